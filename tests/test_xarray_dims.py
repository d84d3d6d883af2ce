"""``dims=`` (contract.md section 9): a kernel over named dimensions of DataArrays, the other
dimensions broadcast. Each result is checked against the kernel applied slice by slice to
NumPy arrays."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import stencilkit as sk

xr = pytest.importorskip("xarray", reason="xarray is not installed (pip install .[dask])")


def _smooth(t):
    return 0.25 * (t[-1, 0] + t[1, 0] + t[0, -1] + t[0, 1])


def _masked(t, land):
    return t[0, 0] if land[0, 0] > 0.5 else 0.5 * (t[0, -1] + t[0, 1])


def _era5_like(dims=("time", "latitude", "longitude"), shape=(3, 12, 16), seed=0):
    rng = np.random.default_rng(seed)
    values = 250.0 + 40.0 * rng.random(shape)
    coords = {d: np.arange(n, dtype=float) + i for i, (d, n) in enumerate(zip(dims, shape))}
    return xr.DataArray(values, dims=dims, coords=coords, name="t2m",
                        attrs={"units": "K", "long_name": "2 metre temperature"})


def _per_slice(kernel, field: xr.DataArray, dims, *others, mode="constant", **options):
    """The reference: the kernel on each 2-D (dims-ordered) slice of a NumPy copy."""
    plain = sk.stencil(mode, **options)(kernel)
    moved = field.transpose(..., *dims)
    values = moved.values
    out = np.empty_like(values)
    for index in np.ndindex(values.shape[:-len(dims)]):
        out[index] = plain(values[index], *others)
    return moved.copy(data=out).transpose(*field.dims)


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_named_dims_broadcast_over_time(backend):
    if sk.backends()[backend].reason:
        pytest.skip(sk.backends()[backend].reason)
    t2m = _era5_like()
    st = sk.stencil(_smooth, dims=("latitude", "longitude"), backend=backend)
    result = st(t2m)
    expected = _per_slice(_smooth, t2m, ("latitude", "longitude"), backend=backend)
    assert result.dims == t2m.dims and result.name == "t2m" and result.attrs == t2m.attrs
    np.testing.assert_array_equal(result.values, expected.values)
    for c in t2m.coords:
        np.testing.assert_array_equal(result.coords[c].values, t2m.coords[c].values)


def test_dims_in_another_order_than_the_array():
    t2m = _era5_like(dims=("latitude", "time", "longitude"), shape=(12, 3, 16))
    result = sk.stencil(_smooth, dims=("latitude", "longitude"))(t2m)
    assert result.dims == ("latitude", "time", "longitude")
    expected = _per_slice(_smooth, t2m, ("latitude", "longitude"))
    np.testing.assert_array_equal(result.values, expected.values)
    # the order of dims= is the order of the kernel's axes: swapped, the kernel is transposed
    swapped = sk.stencil(_masked_first_axis, dims=("longitude", "latitude"))(t2m)
    by_slice = _per_slice(_masked_first_axis, t2m, ("longitude", "latitude"))
    np.testing.assert_array_equal(swapped.values, by_slice.values)


def _masked_first_axis(t):
    return t[1, 0] - t[-1, 0]


def test_second_dataarray_broadcasts_by_name():
    t2m = _era5_like()
    rng = np.random.default_rng(1)
    land = xr.DataArray(rng.random((12, 16)), dims=("latitude", "longitude"),
                        coords={d: t2m.coords[d] for d in ("latitude", "longitude")})
    result = sk.stencil(_masked, dims=("latitude", "longitude"))(t2m, land)
    expected = _per_slice(_masked, t2m, ("latitude", "longitude"), land.values)
    np.testing.assert_array_equal(result.values, expected.values)


def test_border_mode_with_dims():
    t2m = _era5_like()
    st = sk.stencil("wrap", dims=("latitude", "longitude"))(_smooth)
    expected = _per_slice(_smooth, t2m, ("latitude", "longitude"), mode="wrap")
    np.testing.assert_array_equal(st(t2m).values, expected.values)


def test_dask_backed_stays_lazy():
    da = pytest.importorskip("dask.array")
    t2m = _era5_like(shape=(4, 12, 16)).chunk({"time": 1, "latitude": 6})
    result = sk.stencil(_smooth, dims=("latitude", "longitude"))(t2m)
    assert isinstance(result.data, da.Array)
    expected = _per_slice(_smooth, t2m.compute(), ("latitude", "longitude"))
    np.testing.assert_array_equal(result.compute().values, expected.values)
    assert result.dims == t2m.dims and result.name == "t2m"


def test_out_is_written_in_place():
    t2m = _era5_like()
    out = xr.full_like(t2m, -1.0)
    st = sk.stencil(_smooth, dims=("latitude", "longitude"), cval=0.0)
    assert st(t2m, out=out) is out
    expected = _per_slice(_smooth, t2m, ("latitude", "longitude"), cval=0.0)
    np.testing.assert_array_equal(out.values, expected.values)


def test_missing_dim_names_it():
    t2m = _era5_like().rename(latitude="lat")
    st = sk.stencil(_smooth, dims=("latitude", "longitude"))
    with pytest.raises(sk.ArgumentError, match="without 'latitude'"):
        st(t2m)


@pytest.mark.parametrize("bad", [(), ("lat", "lat"), ("lat", 3), 5])
def test_malformed_dims(bad):
    with pytest.raises(sk.StencilTypeError, match="dims"):
        sk.stencil(_smooth, dims=bad)


def test_dims_refused_on_computations():
    from stencilkit import PARALLEL, Field, computation, interval

    def copy(a: Field[float], b: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a  # noqa: F841

    with pytest.raises(sk.StencilError, match="dims"):
        sk.stencil(copy, dims=("x", "y", "z"))


def test_dims_pickle():
    st = sk.stencil(_smooth, dims=("latitude", "longitude"))
    back = pickle.loads(pickle.dumps(st))
    assert back.dims == ("latitude", "longitude")
    t2m = _era5_like()
    np.testing.assert_array_equal(back(t2m).values, st(t2m).values)
