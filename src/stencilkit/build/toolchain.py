"""The system C compiler: discovery, identity (part of every cache key), and compilation."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..errors import BackendError
from . import verdicts

# Exact IEEE semantics (no contraction into FMA, no fast-math) so that results match NumPy
# and Numba bit for bit; -fwrapv gives integers Numba's wrap-around; no errno lets libm
# calls vectorize. A call to an undeclared function is an error, not an implicit `int f()`
# that returns garbage for a double (or names a function nothing defines: a library that
# would fail to load).
BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=gnu11", "-fwrapv",
              "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math",
              "-Werror=implicit-function-declaration")

def missing_function_error(name: str, problem: str, stencil: str) -> BackendError:
    """The error for generated code calling a C function that does not exist: in practice a
    C-string ``sk.Kernel(code, name)`` whose code defines its function under another name."""
    return BackendError(
        f"the code calls a C function '{name}' that {problem}", stencil=stencil,
        hint=f"a C-string sk.Kernel(code, name) must define a function called exactly its "
             f"name: define '{name}' in the code, or name the function it defines")


_UNDECLARED = re.compile(r"implicit declaration of function [\W]?(\w+)")


@dataclass(frozen=True)
class Toolchain:
    cc: str
    version: str
    flags: tuple[str, ...]
    openmp: bool

    @property
    def identity(self) -> str:
        """Everything that changes the binary: compiler, version, flags, CPU."""
        return "|".join([self.cc, self.version, " ".join(self.flags), _cpu_identity()])

    def compile(self, source: Path, output: Path, *, python: bool, stencil: str) -> None:
        cmd = [self.cc, *self.flags]
        if python:
            import numpy as np  # point entries read NumPy arrays' fields (codegen.c.sk_view)

            cmd += [f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}"]
        cmd += [str(source), "-o", str(output), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        undeclared = _UNDECLARED.search(proc.stderr) if proc.returncode != 0 else None
        if undeclared:
            raise missing_function_error(undeclared.group(1), "is not declared or defined",
                                         stencil)
        if proc.returncode != 0:
            raise BackendError(
                f"the C compiler failed on the generated source {source}:\n"
                f"{' '.join(cmd)}\n{proc.stderr.strip()}", stencil=stencil,
                hint="report this with the source file; meanwhile use backend='numpy'")


def _cpu_identity() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = next((ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))), "")
        flags = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
        return platform.machine() + hashlib.sha256((model + flags).encode()).hexdigest()[:12]
    except OSError:
        return platform.machine() + platform.processor()


#: The compiler's predefined macros under -march=native -> the vector extensions they mean
_ISA_MACROS = {"__SSE4_2__": "sse4.2", "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma",
               "__AVX512F__": "avx512f", "__AVX512BW__": "avx512bw",
               "__AVX512VL__": "avx512vl", "__AVX512FP16__": "avx512fp16",
               "__ARM_NEON": "neon", "__ARM_FEATURE_SVE": "sve"}
_RESOLVED = re.compile(r"^\s*-m(arch|tune)=\s+(\S+)\s*$", re.M)
_VALID = re.compile(r"valid arguments to .-mtune=. switch are: ([^\n]*)")


@dataclass(frozen=True)
class NativeTarget:
    """What ``-march=native`` means to a compiler here: the vector extensions it enables,
    the processor names it resolves to ("" where it does not say: clang), and the
    ``-mtune=`` names it knows."""

    isa: tuple[str, ...]
    march: str
    mtune: str
    known_tunes: tuple[str, ...]


@functools.lru_cache(maxsize=4)
def native_target(cc: str | None = None) -> NativeTarget:
    """``cc``'s reading of -march=native (three short runs of the compiler, once per process
    and compiler); an empty target where there is no compiler."""
    found = find_compiler(cc)
    if found is None:
        return NativeTarget((), "", "", ())
    cmd = found.split()

    def run(*args: str) -> str:
        try:
            proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=30,
                                  input="")
            return proc.stdout + proc.stderr
        except (OSError, subprocess.SubprocessError):
            return ""

    macros = run("-march=native", "-dM", "-E", "-x", "c", "-")
    defined = {ln.split()[1] for ln in macros.splitlines() if ln.startswith("#define ")}
    isa = tuple(sorted(name for macro, name in _ISA_MACROS.items() if macro in defined))
    resolved = dict(_RESOLVED.findall(run("-march=native", "-Q", "--help=target")))
    valid = _VALID.search(run("-mtune=stencilkit-probe", "-E", "-x", "c", "-"))
    tunes = tuple(valid.group(1).split()) if valid else ()
    return NativeTarget(isa, resolved.get("arch", ""), resolved.get("tune", ""), tunes)


# The nearest processor GCC has a model for, by vendor and the newest extension present:
# for a CPU newer than the compiler (its -march=native tunes as "generic"). Tried in order,
# the first the compiler knows wins.
_NEAREST_TUNES = {
    "GenuineIntel": (("avx512fp16", ("sapphirerapids", "icelake-server")),
                     ("avx512f", ("icelake-server", "skylake-avx512")),
                     ("avx2", ("alderlake", "skylake", "haswell"))),
    "AuthenticAMD": (("avx512f", ("znver5", "znver4", "znver3")),
                     ("avx2", ("znver3", "znver2"))),
}


def nearest_tune(vendor: str, target: NativeTarget) -> str | None:
    """``-mtune=`` of the nearest processor the compiler knows, where -march=native tunes
    for "generic" (it does not know this one); None where it knows it, or knows no
    neighbour. The ISA stays -march=native's: only scheduling and vector-width heuristics
    change, so the code runs wherever the native code runs."""
    if target.mtune != "generic":
        return None
    for extension, names in _NEAREST_TUNES.get(vendor, ()):
        if extension in target.isa:
            return next((n for n in names if n in target.known_tunes), None)
    return None


# Intel's cost model of the same vector extension, for a CPU that GCC tunes with one of its
# AMD models (``znver*``): that model folds a vector load into each instruction using it, so a
# value read by several terms is read again, where Intel's keeps it in a register. On a
# Zen 4 (GCC 12.2, znver3) the vectorized hdiff loop read 26 vectors per 8 points under znver3
# and 15 under icelake-server (15 under clang too), and ran 1.05-1.07x faster on C-ordered
# arrays and 1.12x on storages; lap3d, jacobi2d and the tridiagonal solve moved by under 3%
# (docs/performance.md). Tried in order, the first the compiler knows wins.
_OTHER_MODELS = (("avx512f", ("icelake-server", "skylake-avx512")),
                 ("avx2", ("haswell", "skylake")))


def other_model_tune(target: NativeTarget) -> str | None:
    """``-mtune=`` of Intel's processor with the vector extensions of ``target`` where the
    compiler tunes for an AMD model (``znver*``); None elsewhere. A candidate of the tuner,
    never the default: the ISA stays -march=native's, so the code runs wherever the native
    code runs, and only the cost model the compiler schedules and allocates registers by
    changes."""
    if not target.mtune.startswith("znver"):
        return None
    for extension, names in _OTHER_MODELS:
        if extension in target.isa:
            return next((n for n in names if n in target.known_tunes), None)
    return None


def find_compiler(explicit: str | None = None) -> str | None:
    for candidate in (explicit, os.environ.get("CC"), "gcc", "clang", "cc"):
        if candidate and shutil.which(candidate.split()[0]):
            return candidate
    return None


#: STENCILKIT_SANITIZE=1 builds generated code with AddressSanitizer and UBSan (the CI's
#: sanitizer step; run Python with LD_PRELOAD=$(gcc -print-file-name=libasan.so)). The flags
#: are part of the toolchain's identity, so sanitized builds have their own cache entries;
#: -O1 (after -O3) keeps sanitized compiles fast.
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g", "-O1")


def sanitize_requested() -> bool:
    return os.environ.get("STENCILKIT_SANITIZE", "") not in ("", "0")


def toolchain(cc: str | None = None, extra_flags: tuple[str, ...] = (),
              openmp: bool = True) -> Toolchain:
    """The toolchain for ``cc`` (default: $CC, gcc, clang, cc); raises if there is none."""
    sanitize = SANITIZE_FLAGS if sanitize_requested() else ()
    return _toolchain(cc, tuple(extra_flags) + sanitize, openmp)


@functools.lru_cache(maxsize=8)
def _toolchain(cc: str | None, extra_flags: tuple[str, ...], openmp: bool) -> Toolchain:
    found = find_compiler(cc)
    if found is None:
        raise BackendError("no C compiler found (looked for $CC, gcc, clang, cc)",
                           hint="install gcc or clang, set CC, or use backend='numpy'")
    version, compiler_openmp = _compiler_facts(found)
    flags = list(BASE_FLAGS)
    has_openmp = openmp and compiler_openmp
    if has_openmp:
        flags.append("-fopenmp")
    return Toolchain(found, version, tuple(flags) + tuple(extra_flags), has_openmp)


@functools.lru_cache(maxsize=4)
def _compiler_facts(found: str) -> tuple[str, bool]:
    """The compiler's version line and whether it builds OpenMP: asked once per compiler, not
    per set of flags (each autotuning candidate's flags make another toolchain, and the two
    runs of the compiler cost 0.05-0.1 s per candidate)."""
    try:
        out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30)
        version = out.stdout.splitlines()[0] if out.stdout else found
    except (OSError, subprocess.SubprocessError) as exc:
        raise BackendError(f"the C compiler {found!r} does not run: {exc}") from exc
    return version, _supports_openmp(found)


def _supports_openmp(cc: str) -> bool:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "omp.c"
        src.write_text("#include <omp.h>\nint f(void) { return omp_get_max_threads(); }\n")
        proc = subprocess.run([cc, "-fopenmp", "-fPIC", "-shared", str(src), "-o",
                               str(Path(tmp) / "omp.so")], capture_output=True)
        return proc.returncode == 0


def _clear_toolchains() -> None:
    _toolchain.cache_clear()
    _compiler_facts.cache_clear()


toolchain.cache_clear = _clear_toolchains  # type: ignore[attr-defined]


_PROBE_C = """
int sk_probe(int n) {
    int s = 0;
    #pragma omp parallel for reduction(+:s)
    for (int i = 0; i < n; ++i) s += i;
    return s;
}
"""


def probe_identity(cc: str, extra_flags: tuple[str, ...], openmp: bool) -> tuple[str, ...]:
    """What the C probe's verdict depends on, without running the compiler: the driver's
    file and the options (a reinstalled compiler has another size or time)."""
    found = find_compiler(cc)
    exe = shutil.which(found.split()[0]) if found else None
    return (str(found), verdicts.file_identity(exe), " ".join(extra_flags), str(openmp),
            str(sanitize_requested()), verdicts.cpu_identity())


def probe(cc: str | None, extra_flags: tuple[str, ...], openmp: bool) -> verdicts.Verdict:
    """Build and load a one-function shared library with the toolchain generated code gets:
    the verdict says why not when that fails, and in ``detail`` that OpenMP is missing."""
    import ctypes
    import tempfile

    try:
        tc = toolchain(cc, extra_flags, openmp)
        with tempfile.TemporaryDirectory(prefix="stencilkit-probe-") as tmp:
            src, lib = Path(tmp) / "probe.c", Path(tmp) / "probe.so"
            src.write_text(_PROBE_C)
            cmd = [tc.cc, *tc.flags, str(src), "-o", str(lib), "-lm"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                return verdicts.Verdict(
                    f"the C compiler {tc.cc!r} cannot build a one-line shared library (exit "
                    f"status {proc.returncode}: {_first_error(proc.stderr)})")
            fn = ctypes.CDLL(str(lib)).sk_probe
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
            if fn(100) != 4950:
                return verdicts.Verdict(f"a one-line C function built by {tc.cc} gave a "
                                        "wrong result")
    except BackendError as exc:  # the compiler does not even report its version
        return verdicts.Verdict(exc.bare_message)
    except OSError as exc:  # the compiler does not start, or the library does not load
        return verdicts.Verdict(f"a one-line shared library could not be built and loaded "
                                f"with {find_compiler(cc)}: {exc}")
    missing = openmp and not tc.openmp
    return verdicts.Verdict(None, f"{tc.cc} has no OpenMP: kernels run on one thread"
                            if missing else "")


def _first_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b:", ln)]
    return (errors or lines or ["no message"])[0][:300]
