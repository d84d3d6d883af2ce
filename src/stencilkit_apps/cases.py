"""The cases of ``stencilkit bench``: each times our backends against its peers (NumPy,
Numba, hand-written C, scipy, dask) on one problem and returns one result row."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import stencilkit as sk

from . import _internals, definitions, handc
from .timing import median_times, same, skipped

CASES = {
    "jacobi2d": "2-D Jacobi point kernel on every backend, against NumPy, Numba and hand C",
    "border_modes": "jacobi2d with each border mode, against scipy.ndimage.correlate",
    "lap3d": "3-D Laplacian point kernel on every backend, against NumPy, Numba and hand C",
    "timeloop": "100 Jacobi sweeps in one njit(parallel=True) function, against numba.stencil",
    "hdiff": "horizontal diffusion computation (gtscript), against NumPy, Numba and fused C",
    "tridiag": "tridiagonal solver computation (vertical sweeps), against hand C and Numba",
    "overhead": "the fixed cost of one call on 16^3 arrays (a point kernel; hdiff, a computation)",
    "parloop_inc": "ParLoop with indirect increments on a triangle mesh, against np.add.at",
    "compile": "time to first result, cold (empty cache) and warm (new process)",
    "dask_jacobi2d": "jacobi2d on a chunked dask array, against one call on the NumPy array",
}



def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


def _jitted_stencil(nb, st, a, out) -> Callable[[], object]:
    """numba.stencil called from Python recompiles on every call; its users call it from
    njit code (parallel=True turns it into parallel loops), so that is what we time."""

    @nb.njit(parallel=True)
    def run(a, out):
        st(a, out=out)

    return lambda: run(a, out)


def _ours_in_njit(nb, st, a, out) -> Callable[[], object]:
    """Our stencil called from inside an njit(parallel=True) function."""

    @nb.njit(parallel=True)
    def run(a, out):
        st(a, out=out)

    return lambda: run(a, out)


def _numba_rows(fns: dict, nb, kernel, a, out) -> None:
    """The rows of the "numba" backend: called from Python, and from njit(parallel=True)."""
    reason = sk.backends()["numba"].reason
    if reason is not None:
        skipped("the 'stencilkit-numba' rows", reason)
        return
    ours = sk.stencil(kernel, backend="numba")
    fns["stencilkit-numba"] = lambda: ours(a, out=out)
    fns["stencilkit-in-njit-par"] = _ours_in_njit(nb, ours, a, out)


def case_timeloop(n: int, steps: int, repeats: int) -> dict:
    """A time loop of ``steps`` Jacobi sweeps inside one njit(parallel=True) function calling
    our stencil, against the same loop calling numba.stencil, and against a Python loop
    calling our C backend."""
    def jacobi(a):
        return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])

    a0 = np.random.default_rng(0).random((n, n))
    a, b = a0.copy(), a0.copy()
    c = sk.stencil(jacobi, backend="c")

    def c_loop():
        x, y = a, b
        for _ in range(steps):
            c(x, out=y)
            x, y = y, x

    fns: dict[str, Callable[[], object]] = {"stencilkit-c-python-loop": c_loop}
    nb = _numba()
    if nb is not None:
        def make(st):
            @nb.njit(parallel=True)
            def loop(x, y, steps):
                for _ in range(steps):
                    st(x, out=y)
                    x, y = y, x
                return x
            return lambda: loop(a, b, steps)

        fns["stencilkit-in-njit-par"] = make(c)
        fns["numba.stencil-in-njit-par"] = make(nb.stencil(jacobi))
    t = median_times(fns, repeats)
    return {"name": f"timeloop-{steps}", "size": f"{n}^2 float64", "bytes": 16 * steps * (n - 2) ** 2,
            "seconds": t, "reference": "stencilkit-c-python-loop"}


def _opencl() -> bool:
    """Whether the "opencl" backend runs here (its rows are left out otherwise, with the
    probe's reason on stderr, once)."""
    reason = sk.backends()["opencl"].reason
    if reason is not None and "opencl" not in _said:
        _said.add("opencl")
        skipped("every 'stencilkit-opencl' row", reason)
    return reason is None


_said: set[str] = set()


def _opencl_point_rows(func, a: np.ndarray, out: np.ndarray) -> dict[str, Callable[[], object]]:
    """"stencilkit-opencl": NumPy arrays, copied to the device and back on every call;
    "stencilkit-opencl-device": pyopencl arrays, in place (the kernel alone, plus launch)."""
    if not _opencl():
        return {}
    st = sk.stencil(func, backend="opencl")
    try:
        import pyopencl.array as cla

        q = _internals.opencl_queue()
        da, dout = cla.to_device(q, a), cla.to_device(q, out)
    except Exception as exc:
        skipped("'stencilkit-opencl-device'", exc)
        return {"stencilkit-opencl": lambda: st(a, out=out)}

    def on_device():
        st(da, out=dout)
        q.finish()

    return {"stencilkit-opencl": lambda: st(a, out=out), "stencilkit-opencl-device": on_device}


def case_jacobi2d(n: int, repeats: int) -> dict:
    def jacobi(a):
        return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])

    a = np.random.default_rng(0).random((n, n))
    out = np.zeros_like(a)
    c = sk.stencil(jacobi, backend="c")
    npb = sk.stencil(jacobi, backend="numpy")

    def hand():
        out[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])

    fns = {"stencilkit-c": lambda: c(a, out=out), "stencilkit-numpy": lambda: npb(a, out=out),
           "numpy-slicing": hand, "hand-c": _hand_c("jacobi2d", c, (a,), out),
           **_opencl_point_rows(jacobi, a, out)}
    nb = _numba()
    if nb is not None:
        nbs = nb.stencil(jacobi)

        @nb.njit(parallel=True)
        def loop(a, out):
            for i in nb.prange(1, a.shape[0] - 1):
                for j in range(1, a.shape[1] - 1):
                    out[i, j] = 0.25 * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])

        fns["numba.stencil"] = _jitted_stencil(nb, nbs, a, out)
        fns["numba-njit-parallel"] = lambda: loop(a, out)
        _numba_rows(fns, nb, jacobi, a, out)
    t = median_times(fns, repeats)
    return {"name": "jacobi2d", "size": f"{n}^2 float64", "bytes": 16 * (n - 2) ** 2,
            "seconds": t}


