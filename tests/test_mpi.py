"""MPI (contract.md section 8): results on distributed arrays equal, bit for bit, the same call
on one process on the gathered arrays, for any number of ranks.

Run by plain pytest (one rank), and by the CI under ``mpiexec -n 1``, ``-n 2`` and ``-n 4``::

    mpiexec -n 4 python -m mpi4py -m pytest -p no:xdist -p no:cacheprovider tests/test_mpi.py

Every rank runs every test in the same order. Verdicts are computed on rank 0 and broadcast,
so a failure fails on every rank (no rank waits in a collective that another skipped).
Periodic axes are compared with the call on ``np.pad(global, mode="wrap")`` cropped back
(in every border mode: a periodic axis stays periodic whatever ``func_or_mode`` says).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install '.[mpi]')")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from mpi4py import MPI  # noqa: E402

import stencilkit as sk  # noqa: E402
from stencilkit import PARALLEL, Field, computation, horizontal, interval, region  # noqa: E402
from stencilkit.gtscript import I  # noqa: E402

from . import computations as C  # noqa: E402

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
BACKENDS = [b for b in ("numpy", "c") if sk.registry.REGISTRY[b].probe() is None]
EXAMPLES = min(20, int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES", "20")))


def same_on_root(got: np.ndarray | None, ref: np.ndarray | None, what: str = "") -> None:
    """Bit-for-bit equality checked on rank 0, the verdict shared by every rank."""
    verdict = None
    if RANK == 0:
        if got.shape != ref.shape or got.dtype != ref.dtype:
            verdict = f"{what}: {got.shape} {got.dtype} vs {ref.shape} {ref.dtype}"
        elif got.tobytes() != ref.tobytes():
            bad = np.argwhere(~((got == ref) | (np.isnan(got) & np.isnan(ref)))
                              if got.dtype.kind in "fc" else got != ref)
            verdict = f"{what}: {len(bad)} element(s) differ, first at {bad[:4].tolist()}"
    verdict = COMM.bcast(verdict)
    assert verdict is None, verdict


def all_ranks(ok: bool) -> bool:
    return bool(COMM.allreduce(bool(ok), op=MPI.LAND))


def global_data(shape, dtype=np.float64, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    return (rng.random(shape) + 0.5).astype(dtype)


def dims_choices(ndim: int) -> list[tuple[int, ...] | None]:
    """Default dims and every axis taking all ranks."""
    out: list[tuple[int, ...] | None] = [None]
    for axis in range(ndim):
        d = [1] * ndim
        d[axis] = SIZE
        out.append(tuple(d))
    return out


def wrap_reference(run, arrays: list[np.ndarray], periodic, pad: list[tuple[int, int]]):
    """``run`` on the arrays padded with their wrap-around along periodic axes, cropped."""
    widths = [(lo, hi) if per else (0, 0) for per, (lo, hi) in zip(periodic, pad)]
    padded = [np.pad(a, widths, mode="wrap") for a in arrays]
    out = run(*padded)
    crop = tuple(slice(lo, n - hi) for (lo, hi), n in zip(widths, out.shape))
    return out[crop]


# ------------------------------------------------------------------ point kernels


def heat(u, alpha):
    return u[0, 0] + alpha * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4.0 * u[0, 0])


def diagonal(u):
    return u[1, 1] - 2.0 * u[-2, -1]


def one_sided(a):
    return a[2, 0] * 3 - a[0, -1]


def two_arrays(a, b, s):
    return a[0, 1] * b[-1, 0] + s


def loop_sum(a):
    acc = 0.0
    for i in range(-2, 3):
        acc += a[i, 0]
    return acc


def weighted(a, w):
    return w[0] * a[-1, 0] + w[1] * a[1, 0] + w[2] * a[0, 0]


def blur1d(a):
    return a[-1] + a[1] - 0.5 * a[0]


def lap3(a):
    return (a[1, 0, 0] + a[-1, 0, 0] + a[0, 1, 0] + a[0, -1, 0] + a[0, 0, 1] + a[0, 0, -1]
            - 6.0 * a[0, 0, 0])


#: (kernel, options, global shape, dtypes of the arrays, scalar arguments, plain extras)
POINT_CASES = {
    "heat": (heat, {}, (13, 9), (np.float64,), (0.2,), ()),
    "diagonal_cval": (diagonal, {"cval": -1.5}, (13, 10), (np.float64,), (), ()),
    "one_sided_int": (one_sided, {}, (14, 9), (np.int32,), (), ()),
    "two_arrays": (two_arrays, {}, (11, 12), (np.float32, np.int16), (3,), ()),
    "loop_sum": (loop_sum, {"neighborhood": ((-2, 2), (0, 0))}, (15, 8), (np.float64,), (), ()),
    "weighted": (weighted, {"standard_indexing": ("w",)}, (12, 9), (np.float64,), (),
                 (np.array([0.25, 0.5, -1.0]),)),
    "blur1d": (blur1d, {}, (17,), (np.float64,), (), ()),
    "lap3": (lap3, {}, (7, 6, 9), (np.float64,), (), ()),
}


MODES = ("nearest", "reflect", "mirror", "wrap")
_KERNELS: dict[tuple[str, str, str], object] = {}


def _point_run(name: str, backend: str, dims, periodic, with_out: bool,
               mode: str = "constant") -> None:
    func, options, shape, dts, scalars, extras = POINT_CASES[name]
    kernel = _KERNELS.get((name, backend, mode))
    if kernel is None:  # one stencil per case: its builds serve every split
        kernel = _KERNELS[name, backend, mode] = sk.stencil(mode, backend=backend,
                                                            **options)(func)
    dec = sk.Decomposition(COMM, shape, halo=2, periodic=periodic, dims=dims)
    globals_ = [global_data(shape, dt, seed=i) for i, dt in enumerate(dts)]
    arrays = [dec.scatter(g) for g in globals_]
    args = (*arrays, *extras, *scalars)
    if with_out:
        out = dec.full(7, dtype=np.float64)
        assert kernel(*args, out=out) is out
    else:
        out = kernel(*args)
        assert isinstance(out, sk.DistributedArray)
    got = dec.gather(out)

    def run(*gs):
        if with_out:
            o = np.full(gs[0].shape, 7, dtype=np.float64)
            kernel(*gs, *extras, *scalars, out=o)
            return o
        return kernel(*gs, *extras, *scalars)

    border = [(-min(0, lo), max(0, hi)) for lo, hi in kernel.neighborhood]
    ref = wrap_reference(run, globals_, dec.periodic, border) if RANK == 0 else None
    same_on_root(got, ref, f"{name} {mode} dims={dec.dims} periodic={dec.periodic} "
                           f"out={with_out}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(POINT_CASES))
def test_point_kernel_matches_one_process(backend, name):
    """Every split on NumPy; the default split on C (the same plan, another kernel)."""
    ndim = len(POINT_CASES[name][2])
    for dims in dims_choices(ndim) if backend == "numpy" else [None]:
        for with_out in (False, True):
            _point_run(name, backend, dims, False, with_out)


@pytest.mark.parametrize("name", sorted(POINT_CASES))
def test_point_kernel_periodic_axes(name):
    ndim = len(POINT_CASES[name][2])
    flags = [(True,) * ndim, tuple(i == 0 for i in range(ndim))]
    for periodic in flags:
        for dims in dims_choices(ndim)[:2]:
            _point_run(name, BACKENDS[-1], dims, periodic, with_out=False)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_point_kernels_random_geometry(data):
    """Random shapes (uneven splits), splits, halos, periodic flags and kernels; the same
    examples on every rank (derandomized)."""
    name = data.draw(st.sampled_from(["heat", "diagonal_cval", "one_sided_int", "two_arrays"]))
    single = st.sampled_from(("constant",) + MODES)
    mode = data.draw(st.one_of(single, st.tuples(single, single)))  # per axis: section 9
    n0 = data.draw(st.integers(3 * SIZE, 3 * SIZE + 9))
    n1 = data.draw(st.integers(3 * SIZE, 3 * SIZE + 9))
    factors = [(a, SIZE // a) for a in range(1, SIZE + 1) if SIZE % a == 0]
    dims = data.draw(st.sampled_from(factors))
    periodic = data.draw(st.tuples(st.booleans(), st.booleans()))
    halo = data.draw(st.integers(2, 3))
    func, options, _, dts, scalars, extras = POINT_CASES[name]
    kernel = sk.stencil(mode, backend="numpy", **options)(func)
    shape = (n0, n1)
    dec = sk.Decomposition(COMM, shape, halo=halo, periodic=periodic, dims=dims)
    globals_ = [global_data(shape, dt, seed=i + n0) for i, dt in enumerate(dts)]
    got = dec.gather(kernel(*[dec.scatter(g) for g in globals_], *extras, *scalars))
    border = [(-min(0, lo), max(0, hi)) for lo, hi in kernel.neighborhood]
    ref = wrap_reference(lambda *gs: kernel(*gs, *extras, *scalars), globals_, periodic,
                         border) if RANK == 0 else None
    same_on_root(got, ref, f"{name} {mode} {shape} dims={dims} periodic={periodic}")


def test_point_kernel_3d_split_along_every_axis():
    """3-D point kernels may split K (only computations may not)."""
    shape = (6, 7, 4 * SIZE + 1)
    kernel = sk.stencil(lap3, backend="numpy")
    for dims in ((1, 1, SIZE), (SIZE, 1, 1)):
        dec = sk.Decomposition(COMM, shape, halo=1, dims=dims)
        g = global_data(shape)
        got = dec.gather(kernel(dec.scatter(g)))
        same_on_root(got, kernel(g) if RANK == 0 else None, f"lap3 dims={dims}")


# ------------------------------------------------------------------ border modes at the global edge


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(POINT_CASES))
def test_border_modes_match_one_process(backend, mode, name):
    """Every mode x kernel (1-D, 2-D, 3-D; uneven splits) x every split on NumPy, the
    default split on C, with and without out=."""
    ndim = len(POINT_CASES[name][2])
    for dims in dims_choices(ndim) if backend == "numpy" else [None]:
        for with_out in (False, True):
            _point_run(name, backend, dims, False, with_out, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["diagonal_cval", "lap3"])
def test_border_modes_with_periodic_axes(mode, name):
    """A periodic axis wraps; the others follow the mode."""
    ndim = len(POINT_CASES[name][2])
    for periodic in (tuple(i == 0 for i in range(ndim)), tuple(i == 1 for i in range(ndim))):
        for dims in dims_choices(ndim)[:2]:
            _point_run(name, BACKENDS[-1], dims, periodic, False, mode)


MIXED_MODES = (("constant", "wrap"), ("nearest", "constant"), ("reflect", "mirror"),
               ("wrap", "reflect"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MIXED_MODES, ids="-".join)
@pytest.mark.parametrize("name", ["heat", "diagonal_cval", "two_arrays", "loop_sum"])
def test_per_axis_border_modes_match_one_process(backend, mode, name):
    """One mode per axis (contract.md section 9): every split on NumPy, the default on C, with
    and without out=, and with either axis periodic (a periodic axis stays periodic)."""
    for dims in dims_choices(2) if backend == "numpy" else [None]:
        for with_out in (False, True):
            _point_run(name, backend, dims, False, with_out, mode)
    for periodic in ((True, False), (False, True)):
        _point_run(name, backend, None, periodic, False, mode)


def right2(a):
    return a[0, 2] + a[1, 0]


def far_reads(a):
    return a[-7, 0] + 2.0 * a[6, 1] - a[0, -1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_border_modes_wider_than_the_global_array(backend, mode):
    """Along an axis one rank holds whole, reads may reach beyond the global array (5
    points, read 7 away): the fill remaps them like the one-process call, any width."""
    shape = (5, 3 * SIZE + 1)
    g = global_data(shape)
    for options, func in (({}, far_reads), ({"neighborhood": ((-2, 2), (0, 0))}, loop_sum)):
        kernel = sk.stencil(mode, backend=backend, **options)(func)
        dec = sk.Decomposition(COMM, shape, halo=7, dims=(1, SIZE))
        for with_out in (False, True):
            u = dec.scatter(g)
            if with_out:
                got = dec.gather(kernel(u, out=dec.full(3.0)))
            else:
                got = dec.gather(kernel(u))
            same_on_root(got, kernel(g) if RANK == 0 else None,
                         f"{func.__name__} {mode} out={with_out}")
    tiny = sk.stencil(mode, backend=backend)(heat)  # one point along axis 0
    one = sk.Decomposition(COMM, (1, 2 * SIZE + 1), halo=1, dims=(1, SIZE))
    g1 = global_data(one.shape)
    same_on_root(one.gather(tiny(one.scatter(g1), 0.3)), tiny(g1, 0.3) if RANK == 0 else None,
                 f"heat {mode} on 1 x {one.shape[1]} points")


@pytest.mark.parametrize("backend", BACKENDS)
def test_mirror_on_blocks_as_thin_as_the_reach(backend):
    """"mirror" reading 2 points beyond the edge maps them to points 1 and 2: with blocks
    of 2 points, point 2 is the neighbour's (the exchange brings it into the edge block's
    halo), and with a block of 1 point, point 1 is too."""
    mirror = sk.stencil("mirror", backend=backend)(diagonal)  # reads 2 before, 1 after
    mirror_heat = sk.stencil("mirror", backend=backend)(heat)  # 1 both sides
    for kernel, shape, dims in ((mirror, (2 * SIZE, 8), (SIZE, 1)),
                                (mirror, (9, 2 * SIZE), (1, SIZE)),
                                (mirror_heat, (2 * SIZE - 1, 7), (SIZE, 1))):
        dec = sk.Decomposition(COMM, shape, halo=2, dims=dims)
        g = global_data(shape)
        extra = (0.3,) if kernel is mirror_heat else ()
        same_on_root(dec.gather(kernel(dec.scatter(g), *extra)),
                     kernel(g, *extra) if RANK == 0 else None, f"mirror {shape} dims={dims}")


@pytest.mark.parametrize("mode", MODES)
def test_border_mode_time_loop(mode):
    """20 heat steps in a remapping mode: each step fills the border from the new data."""
    shape = (4 * SIZE + 3, 10)
    kernel = sk.stencil(mode, backend=BACKENDS[-1])(heat)
    dec = sk.Decomposition(COMM, shape, halo=1)
    g = global_data(shape)
    u, v = dec.scatter(g), dec.zeros()
    gu, gv = g.copy(), np.zeros(shape)
    for _ in range(20):
        kernel(u, 0.2, out=v)
        u, v = v, u
        kernel(gu, 0.2, out=gv)
        gu, gv = gv, gu
    same_on_root(dec.gather(u), gu if RANK == 0 else None, f"20 heat steps {mode}")


def test_border_fill_leaves_unread_halo_alone():
    """The fill writes only the halo that is read: a one-sided kernel's other side and the
    halo beyond the read width keep their sentinels."""
    dec = sk.Decomposition(COMM, (4 * SIZE + 1, 9), halo=3, dims=(SIZE, 1))
    kernel = sk.stencil("nearest", backend="numpy")(one_sided)  # a[2, 0], a[0, -1]
    a = dec.scatter(global_data(dec.shape))
    sentinel = -1e300
    owned = np.zeros(a.data.shape, bool)
    owned[dec.owned_in_data] = True
    a.data[~owned] = sentinel
    kernel(a)
    h = dec.halo
    ok = bool(np.all(a.data[:h[0]] == sentinel))  # never read before along axis 0
    ok &= bool(np.all(a.data[:, :h[1] - 1] == sentinel))  # read 1 before along axis 1
    ok &= bool(np.all(a.data[:, h[1] + dec.local_shape[1]:] == sentinel))  # never after
    ok &= bool(np.all(a.data[h[0]:-h[0], h[1] - 1] != sentinel))  # filled by the mode
    end0, end1 = h[0] + dec.local_shape[0], h[1] + dec.local_shape[1]
    ok &= bool(np.all(a.data[end0:end0 + 2, h[1]:end1] != sentinel))  # exchanged or filled
    ok &= bool(np.all(a.data[end0 + 2:] == sentinel))  # beyond the read width
    assert all_ranks(ok)


def test_time_loop_of_point_kernel():
    """20 steps of the heat equation, u and v swapped each step."""
    shape = (4 * SIZE + 3, 10)
    kernel = sk.stencil(heat, backend=BACKENDS[-1])
    dec = sk.Decomposition(COMM, shape, halo=1)
    g = global_data(shape)
    u, v = dec.scatter(g), dec.zeros()
    gu, gv = g.copy(), np.zeros(shape)
    for _ in range(20):
        kernel(u, 0.2, out=v)
        u, v = v, u
        kernel(gu, 0.2, out=gv)
        gu, gv = gv, gu
    same_on_root(dec.gather(u), gu if RANK == 0 else None, "20 heat steps")


# ------------------------------------------------------------------ computations


def two_step(u: Field[float], tmp: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        tmp = 2.0 * u[1, 0, 0]
        out = tmp[-1, 0, 0] + tmp[1, 0, 0]


def diffuse(u: Field[float], out: Field[float], nu: float):
    with computation(PARALLEL), interval(...):
        out = u + nu * (u[1, 0, 0] + u[-1, 0, 0] + u[0, 1, 0] + u[0, -1, 0] - 4.0 * u)


def edges(u: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = u
        with horizontal(region[I[0], :]):
            out = 2.0 * u[1, 0, 0]


#: name -> (definition, externals, number of 3-D fields, scalars, explicit origin, domain)
COMPUTATIONS = {
    "hdiff": (C.hdiff, None, 3, {}, (3, 2, 0), (5, 6, 5)),
    "tridiagonal": (C.tridiagonal, None, 4, {}, (1, 2, 0), (7, 5, 6)),
    "lap3d": (C.lap3d, None, 2, {}, (3, 2, 1), (5, 6, 4)),
    "upwind": (C.upwind, None, 3, {"dt": 0.1}, (2, 0, 0), (6, 9, 6)),
    "gradient": (C.gradient, {"SCALE": 2.0}, 2, {}, (1, 1, 0), (9, 6, 6)),
    "implicit_diffusion": (C.implicit_diffusion, None, 1, {"nu": 0.3}, (0, 3, 0), (11, 4, 6)),
    "two_step": (two_step, None, 3, {}, (2, 2, 0), (6, 5, 6)),
}
SHAPE3 = (11, 10, 6)


def _computation(name: str, backend: str):
    defn, externals, *_ = COMPUTATIONS[name]
    return sk.stencil(defn, backend=backend, externals=externals)


def _check_computation(st_, dec, nfields, scalars, origin, domain, what, periodic=None):
    shape = dec.shape
    globals_ = [global_data(shape, seed=i) for i in range(nfields)]
    arrays = [dec.scatter(g) for g in globals_]
    st_(*arrays, origin=origin, domain=domain, **scalars)
    got = [dec.gather(a) for a in arrays]
    if RANK == 0:
        refs = [g.copy() for g in globals_]
        if periodic is None:
            st_(*refs, origin=origin, domain=domain, **scalars)
        else:  # the fields padded with their wrap-around along periodic axes
            h = dec.halo
            pad = [(h[i], h[i]) if periodic[i] else (0, 0) for i in range(3)]
            padded = [np.pad(r, pad, mode="wrap") for r in refs]
            st_(*padded, origin=tuple(x + p for x, (p, _) in zip(origin, pad)),
                domain=domain, **scalars)
            refs = [p[tuple(slice(a, p.shape[i] - b) for i, (a, b) in enumerate(pad))]
                    for p in padded]
    for i in range(nfields):
        same_on_root(got[i], refs[i] if RANK == 0 else None, f"{what} field {i}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(COMPUTATIONS))
def test_computation_matches_one_process(backend, name):
    _, _, nfields, scalars, origin, domain = COMPUTATIONS[name]
    st_ = _computation(name, backend)
    for dims in [None, (SIZE, 1, 1), (1, SIZE, 1)] if backend == "numpy" else [None]:
        dec = sk.Decomposition(COMM, SHAPE3, halo=3, dims=dims)
        for o, d in ((None, None), (origin, domain)):
            if o is None and name == "lap3d":
                # it reads a level below and above the domain, and the default origin is 0
                # in K: refused on every rank, as in one process
                with pytest.raises(sk.ArgumentError, match="field 'u' lacks the halo the "
                                                           "stencil needs along K"):
                    _check_computation(st_, dec, nfields, scalars, o, d, name)
                continue
            _check_computation(st_, dec, nfields, scalars, o, d,
                               f"{name} [{backend}] dims={dec.dims} origin={o}")


def test_computation_with_ij_and_k_fields():
    """Field[IJ] from a 2-D decomposition split like the 3-D one; Field[K] columns plain."""
    st_ = sk.stencil(C.column_ops, backend=BACKENDS[-1])
    dec3 = sk.Decomposition(COMM, SHAPE3, halo=2)
    dec2 = sk.Decomposition(COMM, SHAPE3[:2], halo=2, dims=dec3.dims[:2])
    gu, gs, gp = global_data(SHAPE3), global_data(SHAPE3[:2], seed=3), global_data(SHAPE3[2:])
    gout = np.zeros(SHAPE3)
    out = dec3.zeros()
    st_(dec3.scatter(gu), dec2.scatter(gs), gp, out)
    st_(gu, gs, gp, gout)
    same_on_root(dec3.gather(out), gout if RANK == 0 else None, "column_ops")


def test_computation_time_loop():
    """20 steps of a diffusion computation with u and v swapped."""
    st_ = sk.stencil(diffuse, backend=BACKENDS[-1])
    dec = sk.Decomposition(COMM, SHAPE3, halo=1)
    g = global_data(SHAPE3)
    u, v = dec.scatter(g), dec.scatter(g)
    gu, gv = g.copy(), g.copy()
    for _ in range(20):
        st_(u, v, nu=0.1)
        u, v = v, u
        st_(gu, gv, nu=0.1)
        gu, gv = gv, gu
    same_on_root(dec.gather(u), gu if RANK == 0 else None, "20 diffusion steps")


def test_computation_periodic_axes():
    st_ = sk.stencil(C.lap3d, backend=BACKENDS[-1])
    cases = [((True, False, False), (0, 1, 1), (11, 8, 4)),
             ((True, True, False), (0, 0, 1), (11, 10, 4)),
             ((True, True, False), (2, 1, 1), (7, 8, 4))]
    for periodic, origin, domain in cases:
        dec = sk.Decomposition(COMM, SHAPE3, halo=2, periodic=periodic)
        _check_computation(st_, dec, 2, {}, origin, domain, f"lap3d {periodic} {origin}",
                           periodic=periodic)


def test_computation_exec_info_reports_exchange_time():
    st_ = sk.stencil(C.lap3d, backend="numpy")
    dec = sk.Decomposition(COMM, SHAPE3, halo=1)
    info: dict = {}
    # lap3d reads one level below and above: the default origin is 0 in K, so give it
    st_(dec.zeros(), dec.zeros(), origin=(1, 1, 1), exec_info=info)
    assert info["halo_exchange_time"] >= 0 and "call_end_time" in info


# ------------------------------------------------------------------ what is exchanged


def test_exchange_only_faces_and_only_read_arrays():
    """heat reads no corner: corners and the outer ring of a halo-2 array keep a sentinel;
    'out' is never read, so its halo is never touched."""
    dec = sk.Decomposition(COMM, (4 * SIZE + 2, 4 * SIZE + 3), halo=2, periodic=True)
    kernel = sk.stencil(heat, backend="numpy")
    u, v = dec.full(np.nan), dec.full(np.nan)
    u.local[...] = 1.0
    kernel(u, 0.1, out=v)
    d, h = u.data, 2
    faces_ok = (np.all(d[h - 1, h:-h] == 1.0) and np.all(d[-h, h:-h] == 1.0)
                and np.all(d[h:-h, h - 1] == 1.0) and np.all(d[h:-h, -h] == 1.0))
    untouched = (np.all(np.isnan(d[:h, :h])) and np.all(np.isnan(d[0, :]))
                 and np.all(np.isnan(d[:, -1])))
    out_halo = np.all(np.isnan(v.data[:h])) and np.all(np.isnan(v.data[:, :h]))
    assert all_ranks(faces_ok and untouched and out_halo)


def test_exchange_corners_when_read():
    dec = sk.Decomposition(COMM, (4 * SIZE + 2, 4 * SIZE + 3), halo=2, periodic=True)
    kernel = sk.stencil(diagonal, backend="numpy")
    u = dec.full(np.nan)
    u.local[...] = 1.0
    kernel(u)
    d = u.data
    # reads (1, 1) and (-2, -1): the corners (+,+) width 1 and (-,-) 2x1 are filled
    assert all_ranks(d[-2, -2] == 1.0 and d[0, 1] == 1.0 and d[1, 1] == 1.0
                     and np.isnan(d[0, -1]) and np.isnan(d[-1, 0]))


def test_computation_exchanges_footprint_only():
    """lap3d reads u at face offsets only: u's corners keep a sentinel, 'out' is written
    only and keeps its whole halo."""
    dec = sk.Decomposition(COMM, (4 * SIZE + 2, 4 * SIZE + 3, 5), halo=2, periodic=(True, True, False))
    st_ = sk.stencil(C.lap3d, backend="numpy")
    u, out = dec.full(np.nan), dec.full(np.nan)
    u.data[2:-2, 2:-2, :] = 1.0  # the K halo is read by lap3d's K offsets (K not split)
    st_(u, out, origin=(0, 0, 1), domain=(dec.shape[0], dec.shape[1], 3))
    d = u.data
    ok = (d[1, 2, 2] == 1.0 and d[2, 1, 2] == 1.0 and np.isnan(d[1, 1, 2])
          and np.isnan(d[0, 2, 2]) and np.all(np.isnan(out.data[:2])))
    assert all_ranks(ok)


def test_explicit_exchange_fills_whole_halo():
    for periodic in ((False, False), (True, False), (True, True)):
        shape = (3 * SIZE + 4, 7)
        dec = sk.Decomposition(COMM, shape, halo=2, periodic=periodic)
        g = COMM.bcast(global_data(shape))
        a = dec.scatter(g)
        dec.exchange(a)
        ok = True
        for idx in np.ndindex(*dec.data_shape):
            gi, inside = [], True
            for i, x in enumerate(idx):
                p = dec.bounds[i][0] + x - dec.halo[i]
                if not 0 <= p < shape[i]:
                    if not periodic[i]:
                        inside = False
                    p %= shape[i]
                gi.append(p)
            if inside and a.data[idx] != g[tuple(gi)]:
                ok = False
        assert all_ranks(ok), periodic


def test_scatter_gather_round_trip_dtypes():
    for dt in (np.bool_, np.int8, np.uint64, np.float32, np.complex128):
        shape = (2 * SIZE + 3, 5, 3)
        dec = sk.Decomposition(COMM, shape, halo=1)
        g = (np.arange(np.prod(shape)).reshape(shape) % 7).astype(dt)
        a = dec.scatter(g if RANK == 0 else None)
        assert a.dtype == np.dtype(dt) and a.local.shape == dec.local_shape
        same_on_root(dec.gather(a), g if RANK == 0 else None, str(dt))


def test_decomposition_geometry():
    dec = sk.Decomposition(COMM, (10, 11, 12), halo=(2, 1, 0))
    assert dec.dims[2] == 1  # K not split by default
    blocks = COMM.allgather(dec.local_slices)
    count = np.zeros(dec.shape, int)
    for b in blocks:
        count[b] += 1
    assert np.all(count == 1)
    assert dec.zeros().data.shape == tuple(n + 2 * h for n, h in zip(dec.local_shape, dec.halo))
    with pytest.raises(sk.ArgumentError, match="dims"):
        sk.Decomposition(COMM, (10, 10), halo=1, dims=(SIZE + 1, 1))
    if SIZE > 1:
        with pytest.raises(sk.ArgumentError, match="split over"):
            sk.Decomposition(COMM, (1, 8), halo=1, dims=(SIZE, 1))


# ------------------------------------------------------------------ errors: every rank, before anything runs


def _refused(call, *patterns: str) -> None:
    with pytest.raises(sk.ArgumentError) as info:
        call()
    for p in patterns:
        assert p in str(info.value), str(info.value)
    COMM.Barrier()  # every rank got here: nobody waits in an exchange


def test_halo_too_small():
    dec = sk.Decomposition(COMM, (12, 12), halo=1, periodic=True)
    kernel = sk.stencil(diagonal, backend="numpy")
    u = dec.zeros()
    _refused(lambda: kernel(u), "'u' needs a halo of 2", "has halo 1")
    st_ = sk.stencil(C.hdiff, backend="numpy")
    _refused(lambda: st_(*[sk.Decomposition(COMM, SHAPE3, halo=1,
                                            periodic=(True, True, False)).zeros()
                           for _ in range(3)]), "needs a halo of 2")


def test_halo_too_small_without_periodic_axes():
    """The same verdict whatever the number of ranks: also on one rank, where no axis is
    split and no halo is exchanged (it passed there and failed on two, issue 25)."""
    kernel = sk.stencil(diagonal, backend="numpy")
    _refused(lambda: kernel(sk.Decomposition(COMM, (12, 12), halo=1).zeros()),
             "'u' needs a halo of 2 along axis 0", "has halo 1")
    _refused(lambda: kernel(sk.Decomposition(COMM, (12, 12), halo=(2, 0)).zeros()),
             "'u' needs a halo of 1 along axis 1", "has halo 0")
    kernel(sk.Decomposition(COMM, (12, 12), halo=2).zeros())  # enough
    st_ = sk.stencil(C.hdiff, backend="numpy")
    _refused(lambda: st_(*[sk.Decomposition(COMM, SHAPE3, halo=1).zeros()
                           for _ in range(3)]), "needs a halo of 2")
    # K is never split (3-D, default dims): lap3d reads K-1 and K+1 with no halo along K
    lap = sk.stencil(C.lap3d, backend="numpy")
    dec = sk.Decomposition(COMM, SHAPE3, halo=(1, 1, 0))
    lap(dec.zeros(), dec.zeros(), origin=(1, 1, 1),
        domain=tuple(n - 2 for n in SHAPE3))


def test_block_thinner_than_reach():
    dec = sk.Decomposition(COMM, (SIZE, 8), halo=3, periodic=True, dims=(SIZE, 1))
    kernel = sk.stencil(diagonal, backend="numpy")
    _refused(lambda: kernel(dec.zeros()), "thinnest block")


def test_mixed_decompositions_and_plain_arrays():
    kernel = sk.stencil(two_arrays, backend="numpy")
    a = sk.Decomposition(COMM, (12, 12), halo=2).zeros()
    b = sk.Decomposition(COMM, (12, 12), halo=3).zeros()
    _refused(lambda: kernel(a, b, 1.0), "another decomposition")
    _refused(lambda: kernel(a, np.zeros((12, 12)), 1.0), "plain array")
    _refused(lambda: kernel(a, a, 1.0, out=np.zeros((12, 12))), "'out' must be")
    st_ = sk.stencil(C.lap3d, backend="numpy")
    u = sk.Decomposition(COMM, SHAPE3, halo=1).zeros()
    _refused(lambda: st_(u, np.zeros(SHAPE3)), "plain ndarray")
    # afterwards, calls work (nothing left in flight)
    kernel(a, a, 1.0)


def test_border_mode_refusals():
    """In a remapping mode the halo must hold the border along unsplit axes too; "wrap" on
    a split axis is an exchange, with its limits."""
    dec = sk.Decomposition(COMM, (4 * SIZE, 6), halo=(2, 1), dims=(SIZE, 1))
    kernel = sk.stencil("nearest", backend="numpy")(right2)
    sk.stencil(right2, backend="numpy")(dec.zeros())  # constant: axis 1 clipped, halo 1 do
    _refused(lambda: kernel(dec.zeros()), "needs a halo of 2 along axis 1 in border mode "
             "'nearest'", "has halo 1")
    wide = sk.stencil("reflect", backend="numpy")(far_reads)
    _refused(lambda: wide(dec.zeros()), "needs a halo of 7 along axis 0 in border mode "
             "'reflect'")
    if SIZE > 1:
        wrap = sk.stencil("wrap", backend="numpy")(diagonal)
        thinner = sk.Decomposition(COMM, (SIZE, 8), halo=2, dims=(SIZE, 1))
        _refused(lambda: wrap(thinner.zeros()), "thinnest block")
    sk.stencil("nearest", backend="numpy")(one_sided)(dec.zeros())  # nothing left in flight


@pytest.mark.skipif(SIZE < 2, reason="needs two ranks")
def test_error_on_one_rank_only_raises_everywhere():
    kernel = sk.stencil(two_arrays, backend="numpy")
    dec = sk.Decomposition(COMM, (12, 12), halo=2)
    a = dec.zeros()
    b = np.zeros((12, 12)) if RANK == SIZE - 1 else dec.zeros()
    _refused(lambda: kernel(a, b, 1.0), "plain array" if RANK == SIZE - 1 else
             f"rank {SIZE - 1} refused")


def test_computation_refusals():
    st_ = sk.stencil(C.lap3d, backend="numpy")
    kdec = sk.Decomposition(COMM, SHAPE3, halo=1, periodic=(False, False, True))
    _refused(lambda: st_(kdec.zeros(), kdec.zeros()), "along K")
    dec = sk.Decomposition(COMM, SHAPE3, halo=1)
    if dec.dims[0] > 1:
        _refused(lambda: st_(dec.zeros(), dec.zeros(), origin={"u": (1, 1, 1),
                                                              "out": (2, 1, 1)}),
                 "origins differ")
    _refused(lambda: st_(dec.zeros(), dec.zeros(), origin=(0, 0, 0)), "lacks the halo")


@pytest.mark.skipif(SIZE < 2, reason="needs two ranks")
def test_computation_refusals_on_split_axes():
    dec = sk.Decomposition(COMM, (2 * SIZE + 3, 6, 4), halo=2, dims=(SIZE, 1, 1))
    st_ = sk.stencil(edges, backend="numpy")
    _refused(lambda: st_(dec.zeros(), dec.zeros()), "horizontal regions")
    # two_step writes tmp one point beyond the domain: along a periodic axis, a domain
    # starting on a block boundary leaves that point to a rank across the boundary
    pdec = sk.Decomposition(COMM, (2 * SIZE + 3, 6, 4), halo=2, dims=(SIZE, 1, 1),
                            periodic=(True, False, False))
    two = sk.stencil(two_step, backend="numpy")
    start = pdec.block((1, 0, 0))[0][0]
    _refused(lambda: two(pdec.zeros(), pdec.zeros(), pdec.zeros(), origin=(start, 1, 0),
                         domain=(pdec.shape[0] - start - 2, 4, 4)), "'tmp' is written")


@pytest.mark.parametrize("backend", BACKENDS)
def test_written_beyond_domain_edge_on_block_boundary(backend):
    """tmp is written one point beyond the domain, which starts (and ends) on a block
    boundary: the blocks holding those points compute nothing; their owners get them back
    from the neighbour that computed them."""
    two = sk.stencil(two_step, backend=backend)
    for dims in ((SIZE, 1, 1), (1, SIZE, 1)):
        dec = sk.Decomposition(COMM, (3 * SIZE + 4, 3 * SIZE + 5, 4), halo=2, dims=dims)
        a = dims.index(SIZE)
        coords = [0, 0, 0]
        coords[a] = 1 if SIZE > 1 else 0
        start = max(1, dec.block(coords)[a][0])
        stop = dec.block([SIZE - 1 if i == a else 0 for i in range(3)])[a][0] \
            if SIZE > 2 else dec.shape[a] - 2
        origin = [1, 1, 0]
        domain = [dec.shape[0] - 3, dec.shape[1] - 3, 4]
        origin[a], domain[a] = start, stop - start
        _check_computation(two, dec, 3, {}, tuple(origin), tuple(domain),
                           f"two_step dims={dims} origin={origin} domain={domain}")


# ------------------------------------------------------------------ compile once per job


def test_compiled_once_per_job():
    """Every rank builds the same fresh C kernel at the same moment: one build in total (the
    others wait on the cache lock, then load)."""
    if "c" not in BACKENDS:
        pytest.skip("no C compiler")
    directory = COMM.bcast(tempfile.mkdtemp(prefix="sk-mpi-cache-") if RANK == 0 else None)
    nonce = COMM.bcast(uuid.uuid4().int % 10**9 if RANK == 0 else None)
    sk.configure(cache_dir=directory)
    path = Path(directory) / f"fresh_{nonce}.py"
    if RANK == 0:  # a kernel no process has built: its source holds a fresh constant
        path.write_text(f"from stencilkit import Field, PARALLEL, computation, interval\n"
                        f"def fresh(u):\n    return u[-1, 0] + u[1, 0] + {nonce}.0\n"
                        f"def fresh_comp(u: Field[float], out: Field[float]):\n"
                        f"    with computation(PARALLEL), interval(...):\n"
                        f"        out = u[1, 0, 0] + {nonce}.0\n")
    COMM.Barrier()
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = sk.stencil(module.fresh, backend="c")
    comp = sk.stencil(module.fresh_comp, backend="c")
    dec = sk.Decomposition(COMM, (4 * SIZE, 8), halo=1)
    dec3 = sk.Decomposition(COMM, (4 * SIZE, 5, 4), halo=1)
    for call in (lambda: kernel(dec.zeros()), lambda: comp(dec3.zeros(), dec3.zeros())):
        before = sk.cache.info()["builds"]
        COMM.Barrier()
        call()
        assert COMM.allreduce(sk.cache.info()["builds"] - before) == 1
