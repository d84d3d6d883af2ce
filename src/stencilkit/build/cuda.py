"""CUDA C++ to PTX with NVRTC, cached on disk under the source, the architecture, NVRTC's
version and the full option list.

NVRTC needs no GPU: ``compile_ptx(source, "sm_90")`` works on any machine with the
``cuda-bindings`` and ``nvidia-cuda-nvrtc-cu12`` wheels (CI compiles every kernel of the test
suite this way). A compile error is a ``BackendError`` whose message quotes NVRTC's log with
the offending lines of the generated source.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..errors import BackendError

ARTIFACT = "kernel.ptx"


@functools.cache
def nvrtc_problem() -> str | None:
    """None when NVRTC can be loaded, else why not."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return "cuda-bindings is not installed (pip install 'cuda-bindings>=12,<13')"
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # the library itself is missing
        return f"NVRTC cannot be loaded ({exc}); pip install nvidia-cuda-nvrtc-cu12"
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return f"NVRTC does not answer ({err})"
    return None


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


#: What ``fast_math=True`` means to NVRTC: contraction of a * b + c into one rounding
#: (FMA). Not --use_fast_math, which would also flush subnormals to zero, make division and
#: square root approximate and replace single-precision sin/exp/... by intrinsics with
#: errors of many ulps: more than "contraction and reassociation" (docs/numerics.md).
FAST_MATH_OPTIONS = ("--fmad=true",)
#: The default: no contraction, so that a * b + c rounds twice as NumPy's does; division
#: and square root are IEEE-rounded and subnormals kept (NVRTC's defaults, stated anyway).
EXACT_OPTIONS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false")


def options(arch: str, fast_math: bool = False) -> tuple[str, ...]:
    """NVRTC's options for ``arch`` ("sm_90"): all of them are in the PTX cache's key."""
    # compute_XX: PTX, which the driver compiles for the device it runs on
    return (f"--gpu-architecture=compute_{arch.removeprefix('sm_')}", "--std=c++17",
            "-default-device", *(FAST_MATH_OPTIONS if fast_math else EXACT_OPTIONS))


def compile_ptx_uncached(source: str, arch: str, name: str = "stencilkit",
                         fast_math: bool = False) -> str:
    """PTX of ``source`` for ``arch`` ("sm_90"); BackendError with the log on failure."""
    problem = nvrtc_problem()
    if problem is not None:
        raise BackendError(f"cannot compile CUDA: {problem}", stencil=name,
                           hint="pip install 'stencilkit[cuda]'")
    from cuda.bindings import nvrtc

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    if err != ok:
        raise BackendError(f"NVRTC could not create a program: {err}", stencil=name)
    try:
        opts = [o.encode() for o in options(arch, fast_math)]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        if result != ok:
            raise BackendError("NVRTC failed to compile the generated CUDA source (a "
                               "stencilkit bug):\n" + explain_log(log.decode(errors="replace"),
                                                                  source, name),
                               stencil=name, hint="please report it with this message")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return ptx.rstrip(b"\0 ").decode()


def explain_log(log: str, source: str, name: str) -> str:
    """NVRTC's log with each error's source line (and its neighbours) quoted."""
    import re

    lines = source.splitlines()
    out = []
    for entry in log.strip().splitlines():
        out.append(entry)
        m = re.match(rf"{re.escape(name)}\.cu\((\d+)\): error", entry)
        if m:
            n = int(m.group(1))
            for i in range(max(1, n - 2), min(len(lines), n + 1) + 1):
                out.append(f"  {'>' if i == n else ' '} {i:5d} | {lines[i - 1]}")
    return "\n".join(out)


def compile_ptx(source: str, arch: str, name: str = "stencilkit", fast_math: bool = False) -> str:
    """The PTX of ``source``, through the disk cache (key: source, NVRTC version and every
    option, the architecture among them); compiled by ``compile_ptx_uncached`` when
    missing."""
    from . import cache
    from .cache import back_key

    k = back_key("cuda-ptx", source, (nvrtc_version(), *options(arch, fast_math)))
    hit = cache.memory_get(k)
    if hit is not None:
        return hit  # type: ignore[return-value]

    def build(tmp: Path) -> None:
        (tmp / ARTIFACT).write_text(compile_ptx_uncached(source, arch, name, fast_math))

    ptx = cache.get_or_build(k, ARTIFACT, build, lambda path: path.read_text())
    cache.memory_put(k, ptx)
    return ptx