def _hand_c(case: str, ours, args: tuple, out: np.ndarray) -> Callable[[], object]:
    """The hand-written C of a point-kernel case, checked against our result."""
    run = getattr(handc, case)(*args, out)
    want = ours(*args)
    out[...] = 0
    run()
    same(f"hand-c {case}", out, want)
    return run


def case_border_modes(n: int, repeats: int) -> dict:
    """jacobi2d with each border mode against "constant" (which skips the border), and
    against scipy.ndimage.correlate with the same mode, in one run ("vs ours" is the ratio
    to the constant-mode time)."""
    def jacobi(a):
        return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])

    a = np.random.default_rng(0).random((n, n))
    out = np.zeros_like(a)
    modes = ("nearest", "reflect", "mirror", "wrap")
    fns: dict[str, Callable[[], object]] = {}
    c = sk.stencil(jacobi, backend="c")
    fns["stencilkit-c"] = lambda: c(a, out=out)
    for mode in modes:
        st = sk.stencil(func_or_mode=mode, backend="c")(jacobi)
        fns[f"stencilkit-c-{mode}"] = lambda st=st: st(a, out=out)
    try:
        from scipy import ndimage
    except ImportError:
        ndimage = None
    if ndimage is not None:
        weights = np.array([[0.0, 0.25, 0.0], [0.25, 0.0, 0.25], [0.0, 0.25, 0.0]])
        for mode in modes:
            scipy_mode = "grid-wrap" if mode == "wrap" else mode  # np.pad's "wrap"
            fns[f"scipy-correlate-{mode}"] = (
                lambda m=scipy_mode: ndimage.correlate(a, weights, output=out, mode=m))
    t = median_times(fns, repeats)
    return {"name": "border_modes", "size": f"{n}^2 float64", "bytes": 16 * (n - 2) ** 2,
            "seconds": t}


