"""The "cuda" backend without a GPU: the CUDA source of every kernel the main test files
define (point kernels of the Numba comparison suite, border modes, the computations of
tests/computations.py and of the gtscript corpus, ParLoops) is generated and compiled to PTX
for sm_90 by NVRTC, so that a printer bug fails here. NVCC, when installed, compiles a few
of them again as a second opinion. Tests that need a device skip with the reason."""

from __future__ import annotations

import inspect
import shutil
import subprocess

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.build.cuda import compile_ptx_uncached, explain_log, nvrtc_problem
from stencilkit.errors import BackendError

from . import computations as C
from . import kernels as K
from .corpus import MODULES, loader
from .test_numba_compat import CASES as POINT_CASES

ARCH = "sm_90"
needs_nvrtc = pytest.mark.skipif(nvrtc_problem() is not None,
                                 reason=f"NVRTC unavailable: {nvrtc_problem()}")


def compiles(source: str, name: str) -> None:
    ptx = compile_ptx_uncached(source, ARCH, name)
    assert ".entry" in ptx or ".func" in ptx, ptx[:400]


# ---------------------------------------------------------------- point kernels


@needs_nvrtc
@pytest.mark.parametrize("case", POINT_CASES,
                         ids=[f"{i:02d}-{c[0].__name__}" for i, c in enumerate(POINT_CASES)])
def test_point_kernel_compiles(case):
    kernel, args, options, _ = case
    st = sk.stencil(kernel, **options)
    source = st.generate(*args, backend="cuda")
    assert '__global__' in source
    compiles(source, kernel.__name__)


@needs_nvrtc
@pytest.mark.parametrize("mode", ["nearest", "reflect", "mirror", "wrap"])
@pytest.mark.parametrize("kernel, args", [(K.blur, (np.ones((5, 6)),)),
                                          (K.lap3d, (np.ones((4, 5, 6)),)),
                                          (K.two_arrays, (np.ones((5, 6)), np.ones((6, 7))))])
def test_border_modes_compile(mode, kernel, args):
    compiles(sk.stencil(mode)(kernel).generate(*args, backend="cuda"), kernel.__name__)


def test_generate_uses_the_last_call_signature():
    st = sk.stencil(K.blur, backend="numpy")
    with pytest.raises(sk.StencilError, match="not been called"):
        st.generate(backend="cuda")
    st(np.ones((5, 6), np.float32))
    source = st.generate(backend="cuda")
    assert "const float *__restrict__ a_" in source
    assert source == sk.stencil(K.blur).generate(np.ones((5, 6), np.float32), backend="cuda")


# ---------------------------------------------------------------- computations

COMPUTATIONS = [f for name, f in vars(C).items()
                if inspect.isfunction(f) and not name.startswith(("ref_", "_"))
                and f.__module__ in (C.__name__, "stencilkit_apps.definitions")
                and "computation" in inspect.getsource(f)]


@needs_nvrtc
@pytest.mark.parametrize("definition", COMPUTATIONS, ids=[f.__name__ for f in COMPUTATIONS])
def test_computation_compiles(definition):
    externals = {"SCALE": 0.5} if definition is C.gradient else {}
    source = sk.stencil(definition, externals=externals).generate(backend="cuda")
    if definition is C.temporaries_only:  # writes no field: nothing to launch
        assert "0 launch(es)" in source
        assert ".entry" not in compile_ptx_uncached(source, ARCH, definition.__name__)
        return
    compiles(source, definition.__name__)


def _corpus():
    out = []
    for module in MODULES:
        for case in loader.load(module, "stencilkit").CASES:
            out.append(pytest.param(module, case, id=f"{module}.{case.name}"))
    return out


@needs_nvrtc
@pytest.mark.parametrize("module, case", _corpus())
def test_corpus_computation_compiles(module, case):
    mod = loader.load(module, "stencilkit")
    st = loader.our_stencil(getattr(mod, case.name), "numpy", case.externals)
    compiles(st.generate(backend="cuda"), case.name)


def test_forward_computation_is_a_thread_per_column():
    source = sk.stencil(C.tridiagonal).generate(backend="cuda")
    # the launches (the prelude's helpers name every axis): two horizontal grid dimensions,
    # the K loops inside each thread; no C99 VLA
    launches = "".join(source.split('extern "C" __global__')[1:])
    assert launches and "threadIdx.x" in launches and "threadIdx.y" in launches
    assert "threadIdx.z" not in launches
    assert "_column_[" not in source


# ---------------------------------------------------------------- ParLoops


def _mesh():
    from .test_parloop import mesh

    return mesh("hand")


@sk.kernel
def _cell_area(area, x, total):
    area[0] = 0.5 * abs((x[1, 0] - x[0, 0]) * (x[2, 1] - x[0, 1])
                        - (x[2, 0] - x[0, 0]) * (x[1, 1] - x[0, 1]))
    total[0] += area[0]


@sk.kernel
def _spread(area, node_vals, weight):
    for i in range(3):
        node_vals[i, 0] += area[0] / 3.0 * weight[0]
        node_vals[i, 1] += 1.0


@sk.kernel
def _edges(x, lo, hi):
    for i in range(3):
        j = (i + 1) % 3
        d = ((x[i, 0] - x[j, 0]) ** 2 + (x[i, 1] - x[j, 1]) ** 2) ** 0.5
        lo[0] = min(lo[0], d)
        hi[0] = max(hi[0], d)


