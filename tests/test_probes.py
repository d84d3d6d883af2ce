"""The backends' probes build and run a one-line kernel, so that no backend is called
available that cannot build; PoCL is told the CPU's name where LLVM cannot find it.

PoCL failing to name the CPU (pocl/pocl#1049) cannot happen for real on this machine:
``tests/simulated_pocl`` makes PyOpenCL's builds fail as they do there, in every process
started with it on PYTHONPATH (the probe's own subprocess included).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.build import toolchain, verdicts
from stencilkit.registry import REGISTRY
from stencilkit.registry import c as c_registry
from stencilkit.registry import cuda as cuda_registry
from stencilkit.registry import numba as numba_registry
from stencilkit.runtime import pocl_target

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = ROOT / "tests" / "simulated_pocl"
VARIABLE = pocl_target.CPU_NAME_VARIABLE
EPYC_LOG = ("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\nBuild on <pyopencl.Device "
            "'pthread-AMD EPYC 7B13'>:\n\nerror: unknown target CPU 'generic'\nDevice "
            "pthread-AMD EPYC 7B13 failed to build the program")
POCL = "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO"

needs_pyopencl = pytest.mark.skipif(importlib.util.find_spec("pyopencl") is None,
                                    reason="pyopencl is not installed (pip install .[test])")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A private cache (no remembered verdicts), no POCL_LLVM_CPU_NAME, no probe run yet."""
    sk.configure(cache_dir=str(tmp_path / "cache"))
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setattr(pocl_target, "_applied", [])
    pocl_target.prepare.cache_clear()
    c_registry._probe.cache_clear()
    yield tmp_path
    pocl_target.prepare.cache_clear()
    c_registry._probe.cache_clear()


# ----------------------------------------------------------------------------- PoCL's CPU name

def fake_pocl(monkeypatch, builds_with: tuple[str | None, ...], log: str = EPYC_LOG):
    """PoCL whose builds work only when POCL_LLVM_CPU_NAME is one of ``builds_with`` (None:
    unset); the list of environments it was checked with."""
    calls: list[dict[str, str]] = []

    def check(env):
        calls.append(dict(env))
        works = env.get(VARIABLE) in builds_with
        return {"pocl": POCL, "error": None if works else log}

    monkeypatch.setattr(pocl_target, "check", check)
    monkeypatch.setattr(pocl_target, "candidates", lambda: ["x86-64-v3", "x86-64"])
    return calls


def test_no_override_where_detection_works(fresh, monkeypatch):
    calls = fake_pocl(monkeypatch, builds_with=(None,))
    assert pocl_target.prepare() is None
    assert VARIABLE not in os.environ and calls == [{}]


def test_override_where_detection_fails_and_remembered(fresh, monkeypatch):
    calls = fake_pocl(monkeypatch, builds_with=("x86-64",))
    assert pocl_target.prepare() is None
    assert os.environ[VARIABLE] == "x86-64"
    assert calls == [{}, {VARIABLE: "x86-64-v3"}, {VARIABLE: "x86-64"}]
    # the next process: the name comes from the stored verdict, without a subprocess
    pocl_target.prepare.cache_clear()
    del os.environ[VARIABLE]
    assert pocl_target.prepare() is None
    assert os.environ[VARIABLE] == "x86-64" and len(calls) == 3


def test_the_users_setting_stands(fresh, monkeypatch):
    calls = fake_pocl(monkeypatch, builds_with=("x86-64",))
    monkeypatch.setenv(VARIABLE, "znver3")
    assert pocl_target.prepare() is None
    assert os.environ[VARIABLE] == "znver3" and calls == []


def test_no_override_for_other_build_failures(fresh, monkeypatch):
    calls = fake_pocl(monkeypatch, builds_with=(), log="error: out of host memory")
    assert pocl_target.prepare() is None  # the in-process probe reports this failure itself
    assert VARIABLE not in os.environ and calls == [{}]


def test_a_pocl_without_override_says_why(fresh, monkeypatch):
    calls = fake_pocl(monkeypatch, builds_with=())
    reason = pocl_target.prepare()
    assert VARIABLE not in os.environ and len(calls) == 3
    assert "PoCL 3.0-rc2 cannot name this processor" in reason
    assert "pocl/pocl#1049" in reason and f"{VARIABLE}=x86-64-v3 or x86-64" in reason


