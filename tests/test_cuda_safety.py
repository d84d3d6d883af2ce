"""Issue 24, item 1: no silent wrong answer from what the generated GPU code lets the
compiler and the hardware assume.

On an H200, a FORWARD sweep reading the level below the one it writes gave every level the
value from before the call: its K loop had become a grid dimension (a thread per level). The
emulator (tests/cuda_emulator.py) runs a launch's threads last-first and reads ``const
__restrict__`` parameters from a snapshot taken at launch, so that it shows the same wrong
answer. The static checks read the generated CUDA and OpenCL source and NVRTC's PTX: no
grid dimension over a sweep's K loop, no buffer that any launch writes passed as ``const``,
no non-coherent load (``ld.global.nc``) from a parameter the kernel also stores to."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import BACKWARD, FORWARD, PARALLEL, Field, computation, interval
from stencilkit.build.cuda import compile_ptx_uncached, nvrtc_problem

from . import computations as C
from . import kernels as K
from .test_cuda_compile import _parloops
from .test_numba_compat import CASES as POINT_CASES

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
needs_nvrtc = pytest.mark.skipif(nvrtc_problem() is not None,
                                 reason=f"NVRTC unavailable: {nvrtc_problem()}")


def forward_double(field: Field[float]):
    with computation(FORWARD), interval(1, None):
        field = field[0, 0, -1] * 2


def backward_double(field: Field[float]):
    with computation(BACKWARD), interval(0, -1):
        field = field[0, 0, 1] * 2


def forward_into(a: Field[float], b: Field[float]):
    with computation(FORWARD), interval(1, None):
        b = b[0, 0, -1] + a


def forward_then_parallel(a: Field[float], b: Field[float]):
    with computation(FORWARD), interval(1, None):
        a = a[0, 0, -1] + 1.0
    with computation(PARALLEL), interval(...):
        b = a * 2.0  # noqa: F841 (a field)


SWEEPS = [forward_double, backward_double, forward_into, forward_then_parallel]


@pytest.fixture
def emulated(monkeypatch):
    from .cuda_emulator import install

    install(monkeypatch)
    return "cuda"


def _fields(definition, shape=(3, 4, 6)):
    rng = np.random.default_rng(24)
    n = definition.__code__.co_argcount
    return [rng.random(shape) + 1.0 for _ in range(n)]


# ---------------------------------------------------------------- on the emulator


@needs_gxx
@pytest.mark.parametrize("definition", SWEEPS, ids=[f.__name__ for f in SWEEPS])
def test_sweeps_reading_their_own_levels(emulated, definition):
    """The issue's example gives [1, 2, 4, 8, 16] along K, as on "numpy"; every sweep of
    SWEEPS matches "numpy" exactly (a K loop made threads reads the levels from before the
    call: [1, 2, 2, 2, 2] on the GPU and on the emulator)."""
    if definition is forward_double:
        column = np.ones((2, 2, 5))
        sk.stencil(definition, backend="cuda")(column)
        np.testing.assert_array_equal(column[1, 1], [1, 2, 4, 8, 16])
    ours, ref = _fields(definition), _fields(definition)
    sk.stencil(definition, backend="cuda")(*ours)
    sk.stencil(definition, backend="numpy")(*ref)
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a, b)


@needs_gxx
@pytest.mark.parametrize("loads", ["snapshot", "live"])
def test_device_out_sharing_memory_with_an_input(emulated, monkeypatch, loads):
    """``st(a, out=a)`` on device arrays: the input is copied first, as on the host (each
    point sees the input from before the call; none is read non-coherently while written),
    whatever the read-only loads return."""
    from . import cuda_emulator
    from .cuda_emulator import DeviceArray

    monkeypatch.setattr(cuda_emulator, "READ_ONLY_LOADS", loads)

    rng = np.random.default_rng(5)
    host = rng.random((9, 10))
    expected = host.copy()
    sk.stencil(K.blur, backend="numpy")(expected, out=expected)
    a = host.copy().view(DeviceArray)
    sk.stencil(K.blur, backend="cuda")(a, out=a)
    np.testing.assert_array_equal(np.asarray(a), expected)
    b = host.copy().view(DeviceArray)  # an overlapping view, not the same array
    sk.stencil(K.blur, backend="cuda")(b[1:, :], out=b[:-1, :])
    expected = host.copy()
    sk.stencil(K.blur, backend="numpy")(expected[1:, :], out=expected[:-1, :])
    np.testing.assert_array_equal(np.asarray(b), expected)


@sk.kernel
def _shift(y, x):
    y[0] = x[0] + 1.0


@needs_gxx
def test_device_dats_sharing_memory_with_a_written_one_are_refused(emulated):
    """Dats built on device arrays keep the caller's memory: a written one sharing it with
    another argument is refused before the launch (each is a ``__restrict__`` parameter,
    the read one ``const``), as computations refuse overlapping written fields."""
    from .cuda_emulator import device_empty

    s = sk.Set(5)
    mem = device_empty(10)
    mem[...] = 0.0
    for x in (mem[:5], mem[2:7]):  # the same memory, an overlapping view
        with pytest.raises(sk.ArgumentError, match="shares device memory") as info:
            sk.par_loop(_shift, s, sk.Dat(s, data=mem[:5])(sk.WRITE), sk.Dat(s, data=x)(sk.READ),
                        backend="cuda")
        assert "_shift" in str(info.value)
    np.testing.assert_array_equal(np.asarray(mem), 0.0)  # nothing ran
    sk.par_loop(_shift, s, sk.Dat(s, data=mem[:5])(sk.WRITE), sk.Dat(s, data=mem[5:])(sk.READ),
                backend="cuda")  # adjacent, not overlapping
    np.testing.assert_array_equal(np.asarray(mem), [1.0] * 5 + [0.0] * 5)


@needs_gxx
def test_emulator_reads_const_restrict_parameters_from_a_snapshot(emulated):
    """The emulator's model of ``ld.global.nc``: a read-only parameter whose memory another
    parameter writes during the launch reads the values from before it (the property the
    tests above rely on to fail without their fixes)."""
    from stencilkit.runtime import cuda as rt

    from .cuda_emulator import DeviceArray

    st = sk.stencil(K.centre, backend="cuda")  # out[i, j] = a[i, j + 1]
    host = np.arange(12.0).reshape(3, 4)
    a = host.copy().view(DeviceArray)
    st(a, out=np.zeros((3, 4)).view(DeviceArray))  # built
    (call,) = st._specs.values()
    entry = call.entry
    # the same memory as input and output, past the runtime's copy: every thread reads the
    # snapshot, so the result is the shifted input whatever order the threads run in
    status = rt.CudaEntry.__call__(entry, a, a, False, 0.0)
    assert status == 0
    np.testing.assert_array_equal(np.asarray(a)[:, :-1], host[:, 1:])


# ---------------------------------------------------------------- static checks


def _cuda_sources():
    out = []
    for kernel, args, options, _ in POINT_CASES:
        if any(np.iscomplexobj(a) for a in args):
            continue
        out.append((f"point:{kernel.__name__}",
                    sk.stencil(kernel, **options).generate(*args, backend="cuda")))
    for mode in ("nearest", "wrap"):
        out.append((f"point:blur:{mode}",
                    sk.stencil(mode)(K.blur).generate(np.ones((5, 6)), backend="cuda")))
    for definition in (*SWEEPS, C.tridiagonal, C.implicit_diffusion, C.column_sum, C.upwind,
                       C.planes):
        out.append((f"computation:{definition.__name__}",
                    sk.stencil(definition).generate(backend="cuda")))
    for name, make in sorted(_parloops().items()):
        for race in ("atomic", "color"):
            out.append((f"parloop:{name}:{race}", make(race).generate(backend="cuda")))
    return [pytest.param(label, source, id=label) for label, source in out]


_PARAM = re.compile(r"(?:__global\s+)?(const\s+)?[\w ]+?\*\s*(?:__restrict__\s+|restrict\s+)?"
                    r"(\w+)$")


def _launches(source: str, qualifier: str) -> list[tuple[str, dict[str, bool], str]]:
    """(name, {pointer parameter: printed const}, body) of each launch in ``source``."""
    out = []
    for part in source.split(qualifier)[1:]:
        m = re.match(r"\s*void\s+(\w+)\(([^)]*)\)\s*\{", part)
        assert m, part[:200]
        params = {}
        for p in m.group(2).split(","):
            pm = _PARAM.match(p.strip())
            if pm and "*" in p:
                params[pm.group(2)] = bool(pm.group(1))
        out.append((m.group(1), params, part[m.end():]))
    return out


def _written(body: str, name: str) -> bool:
    """Whether ``body`` stores through ``name``: an element assignment, an atomic on its
    address, or a non-const pointer derived from it."""
    store = False
    for m in re.finditer(rf"\b{name}\[", body):
        depth, i = 1, m.end()
        while depth:  # to the matching bracket: an index may itself index (a0[m0[e]])
            depth += {"[": 1, "]": -1}.get(body[i], 0)
            i += 1
        store = store or bool(re.match(r"\s*[-+*/]?=(?!=)", body[i:]))
    atomic = re.search(rf"(sk_atomic_\w+|atomic_\w+)\(\s*(\(\w+ \*\))?\s*&?\s*{name}\b", body)
    derived = re.search(rf"(?<!const )\b\w+ \*(\w+) = {name}\b", body)
    return bool(store or atomic or (derived and _written(body, derived.group(1))))


def _check_no_written_const(source: str, qualifier: str) -> list[str]:
    launches = _launches(source, qualifier)
    written = {p for _, params, body in launches for p in params if _written(body, p)}
    return [f"{name}: {p}" for name, params, _ in launches for p, const in params.items()
            if const and p in written]


CUDA_SOURCES = _cuda_sources()


@pytest.mark.parametrize("label, source", CUDA_SOURCES)
def test_no_written_buffer_is_const_in_cuda(label, source):
    """No buffer that any launch of a kernel writes is a ``const`` (read-only, possibly
    non-coherently loaded) parameter of any launch of that kernel."""
    assert _check_no_written_const(source, 'extern "C" __global__') == []


def test_the_static_check_sees_a_written_const_parameter():
    source = ('extern "C" __global__ void f_1(const double *__restrict__ a, double *b, '
              'int *__restrict__ sk_status)\n{\n    b[0] = a[0];\n}\n'
              'extern "C" __global__ void f_2(double *__restrict__ a, int *sk_status)\n{\n'
              '    a[1] += 2.0;\n}\n')
    assert _check_no_written_const(source, 'extern "C" __global__') == ["f_1: a"]


def _opencl_sources():
    pytest.importorskip("pyopencl")
    out = []
    for definition in (*SWEEPS, C.tridiagonal, C.implicit_diffusion):
        out.append((definition.__name__, sk.stencil(definition).generate(backend="opencl")))
    for kernel in (K.blur, K.lap3d, K.two_arrays):
        args = [np.ones((6,) * (3 if kernel is K.lap3d else 2))] * \
            (2 if kernel is K.two_arrays else 1)
        out.append((kernel.__name__, sk.stencil(kernel).generate(*args, backend="opencl")))
    return out


def test_no_written_buffer_is_const_in_opencl():
    for label, source in _opencl_sources():
        assert _check_no_written_const(source, "__kernel") == [], label


@pytest.mark.parametrize("definition", SWEEPS, ids=[f.__name__ for f in SWEEPS])
@pytest.mark.parametrize("backend", ["cuda", "opencl"])
def test_sweep_k_loops_are_not_grid_dimensions(definition, backend):
    """A FORWARD/BACKWARD sweep's K loop runs inside each thread (work-item): the only
    launches over K are PARALLEL stages'."""
    if backend == "opencl":
        pytest.importorskip("pyopencl")
    source = sk.stencil(definition).generate(backend=backend)
    qualifier = 'extern "C" __global__' if backend == "cuda" else "__kernel"
    sweeps = 0
    for name, _, body in _launches(source, qualifier):
        if "[0, 0, -1]" not in body and "[0, 0, 1]" not in body:
            continue  # a PARALLEL stage's launch: a thread per point, K included
        sweeps += 1
        assert not re.search(r"\bk = [^;]*(threadIdx|blockIdx|get_global_id)", body), \
            (name, body[:600])
    assert sweeps


