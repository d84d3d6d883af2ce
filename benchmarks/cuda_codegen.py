"""The machine code of the "cuda" backend's kernels, without a GPU.

For each case (a point kernel and the layout of its arrays) the kernels that a call runs are
compiled by NVRTC for one architecture (default sm_90) with ``--ptxas-options=-v``, and
this prints per ``__global__`` function: the registers, the stack and spill bytes ptxas
reports, and in the PTX the 64-bit multiplies (``mul.lo.s64``/``mad.lo.s64``: index
arithmetic in 64 bits), the widening multiplies (``mul.wide``: a 32-bit index scaled to a
byte offset) and the global loads. Next to them, a naive hand kernel (one thread per point,
no tiling) as the yardstick. These are the CPU-side figures of docs/performance-gpu.md; the
GPU timings are ``../shared/gpu-bench``'s.

    PYTHONPATH=src python benchmarks/cuda_codegen.py [--arch sm_90] [--source]

Needs ``cuda-bindings`` and NVRTC (``pip install 'stencilkit[cuda]'``); no CuPy, no device.
"""

from __future__ import annotations

import argparse
import re

import numpy as np

import stencilkit as sk

HAND_LAP3D = r"""
extern "C" __global__ void hand_lap3d(const double *__restrict__ a, double *__restrict__ o,
                                      int n0, int n1, int n2) {
    int k = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y,
        i = blockIdx.z * blockDim.z + threadIdx.z;
    if (i < 1 || j < 1 || k < 1 || i >= n0 - 1 || j >= n1 - 1 || k >= n2 - 1) return;
    long c = ((long)i * n1 + j) * n2 + k, s0 = (long)n1 * n2;
    o[c] = a[c - s0] + a[c + s0] + a[c - n2] + a[c + n2] + a[c - 1] + a[c + 1] - 6.0 * a[c];
}
"""


def lap3d(a):
    return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
            - 6.0 * a[0, 0, 0])


def jacobi2d(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


def _storage(shape: tuple[int, int, int]) -> np.ndarray:
    """The layout of ``sk.empty(shape, backend="cuda")``: K outermost, J unit stride."""
    ni, nj, nk = shape
    return np.empty(ni * nj * nk).reshape(nk, ni, nj).transpose(1, 2, 0)


def _huge(shape: tuple[int, ...]) -> np.ndarray:
    """A C-ordered stand-in of more than 2**31 elements over one element of memory (never
    read: only its shape and strides choose the kernel)."""
    strides = tuple(int(np.prod(shape[i + 1:])) * 8 for i in range(len(shape)))
    return np.lib.stride_tricks.as_strided(np.empty(1), shape, strides)


CASES = [
    ("lap3d 512^3, C order", lap3d, lambda: np.empty((512, 512, 512))),
    ("lap3d 512^3, Fortran order", lap3d, lambda: np.empty((512, 512, 512), order="F")),
    ("lap3d 512^3, storage (K outermost)", lap3d, lambda: _storage((512, 512, 512))),
    ("lap3d 1300^3 (> 2**31 elements), C order", lap3d, lambda: _huge((1300, 1300, 1300))),
    ("jacobi2d 16384^2", jacobi2d, lambda: np.empty((16384, 16384))),
]


def call_source(func, a: np.ndarray) -> str:
    """The CUDA source of the kernels a call ``st(a, out=b)`` (b with a's layout) runs."""
    from stencilkit.stencil import _array_key

    st = sk.stencil(func)
    # the signature (dtype, ndim, unit last stride) as the call's; its layout and sizes
    # then choose the kernels
    small = np.ones((4,) * a.ndim, order="C" if a.strides[-1] == a.itemsize else "F")
    entry = st._build((small,), _array_key(small), "cuda", True, generate=True).entry
    if not hasattr(entry, "variant"):  # before per-call variants: one source per signature
        return st.generate(a, backend="cuda")
    return entry.variant((a, a, False, 0.0)).source


def ptxas(source: str, arch: str) -> tuple[str, str]:
    """(ptxas's -v log, the PTX) of ``source`` compiled by NVRTC for ``arch``."""
    from cuda.bindings import nvrtc

    from stencilkit.build.cuda import options

    def run(opts: list[str]) -> tuple[str, str]:
        ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
        _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
        try:
            encoded = [o.encode() for o in opts]
            (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            if result != ok:
                raise RuntimeError(log.decode())
            _, n = nvrtc.nvrtcGetPTXSize(prog)
            ptx = b" " * n
            nvrtc.nvrtcGetPTX(prog, ptx)
            return log.decode().replace("\0", ""), ptx.decode().replace("\0", "")
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    rest = list(options(arch)[1:])  # the backend's own options, a real architecture
    log, _ = run([f"--gpu-architecture={arch}", *rest, "--ptxas-options=-v"])
    _, ptx = run([f"--gpu-architecture=compute_{arch.removeprefix('sm_')}", *rest])
    return log, ptx


def kernel_figures(source: str, arch: str) -> dict[str, dict[str, int]]:
    """Per ``__global__`` function: registers, stack and spill bytes, 64-bit multiplies,
    widening multiplies and global loads in its PTX."""
    log, ptx = ptxas(source, arch)
    out: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"Compiling entry function '(\w+)'.*?\n(.*?)Used (\d+) registers",
                         log, re.S):
        name, props, regs = m.group(1), m.group(2), int(m.group(3))
        stack = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads", props)
        out[name] = {"registers": regs, "stack": int(stack.group(1)) if stack else 0,
                     "spills": int(stack.group(2)) + int(stack.group(3)) if stack else 0}
    for m in re.finditer(r"\.entry (\w+)\((.*?)^}", ptx, re.S | re.M):
        body = m.group(2)
        if m.group(1) in out:
            out[m.group(1)].update({
                "mul64": len(re.findall(r"\b(?:mul|mad)\.lo\.[su]64\b", body)),
                "mulwide": len(re.findall(r"\bmul\.wide\.", body)),
                "loads": len(re.findall(r"\bld\.global\.", body))})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--source", action="store_true", help="print each case's CUDA too")
    opts = parser.parse_args()
    head = f"{'case / kernel':58s} {'regs':>4s} {'spill':>5s} {'mul64':>5s} {'wide':>4s} " \
           f"{'ld':>3s}"
    print(head)
    rows = [(label, call_source(func, make())) for label, func, make in CASES]
    rows.append(("naive hand kernel (reference)", HAND_LAP3D))
    for label, source in rows:
        print(label)
        if opts.source:
            print(source[source.index("launch(es)") - 120:] if "launch(es)" in source
                  else source)
        for name, f in kernel_figures(source, opts.arch).items():
            print(f"  {name:56s} {f['registers']:4d} {f['spills']:5d} {f.get('mul64', 0):5d} "
                  f"{f.get('mulwide', 0):4d} {f.get('loads', 0):3d}")


if __name__ == "__main__":
    main()