def test_a_check_that_did_not_run_is_not_remembered(fresh, monkeypatch):
    calls = []

    def timed_out(env):
        calls.append(env)
        return {"pocl": None, "error": "the check did not run: timed out", "ran": False}

    monkeypatch.setattr(pocl_target, "check", timed_out)
    assert pocl_target.prepare() is None and VARIABLE not in os.environ
    pocl_target.prepare.cache_clear()
    assert pocl_target.prepare() is None and len(calls) == 2  # checked again


def test_x86_levels_follow_the_feature_flags():
    v2 = {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}
    v3 = v2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
    v4 = v3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    assert pocl_target.x86_levels(set()) == ["x86-64"]
    assert pocl_target.x86_levels(v2) == ["x86-64-v2", "x86-64"]
    assert pocl_target.x86_levels(v3 - {"movbe"}) == ["x86-64-v2", "x86-64"]
    assert pocl_target.x86_levels(v4) == ["x86-64-v4", "x86-64"]


@needs_pyopencl
def test_this_machines_pocl_needs_no_name(fresh):
    found = pocl_target.check({})
    if found["pocl"] is None:
        pytest.skip("no PoCL CPU device here")
    assert found["error"] is None, found
    assert pocl_target.prepare() is None and VARIABLE not in os.environ


# ----------------------------------------------------------------------------- simulated PoCL

KERNEL = textwrap.dedent("""
    def blur(a):
        return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])
""")

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import stencilkit as sk
    from kernels import blur
    status = sk.backends()["opencl"]
    a = np.random.default_rng(0).random((6, 7))
    try:
        got = sk.stencil(blur, backend="opencl")(a)
        error = None
        same = bool(np.array_equal(got, sk.stencil(blur, backend="numpy")(a)))
    except sk.BackendError as exc:
        error, same = str(exc), None
    print(json.dumps({"available": status.available, "reason": status.reason, "error": error,
                      "same": same, "name": os.environ.get("POCL_LLVM_CPU_NAME")}))
