"""Complex numbers on "cuda" (issue 24 item 5): complex64 and complex128 as a struct of the
prelude with Numba's arithmetic. On the emulator: point kernels, computations and ParLoops
bit-identical to the "numba" backend and to Numba's own @stencil (arithmetic, comparisons,
conversions, the C99 Annex G special values of the "c" backend), close to "numpy" (whose
array loops divide by a reciprocal and, on FMA CPUs, fuse the product: docs/numerics.md);
compile-only with NVRTC (and nvcc where installed); refusals of what is not computed."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.build.cuda import compile_ptx_uncached, nvrtc_problem

needs_nvrtc = pytest.mark.skipif(nvrtc_problem() is not None,
                                 reason=f"NVRTC unavailable: {nvrtc_problem()}")


def _needs(backend: str) -> None:
    reason = registry.REGISTRY[backend].probe()
    if reason is not None:
        pytest.skip(f"backend {backend}: {reason}")


def arith(a, b, s):
    z = a[0, 1] * b[0, 0] - a[1, 0] / b[0, 1] + s * a[0, 0]
    w = -z + (1 + 2j) * a[0, 0]
    if z == w or not z:
        return z
    return z / w + abs(a[0, 0])


def wave(psi, v):
    """One explicit Schroedinger-like step on a complex64 wave function."""
    lap = psi[-1, 0] + psi[1, 0] + psi[0, -1] + psi[0, 1] - 4 * psi[0, 0]
    return psi[0, 0] * v[0, 0] + np.complex64(0.25j) * lap


def addsub(a, b):
    return a[0, 0] + b[0, 1] - (-a[1, 0])


def mixed(a, x):
    """complex64 with float64: NumPy's promotion gives complex128."""
    return a[0, 0] * x[0, 0] + x[0, 1] / a[0, 0]


def nan_tests(a):
    return np.isnan(a[0, 0]) or (np.isinf(a[0, 0]) and not np.isfinite(a[0, 1]))


def muldiv(a, b):
    return a[0] * b[0] + a[0] / b[0]


def complex_log(a):
    return np.log(a[0, 0])


def phase(psi, v):
    """A transmission function: the wave times exp(i sigma V)."""
    return psi[0] * np.exp(v[0] * 0.5j) + np.exp(psi[0]) - np.sqrt(psi[0])


