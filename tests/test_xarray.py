"""Stencils on xarray objects (contract.md section 8): a point kernel returns a DataArray with the
same dims, coords, attrs and name (NumPy- or dask-backed); a computation takes DataArrays as
fields and writes into their data. Values are checked against the NumPy calls."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

from . import dask_kernels as kk

xr = pytest.importorskip("xarray", reason="xarray is not installed (pip install .[dask])")


def _labelled(values, name="T"):
    dims = ("time", "lat", "lon")[-values.ndim:]
    coords = {d: np.arange(n) * 0.5 + i for i, (d, n) in enumerate(zip(dims, values.shape))}
    coords["label"] = dims[0], [f"p{i}" for i in range(values.shape[0])]  # non-index coord
    return xr.DataArray(values, dims=dims, coords=coords, name=name,
                        attrs={"units": "K", "history": "made by a test"})


def _same_metadata(result, template):
    assert isinstance(result, xr.DataArray)
    assert result.dims == template.dims
    assert result.name == template.name
    assert result.attrs == template.attrs
    assert set(result.coords) == set(template.coords)
    for c in template.coords:
        np.testing.assert_array_equal(result.coords[c].values, template.coords[c].values)
        assert result.coords[c].dims == template.coords[c].dims


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("backed", ["numpy", "dask"])
def test_point_kernel_keeps_metadata(ndim, backed):
    func = {1: kk.k1_uneven, 2: kk.k2_uneven, 3: kk.k3_seven}[ndim]
    stencil = sk.stencil(func)
    values = np.random.default_rng(ndim).random((6, 5, 4)[:ndim])
    arr = _labelled(values)
    if backed == "dask":
        pytest.importorskip("dask.array", reason="dask is not installed")
        arr = arr.chunk({arr.dims[0]: 2})
    result = stencil(arr)
    _same_metadata(result, arr)
    if backed == "dask":
        assert type(result.data).__module__.startswith("dask")
        result = result.compute()
    np.testing.assert_array_equal(result.data, stencil(values))
    assert arr.attrs == {"units": "K", "history": "made by a test"}  # the input untouched


def test_secondary_dataarrays_scalars_and_weights():
    rng = np.random.default_rng(3)
    a, b = rng.random((5, 6)), rng.integers(0, 9, (5, 6))
    stencil = sk.stencil(kk.k2_int)
    got = stencil(_labelled(a.astype(np.int64)), _labelled(b.astype(np.int64), "U"))
    np.testing.assert_array_equal(got.data, stencil(a.astype(np.int64), b.astype(np.int64)))
    assert got.name == "T"
    weighted = sk.stencil(kk.k2_weights, standard_indexing=("w",))
    w = xr.DataArray([0.5, 1.0, 2.0], dims="k")
    np.testing.assert_array_equal(weighted(_labelled(a), w).data, weighted(a, w.data))


def test_out_dataarray_is_written_in_place():
    values = np.random.default_rng(4).random((5, 6))
    arr = _labelled(values)
    out = _labelled(np.full((5, 6), -1.0), "result")
    stencil = sk.stencil(kk.k2_uneven)
    assert stencil(arr, out=out) is out
    ref = np.full((5, 6), -1.0)
    stencil(values, out=ref)
    np.testing.assert_array_equal(out.data, ref)


def test_transposed_secondary_is_refused():
    a = _labelled(np.random.default_rng(5).random((5, 5)).astype(np.int64))
    with pytest.raises(sk.ArgumentError, match="(?s)dims.*transpose"):
        sk.stencil(kk.k2_int)(a, a.transpose())


def test_dataset_is_refused():
    ds = xr.Dataset({"T": _labelled(np.zeros((3, 4)))})
    with pytest.raises(sk.ArgumentError, match="(?s)Dataset.*ds\\['name'\\]"):
        sk.stencil(kk.k2_uneven)(ds)


def test_dask_backed_out_is_refused():
    pytest.importorskip("dask.array", reason="dask is not installed")
    arr = _labelled(np.zeros((4, 4)))
    with pytest.raises(sk.ArgumentError, match="out="):
        sk.stencil(kk.k2_uneven)(arr, out=arr.chunk(2))


@sk.stencil
def shift_scale(a: Field[float], b: Field[float], *, f: float = 2.0):
    with computation(PARALLEL), interval(...):
        b = a[1, 0, 0] * f + a[0, -1, 0]  # noqa: F841 (a field written)


@pytest.mark.parametrize("backed", ["numpy", "dask"])
def test_computation_writes_into_dataarrays(backed, backend):
    stencil = sk.stencil(shift_scale.func, backend=backend)
    a = np.random.default_rng(6).random((6, 5, 4))
    ref = np.zeros_like(a)
    stencil(a, ref, f=3.0)
    arr, out = _grid(a), _grid(np.zeros_like(a), "out")
    if backed == "dask":
        pytest.importorskip("dask.array", reason="dask is not installed")
        arr, out = arr.chunk({"lon": 2}), out.chunk({"lon": 3})
    stencil(arr, out, f=3.0)
    assert isinstance(out.data, np.ndarray)  # loaded, then written in place
    np.testing.assert_array_equal(out.data, ref)
    assert out.name == "out" and out.attrs["units"] == "K"


def test_computation_refuses_a_bare_dask_array():
    da = pytest.importorskip("dask.array", reason="dask is not installed")
    a = np.zeros((4, 4, 3))
    with pytest.raises(sk.ArgumentError, match="(?s)field 'b' is a dask array.*compute"):
        shift_scale(a, da.zeros((4, 4, 3)))


def _grid(values, name="T", dims=("lon", "lat", "lev")):
    """A model field: its dims name the grid axes (I, J, K) in any order."""
    return xr.DataArray(values, dims=dims, name=name, attrs={"units": "K"})


@pytest.mark.parametrize("dims", [("lev", "lat", "lon"), ("lat", "lev", "lon"),
                                  ("y", "x", "z")], ids="-".join)
def test_computation_maps_dims_by_name(dims):
    """The same physical field in another dimension order gives the same numbers: a
    DataArray's dims are mapped to I, J, K by their names, never by position."""
    rng = np.random.default_rng(8)
    a = rng.random((6, 5, 4))  # (I, J, K) = (lon, lat, lev)
    ref = np.zeros_like(a)
    shift_scale(a, ref, f=3.0)
    names = {"lon": "x", "lat": "y", "lev": "z"} if "x" in dims else None
    canon = ("lon", "lat", "lev") if names is None else ("x", "y", "z")
    arr = _grid(a, dims=canon).transpose(*dims)
    out = _grid(np.zeros_like(a), "out", dims=canon).transpose(*dims)
    shift_scale(arr, out, f=3.0)
    np.testing.assert_array_equal(out.transpose(*canon).values, ref)


def test_computation_refuses_dims_it_cannot_map():
    a = _grid(np.zeros((4, 4, 3)), dims=("time", "lat", "lon"))
    with pytest.raises(sk.ArgumentError, match="none of them names axis K"):
        shift_scale(a, _grid(np.zeros((4, 4, 3))))
    b = _grid(np.zeros((4, 4, 3)), dims=("lon", "longitude", "lev"))
    with pytest.raises(sk.ArgumentError, match="both 'lon' and 'longitude' name axis I"):
        shift_scale(b, _grid(np.zeros((4, 4, 3))))