# ---------------------------------------------------------------- PTX


def _pointer_flow(ptx: str) -> list[tuple[str, set[int], set[int]]]:
    """Per entry of ``ptx``: (name, pointer parameters read by ld.global.nc, pointer
    parameters stored to or updated atomically), each parameter followed through the
    registers derived from it."""
    out = []
    for m in re.finditer(r"\.entry (\w+)\((.*?)\)\s*\{(.*?)\n\}", ptx, re.S):
        name, body = m.group(1), m.group(3)
        origin: dict[str, set[int]] = {}
        lines = [ln.strip() for ln in body.splitlines()]
        for ln in lines:
            pm = re.match(rf"ld\.param\.\w+\s+(%\w+),\s*\[{name}_param_(\d+)\]", ln)
            if pm:
                origin[pm.group(1)] = {int(pm.group(2))}
        changed = True
        while changed:  # derived registers, to a fixed point (loops reassign them)
            changed = False
            for ln in lines:
                im = re.match(r"(?!st\.|atom\.|red\.|ld\.)[a-z][\w.]*\s+(%\w+),\s*(.*);", ln)
                if not im:
                    continue
                srcs = set().union(*(origin.get(r, set())
                                     for r in re.findall(r"%\w+", im.group(2))))
                if srcs - origin.get(im.group(1), set()):
                    origin[im.group(1)] = origin.get(im.group(1), set()) | srcs
                    changed = True

        def params(ln: str, origin: dict[str, set[int]] = origin) -> set[int]:
            addr = re.search(r"\[(%\w+)", ln)
            return origin.get(addr.group(1), set()) if addr else set()

        # the pointer parameters: those converted to global addresses (an address also
        # derives from the scalars of its index: strides, origins)
        pointers = set().union(*(origin.get(r, set()) for ln in lines
                                 for r in re.findall(r"cvta\.to\.global\.u64\s+%\w+,\s*(%\w+)",
                                                     ln)))
        nc = set().union(*(params(ln) for ln in lines if ln.startswith("ld.global.nc")))
        stored = set().union(*(params(ln) for ln in lines
                               if ln.startswith(("st.global", "atom.global", "red.global"))))
        out.append((name, nc & pointers, stored & pointers))
    return out