def _c(shape, dtype=np.complex128, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.fixture
def cuda(monkeypatch):
    """"cuda" on the emulator (the real device where one is available)."""
    if registry.REGISTRY["cuda"].probe() is not None:
        from .cuda_emulator import install

        install(monkeypatch)
    return "cuda"


CASES = [
    ("arith", arith, lambda: (_c((20, 21)), _c((20, 21), seed=1), 0.5 - 0.25j)),
    ("arith64", arith, lambda: (_c((20, 21), np.complex64), _c((20, 21), np.complex64, 1),
                                np.complex64(0.5 - 0.25j))),
    ("wave", wave, lambda: (_c((32, 33), np.complex64), _c((32, 33), np.complex64, 2))),
    ("mixed", mixed, lambda: (_c((12, 13), np.complex64), np.linspace(1, 2, 156).reshape(12, 13))),
    ("muldiv", muldiv, lambda: (_c(1000), _c(1000, seed=3))),
]


@pytest.mark.parametrize("name, kernel, make", CASES, ids=[c[0] for c in CASES])
def test_point_kernels_equal_numba(cuda, name, kernel, make):
    _needs("numba")
    args = make()
    got = sk.stencil(kernel, backend=cuda)(*args)
    ref = sk.stencil(kernel, backend="numba")(*args)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(np.asarray(got), ref)
    near = sk.stencil(kernel, backend="numpy")(*args)
    single = any(getattr(a, "dtype", None) == np.complex64 for a in args)
    np.testing.assert_allclose(np.asarray(got), near, rtol=1e-5 if single else 1e-12)


def test_numbas_own_stencil(cuda, numba_stencil):
    psi, v = _c((16, 17), np.complex64), _c((16, 17), np.complex64, 5)
    np.testing.assert_array_equal(np.asarray(sk.stencil(wave, backend=cuda)(psi, v)),
                                  numba_stencil(wave)(psi, v))
    a, b = _c((9, 10)), _c((9, 10), seed=6)
    np.testing.assert_array_equal(np.asarray(sk.stencil(arith, backend=cuda)(a, b, 2j)),
                                  numba_stencil(arith)(a, b, 2j))


def test_addition_and_conversions_equal_numpy(cuda):
    a, b = _c((10, 11), np.complex64), _c((10, 11), seed=1)
    np.testing.assert_array_equal(np.asarray(sk.stencil(addsub, backend=cuda)(a, b)),
                                  sk.stencil(addsub, backend="numpy")(a, b))
    out = np.zeros((10, 11), np.complex64)  # complex128 results stored as complex64
    sk.stencil(addsub, backend=cuda)(b, b, out=out)
    np.testing.assert_array_equal(out, sk.stencil(addsub, backend="numpy")(
        b, b, out=np.zeros((10, 11), np.complex64)))


def muls(a, b):
    return a[0] * b[0]


def divs(a, b):
    return a[0] / b[0]


@pytest.mark.parametrize("kernel, huge", [(muls, False), (divs, True)])
def test_special_values_equal_c(cuda, kernel, huge):
    """NaN, infinities, zeros and zero divisors: C99 Annex G's values, as the "c" backend's
    libgcc computes them (Numba raises on a zero divisor and, before Python 3.14, returns
    NaN where Annex G recovers an infinity). Products that overflow are left out: GCC
    vectorizes the "c" backend's complex128 product with fused multiply-adds
    (docs/numerics.md)."""
    _needs("c")
    special = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan] + ([1e300] if huge else [])
    vals = np.array([complex(r, i) for r in special for i in special])
    a, b = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
    with np.errstate(all="ignore"):
        got = np.asarray(sk.stencil(kernel, backend=cuda)(a, b))
        ref = sk.stencil(kernel, backend="c")(a, b)
    np.testing.assert_array_equal(got.view(np.float64), ref.view(np.float64))


def test_nan_tests_equal_numpy(cuda):
    special = [0.0, 1.0, np.inf, -np.inf, np.nan]
    grid = np.array([complex(r, i) for r in special for i in special]).reshape(5, 5)
    np.testing.assert_array_equal(np.asarray(sk.stencil(nan_tests, backend=cuda)(grid)),
                                  sk.stencil(nan_tests, backend="numpy")(grid))


def test_complex_cval_and_scalar(cuda):
    a = _c((6, 7))
    st = sk.stencil(arith, backend=cuda, cval=1 - 1j)
    got = np.asarray(st(a, a, np.complex128(3j)))
    assert got[-1, 0] == 1 - 1j and got[0, -1] == 1 - 1j  # the border: cval
    np.testing.assert_array_equal(got, sk.stencil(arith, backend="numba", cval=1 - 1j)(
        a, a, np.complex128(3j)))


def test_unsupported_complex_function_is_refused(cuda):
    with pytest.raises(sk.BackendError, match=r"complex numbers with log\(\)") as info:
        sk.stencil(complex_log, backend=cuda)(_c((4, 4)))
    text = str(info.value)
    assert "complex_log" in text and "test_cuda_complex.py" in text and "fix:" in text
    assert "np.log(a[0, 0])" in text
    sk.stencil(complex_log, backend=cuda)(np.ones((4, 4)))  # real: computed


def test_exp(cuda):
    """exp of a complex number: glibc's cexp algorithm (which NumPy calls) on libdevice's
    exp/sin/cos, so within their bounds on a GPU; on the emulator, where the host's libm
    computes those, bit-identical to NumPy."""
    from stencilkit.runtime import cuda as runtime

    from .cuda_emulator import _functions

    on_emulator = runtime.CudaEntry.functions is _functions
    for dtype, eps, bound in ((np.complex128, 2.0**-52, 4), (np.complex64, 2.0**-23, 6)):
        z = _c(2000, dtype) * 3
        z.imag *= 10
        got = np.asarray(sk.stencil(_exp1, backend=cuda)(z))
        ref = np.exp(z)
        err = np.abs(got - ref) / np.abs(ref)
        assert err.max() <= bound * eps, (dtype, err.max() / eps)
        if on_emulator:
            np.testing.assert_array_equal(got, ref)
        v = np.random.default_rng(9).uniform(-50, 50, 2000).astype(z.real.dtype)
        got = np.asarray(sk.stencil(phase, backend=cuda)(z, v))
        ref = sk.stencil(phase, backend="numpy")(z, v)
        err = np.abs(got - ref) / np.abs(ref)
        assert err.max() <= 2 * bound * eps, (dtype, err.max() / eps)
    z = np.array([0j, 1 + 0j, 710 + 1j, 1500 - 2j, 2200 + 0.5j, -800 + 1j, 1e-310j, -0.0 - 0j])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(sk.stencil(_exp1, backend=cuda)(z)),
                                      np.exp(z))


