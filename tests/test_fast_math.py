"""Bit-identical floating point by default, contraction only with ``fast_math=True``
(contract.md section 9, docs/numerics.md; issue 24 item 3).

An FMA-sensitive kernel (``a * b + c`` on random doubles: about a quarter of the elements
differ by an ulp when the product is not rounded) computes exactly NumPy's result on every
backend by default; ``fast_math=True`` reaches each compiler (the flags, the PTX, the
emulator's contraction) and every cache key it affects. On the GPU itself the default was
checked by issue 24's run (``--fmad=false``: 324 passed); here the PTX is checked without one.
"""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.build import cuda as build_cuda
from stencilkit.build.cuda import nvrtc_problem

from .cuda_emulator import REPLACED, host_has_fma

needs_nvrtc = pytest.mark.skipif(nvrtc_problem() is not None,
                                 reason=f"NVRTC unavailable: {nvrtc_problem()}")
needs_fma = pytest.mark.skipif(not host_has_fma(), reason="the CPU has no FMA instructions")


def muladd(a, b, c):
    return a[0, 0] * b[0, 0] + c[0, 0]


def _fma_inputs(n: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(24)
    return tuple(rng.standard_normal((n, n)) for _ in range(3))  # type: ignore[return-value]


def _skip_unless(backend: str, monkeypatch=None) -> None:
    """Skip unless ``backend`` runs here; "cuda" without a device runs on the emulator
    (given ``monkeypatch``), so that the CPU-only CI checks it too."""
    reason = registry.REGISTRY[backend].probe()
    if reason is not None and backend == "cuda" and monkeypatch is not None \
            and shutil.which("g++"):
        from .cuda_emulator import install

        install(monkeypatch)
        return
    if reason is not None:
        pytest.skip(f"backend {backend}: {reason}")


def test_inputs_are_fma_sensitive():
    a, b, c = _fma_inputs()
    fused = np.array([np.float64(np.longdouble(x) * np.longdouble(y) + np.longdouble(z))
                      for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]).reshape(a.shape)
    if np.finfo(np.longdouble).nmant < 63:
        pytest.skip("long double is no wider than double here")
    assert np.count_nonzero(fused != a * b + c) > a.size // 10


def test_default_is_bit_identical_to_numpy(backend):
    a, b, c = _fma_inputs()
    out = sk.stencil(muladd, backend=backend)(a, b, c)
    np.testing.assert_array_equal(np.asarray(out), a * b + c)


@pytest.mark.parametrize("backend_name", ["c", "opencl", "cuda"])
def test_fast_math_contracts(backend_name, monkeypatch):
    """The option reaches the compiler: with contraction allowed, some elements of the
    FMA-sensitive kernel round once (needs FMA on this CPU; the "cuda" emulator models
    NVRTC's --fmad=true with g++ -mfma -ffp-contract=fast)."""
    _skip_unless(backend_name, monkeypatch)
    if backend_name != "opencl" and not host_has_fma():
        pytest.skip("the CPU has no FMA instructions")
    a, b, c = _fma_inputs()
    fast = np.asarray(sk.stencil(muladd, backend=backend_name, fast_math=True)(a, b, c))
    exact = np.asarray(sk.stencil(muladd, backend=backend_name)(a, b, c))
    np.testing.assert_array_equal(exact, a * b + c)
    interior = (slice(0, None), slice(0, None))
    assert np.count_nonzero(fast[interior] != exact[interior]) > 0
    np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-12)


def test_configure_sets_the_default_for_later_stencils():
    _skip_unless("c")
    if not host_has_fma():
        pytest.skip("the CPU has no FMA instructions")
    a, b, c = _fma_inputs()
    before = sk.stencil(muladd, backend="c")
    with_fast = sk.configure(fast_math=True)
    assert with_fast.fast_math is True
    after = sk.stencil(muladd, backend="c")
    explicit = sk.stencil(muladd, backend="c", fast_math=False)
    assert (before.fast_math, after.fast_math, explicit.fast_math) == (False, True, False)
    np.testing.assert_array_equal(before(a, b, c), a * b + c)
    np.testing.assert_array_equal(explicit(a, b, c), a * b + c)
    assert np.count_nonzero(after(a, b, c) != a * b + c) > 0