@needs_nvrtc
def test_pointer_flow_attributes_loads_and_stores_to_parameters():
    """The PTX check below on hand-written kernels: ``good`` reads its const restrict ``a``
    non-coherently and stores to ``b``; ``cast`` stores through ``a`` with its const cast
    away, which NVRTC sees (no ``ld.global.nc`` then, and the store is attributed to ``a``)."""
    good = ('extern "C" __global__ void good(const double *__restrict__ a, '
            'double *__restrict__ b) { b[threadIdx.x] = a[threadIdx.x] * 2.0; }')
    cast = ('extern "C" __global__ void cast(const double *__restrict__ a, int n) '
            '{ for (int k = 1; k < n; ++k) ((double *)a)[k] = a[k - 1] * 2.0; }')
    assert _pointer_flow(compile_ptx_uncached(good, "sm_90", "good")) == [("good", {0}, {1})]
    assert _pointer_flow(compile_ptx_uncached(cast, "sm_90", "cast")) == [("cast", set(), {0})]


@needs_nvrtc
@pytest.mark.parametrize("label, source", [p for p in CUDA_SOURCES
                                           if not p.values[0].startswith("point:")])
def test_no_non_coherent_load_of_a_stored_parameter(label, source):
    """NVRTC's PTX (sm_90): no ``ld.global.nc`` from a parameter that the same kernel stores
    to (such a load may return the value from before the launch)."""
    ptx = compile_ptx_uncached(source, "sm_90", "safety")
    flows = _pointer_flow(ptx)
    assert flows
    for name, nc, stored in flows:
        assert not nc & stored, (name, nc, stored)