@sk.kernel
def _mass(m, x):
    for i in range(3):
        for j in range(3):
            m[i, j] += (x[i, 0] + x[j, 1]) * 0.1


@sk.kernel
def _axpy(y, x, a):
    y[0] = y[0] + a[0] * x[0]


@sk.kernel
def _count(out, n):
    out[0] += 1
    n[0] += 1


def _parloops():
    xy, tri, cells, nodes, c2n, coords = _mesh()
    area = sk.Dat(cells)
    acc = sk.Dat(nodes, dim=2, data=np.ones((len(xy), 2)))
    mat = sk.Mat(sk.Sparsity(c2n, c2n))
    ints = sk.Dat(nodes, dtype=np.int64)
    return {
        "cell_area": lambda race: sk.ParLoop(_cell_area, cells, area(sk.WRITE),
                                             coords(sk.READ, c2n), sk.Global(1, 0.0)(sk.INC),
                                             race=race),
        "spread": lambda race: sk.ParLoop(_spread, cells, area(sk.READ), acc(sk.INC, c2n),
                                          sk.Global(1, 2.0)(sk.READ), race=race),
        "edges": lambda race: sk.ParLoop(_edges, cells, coords(sk.READ, c2n),
                                         sk.Global(1, 9.0)(sk.MIN), sk.Global(1, 0.0)(sk.MAX),
                                         race=race),
        "mass": lambda race: sk.ParLoop(_mass, cells, mat(sk.INC, (c2n, c2n)),
                                        coords(sk.READ, c2n), race=race),
        "axpy": lambda race: sk.ParLoop(_axpy, nodes, sk.Dat(nodes)(sk.RW),
                                        sk.Dat(nodes)(sk.READ), sk.Global(1, 2.0)(sk.READ),
                                        race=race),
        "int_count": lambda race: sk.ParLoop(_count, cells, ints(sk.INC, c2n[0]),
                                             sk.Global(1, 0, dtype=np.int64)(sk.INC),
                                             race=race),
    }


PARLOOPS = sorted(_parloops())


@needs_nvrtc
@pytest.mark.parametrize("race", ["atomic", "color"])
@pytest.mark.parametrize("name", PARLOOPS)
def test_parloop_compiles(name, race):
    loop = _parloops()[name](race)
    source = loop.generate(backend="cuda")
    if loop.race_mode() == "atomic":
        assert "sk_atomic_add_" in source.split("*/", 1)[1].split("SK_DEVICE int")[-1] or \
            "Global" in source or name in ("edges",)
    compiles(source, name)


def test_global_reduction_is_private_then_warp_then_atomic():
    """A Global reduction: each thread's private copy initialized once, before its grid-stride
    loop, combined across the warp by shuffles after it, and added by lane 0 alone."""
    source = _parloops()["cell_area"]("atomic").generate(backend="cuda")
    body = source[source.index("double r2_private[1];"):]
    loop_end = body.index("\n    }\n")  # the grid-stride loop's closing brace
    assert body.index("r2_private[0] = 0.0;") < body.index("for (int64_t b = ") < loop_end
    after = body[loop_end:]
    assert after.index("r2_private[0] = sk_warp_add(r2_private[0]);") < \
        after.index("if (sk_lane() == 0) {") < \
        after.index("sk_atomic_add_f64(r2 + 0, r2_private[0]);")
    if nvrtc_problem() is None:  # the shuffles reach the PTX
        assert "shfl.sync.down" in compile_ptx_uncached(source, ARCH, "cell_area")


# ---------------------------------------------------------------- errors, availability


def test_compile_error_quotes_the_source_line():
    source = 'extern "C" __global__ void f(double *a)\n{\n    a[0] = undefined_name;\n}\n'
    log = 'demo.cu(3): error: identifier "undefined_name" is undefined'
    text = explain_log(log, source, "demo")
    assert ">     3 |     a[0] = undefined_name;" in text
    if nvrtc_problem() is None:
        with pytest.raises(BackendError, match=r"undefined_name") as info:
            compile_ptx_uncached(source, ARCH, "demo")
        assert ">     3 |" in str(info.value)


def test_backends_say_why_cuda_is_unavailable():
    status = sk.backends()["cuda"]
    if status.available:
        pytest.skip("a CUDA device is available here")
    assert status.reason and any(w in status.reason for w in ("cupy", "CUDA", "NVRTC",
                                                              "cuda-bindings"))
    with pytest.raises(BackendError, match="not available"):
        sk.stencil(K.blur, backend="cuda")(np.ones((4, 4)))


def test_every_dtype_is_a_capability():
    caps = registry.REGISTRY["cuda"].capabilities
    assert caps is not None
    assert {np.dtype(np.complex64), np.dtype(np.complex128), np.dtype(np.float64)} <= caps.dtypes


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("make", [
    lambda: sk.stencil(K.lap3d).generate(np.ones((4, 5, 6)), backend="cuda"),
    lambda: sk.stencil(C.tridiagonal).generate(backend="cuda"),
    lambda: _parloops()["cell_area"]("atomic").generate(backend="cuda"),
], ids=["lap3d", "tridiagonal", "cell_area"])
def test_nvcc_agrees(make, tmp_path):
    """A second compiler on the same source (nvcc -ptx; also checks C++ warnings)."""
    path = tmp_path / "k.cu"
    path.write_text(make())
    done = subprocess.run(["nvcc", "-ptx", f"-arch={ARCH}", "-Werror", "all-warnings",
                           "-o", str(tmp_path / "k.ptx"), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