def _exp1(a):
    return np.exp(a[0])


def _sqrt1(a):
    return np.sqrt(a[0])


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_sqrt(cuda, dtype):
    """sqrt of a complex number: glibc's csqrt algorithm (which NumPy calls), scaled near
    overflow and underflow. On the emulator bit-identical to NumPy over 300 decades of
    magnitude; on a GPU within libdevice's hypot and sqrt (4 eps relative); zeros,
    infinities and NaN exact everywhere."""
    from stencilkit.runtime import cuda as runtime

    from .cuda_emulator import _functions

    real = np.dtype(dtype().real.dtype)
    decades = 300 if real == np.float64 else 37
    rng = np.random.default_rng(11)
    z = (rng.standard_normal(3000) * 10.0 ** rng.integers(-decades, decades, 3000)
         + 1j * rng.standard_normal(3000) * 10.0 ** rng.integers(-decades, decades, 3000)
         ).astype(dtype)
    big, small = float(np.finfo(real).max), float(np.finfo(real).tiny)
    scaled = [(big, 1), (1, big), (-big, big / 3), (big / 2, -small), (-big / 3, 2.5),
              (small / 8, small / 16), (-small / 8, small / 2), (small, 3e-3 * small)]
    z = np.concatenate([z, np.array([complex(x, y) for x, y in scaled], dtype=dtype)])
    got, ref = np.asarray(sk.stencil(_sqrt1, backend=cuda)(z)), np.sqrt(z)
    assert (np.abs(got - ref) / np.abs(ref)).max() <= 4 * np.finfo(real).eps
    if runtime.CudaEntry.functions is _functions:
        np.testing.assert_array_equal(got, ref)
    f = np.finfo(real)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan]
    other = [1.0, -2.5, float(f.max), float(f.tiny) / 8]
    edge = np.array([complex(r, i) for r in special for i in special + other]
                    + [complex(r, i) for r in other for i in special], dtype=dtype)
    with np.errstate(all="ignore"):
        got, ref = np.asarray(sk.stencil(_sqrt1, backend=cuda)(edge)), np.sqrt(edge)
    np.testing.assert_array_equal(got.view(real), ref.view(real))
    np.testing.assert_array_equal(np.signbit(got.view(real)), np.signbit(ref.view(real)))


def test_exp_special_values_equal_c(cuda):
    """C99 Annex G's table, as glibc (the "c" backend, NumPy) gives it; exact on a GPU
    too, since every result here is 0, an infinity, NaN or an exact copy."""
    _needs("c")
    special = [0.0, -0.0, np.inf, -np.inf, np.nan]
    finite = [0.0, -0.0, 1.0, -2.5]
    vals = [complex(r, i) for r in special for i in special + finite]
    vals += [complex(r, i) for r in finite for i in special if not np.isfinite(i)]
    z = np.array(vals)
    with np.errstate(all="ignore"):
        got = np.asarray(sk.stencil(_exp1, backend=cuda)(z))
        ref = sk.stencil(_exp1, backend="c")(z)
    np.testing.assert_array_equal(got.view(np.float64), ref.view(np.float64))
    np.testing.assert_array_equal(np.signbit(got.view(np.float64)),
                                  np.signbit(ref.view(np.float64)))


# ---------------------------------------------------------------- computations, ParLoops


def _computation():
    from stencilkit import PARALLEL, Field, computation, interval

    def rotate(psi: Field[np.complex128], phase: Field[np.complex128],
               out: Field[np.complex128]):
        with computation(PARALLEL), interval(...):
            out = psi * phase / (phase + psi[1, 0, 0])  # noqa: F841

    return rotate