def case_dask_jacobi2d(n: int, repeats: int) -> dict | None:
    """jacobi2d on an n x n dask array in 4 and 16 chunks against one call on the NumPy
    array (each call returns a new array; the dask calls build the graph and compute it):
    the cost of the overlap (copies of the extended chunks) and of the scheduler."""
    try:
        import dask.array as da
    except ImportError:
        print("dask_jacobi2d: skipped, dask is not installed (pip install .[dask])",
              file=sys.stderr)
        return None
    def jacobi(a):
        return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])

    a = np.random.default_rng(0).random((n, n))
    c = sk.stencil(jacobi, backend="c")
    fns: dict[str, Callable[[], object]] = {"stencilkit-c": lambda: c(a)}
    for parts in (4, 16):
        side = n // int(np.sqrt(parts))
        x = da.from_array(a, chunks=(side, side))
        for sched in ("threads", "sync"):
            fns[f"dask-{parts}-chunks-{sched}"] = (
                lambda x=x, sched=sched: c(x).compute(scheduler=sched))
    t = median_times(fns, repeats, warmup=1)
    return {"name": "dask_jacobi2d", "size": f"{n}^2 float64", "bytes": 16 * (n - 2) ** 2,
            "seconds": t}


def case_lap3d(n: int, repeats: int) -> dict:
    def lap(a):
        return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
                - 6.0 * a[0, 0, 0])

    a = np.random.default_rng(0).random((n, n, n))
    out = np.zeros_like(a)
    c = sk.stencil(lap, backend="c")
    npb = sk.stencil(lap, backend="numpy")

    def hand():
        out[1:-1, 1:-1, 1:-1] = (a[:-2, 1:-1, 1:-1] + a[2:, 1:-1, 1:-1] + a[1:-1, :-2, 1:-1]
                                 + a[1:-1, 2:, 1:-1] + a[1:-1, 1:-1, :-2] + a[1:-1, 1:-1, 2:]
                                 - 6.0 * a[1:-1, 1:-1, 1:-1])

    fns = {"stencilkit-c": lambda: c(a, out=out), "stencilkit-numpy": lambda: npb(a, out=out),
           "numpy-slicing": hand, "hand-c": _hand_c("lap3d", c, (a,), out),
           **_opencl_point_rows(lap, a, out)}
    nb = _numba()
    if nb is not None:
        nbs = nb.stencil(lap)

        @nb.njit(parallel=True)
        def loop(a, out):
            for i in nb.prange(1, a.shape[0] - 1):
                for j in range(1, a.shape[1] - 1):
                    for k in range(1, a.shape[2] - 1):
                        out[i, j, k] = (a[i - 1, j, k] + a[i + 1, j, k] + a[i, j - 1, k]
                                        + a[i, j + 1, k] + a[i, j, k - 1] + a[i, j, k + 1]
                                        - 6.0 * a[i, j, k])

        fns["numba.stencil"] = _jitted_stencil(nb, nbs, a, out)
        fns["numba-njit-parallel"] = lambda: loop(a, out)
        _numba_rows(fns, nb, lap, a, out)
    t = median_times(fns, repeats)
    return {"name": f"lap3d-{n}", "size": f"{n}^3 float64", "bytes": 16 * (n - 2) ** 3,
            "seconds": t}