def test_computation_and_parloop_take_the_option():
    _skip_unless("c")
    if not host_has_fma():
        pytest.skip("the CPU has no FMA instructions")
    from stencilkit.gtscript import PARALLEL, Field, computation, interval

    def comp(a: Field[np.float64], b: Field[np.float64], c: Field[np.float64],
             out: Field[np.float64]):
        with computation(PARALLEL), interval(...):
            out = a * b + c  # noqa: F841

    a, b, c = (x.reshape(16, 16, 16) for x in _fma_inputs(64))
    results = {}
    for fast in (False, True):
        out = np.zeros_like(a)
        sk.stencil(comp, backend="c", fast_math=fast)(a, b, c, out)
        results[fast] = out
    np.testing.assert_array_equal(results[False], a * b + c)
    assert np.count_nonzero(results[True] != results[False]) > 0

    def kern(x, y, z, o):
        o[0] = x[0] * y[0] + z[0]

    x, y, z = (v.ravel() for v in _fma_inputs())
    cells = sk.Set(x.size)
    outs = {}
    for fast in (False, True):
        o = sk.Dat(cells, dtype=np.float64)
        sk.par_loop(sk.kernel(kern, fast_math=fast), cells,
                    *(sk.Dat(cells, data=v)(sk.READ) for v in (x, y, z)), o(sk.WRITE),
                    backend="c")
        outs[fast] = o.data.copy()
    np.testing.assert_array_equal(outs[False], x * y + z)
    assert np.count_nonzero(outs[True] != outs[False]) > 0


def test_numba_does_not_contract():
    """LLVM contracts only under fastmath flags, which the generated njit code never sets."""
    _skip_unless("numba")
    a, b, c = _fma_inputs()
    np.testing.assert_array_equal(sk.stencil(muladd, backend="numba")(a, b, c)[:-1, :-1],
                                  (a * b + c)[:-1, :-1])


# ---------------------------------------------------------------- CUDA: the PTX itself


def _ptx_arith(ptx: str) -> set[str]:
    return {line.split()[0] for line in ptx.splitlines()
            if line.strip().startswith(("fma.", "mul.f", "add.f", "mul.rn", "add.rn"))}


@needs_nvrtc
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_default_ptx_has_no_fma(dtype):
    a = np.ones((8, 8), dtype)
    st = sk.stencil(muladd)
    exact = build_cuda.compile_ptx_uncached(st.generate(a, a, a, backend="cuda"), "sm_90")
    fast_source = sk.stencil(muladd, fast_math=True).generate(a, a, a, backend="cuda")
    fast = build_cuda.compile_ptx_uncached(fast_source, "sm_90", fast_math=True)
    assert not any(op.startswith("fma.") for op in _ptx_arith(exact)), _ptx_arith(exact)
    assert any(op.startswith("fma.rn") for op in _ptx_arith(fast)), _ptx_arith(fast)


@needs_nvrtc
def test_ptx_cache_key_holds_the_options(tmp_path):
    """A changed option never loads a stale PTX: the same source compiled with and without
    fast_math gives two cache entries, each with its own instructions, also when the second
    compile finds the first one's entry in memory and on disk."""
    from stencilkit.build import cache

    sk.configure(cache_dir=tmp_path)
    a = np.ones((8, 8))
    source = sk.stencil(muladd).generate(a, a, a, backend="cuda")
    exact = build_cuda.compile_ptx(source, "sm_90", "muladd")
    fast = build_cuda.compile_ptx(source, "sm_90", "muladd", fast_math=True)
    assert "fma.rn" not in exact and "fma.rn" in fast
    cache._memory.clear()  # from disk now: each option set finds its own entry
    assert "fma.rn" not in build_cuda.compile_ptx(source, "sm_90", "muladd")
    assert "fma.rn" in build_cuda.compile_ptx(source, "sm_90", "muladd", fast_math=True)
    stored = sorted(p.read_text() for p in tmp_path.rglob(build_cuda.ARTIFACT))
    assert len(stored) == 2 and sum("fma.rn" in p for p in stored) == 1


