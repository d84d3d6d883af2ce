"""PoCL's target CPU: telling PoCL which processor to compile for when LLVM cannot name it.

PoCL compiles every kernel for the CPU that LLVM's host detection names (``-target-cpu``).
Where LLVM does not know the processor (one newer than PoCL's LLVM, or a virtual machine's
CPUID, such as an "AMD EPYC" VM), it answers "generic", which x86 clang refuses: every build
fails with ``error: unknown target CPU 'generic'`` (pocl/pocl#1049).

PoCL 5.0 and later take the name from the environment variable ``POCL_LLVM_CPU_NAME``
(read once, when PoCL first lists its devices; distributions such as Debian carry the same
patch in older versions). PoCL 3.0, which the ``pyopencl`` wheels ship, has no override: its
``-target-cpu`` comes after the user's options and ``POCL_EXTRA_BUILD_FLAGS`` (which it
refuses anyway: "Invalid build option: -target-cpu"), and its device list ignores
``POCL_DEVICES`` parameters for the CPU name. There the backend is unavailable, and says why.

``prepare()`` runs before stencilkit's first OpenCL context. Unless the user set
``POCL_LLVM_CPU_NAME`` (their choice stands), it builds a one-line kernel on PoCL's CPU
devices in a fresh interpreter (PoCL reads the variable once per process, so the test cannot
run in this one). When that fails naming the CPU, it tries the x86-64 level the processor
has (``x86-64-v4`` .. ``x86-64``, from its feature flags) the same way, and sets the first
that builds in ``os.environ``. A build that works is remembered on disk (``build/verdicts``,
keyed by PyOpenCL's and PoCL's files, the ICD configuration, the ``POCL_*`` variables and the
CPU), so later processes start no interpreter.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from ..build import verdicts

#: PoCL's variable for the CPU name (PoCL >= 5.0).
CPU_NAME_VARIABLE = "POCL_LLVM_CPU_NAME"
#: What PoCL's build log says when LLVM could not name the processor.
UNKNOWN_CPU = "unknown target CPU"
_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")
_TIMEOUT = 120.0  # seconds for one check (PoCL's first build of its kernel library included)

# Run in a fresh interpreter: build and run a one-line kernel on every CPU device of PoCL.
# Prints one JSON line: {"pocl": platform version or null, "error": build log or null}.
_CHECK = r"""
import json, sys
out = {"pocl": None, "error": None}
try:
    import numpy as np
    import pyopencl as cl
    platforms = cl.get_platforms()
except Exception:
    platforms = []
for p in platforms:
    if "portable computing language" not in p.name.lower() and "pocl" not in p.version.lower():
        continue
    out["pocl"] = p.version.strip()
    try:
        devices = p.get_devices(device_type=cl.device_type.CPU)
    except cl.Error:
        continue
    for d in devices:
        try:
            ctx = cl.Context([d])
            q = cl.CommandQueue(ctx)
            prg = cl.Program(ctx, "__kernel void sk_probe(__global int *x) "
                                  "{ x[get_global_id(0)] += 1; }").build()
            a = np.zeros(4, np.int32)
            buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
            prg.sk_probe(q, (4,), None, buf)
            cl.enqueue_copy(q, a, buf)
            q.finish()
            if list(a) != [1, 1, 1, 1]:
                out["error"] = "a one-line kernel gave a wrong result"
        except Exception as exc:
            out["error"] = str(exc)
        break
    break
print(json.dumps(out))
"""


def check(env: dict[str, str]) -> dict[str, str | None]:
    """The one-line build on PoCL's CPU device in a fresh interpreter with ``env`` added to
    this process's environment: {"pocl": version or None, "error": log or None}."""
    try:
        proc = subprocess.run([sys.executable, "-c", _CHECK], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=_TIMEOUT)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        # The check itself did not run (or crashed, or timed out on a loaded machine)
        return {"pocl": None, "error": f"the check did not run: {exc}", "ran": False}


def x86_levels(flags: set[str]) -> list[str]:
    """The LLVM names of the x86-64 micro-architecture levels a CPU with these
    ``/proc/cpuinfo`` flags implements, best first (always ending with "x86-64")."""
    v2 = {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}
    v3 = v2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
    v4 = v3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    levels = [name for name, need in (("x86-64-v4", v4), ("x86-64-v3", v3), ("x86-64-v2", v2))
              if need <= flags]
    return levels[:1] + ["x86-64"]