def case_overhead(repeats: int) -> dict:
    def lap(a):
        return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] - 4.0 * a[0, 0, 0]

    a = np.random.default_rng(0).random((16, 16, 16))
    out = np.zeros_like(a)
    c = sk.stencil(lap, backend="c")
    c(a, out=out)
    fns: dict[str, Callable[[], object]] = {"stencilkit-c": lambda: c(a, out=out)}
    # a computation's call on fields of the same size: hdiff over their 12 x 12 x 16 interior
    computation = sk.stencil(definitions.hdiff, backend="c")
    coeff, result = 0.1 * a, np.zeros_like(a)
    fns["stencilkit-c-computation"] = functools.partial(
        computation, a, result, coeff, origin=(2, 2, 0), domain=(12, 12, 16))
    for name, f in _opencl_point_rows(lap, a, out).items():
        try:
            f()
        except Exception as exc:
            skipped(f"{name!r}", exc)
            continue
        fns[name] = f
    nb = _numba()
    if nb is not None:
        fns["numba.stencil"] = _jitted_stencil(nb, nb.stencil(lap), a, out)

        @nb.njit(parallel=True)
        def loop(a, out):
            for i in nb.prange(1, a.shape[0] - 1):
                for j in range(1, a.shape[1] - 1):
                    for k in range(1, a.shape[2] - 1):
                        out[i, j, k] = (a[i - 1, j, k] + a[i + 1, j, k] + a[i, j - 1, k]
                                        + a[i, j + 1, k] - 4.0 * a[i, j, k])

        fns["numba-njit-parallel"] = lambda: loop(a, out)
    # each sample is a batch of calls lasting about 10 ms; report seconds per call
    counts = {}
    for k, f in list(fns.items()):
        t0 = time.perf_counter()
        try:
            f()
        except Exception as exc:
            skipped(f"{k!r}", exc)
            del fns[k]
            continue
        counts[k] = max(1, min(2000, int(0.01 / max(time.perf_counter() - t0, 1e-7))))
    batch = {k: (lambda f=f, n=counts[k]: [f() for _ in range(n)]) for k, f in fns.items()}
    t = median_times(batch, repeats)
    return {"name": "overhead", "size": "16^3 float64", "bytes": 0,
            "seconds": {k: v / counts[k] for k, v in t.items()}, "spread": t.spread}


def case_hdiff(n: int, nk: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    inp = rng.random((n + 4, n + 4, nk))
    coeff = 0.1 * rng.random((n + 4, n + 4, nk))
    out = np.zeros_like(inp)
    c = sk.stencil(definitions.hdiff, backend="c")
    npb = sk.stencil(definitions.hdiff, backend="numpy")
    geo = {"origin": (2, 2, 0), "domain": (n, n, nk)}

    def hand():
        lap = 4 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1] + inp[1:-1, 2:]
                                     + inp[1:-1, :-2])
        res = lap[1:, 1:-1] - lap[:-1, 1:-1]
        flx = np.where(res * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2]) > 0, 0.0, res)
        res = lap[1:-1, 1:] - lap[1:-1, :-1]
        fly = np.where(res * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2]) > 0, 0.0, res)
        out[2:-2, 2:-2] = inp[2:-2, 2:-2] - coeff[2:-2, 2:-2] * (
            flx[1:] - flx[:-1] + fly[:, 1:] - fly[:, :-1])

    c(inp, out, coeff, **geo)
    want = out.copy()
    out[...] = 0
    fused = handc.hdiff(inp, coeff, out)
    fused()
    same("hand-c hdiff", out, want)
    fns = {"stencilkit-c": lambda: c(inp, out, coeff, **geo),
           "stencilkit-numpy": lambda: npb(inp, out, coeff, **geo), "numpy-slicing": hand,
           "hand-c-fused": fused}
    # the same computation spelled with `if` statements, and with helper functions
    for spelling in ("if", "functions"):
        other = sk.stencil(getattr(definitions, f"hdiff_{spelling}"), backend="c")
        out[...] = 0
        other(inp, out, coeff, **geo)
        same(f"stencilkit-c hdiff_{spelling}", out, want)
        fns[f"stencilkit-c-{spelling}"] = functools.partial(other, inp, out, coeff, **geo)
    if _opencl():  # NumPy fields: copied to the device and back on every call
        ocl = sk.stencil(definitions.hdiff, backend="opencl")
        fns["stencilkit-opencl"] = lambda: ocl(inp, out, coeff, **geo)
    nb = _numba()
    if nb is not None:
        fns["numba-njit-parallel"] = lambda: definitions.hdiff_numba(inp, coeff, out)
    t = median_times(fns, repeats)
    return {"name": "hdiff", "size": f"{n}x{n}x{nk} float64", "bytes": 0, "seconds": t}