def test_nvrtc_options():
    exact = build_cuda.options("sm_90")
    assert "--fmad=false" in exact and "--gpu-architecture=compute_90" in exact
    assert "--fmad=true" in build_cuda.options("sm_90", fast_math=True)
    assert "--fmad=false" not in build_cuda.options("sm_90", fast_math=True)


def test_cuda_entry_keeps_the_stencils_option(monkeypatch):
    """The PTX is compiled on the first call, after the build: the entry keeps the option
    in force when it was built and hands it to compile_ptx then, whatever is in force."""
    from types import SimpleNamespace

    from stencilkit import config
    from stencilkit.runtime import cuda as runtime

    class Module:
        def load(self, ptx):
            pass

    fake = SimpleNamespace(cuda=SimpleNamespace(
        Device=lambda: SimpleNamespace(compute_capability="90"),
        function=SimpleNamespace(Module=Module)))
    monkeypatch.setattr(runtime, "_cupy", lambda: fake)
    seen = []
    monkeypatch.setattr(build_cuda, "compile_ptx",
                        lambda src, arch, name, fast_math: seen.append((arch, fast_math)) or "")
    plan = SimpleNamespace(launches=lambda: [])
    functions = REPLACED.get("functions", runtime.CudaEntry.functions)  # the device's
    for fast in (False, True):
        with config.building(fast):
            entry = runtime.CudaEntry(plan, "source", (), frozenset(), "muladd")
        with config.building(not fast):
            functions(entry)
    assert seen == [("sm_90", False), ("sm_90", True)]


# ---------------------------------------------------------------- OpenCL


def test_opencl_source_and_options_follow_the_option():
    _skip_unless("opencl")
    from stencilkit import config
    from stencilkit.runtime import opencl as ocl

    a = np.ones((6, 6))
    exact = sk.stencil(muladd).generate(a, a, a, backend="opencl")
    fast = sk.stencil(muladd, fast_math=True).generate(a, a, a, backend="opencl")
    assert "#pragma OPENCL FP_CONTRACT OFF" in exact and "FP_CONTRACT ON" not in exact
    assert "#pragma OPENCL FP_CONTRACT ON" in fast
    with config.building(True):
        assert "-cl-mad-enable" in ocl.build_options()
    assert "-cl-mad-enable" not in ocl.build_options()


# ---------------------------------------------------------------- the C toolchain


def test_c_flags_follow_the_option():
    _skip_unless("c")
    from stencilkit import config
    from stencilkit.build.extension import FAST_MATH_FLAGS, current_toolchain

    exact = current_toolchain()
    with config.building(True):
        fast = current_toolchain()
    assert "-ffp-contract=off" in exact.flags and "-ffp-contract=fast" not in exact.flags
    assert fast.flags[-len(FAST_MATH_FLAGS):] == FAST_MATH_FLAGS
    assert fast.identity != exact.identity  # hence every C cache key differs


# ---------------------------------------------------------------- the option itself


@pytest.mark.parametrize("bad", ["yes", 1, None.__class__])
def test_bad_values_are_refused(bad):
    with pytest.raises(sk.StencilError, match=r"stencil 'muladd'.*fast_math=") as info:
        sk.stencil(muladd, fast_math=bad)
    assert "test_fast_math.py" in str(info.value)
    with pytest.raises(sk.StencilError, match="fast_math="):
        sk.kernel(muladd, fast_math=bad)
    before = sk.config.current()
    with pytest.raises(sk.StencilError, match="fast_math="):
        sk.configure(fast_math=bad)
    assert sk.config.current() == before


def test_pickle_keeps_the_option():
    st = sk.stencil(muladd, fast_math=True)
    assert pickle.loads(pickle.dumps(st)).fast_math is True
    kern = sk.kernel(muladd, fast_math=True)
    assert pickle.loads(pickle.dumps(kern)).fast_math is True
