"""The benchmark suite behind ``stencilkit bench``.

One process, every figure a median of repeated calls after warm-up, the implementations of a
case interleaved (round-robin), and the machine's STREAM copy/triad bandwidth measured in the
same run by a C kernel built with the same toolchain. Never used for assertions in tests.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

_STREAM_C = r"""
#include <stdint.h>
void copy(double *restrict c, const double *restrict a, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) c[i] = a[i];
}
void triad(double *restrict a, const double *restrict b, const double *restrict c,
           double s, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""


class Medians(dict):
    """Median seconds per implementation; ``spread`` is each one's half interquartile range
    relative to its median (0.05: the middle half of the samples lies within about ±5%)."""

    def __init__(self, samples: dict[str, list[float]]) -> None:
        super().__init__({k: statistics.median(v) for k, v in samples.items()})
        self.spread = {k: spread(v) for k, v in samples.items()}


def spread(samples: list[float]) -> float:
    if len(samples) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return (q3 - q1) / 2 / statistics.median(samples)


#: The cases of ``stencilkit bench``, in the order they run, with what each times.
CASES = {
    "jacobi2d": "2-D Jacobi point kernel on every backend, against NumPy, Numba and hand C",
    "border_modes": "jacobi2d with each border mode, against scipy.ndimage.correlate",
    "lap3d": "3-D Laplacian point kernel on every backend, against NumPy, Numba and hand C",
    "timeloop": "100 Jacobi sweeps in one njit(parallel=True) function, against numba.stencil",
    "hdiff": "horizontal diffusion computation (gtscript), against NumPy, Numba and fused C",
    "tridiag": "tridiagonal solver computation (vertical sweeps), against hand C and Numba",
    "overhead": "the fixed cost of one call on 16^3 arrays",
    "parloop_inc": "ParLoop with indirect increments on a triangle mesh, against np.add.at",
    "compile": "time to first result, cold (empty cache) and warm (new process)",
    "dask_jacobi2d": "jacobi2d on a chunked dask array, against one call on the NumPy array",
}


def _skipped(what: str, exc: BaseException | str) -> None:
    """Say on stderr that ``what`` is left out, and why, in one line; the run goes on."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    why = "; ".join(ln.strip() for ln in str(why).splitlines() if ln.strip())
    print(f"stencilkit bench: {what} skipped: {why[:500]}", file=sys.stderr, flush=True)


def _median_times(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 2,
                  before: Callable[[str], object] | None = None) -> Medians:
    """Median seconds per call of each function. The calls are interleaved, one of each per
    round in an order shuffled every round (a fixed order lets the drift of a shared machine,
    or one implementation's cache footprint, favour its successor); ``before(name)`` runs
    untimed before each call. A function that raises (a backend that cannot build or run
    here) is left out, with the reason on stderr, and the others are timed."""
    import random

    order = random.Random(0)
    fns = dict(fns)
    for _ in range(warmup):
        for name in list(fns):
            if before:
                before(name)
            try:
                fns[name]()
            except Exception as exc:
                _skipped(f"{name!r}", exc)
                del fns[name]
    names = list(fns)
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        order.shuffle(names)
        for name in names:
            if before:
                before(name)
            f = fns[name]
            t0 = time.perf_counter()
            f()
            samples[name].append(time.perf_counter() - t0)
    return Medians({k: samples[k] for k in fns})


def _same(name: str, got: np.ndarray, want: np.ndarray) -> None:
    """A peer is timed only once its result matches ours (a wrong peer is a wrong ratio)."""
    if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
        raise AssertionError(f"bench: {name} differs from stencilkit's result")


def stream(n: int, repeats: int) -> dict[str, float]:
    """STREAM copy and triad bandwidth in GB/s (copy counts 16 bytes/element, triad 24)."""
    from .build.toolchain import toolchain

    tc = toolchain()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "stream.c"
        src.write_text(_STREAM_C)
        lib = Path(tmp) / "stream.so"
        subprocess.run([tc.cc, *tc.flags, str(src), "-o", str(lib)], check=True)
        dll = ctypes.CDLL(str(lib))
    a, b, c = np.ones(n), np.ones(n), np.empty(n)
    pa, pb, pc = (x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, c))
    dll.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    dll.triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double, ctypes.c_int64]
    t = _median_times({"copy": lambda: dll.copy(pc, pa, n),
                       "triad": lambda: dll.triad(pa, pb, pc, 3.0, n)}, repeats)
    return {"copy": 16 * n / t["copy"] / 1e9, "triad": 24 * n / t["triad"] / 1e9}


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
    import stencilkit as sk

    reason = sk.registry.REGISTRY["numba"].probe()
    if reason is not None:
        _skipped("the 'stencilkit-numba' rows", reason)
        return
    ours = sk.stencil(kernel, backend="numba")
    fns["stencilkit-numba"] = lambda: ours(a, out=out)
    fns["stencilkit-in-njit-par"] = _ours_in_njit(nb, ours, a, out)


def case_timeloop(n: int, steps: int, repeats: int) -> dict:
    """A time loop of ``steps`` Jacobi sweeps inside one njit(parallel=True) function calling
    our stencil, against the same loop calling numba.stencil, and against a Python loop
    calling our C backend."""
    import stencilkit as sk

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
    t = _median_times(fns, repeats)
    return {"name": f"timeloop-{steps}", "size": f"{n}^2 float64", "bytes": 16 * steps * (n - 2) ** 2,
            "seconds": t, "reference": "stencilkit-c-python-loop"}


def _opencl() -> bool:
    """Whether the "opencl" backend runs here (its rows are left out otherwise, with the
    probe's reason on stderr, once)."""
    from . import registry

    reason = registry.REGISTRY["opencl"].probe()
    if reason is not None and "opencl" not in _said:
        _said.add("opencl")
        _skipped("every 'stencilkit-opencl' row", reason)
    return reason is None


_said: set[str] = set()


def _opencl_point_rows(func, a: np.ndarray, out: np.ndarray) -> dict[str, Callable[[], object]]:
    """"stencilkit-opencl": NumPy arrays, copied to the device and back on every call;
    "stencilkit-opencl-device": pyopencl arrays, in place (the kernel alone, plus launch)."""
    if not _opencl():
        return {}
    import stencilkit as sk
    from stencilkit.runtime.opencl import device

    st = sk.stencil(func, backend="opencl")
    try:
        import pyopencl.array as cla

        q = device().queue
        da, dout = cla.to_device(q, a), cla.to_device(q, out)
    except Exception as exc:
        _skipped("'stencilkit-opencl-device'", exc)
        return {"stencilkit-opencl": lambda: st(a, out=out)}

    def on_device():
        st(da, out=dout)
        q.finish()

    return {"stencilkit-opencl": lambda: st(a, out=out), "stencilkit-opencl-device": on_device}


def case_jacobi2d(n: int, repeats: int) -> dict:
    import stencilkit as sk

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
    t = _median_times(fns, repeats)
    return {"name": "jacobi2d", "size": f"{n}^2 float64", "bytes": 16 * (n - 2) ** 2,
            "seconds": t}


def _hand_c(case: str, ours, args: tuple, out: np.ndarray) -> Callable[[], object]:
    """The hand-written C of a point-kernel case, checked against our result."""
    from . import bench_handc

    run = getattr(bench_handc, case)(*args, out)
    want = ours(*args)
    out[...] = 0
    run()
    _same(f"hand-c {case}", out, want)
    return run


def case_border_modes(n: int, repeats: int) -> dict:
    """jacobi2d with each border mode against "constant" (which skips the border), and
    against scipy.ndimage.correlate with the same mode, in one run ("vs ours" is the ratio
    to the constant-mode time)."""
    import stencilkit as sk

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
    t = _median_times(fns, repeats)
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
    import stencilkit as sk

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
    t = _median_times(fns, repeats, warmup=1)
    return {"name": "dask_jacobi2d", "size": f"{n}^2 float64", "bytes": 16 * (n - 2) ** 2,
            "seconds": t}


def case_lap3d(n: int, repeats: int) -> dict:
    import stencilkit as sk

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
    t = _median_times(fns, repeats)
    return {"name": f"lap3d-{n}", "size": f"{n}^3 float64", "bytes": 16 * (n - 2) ** 3,
            "seconds": t}


def case_overhead(repeats: int) -> dict:
    import stencilkit as sk

    def lap(a):
        return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] - 4.0 * a[0, 0, 0]

    a = np.random.default_rng(0).random((16, 16, 16))
    out = np.zeros_like(a)
    c = sk.stencil(lap, backend="c")
    c(a, out=out)
    fns: dict[str, Callable[[], object]] = {"stencilkit-c": lambda: c(a, out=out)}
    for name, f in _opencl_point_rows(lap, a, out).items():
        try:
            f()
        except Exception as exc:
            _skipped(f"{name!r}", exc)
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
            _skipped(f"{k!r}", exc)
            del fns[k]
            continue
        counts[k] = max(1, min(2000, int(0.01 / max(time.perf_counter() - t0, 1e-7))))
    batch = {k: (lambda f=f, n=counts[k]: [f() for _ in range(n)]) for k, f in fns.items()}
    t = _median_times(batch, repeats)
    return {"name": "overhead", "size": "16^3 float64", "bytes": 0,
            "seconds": {k: v / counts[k] for k, v in t.items()}, "spread": t.spread}


def _computations():
    """The gtscript definitions of the hdiff and tridiag cases (module-level source)."""
    from . import bench_definitions

    return bench_definitions


def case_hdiff(n: int, nk: int, repeats: int) -> dict:
    import stencilkit as sk

    defs = _computations()
    rng = np.random.default_rng(0)
    inp = rng.random((n + 4, n + 4, nk))
    coeff = 0.1 * rng.random((n + 4, n + 4, nk))
    out = np.zeros_like(inp)
    c = sk.stencil(defs.hdiff, backend="c")
    npb = sk.stencil(defs.hdiff, backend="numpy")
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

    from . import bench_handc

    c(inp, out, coeff, **geo)
    want = out.copy()
    out[...] = 0
    fused = bench_handc.hdiff(inp, coeff, out)
    fused()
    _same("hand-c hdiff", out, want)
    fns = {"stencilkit-c": lambda: c(inp, out, coeff, **geo),
           "stencilkit-numpy": lambda: npb(inp, out, coeff, **geo), "numpy-slicing": hand,
           "hand-c-fused": fused}
    # the same computation spelled with `if` statements, and with helper functions
    for spelling in ("if", "functions"):
        other = sk.stencil(getattr(defs, f"hdiff_{spelling}"), backend="c")
        out[...] = 0
        other(inp, out, coeff, **geo)
        _same(f"stencilkit-c hdiff_{spelling}", out, want)
        fns[f"stencilkit-c-{spelling}"] = functools.partial(other, inp, out, coeff, **geo)
    if _opencl():  # NumPy fields: copied to the device and back on every call
        ocl = sk.stencil(defs.hdiff, backend="opencl")
        fns["stencilkit-opencl"] = lambda: ocl(inp, out, coeff, **geo)
    nb = _numba()
    if nb is not None:
        fns["numba-njit-parallel"] = lambda: defs.hdiff_numba(inp, coeff, out)
    t = _median_times(fns, repeats)
    return {"name": "hdiff", "size": f"{n}x{n}x{nk} float64", "bytes": 0, "seconds": t}


def case_tridiag(n: int, nk: int, repeats: int) -> dict:
    import stencilkit as sk

    defs = _computations()
    rng = np.random.default_rng(0)
    base = [rng.random((n, n, nk)), 3 + rng.random((n, n, nk)), rng.random((n, n, nk)),
            rng.random((n, n, nk))]
    c = sk.stencil(defs.tridiagonal, backend="c")
    npb = sk.stencil(defs.tridiagonal, backend="numpy")
    layouts = {"storage": [sk.as_storage(x, backend="c") for x in base],
               "c-order": [np.ascontiguousarray(x) for x in base]}
    work = {k: [x.copy() for x in v] for k, v in layouts.items()}
    for k in work:  # keep the layout of each copy
        work[k] = [sk.as_storage(x, backend="c") if k == "storage" else x for x in work[k]]

    def fresh(k):
        for w, b in zip(work[k], layouts[k]):
            w[...] = b  # reset c and d: each timed call solves the same system

    from . import bench_handc

    fns: dict[str, Callable[[], object]] = {
        "stencilkit-c-storage": lambda: c(*work["storage"]),
        "stencilkit-c-c-order": lambda: c(*work["c-order"]),
        "stencilkit-numpy": lambda: npb(*work["c-order"]),
    }
    if _opencl():
        ocl = sk.stencil(defs.tridiagonal, backend="opencl")
        fns["stencilkit-opencl"] = lambda: ocl(*work["c-order"])
    for layout in ("storage", "c-order"):  # checked against ours on the same layout
        fresh(layout)
        c(*work[layout])
        want = work[layout][3].copy()
        fresh(layout)
        hand = bench_handc.tridiag(*work[layout])
        hand()
        _same(f"hand-c tridiag ({layout})", work[layout][3], want)
        fns[f"hand-c-{layout}"] = hand
    fresh("c-order")
    columns = bench_handc.tridiag(*work["c-order"], columns=True)
    columns()
    _same("hand-c tridiag (c-order, one column at a time)", work["c-order"][3], want)
    fns["hand-c-c-order-columns"] = columns
    # GT4Py's spelling with cp/dp temporaries and an output field (inputs unchanged, so no
    # reset needed): the peer-bench's case, checked against the in-place solution
    temps = sk.stencil(defs.tridiagonal_temporaries, backend="c")
    for layout in ("storage", "c-order"):
        fresh(layout)
        args = [x.copy() for x in work[layout]]
        args = [sk.as_storage(x, backend="c") for x in args] if layout == "storage" else args
        x_out = np.zeros_like(args[0])
        temps(*args, x_out)
        fresh(layout)
        c(*work[layout])
        _same(f"stencilkit tridiag with temporaries ({layout})", x_out, work[layout][3])
        fns[f"stencilkit-c-{layout}-temporaries"] = (
            lambda args=args, x_out=x_out: temps(*args, x_out))
        x_hand = np.zeros_like(x_out)
        hand_x = bench_handc.tridiag_x(*args[:4], x_hand)
        hand_x()
        _same(f"hand-c tridiag with temporaries ({layout})", x_hand, work[layout][3])
        fns[f"hand-c-{layout}-temporaries"] = hand_x
    nb = _numba()
    if nb is not None:
        fns["numba-njit-parallel"] = lambda: defs.tridiag_numba(*work["c-order"])
    resets = {"stencilkit-c-storage": "storage", "hand-c-storage": "storage"}
    # reset c and d before every call: each timed call solves the same system
    t = _median_times(fns, repeats, before=lambda name: fresh(resets.get(name, "c-order")))
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
    import stencilkit as sk
    from stencilkit.loop import block_coloring

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
    block_coloring(len(tri), [tri], [len(xy)])
    coloring = time.perf_counter() - t0

    def hand():
        np.add.at(acc._data, tri.reshape(-1), np.repeat(vals._data / 3.0, 3))

    fns = {k: loop.compute for k, loop in loops.items()}
    fns["numpy-add.at"] = hand
    t = _median_times(fns, repeats)
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


def _table(results: list[dict], bw: dict[str, float] | None) -> str:
    lines = [f"STREAM: copy {bw['copy']:.1f} GB/s, triad {bw['triad']:.1f} GB/s" if bw else
             "STREAM: not measured", ""]
    header = f"{'case':<14} {'implementation':<26} {'median':>12} {'spread':>7} {'GB/s':>8} " \
             f"{'/STREAM':>8} {'vs ours':>8}"
    lines += [header, "-" * len(header)]
    for r in results:
        ours = r["seconds"].get(r.get("reference", "stencilkit-c"))
        for impl, t in r["seconds"].items():
            gbs = r["bytes"] / t / 1e9 if r["bytes"] else None
            rate = f"{gbs:8.1f}" if gbs else " " * 8
            frac = f"{gbs / bw['copy']:8.2f}" if gbs and bw else " " * 8
            ratio = f"{t / ours:8.2f}" if ours else " " * 8
            half = r.get("spread", {}).get(impl)
            sp = f"{100 * half:6.1f}%" if half is not None else " " * 7
            shown = f"{t * 1e6:9.2f} us" if t < 1e-3 else f"{t * 1e3:9.2f} ms"
            lines.append(f"{r['name']:<14} {impl:<26} {shown:>12} {sp} {rate} {frac} {ratio}")
        if "coloring_seconds" in r:
            lines.append(f"{r['name']:<14} {'(block colouring, once)':<22} "
                         f"{r['coloring_seconds'] * 1e3:9.2f} ms")
    return "\n".join(lines)


def compare(path_a: str, path_b: str) -> int:
    """The ratio table of two ``--json`` results: each implementation's median in A and B,
    B/A, and its ratio to stencilkit in each run (those should agree between two runs on one
    machine; their quotient is how far they do not)."""
    try:
        runs = [json.loads(Path(p).read_text()) for p in (path_a, path_b)]
        cases = [{r["name"]: r for r in run["cases"]} for run in runs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"stencilkit bench --compare: not two results of 'stencilkit bench --json' "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    header = (f"{'case':<14} {'implementation':<26} {'A':>11} {'B':>11} {'B/A':>6} "
              f"{'vs ours A':>9} {'vs ours B':>9} {'drift':>6}")
    bw = [(run.get("stream_gbs") or {}).get("copy") for run in runs]
    lines = [f"A: {path_a} (STREAM copy {bw[0] or 0:.1f} GB/s)",
             f"B: {path_b} (STREAM copy {bw[1] or 0:.1f} GB/s)", "", header, "-" * len(header)]

    def shown(t: float) -> str:
        return f"{t * 1e6:8.2f} us" if t < 1e-3 else f"{t * 1e3:8.2f} ms"

    for name, ra in cases[0].items():
        rb = cases[1].get(name)
        if rb is None:
            continue
        refs = [r["seconds"].get(r.get("reference", "stencilkit-c")) for r in (ra, rb)]
        for impl, ta in ra["seconds"].items():
            tb = rb["seconds"].get(impl)
            if tb is None:
                continue
            va, vb = (t / ref if ref else None for t, ref in ((ta, refs[0]), (tb, refs[1])))
            rel = (f"{va:9.2f} {vb:9.2f} {vb / va:6.2f}" if va and vb else " " * 26)
            lines.append(f"{name:<14} {impl:<26} {shown(ta):>11} {shown(tb):>11} "
                         f"{tb / ta:6.2f} {rel}")
    lines += ["", "drift: (vs ours in B) / (vs ours in A); 1.00 means the ratio held between runs"]
    print("\n".join(lines))
    return 0


OURS_COLOUR, PEER_COLOUR = "tab:orange", "tab:blue"


def _plot(results: list[dict], bw: dict[str, float] | None, path: str) -> None:
    fig = chart(results, bw)
    if fig is not None:
        fig.savefig(path, dpi=100)


def chart(results: list[dict], bw: dict[str, float] | None):
    """The benchmark chart (a matplotlib Figure; None without results). Every case in a
    panel of its own: each implementation's speed relative to stencilkit's
    (its median over the implementation's, so higher is faster and stencilkit is at 1), ours
    in one colour and the peers in another, the spread as error bars; the legend above the
    panels, never over a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = [r for r in results if r["seconds"]]
    if not rows:
        return None
    ncols = min(3, len(rows))
    nrows = -(-len(rows) // ncols)
    tallest = max(len(r["seconds"]) for r in rows)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(5.6 * ncols, (0.9 + 0.32 * tallest) * nrows + 0.6))
    for ax, r in zip(axes.flat, rows):
        times = r["seconds"]
        ours = times.get(r.get("reference", "stencilkit-c")) or next(
            (t for n, t in times.items() if n.startswith("stencilkit")), None)
        names = sorted(times, key=lambda n: times[n], reverse=True)  # fastest on top
        base = ours or min(times.values())
        speed = [base / times[n] for n in names]
        spread = r.get("spread", {})
        ax.barh(names, speed, xerr=[v * spread.get(n, 0.0) for v, n in zip(speed, names)],
                color=[OURS_COLOUR if n.startswith("stencilkit") else PEER_COLOUR
                       for n in names], ecolor="black", capsize=2)
        ax.axvline(1.0, color="gray", lw=0.8, ls=":")
        title = f"{r['name']} ({r['size']})"
        if r.get("bytes") and ours:
            title += f"\nstencilkit {r['bytes'] / ours / 1e9:.1f} GB/s" + (
                f", STREAM copy {bw['copy']:.1f}" if bw else "")
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel("speed relative to stencilkit (higher is faster)" if ours else
                      "speed relative to the fastest", fontsize=8)
    for ax in list(axes.flat)[len(rows):]:
        ax.set_visible(False)
    fig.legend(handles=[Patch(color=OURS_COLOUR, label="stencilkit"),
                        Patch(color=PEER_COLOUR, label="peers"),
                        Patch(facecolor="white", edgecolor="black",
                              label="error bar: half the interquartile range")],
               loc="upper center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    return fig


def unknown_cases(only: list[str]) -> list[str]:
    """The names in ``only`` that are not cases of the suite."""
    return [name for name in only if name not in CASES]


def _runs(quick: bool, repeats: int) -> dict[str, Callable[[], list[dict]]]:
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


def run(quick: bool = False, json_path: str | None = None, plot_path: str | None = None,
        only: list[str] | None = None) -> int:
    """Run the cases named in ``only`` (all by default; names from ``CASES``). A case or an
    implementation that fails (a backend that cannot build or run here) is left out with
    the reason on stderr, and the run goes on."""
    repeats = 5 if quick else 20
    wrong = unknown_cases(only or [])
    if wrong:
        raise ValueError(f"unknown case {', '.join(map(repr, wrong))}; the cases are: "
                         f"{', '.join(CASES)}")
    want = set(only or CASES)
    try:
        bw: dict[str, float] | None = stream(1 << 21 if quick else 1 << 25, repeats)
    except Exception as exc:  # no C compiler: the cases still run on what there is
        _skipped("the STREAM bandwidth", exc)
        bw = None
    results = []
    for name, case in _runs(quick, repeats).items():
        if name not in want:
            continue
        try:
            results += case()
        except Exception as exc:
            _skipped(f"the case {name!r}", exc)
    for r in results:
        r.setdefault("spread", getattr(r["seconds"], "spread", {}))
    print(_table(results, bw))
    print("\nspread: half the interquartile range of the samples, relative to the median; "
          "vs ours: median / stencilkit's median")
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "numpy": np.__version__, "quick": quick, "stream_gbs": bw, "cases": results}
    if json_path:
        Path(json_path).write_text(json.dumps(meta, indent=2))
    if plot_path:
        _plot(results, bw, plot_path)
    return 0