def test_computation(cuda):
    _needs("numba")
    comp = _computation()
    psi, phase = _c((8, 6, 4)), _c((8, 6, 4), seed=2)
    outs = {}
    for be in (cuda, "numba", "numpy"):
        out = np.zeros_like(psi)
        sk.stencil(comp, backend=be)(psi, phase, out, origin=(0, 0, 0), domain=(7, 6, 4))
        outs[be] = out
    np.testing.assert_array_equal(outs[cuda], outs["numba"])
    np.testing.assert_allclose(outs[cuda], outs["numpy"], rtol=1e-13)


def _parloop_kernels():
    def scale(o, x, y):
        o[0] = x[0] * y[0] / (y[0] + 1.5j)

    def total(g, x):
        g[0] += x[0] * x[0]

    return scale, total


def test_parloops(cuda):
    _needs("numba")
    scale, total = _parloop_kernels()
    x, y = _c(257), _c(257, seed=4)
    cells = sk.Set(x.size)
    results = {}
    for be in (cuda, "numba"):
        o = sk.Dat(cells, dtype=np.complex128)
        sk.par_loop(sk.kernel(scale), cells, o(sk.WRITE), sk.Dat(cells, data=x)(sk.READ),
                    sk.Dat(cells, data=y)(sk.READ), backend=be)
        g = sk.Global(1, 0j, dtype=np.complex128)
        sk.par_loop(sk.kernel(total), cells, g(sk.INC), sk.Dat(cells, data=x)(sk.READ),
                    backend=be)
        results[be] = (o.data.copy(), g.data.copy())
    np.testing.assert_array_equal(results[cuda][0], results["numba"][0])
    np.testing.assert_allclose(results[cuda][1], np.sum(x * x), rtol=1e-12)


# ---------------------------------------------------------------- compile-only


def _sources():
    a = _c((6, 7))
    scale, total = _parloop_kernels()
    cells = sk.Set(8)
    x = sk.Dat(cells, data=_c(8))
    g = sk.Global(1, 0j, dtype=np.complex128)
    return {
        "arith": sk.stencil(arith).generate(a, a, 1j, backend="cuda"),
        "wave": sk.stencil(wave).generate(a.astype(np.complex64), a.astype(np.complex64),
                                          backend="cuda"),
        "mixed": sk.stencil(mixed).generate(a.astype(np.complex64), a.real, backend="cuda"),
        "computation": sk.stencil(_computation()).generate(backend="cuda"),
        "phase": sk.stencil(phase).generate(a[0], a[0].real, backend="cuda"),
        "phase64": sk.stencil(phase).generate(a[0].astype(np.complex64),
                                              a[0].real.astype(np.float32), backend="cuda"),
        "parloop_global": sk.ParLoop(sk.kernel(total), cells, g(sk.INC), x(sk.READ)
                                     ).generate(backend="cuda"),
    }


@needs_nvrtc
@pytest.mark.parametrize("fast_math", [False, True])
def test_nvrtc_compiles(fast_math):
    for name, source in _sources().items():
        assert "sk_complex" in source, name
        ptx = compile_ptx_uncached(source, "sm_90", name, fast_math)
        assert ".entry" in ptx, name
    # the complex product is not contracted by default (libdevice's division and hypot
    # use FMAs of their own: a product alone shows it)
    a = _c(8)
    product = sk.stencil(muls, fast_math=fast_math).generate(a, a, backend="cuda")
    ptx = compile_ptx_uncached(product, "sm_90", "muls", fast_math)
    assert ("fma.rn.f64" in ptx) == fast_math


def test_real_kernels_have_no_complex_prelude():
    a = np.ones((5, 5))
    assert "sk_complex" not in sk.stencil(addsub).generate(a, a, backend="cuda")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_agrees(tmp_path):
    """A second compiler on the complex sources (nvcc -ptx, every warning an error)."""
    for name, source in _sources().items():
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        done = subprocess.run(["nvcc", "-ptx", "-arch=sm_90", "-Werror", "all-warnings",
                               "-o", str(tmp_path / f"{name}.ptx"), str(path)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (name, done.stderr)