""")


@pytest.fixture(scope="module")
def caches(tmp_path_factory) -> dict[str, Path]:
    """One cache per simulated PoCL version, shared by this module's tests: the first
    process finds out what PoCL needs, the others read it (as a user's later processes do)."""
    return {v: tmp_path_factory.mktemp(f"pocl-{v}") for v in ("3.0", "5.0")}


def simulated(tmp_path: Path, caches: dict[str, Path], version: str, *argv: str,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """``python argv`` where PoCL cannot name the CPU (its ``version`` simulated)."""
    (tmp_path / "kernels.py").write_text(KERNEL)
    environ = {k: v for k, v in os.environ.items() if k != VARIABLE}
    environ.update(PYTHONPATH=os.pathsep.join([str(SIMULATED), str(ROOT / "src"), str(tmp_path)]),
                   SK_SIMULATED_POCL=version, STENCILKIT_CACHE_DIR=str(caches[version]),
                   **(env or {}))
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          env=environ, cwd=ROOT, timeout=300)


def outcome(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_pyopencl
def test_pocl_without_override_is_unavailable_with_the_reason(tmp_path, caches):
    got = outcome(simulated(tmp_path, caches, "3.0", "-c", SCRIPT))
    assert got["available"] is False and got["name"] is None
    for says in ("cannot build a one-line kernel (error: unknown target CPU 'generic')",
                 "PoCL 3.0-rc2 cannot name this processor", "pocl/pocl#1049"):
        assert says in got["reason"], got["reason"]
    assert "backend 'opencl' is not available" in got["error"]
    assert "unknown target CPU 'generic'" in got["error"]
    # the command line says the same (from the remembered verdict: no interpreter this time)
    proc = simulated(tmp_path, caches, "3.0", "-m", "stencilkit.cli", "backends")
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("opencl"))
    assert "unavailable: " in line and "PoCL 3.0-rc2 cannot name this processor" in line
    assert "numpy    available" in proc.stdout


@needs_pyopencl
def test_pocl_with_override_is_told_the_cpu(tmp_path, caches):
    got = outcome(simulated(tmp_path, caches, "5.0", "-c", SCRIPT))
    assert got == {"available": True, "reason": None, "error": None, "same": True,
                   "name": pocl_target.candidates()[0]}


@needs_pyopencl
def test_pocl_override_never_replaces_the_users_name(tmp_path, caches):
    got = outcome(simulated(tmp_path, caches, "5.0", "-c", SCRIPT, env={VARIABLE: "generic"}))
    assert got["name"] == "generic" and got["available"] is False
    assert "unknown target CPU 'generic'" in got["reason"]


@needs_pyopencl
def test_pocl_started_before_stencilkit_says_so(tmp_path, caches):
    script = "import pyopencl\npyopencl.get_platforms()\n" + SCRIPT
    got = outcome(simulated(tmp_path, caches, "5.0", "-c", script))
    assert got["available"] is False and got["name"] == pocl_target.candidates()[0]
    assert (f"PoCL was already running when stencilkit set {VARIABLE}={got['name']}: set it "
            "in the environment before the program starts") in got["reason"]


@needs_pyopencl
def test_backend_tests_skip_with_the_probes_reason(tmp_path, caches):
    proc = simulated(tmp_path, caches, "3.0", "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                     "-n", "0", "tests/test_pickle.py", "-k", "opencl")
    assert proc.returncode == 0, proc.stdout[-3000:]
    skipped = [ln for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert skipped and "failed" not in proc.stdout.splitlines()[-1]
    for ln in skipped:
        assert "backend opencl: the OpenCL compiler of" in ln, ln
        assert "unknown target CPU 'generic'" in ln, ln


# ----------------------------------------------------------------------------- C, Numba, CUDA

def compiler(tmp_path: Path, body: str) -> str:
    """A C compiler driver: the shell ``body`` (arguments in "$@")."""
    path = tmp_path / "cc"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_c_probe_says_why_the_compiler_fails(fresh):
    sk.configure(cc=compiler(fresh, 'echo "cc1: error: no space left" >&2; exit 3'))
    reason = REGISTRY["c"].probe()
    assert "cannot build a one-line shared library" in reason
    assert "exit status 3: cc1: error: no space left" in reason
    assert not sk.backends()["c"]
    with pytest.raises(sk.BackendError, match="not available: the C compiler"):
        sk.registry.resolve("c")


def test_c_probe_without_openmp_is_available_and_says_so(fresh):
    if toolchain.find_compiler(None) is None:
        pytest.skip("no C compiler here")
    gcc = toolchain.find_compiler(None)
    sk.configure(cc=compiler(fresh, 'for a in "$@"; do [ "$a" = -fopenmp ] && exit 1; done\n'
                                    f'exec {gcc} "$@"'))
    assert REGISTRY["c"].probe() is None
    status = sk.backends()["c"]
    assert status and "has no OpenMP: kernels run on one thread" in str(status)


def test_c_verdict_is_remembered_until_the_compiler_changes(fresh, monkeypatch):
    gcc = toolchain.find_compiler(None)
    if gcc is None:
        pytest.skip("no C compiler here")
    cc = compiler(fresh, f'exec {gcc} "$@"')
    sk.configure(cc=cc)
    assert REGISTRY["c"].probe() is None
    assert list((verdicts._path("c", ["x"]).parent).glob("c-*.json"))
    probed = []
    real = toolchain.probe
    monkeypatch.setattr(toolchain, "probe", lambda *a: probed.append(a) or real(*a))
    c_registry._probe.cache_clear()
    assert REGISTRY["c"].probe() is None and probed == []  # a later process: a file read
    Path(cc).write_text(f"#!/bin/sh\n# upgraded\nexec {gcc} \"$@\"\n")
    c_registry._probe.cache_clear()
    assert REGISTRY["c"].probe() is None and len(probed) == 1  # another compiler: probed


def test_concurrent_processes_probe_once(fresh):
    """Processes starting together (pytest-xdist's workers) wait for one probe."""
    gcc = toolchain.find_compiler(None)
    if gcc is None:
        pytest.skip("no C compiler here")
    log = fresh / "probes.log"
    cc = compiler(fresh, f'case "$*" in *probe.c*) echo probed >> {log}; sleep 1;; esac\n'
                         f'exec {gcc} "$@"')
    script = (f"import stencilkit as sk; sk.configure(cc={cc!r}); "
              "print(sk.registry.REGISTRY['c'].probe())")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"),
               STENCILKIT_CACHE_DIR=str(fresh / "shared"))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [o.strip() for o, _ in outs] == ["None"] * 3, outs
    assert log.read_text() == "probed\n"


def test_a_failure_is_not_remembered(fresh):
    cc = compiler(fresh, "exit 1")
    sk.configure(cc=cc)
    assert REGISTRY["c"].probe() is not None
    assert not list(verdicts._path("c", ["x"]).parent.glob("c-*.json"))


def test_numba_probe_says_why_numba_cannot_compile(fresh, monkeypatch):
    broken = types.ModuleType("numba")

    def njit(*args, **kwargs):
        raise OSError("libllvmlite.so: cannot open shared object file")

    broken.njit = njit
    broken.__spec__ = importlib.util.find_spec("numba")
    if broken.__spec__ is None:
        pytest.skip("numba is not installed")
    monkeypatch.setitem(sys.modules, "numba", broken)
    numba_registry.probe.cache_clear()
    try:
        reason = numba_registry.probe()
    finally:
        numba_registry.probe.cache_clear()
    assert reason == ("numba cannot compile a one-line function (OSError: libllvmlite.so: "
                      "cannot open shared object file)")


def fake_cupy(monkeypatch, device_count=lambda: 1, load_error: Exception | None = None):
    """CuPy on a machine whose device runs what the driver loads (NVRTC is the real one):
    the launches made."""
    launched = []

    class Module:
        def load(self, ptx: bytes) -> None:
            assert b".entry sk_probe" in ptx  # PTX from NVRTC for compute_90
            if load_error is not None:
                raise load_error

        def get_function(self, name):
            def launch(grid, block, args):
                launched.append((name, grid, block))
                args[0][: block[0]] += 1
            return launch

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=device_count),
        Device=lambda: types.SimpleNamespace(compute_capability="90"),
        function=types.SimpleNamespace(Module=Module))
    fake.zeros, fake.asnumpy = np.zeros, np.asarray
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr("stencilkit.runtime.cuda._cupy", lambda: fake)  # also under the emulator
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "cupy" else real(name, *a))
    cuda_registry.probe.cache_clear()
    return launched


