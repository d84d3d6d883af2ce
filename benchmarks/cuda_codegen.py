"""The machine code of the "cuda" backend's kernels, without a GPU.

For each case (a point kernel or a computation, and the layout of its arrays) the kernels
that a call runs are compiled by NVRTC for one architecture (default sm_90) with
``--ptxas-options=-v``, and this prints per ``__global__`` function: the registers, the stack and
spill bytes ptxas reports, and in the PTX the 64-bit multiplies
(``mul.lo.s64``/``mad.lo.s64``: index arithmetic in 64 bits), the widening multiplies
(``mul.wide``: a 32-bit index scaled to a byte offset), the global loads and the shared
loads and stores. Next to them, a naive hand kernel (one thread per point, no tiling) as the
yardstick. For computations (hdiff, a tridiagonal solve; C order and the storages) also the
launches per call and the memory traffic per grid point that the plan implies (each launch
reading each array it loads once and writing each it stores once, 3-D temporaries included
unless they live in shared memory) against the least a call can move (each input field read
once, each output written once), the shared memory a launch takes at 80 levels (per thread,
per block, blocks per SM), the global-memory variant a call with more levels runs, and the
hand kernels of ``../shared/gpu-bench`` (fused hdiff; a thread per column keeping the
tridiagonal coefficients in global memory). These are the CPU-side figures of
docs/performance-gpu.md; the GPU timings are ``../shared/gpu-bench``'s.

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


HAND_HDIFF = r"""
__device__ __forceinline__ double L(const double* a, long p, long s0, long s1) {
  return 4.0 * a[p] - (a[p + s0] + a[p - s0] + a[p + s1] + a[p - s1]);
}
extern "C" __global__ void hand_hdiff(const double* __restrict__ in,
    const double* __restrict__ c, double* __restrict__ o, long n0, long n1, long n2, long s0,
    long s1, long s2) {
  long i = blockIdx.z * blockDim.z + threadIdx.z;
  long j = blockIdx.y * blockDim.y + threadIdx.y;
  long k = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 2 || j < 2 || i >= n0 - 2 || j >= n1 - 2 || k >= n2) return;
  long p = i * s0 + j * s1 + k * s2;
  double l0 = L(in, p, s0, s1), lip = L(in, p + s0, s0, s1), lim = L(in, p - s0, s0, s1);
  double ljp = L(in, p + s1, s0, s1), ljm = L(in, p - s1, s0, s1);
  double fx = lip - l0;   if (fx * (in[p + s0] - in[p]) > 0.0) fx = 0.0;
  double fxm = l0 - lim;  if (fxm * (in[p] - in[p - s0]) > 0.0) fxm = 0.0;
  double fy = ljp - l0;   if (fy * (in[p + s1] - in[p]) > 0.0) fy = 0.0;
  double fym = l0 - ljm;  if (fym * (in[p] - in[p - s1]) > 0.0) fym = 0.0;
  o[p] = in[p] - c[p] * (fx - fxm + fy - fym);
}
"""

HAND_TRIDIAG = r"""
extern "C" __global__ void hand_tridiag(const double* __restrict__ a,
    const double* __restrict__ b, const double* __restrict__ c, const double* __restrict__ d,
    double* __restrict__ x, double* __restrict__ cp, double* __restrict__ dp,
    long n0, long n1, long n2, long s0, long s1, long s2) {
  long i = blockIdx.y * blockDim.y + threadIdx.y;
  long j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n0 || j >= n1) return;
  long p = i * s0 + j * s1;
  double cc = c[p] / b[p], dd = d[p] / b[p];
  cp[p] = cc; dp[p] = dd;
  for (long k = 1; k < n2; ++k) {
    long q = p + k * s2;
    double m = 1.0 / (b[q] - a[q] * cc);
    cc = c[q] * m; dd = (d[q] - a[q] * dd) * m;
    cp[q] = cc; dp[q] = dd;
  }
  double xx = dd; x[p + (n2 - 1) * s2] = xx;
  for (long k = n2 - 2; k >= 0; --k) {
    long q = p + k * s2;
    xx = dp[q] - cp[q] * xx; x[q] = xx;
  }
}
"""

CASES = [
    ("lap3d 512^3, C order", lap3d, lambda: np.empty((512, 512, 512))),
    ("lap3d 512^3, Fortran order", lap3d, lambda: np.empty((512, 512, 512), order="F")),
    ("lap3d 512^3, storage (K outermost)", lap3d, lambda: _storage((512, 512, 512))),
    ("lap3d 1300^3 (> 2**31 elements), C order", lap3d, lambda: _huge((1300, 1300, 1300))),
    ("jacobi2d 16384^2", jacobi2d, lambda: np.empty((16384, 16384))),
]


def _stand_in(shape: tuple[int, int, int], storage: bool) -> np.ndarray:
    """An array of ``shape`` in C order or in the storage order over one element of memory
    (a computation's build reads only the layout)."""
    ni, nj, nk = shape
    strides = (nj * 8, 8, ni * nj * 8) if storage else (nj * nk * 8, nk * 8, 8)
    return np.lib.stride_tricks.as_strided(np.empty(1), shape, strides)


def _computations() -> list[tuple[str, object, bool]]:
    from stencilkit_apps import definitions

    return [(f"{name} 1024x1024x80, {'storage (K outermost)' if storage else 'C order'}",
             func, storage)
            for name, func in (("hdiff", definitions.hdiff),
                               ("tridiag (c, d in place)", definitions.tridiagonal),
                               ("tridiag (cp, dp temporaries)",
                                definitions.tridiagonal_temporaries))
            for storage in (False, True)]


def computation_build(func, storage: bool):
    """(launch plan, CUDA source) of "cuda"'s build of computation ``func`` for fields of
    1024x1024x80 in C order or the storage order: the kernels such a call runs."""
    from stencilkit.registry import REGISTRY

    st = sk.stencil(func)
    fields = {f.name: _stand_in((1024, 1024, 80), storage)
              for f in st.definition.parameter_fields}
    source, call = st._build(REGISTRY["cuda"], fields)
    return call.entry.plan, source


def global_variant(func, storage: bool):
    """(launch plan, CUDA source) of the variant a call whose levels do not fit shared
    memory runs: the column-private temporaries in global memory (None where the build
    keeps none on chip)."""
    import dataclasses

    from stencilkit.registry import REGISTRY

    st = sk.stencil(func)
    fields = {f.name: _stand_in((1024, 1024, 80), storage)
              for f in st.definition.parameter_fields}
    entry = st._build(REGISTRY["cuda"], fields)[1].entry
    if not entry.variants.own.on_chip:
        return None
    return entry.variants.build(dataclasses.replace(entry.variants.own, on_chip=False))


def shared_note(plan, nk: int = 80) -> str:
    """The shared memory a launch of ``plan`` takes for ``nk`` levels: per thread, per block
    (the block the launcher sizes) and what that leaves per SM (228 KiB on an H100/H200, 1
    KiB of it reserved per block)."""
    from stencilkit.ir.host_eval import evaluate
    from stencilkit.runtime.cuda import BLOCKS
    from stencilkit.runtime.cuda_variants import fits_on_chip, shared_block

    notes = []
    for launch in plan.launches():
        if launch.shared is None:
            continue
        per_thread = launch.shared.bytes_per_thread(
            int(evaluate(launch.shared.per_thread, {"nk": nk})))
        block = shared_block(BLOCKS[len(launch.dims)], per_thread)
        if block is None:
            notes.append(f"{per_thread} B/thread: no block fits")
            continue
        threads = block[0] * block[1] * block[2]
        per_block = threads * per_thread
        blocks = min(32, 228 * 1024 // (per_block + 1024))
        notes.append(f"on chip: shared {per_thread} B/thread x {threads} threads = {per_block} "
                     f"B/block, {blocks} blocks ({blocks * threads} threads) per SM; a call "
                     f"at nk = {nk} runs it: {fits_on_chip(nk, per_thread // nk)}")
    return "; ".join(notes)


def traffic(plan, func) -> tuple[int, int]:
    """(bytes per grid point the plan moves, the least a call moves): each launch reads
    each array it loads once and writes each it stores once (neighbours from the cache),
    temporaries included unless on chip (a column pointer into shared memory is no
    parameter of the launch); the least reads each field the computation reads and writes
    each it writes, once."""
    from stencilkit.ir import kernel as k
    from stencilkit.ir.core import walk

    moved = 0
    for launch in plan.launches():
        nodes = [n for s in launch.body for n in walk(s)]
        # the array each pointer reaches: a parameter, or a column pointer into one
        array = {p.name: p.name for p in launch.params if p.pointer}
        array.update({n.symbol.name: n.value.buffer.base.name for n in nodes
                      if isinstance(n, k.Declare) and isinstance(n.value, k.Address)
                      and n.value.buffer.base.name in array})
        for kind in (k.Load, k.Store):
            arrays = {array[n.buffer.base.name]: n.buffer.element_type for n in nodes
                      if isinstance(n, kind) and n.buffer.base.name in array}
            moved += sum(np.dtype(t).itemsize for t in arrays.values())
    from stencilkit.analysis.schedule import reads
    from stencilkit.lower.computation import written_before_read

    st = sk.stencil(func, backend="numpy")
    multistages = list(enumerate(st.schedule.multistages))
    written = {n for _, ms in multistages for n in ms.written}
    least = 0
    for f in st.definition.parameter_fields:
        # an output the call sets before reading it (x of the tridiagonal solve) is no input
        read = any(acc.field == f.name for _, ms in multistages for iv in ms.intervals
                   for stage in iv.stages for u in stage.units for acc in reads(u)) \
            and not (f.name in written and written_before_read(f.name, multistages))
        least += np.dtype(f.dtype).itemsize * (int(read) + int(f.name in written))
    return moved, least


def call_source(func, a: np.ndarray) -> str:
    """The CUDA source of the kernels a call ``st(a, out=b)`` (b with a's layout) runs."""
    from stencilkit.api.stencil import _array_key

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
                "loads": len(re.findall(r"\bld\.global\.", body)),
                "shared": len(re.findall(r"\b(?:ld|st)\.shared\.", body))})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--source", action="store_true", help="print each case's CUDA too")
    opts = parser.parse_args()
    head = f"{'case / kernel':58s} {'regs':>4s} {'spill':>5s} {'mul64':>5s} {'wide':>4s} " \
           f"{'ld':>3s} {'ld/st.shared':>12s}"
    print(head)
    rows = [(label, call_source(func, make()), "") for label, func, make in CASES]
    rows.append(("naive hand kernel (reference)", HAND_LAP3D, ""))
    for label, func, storage in _computations():
        plan, source = computation_build(func, storage)
        moved, least = traffic(plan, func)
        shared = shared_note(plan)
        rows.append((label, source, f"{len(plan.launches())} launch(es), {moved} B/point "
                                    f"moved, {least} B/point least"
                                    + (f"; {shared}" if shared else "")))
        fallback = global_variant(func, storage)
        if fallback is not None:  # more levels than shared memory holds
            moved, _ = traffic(fallback[0], func)
            rows.append((f"{label}, temporaries in global memory (deeper than fits_on_chip)",
                         fallback[1], f"{moved} B/point moved"))
    rows.append(("hand hdiff, fused (gpu-bench's; C order)", HAND_HDIFF,
                 "1 launch, 24 B/point"))
    rows.append(("hand tridiag, thread per column, cp/dp in global memory (gpu-bench's)",
                 HAND_TRIDIAG, "1 launch, 72 B/point"))
    for label, source, note in rows:
        print(label + (f": {note}" if note else ""))
        if opts.source:
            print(source[source.index("launch(es)") - 120:] if "launch(es)" in source
                  else source)
        for name, f in kernel_figures(source, opts.arch).items():
            print(f"  {name:56s} {f['registers']:4d} {f['spills']:5d} {f.get('mul64', 0):5d} "
                  f"{f.get('mulwide', 0):4d} {f.get('loads', 0):3d} {f.get('shared', 0):12d}")


if __name__ == "__main__":
    main()