def case_tridiag(n: int, nk: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    base = [rng.random((n, n, nk)), 3 + rng.random((n, n, nk)), rng.random((n, n, nk)),
            rng.random((n, n, nk))]
    c = sk.stencil(definitions.tridiagonal, backend="c")
    npb = sk.stencil(definitions.tridiagonal, backend="numpy")
    layouts = {"storage": [sk.as_storage(x, backend="c") for x in base],
               "c-order": [np.ascontiguousarray(x) for x in base]}
    work = {k: [x.copy() for x in v] for k, v in layouts.items()}
    for k in work:  # keep the layout of each copy
        work[k] = [sk.as_storage(x, backend="c") if k == "storage" else x for x in work[k]]

    def fresh(k):
        for w, b in zip(work[k], layouts[k]):
            w[...] = b  # reset c and d: each timed call solves the same system

    fns: dict[str, Callable[[], object]] = {
        "stencilkit-c-storage": lambda: c(*work["storage"]),
        "stencilkit-c-c-order": lambda: c(*work["c-order"]),
        "stencilkit-numpy": lambda: npb(*work["c-order"]),
    }
    if _opencl():
        ocl = sk.stencil(definitions.tridiagonal, backend="opencl")
        fns["stencilkit-opencl"] = lambda: ocl(*work["c-order"])
    for layout in ("storage", "c-order"):  # checked against ours on the same layout
        fresh(layout)
        c(*work[layout])
        want = work[layout][3].copy()
        fresh(layout)
        hand = handc.tridiag(*work[layout])
        hand()
        same(f"hand-c tridiag ({layout})", work[layout][3], want)
        fns[f"hand-c-{layout}"] = hand
    fresh("c-order")
    columns = handc.tridiag(*work["c-order"], columns=True)
    columns()
    same("hand-c tridiag (c-order, one column at a time)", work["c-order"][3], want)
    fns["hand-c-c-order-columns"] = columns
    # GT4Py's spelling with cp/dp temporaries and an output field (inputs unchanged, so no
    # reset needed): the peer-bench's case, checked against the in-place solution
    temps = sk.stencil(definitions.tridiagonal_temporaries, backend="c")
    for layout in ("storage", "c-order"):
        fresh(layout)
        args = [x.copy() for x in work[layout]]
        args = [sk.as_storage(x, backend="c") for x in args] if layout == "storage" else args
        x_out = np.zeros_like(args[0])
        temps(*args, x_out)
        fresh(layout)
        c(*work[layout])
        same(f"stencilkit tridiag with temporaries ({layout})", x_out, work[layout][3])
        fns[f"stencilkit-c-{layout}-temporaries"] = (
            lambda args=args, x_out=x_out: temps(*args, x_out))
        x_hand = np.zeros_like(x_out)
        hand_x = handc.tridiag_x(*args[:4], x_hand)
        hand_x()
        same(f"hand-c tridiag with temporaries ({layout})", x_hand, work[layout][3])
        fns[f"hand-c-{layout}-temporaries"] = hand_x
    nb = _numba()
    if nb is not None:
        fns["numba-njit-parallel"] = lambda: definitions.tridiag_numba(*work["c-order"])
    resets = {"stencilkit-c-storage": "storage", "hand-c-storage": "storage"}
    # reset c and d before every call: each timed call solves the same system
    t = median_times(fns, repeats, before=lambda name: fresh(resets.get(name, "c-order")))
    seconds = dict(t)
    seconds["stencilkit-c"] = seconds["stencilkit-c-storage"]
    return {"name": "tridiag", "size": f"{n}x{n}x{nk} float64", "bytes": 0, "seconds": seconds,
            "spread": t.spread}


def triangle_mesh(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and triangles of a structured triangulation with 2 * nx * ny cells."""
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    a = (i * (ny + 1) + j).ravel()
    b = a + ny + 1
    tri = np.concatenate([np.stack([a, b, b + 1], 1), np.stack([a, b + 1, a + 1], 1)])
    xs, ys = np.meshgrid(np.linspace(0, 1, nx + 1), np.linspace(0, 1, ny + 1), indexing="ij")
    return np.stack([xs.ravel(), ys.ravel()], 1), tri


def case_parloop_inc(n_cells: int, repeats: int) -> dict:
    """Indirect INC: every cell adds a third of its value to each of its three nodes."""
    side = int(np.sqrt(n_cells / 2))
    xy, tri = triangle_mesh(side, side)
    cells, nodes = sk.Set(len(tri)), sk.Set(len(xy))
    c2n = sk.Map(cells, nodes, 3, tri)
    vals = sk.Dat(cells, data=np.random.default_rng(0).random(len(tri)))
    acc = sk.Dat(nodes)

    @sk.kernel
    def spread(v, a):
        for i in range(3):
            a[i, 0] += v[0] / 3.0

    loops = {}
    for race in ("atomic", "color"):
        loops[f"stencilkit-c-{race}"] = sk.ParLoop(spread, cells, vals(sk.READ), acc(sk.INC, c2n),
                                                   backend="c", race=race)
    loops["stencilkit-numpy"] = sk.ParLoop(spread, cells, vals(sk.READ), acc(sk.INC, c2n),
                                           backend="numpy")
    if _opencl():
        for race in ("atomic", "color"):
            loops[f"stencilkit-opencl-{race}"] = sk.ParLoop(
                spread, cells, vals(sk.READ), acc(sk.INC, c2n), backend="opencl", race=race)
    t0 = time.perf_counter()
    _internals.block_coloring(len(tri), [tri], [len(xy)])
    coloring = time.perf_counter() - t0

    def hand():
        np.add.at(acc.data, tri.reshape(-1), np.repeat(vals.data / 3.0, 3))

    fns = {k: loop.compute for k, loop in loops.items()}
    fns["numpy-add.at"] = hand
    t = median_times(fns, repeats)
    t["stencilkit-c"] = min(t["stencilkit-c-atomic"], t["stencilkit-c-color"])
    return {"name": "parloop_inc", "size": f"{len(tri)} cells", "bytes": 0, "seconds": t,
            "coloring_seconds": coloring}


_COMPILE_SCRIPT = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import numpy as np
    import stencilkit as sk
    t1 = time.perf_counter()
    from stencilkit_bench_kernel import k
    a = np.ones((64, 64))
    st = sk.stencil(k, backend="c")
    st(a)
    t2 = time.perf_counter()
    print(t1 - t0, t2 - t1)
""")
_COMPILE_KERNEL = "def k(a):\n    return 0.5 * (a[-1, 0] + a[1, 0]) - a[0, 1]\n"


def case_compile() -> dict:
    """Cold (empty cache) and warm (new process, disk cache) time to first result."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "stencilkit_bench_kernel.py").write_text(_COMPILE_KERNEL)
        Path(tmp, "run.py").write_text(_COMPILE_SCRIPT)
        env = dict(os.environ, STENCILKIT_CACHE_DIR=str(Path(tmp) / "cache"),
                   PYTHONPATH=tmp + os.pathsep + os.environ.get("PYTHONPATH", ""))
        times = []
        for _ in range(2):
            out = subprocess.run([sys.executable, str(Path(tmp, "run.py"))], env=env,
                                 capture_output=True, text=True, check=True)
            times.append(float(out.stdout.split()[1]))
    return {"name": "compile", "size": "single-stage 2-D stencil", "bytes": 0,
            "seconds": {"cold-first-result": times[0], "warm-first-result": times[1]}}




def runs(quick: bool, repeats: int) -> dict[str, Callable[[], list[dict]]]:
    """Each case's run, returning its result rows (none when it has nothing to time)."""
    n2, nk = (64, 16) if quick else (256, 80)
    return {
        "jacobi2d": lambda: [case_jacobi2d(512 if quick else 4096, repeats)],
        "border_modes": lambda: [case_border_modes(512 if quick else 4096, repeats)],
        "lap3d": lambda: [case_lap3d(n, repeats) for n in ([32] if quick else [64, 256])],
        "timeloop": lambda: [case_timeloop(256 if quick else 2048, 100, repeats)],
        "hdiff": lambda: [case_hdiff(n2, nk, repeats)],
        "tridiag": lambda: [case_tridiag(n2, nk, repeats)],
        "overhead": lambda: [case_overhead(repeats)],
        "parloop_inc": lambda: [case_parloop_inc(20_000 if quick else 1_000_000, repeats)],
        "compile": lambda: [case_compile()],
        "dask_jacobi2d": lambda: [r for r in [case_dask_jacobi2d(1024 if quick else 8192,
                                                                 repeats)] if r],
    }