def _cpu_flags() -> set[str]:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return set()
    line = next((ln for ln in lines if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def candidates() -> list[str]:
    """The CPU names to offer PoCL, best first; none where LLVM's x86-64 names do not apply."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    return x86_levels(_cpu_flags())


def decide() -> verdicts.Verdict:
    """Whether PoCL needs a CPU name here: ``detail`` is the name that makes its builds work
    ("" when none is needed); ``reason`` says why PoCL cannot build here when no name helps."""
    first = check({})
    error = first.get("error")
    if first.get("ran") is False:  # leave PoCL alone, and check again in the next process
        return verdicts.Verdict(None, lasting=False)
    if first.get("pocl") is None or not error or UNKNOWN_CPU not in error:
        return verdicts.Verdict(None)  # no PoCL, PoCL works, or fails for another reason
    tried, lasting = [], True
    for name in candidates():
        tried.append(name)
        found = check({CPU_NAME_VARIABLE: name})
        if not found.get("error"):
            return verdicts.Verdict(None, name)
        lasting &= found.get("ran") is not False
    offered = (f"and {CPU_NAME_VARIABLE}={' or '.join(tried)} did not help (PoCL reads it "
               "from version 5.0 on)" if tried else f"and there is no {CPU_NAME_VARIABLE} to "
               "offer on this processor")
    return verdicts.Verdict(f"{pocl_version(str(first['pocl']))} cannot name this processor "
                            f"for LLVM (pocl/pocl#1049), {offered}", lasting=lasting)


def pocl_version(platform_version: str) -> str:
    """"PoCL 3.0-rc2" from a platform version such as "OpenCL 3.0 PoCL 3.0-rc2  Linux, ..."."""
    found = re.search(r"PoCL\s+\S+", platform_version)
    return found.group(0) if found else "PoCL"


def identity() -> tuple[str, ...]:
    """What ``decide()``'s outcome depends on (see the module's docstring)."""
    cl = importlib.util.find_spec("pyopencl")
    files: list[str] = []
    if cl is not None and cl.submodule_search_locations:
        package = Path(next(iter(cl.submodule_search_locations)))
        for pattern in ("_cl*", ".libs/*"):
            files += sorted(verdicts.file_identity(p) for p in package.glob(pattern))
    vendors = Path(os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors"))
    icds = sorted(vendors.glob("*.icd")) if vendors.is_dir() else [vendors]
    for icd in icds:  # the file, and the driver library it names
        files.append(verdicts.file_identity(icd))
        try:
            lib = icd.read_text().strip()
        except OSError:
            continue
        dirs = ("",) if os.path.isabs(lib) else _LIBRARY_DIRS
        files += [verdicts.file_identity(os.path.join(d, lib)) for d in dirs
                  if os.path.exists(os.path.join(d, lib))]
    env = sorted(f"{k}={v}" for k, v in os.environ.items()
                 if k.startswith(("POCL_", "OCL_ICD", "PYOPENCL_")) and k != "PYOPENCL_HOME")
    return (sys.executable, *files, *env, verdicts.cpu_identity())


@functools.cache
def prepare() -> str | None:
    """Make PoCL's builds work here before the first OpenCL context (see the module's
    docstring): None, or why PoCL's CPU device cannot build here. Once per process."""
    if CPU_NAME_VARIABLE in os.environ or importlib.util.find_spec("pyopencl") is None:
        return None  # the user's setting stands; without PyOpenCL the probe says so
    # Failures are stored too: the key changes with whatever would repair PoCL here (a
    # newer PoCL, another driver, a POCL_* variable), and a failure costs three interpreters.
    verdict = verdicts.remembered("pocl-target", identity(), decide, failures=True)
    if verdict.reason is None and verdict.detail:
        os.environ[CPU_NAME_VARIABLE] = verdict.detail
        _applied.append(verdict.detail)
    return verdict.reason


_applied: list[str] = []  # the CPU name prepare() set, if it set one


def explain() -> str | None:
    """Why PoCL's builds fail naming the CPU in this process, as far as stencilkit knows."""
    reason = prepare()
    if reason is None and _applied:
        return (f"PoCL was already running when stencilkit set {CPU_NAME_VARIABLE}="
                f"{_applied[-1]}: set it in the environment before the program starts")
    return reason