@pytest.fixture
def nvrtc(fresh):
    from stencilkit.build.cuda import nvrtc_problem

    if nvrtc_problem() is not None:
        pytest.skip(f"NVRTC: {nvrtc_problem()}")
    yield
    cuda_registry.probe.cache_clear()


def test_cuda_probe_runs_a_one_line_kernel(nvrtc, monkeypatch):
    launched = fake_cupy(monkeypatch)
    assert cuda_registry.probe() is None
    assert launched == [("sk_probe", (1,), (4,))]


def test_cuda_whose_driver_refuses_the_ptx_is_unavailable(nvrtc, monkeypatch):
    class CUDADriverError(RuntimeError):
        pass

    launched = fake_cupy(monkeypatch, load_error=CUDADriverError(
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an "
        "unsupported toolchain."))
    assert cuda_registry.probe() == (
        "a one-line kernel does not run on the CUDA device (CUDADriverError: "
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an "
        "unsupported toolchain.)")
    assert launched == []


def test_cuda_with_cupy_but_no_device_is_unavailable(monkeypatch):
    class CUDARuntimeError(RuntimeError):
        pass

    def no_device():
        raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    fake_cupy(monkeypatch, device_count=no_device)
    monkeypatch.setattr("stencilkit.build.cuda.nvrtc_problem", lambda: None)
    try:
        reason = cuda_registry.probe()
    finally:
        cuda_registry.probe.cache_clear()
    assert reason == ("no CUDA device (CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable "
                      "device is detected)")


def test_probes_agree_with_what_runs(backend):
    """Every backend called available builds and runs a kernel (the probe is not optimistic)."""
    a = np.random.default_rng(1).random((5, 6))
    blur = sk.stencil(backend=backend)(_blur)
    want = sk.stencil(backend="numpy")(_blur)(a)
    np.testing.assert_allclose(blur(a), want, rtol=1e-12)


def _blur(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])
