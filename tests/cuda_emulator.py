"""Runs the "cuda" backend's generated CUDA on the CPU, for tests on machines without a GPU.

``STENCILKIT_CUDA_EMULATOR=1`` (read by conftest.py) installs it: the CUDA source is compiled
by the host C++ compiler with a shim that defines CUDA's qualifiers, built-in variables and
atomics; each launch runs every thread of its grid one after the other (so atomics are
trivially indivisible), the last thread first (a launch whose threads depend on each other
then reads values from before the launch, as a GPU's would); a ``const T *__restrict__``
parameter reads a snapshot of its memory taken at launch (what a GPU's non-coherent
``ld.global.nc`` loads may return when the same memory is written through another
parameter; ``READ_ONLY_LOADS = "live"`` reads the memory as it is instead); CuPy is
replaced by NumPy (``asarray`` copies, as a transfer to the device does; each "device"
allocation is exact and ends at a guard page, so that a kernel reading past the end of an
array crashes the test loudly, as it kills the CUDA context on a GPU); pinned host memory is a
host page whose address the kernels store through (as with unified addressing), events
count what they are asked (``EVENT_CALLS``) and may be told to report unfinished launches
(``EVENTS_COMPLETE``), the current stream may be told it is capturing. Everything else is
the backend's own code: the launch plan, the grid sizes, the argument binding, the host
loops, the status word, the copies back. A launch's dynamic shared memory (``extern
__shared__ T sk_shared[]``, sized by CuPy's ``shared_mem=``) is one guarded allocation per
launch. Threads that run one after the other cannot show two threads of a block racing
on the same bytes, so the emulator holds the kernels to what keeps them race-free without
barriers (each thread keeps to its own slice): the memory is filled with 0xff bytes (NaNs)
before each thread, so that a thread reading what it did not write reads NaNs; a launch
in which two threads of a block wrote the same byte raises; a thread indexing past the
bytes the launcher passed dies at the guard page. NVRTC's contraction is modelled: a
kernel built with ``fast_math=True`` (NVRTC ``--fmad=true``) is compiled with ``-O2 -mfma
-ffp-contract=fast`` where the host has FMA, one built without it with
``-ffp-contract=off`` (``--fmad=false``). What it cannot show: timing, coalescing, real
concurrency, NVRTC/driver behaviour, libdevice's math functions (the host's libm computes
them here).
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import mmap
import re
import subprocess
import tempfile
import types
from pathlib import Path

import numpy as np

SHIM = """\
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>
struct sk_dim3 { unsigned x, y, z; };
static sk_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
static inline long long __double_as_longlong(double f) { long long i; memcpy(&i, &f, 8); return i; }
template <class T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <class T> static inline T atomicMin(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <class T> static inline T atomicMax(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <class T> static inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <class T> static inline T atomicCAS(T *p, T c, T v) { T o = *p; if (o == c) *p = v; return o; }
/* threads run one after the other, so no warp exchanges values: a warp of one lane (each
   thread adds its own private copy with an atomic) */
#define SK_WARP 1
template <class T> static inline T __shfl_down_sync(unsigned, T v, int) { return v; }
/* the block's dynamic shared memory (``extern __shared__``, rewritten by _library); which
   thread of the block wrote each byte; set when two threads of a block wrote the same byte */
static unsigned char *emu_shared;
static unsigned *emu_owner;
extern "C" { int emu_shared_conflict = 0; }
"""

#: a kernel's dynamic shared memory declaration, as codegen.cuda prints it
_EXTERN_SHARED = re.compile(r"extern __shared__ (\w+) (\w+)\[\];")

_CTYPES = {"b1": ctypes.c_bool, "i1": ctypes.c_int8, "u1": ctypes.c_uint8,
           "i2": ctypes.c_int16, "u2": ctypes.c_uint16, "i4": ctypes.c_int32,
           "u4": ctypes.c_uint32, "i8": ctypes.c_int64, "u8": ctypes.c_uint64,
           "f4": ctypes.c_float, "f8": ctypes.c_double}


class _Complex64(ctypes.Structure):
    _fields_ = [("re", ctypes.c_float), ("im", ctypes.c_float)]


class _Complex128(ctypes.Structure):
    _fields_ = [("re", ctypes.c_double), ("im", ctypes.c_double)]


# complex scalars travel by value as the prelude's structs (real, imaginary)
_CTYPES["c8"] = lambda z: _Complex64(z.real, z.imag)
_CTYPES["c16"] = lambda z: _Complex128(z.real, z.imag)
_built: dict[str, ctypes.CDLL] = {}
#: what install() replaced (the device's own ``CudaEntry.functions``, for tests of it)
REPLACED: dict[str, object] = {}
#: what a ``const T *__restrict__`` parameter reads: "snapshot" (its memory at launch, as a
#: non-coherent load may return) or "live" (the memory as it is, as a coherent load returns).
#: A GPU may do either when another parameter writes the same memory; tests that must hold
#: on a GPU run in both.
READ_ONLY_LOADS = "snapshot"
_dir = Path(tempfile.mkdtemp(prefix="stencilkit-cuda-emulator-"))
#: the dynamic shared memory a launch may ask for without opting in (every sm_30+ device)
SHARED_WITHOUT_OPT_IN = 48 * 1024


def _driver(launch, printer) -> str:
    params = [printer.param(p) for p in launch.params] + ["int *sk_status"]
    args = [p.name for p in launch.params] + ["sk_status"]
    # the driver's own names start with "emu_": the kernel's parameters (a host loop's
    # counter "k", say) must not be shadowed
    return "\n".join([
        f'extern "C" void emulate_{launch.name}({", ".join(params)}, unsigned emu_gx, '
        "unsigned emu_gy, unsigned emu_gz, unsigned emu_bx, unsigned emu_by, unsigned emu_bz, "
        "unsigned char *emu_shared_base, unsigned long emu_shared_bytes) {",
        "    gridDim = {emu_gx, emu_gy, emu_gz}; blockDim = {emu_bx, emu_by, emu_bz};",
        "    emu_shared = emu_shared_base;",
        "    unsigned *emu_owners = (unsigned *)calloc(emu_shared_bytes ? emu_shared_bytes : 1,"
        " sizeof(unsigned));",
        "    emu_owner = emu_owners;",
        # the last thread first: threads of a launch have no order, and one that reads what
        # a lower-numbered thread writes (a dependence the launch plan must not split into
        # threads) then reads the value from before the launch, as on a GPU
        "    for (unsigned emu_z = emu_gz; emu_z-- > 0;)",
        "    for (unsigned emu_y = emu_gy; emu_y-- > 0;)",
        "    for (unsigned emu_x = emu_gx; emu_x-- > 0;) {",
        "        blockIdx = {emu_x, emu_y, emu_z};",
        "        if (emu_shared_bytes) memset(emu_owner, 0, emu_shared_bytes * sizeof(unsigned));",
        "        for (unsigned emu_k = emu_bz; emu_k-- > 0;)",
        "        for (unsigned emu_j = emu_by; emu_j-- > 0;)",
        "        for (unsigned emu_i = emu_bx; emu_i-- > 0;) {",
        "            threadIdx = {emu_i, emu_j, emu_k};",
        # the thread's own view: what it did not write reads as NaN
        "            if (emu_shared_bytes) memset(emu_shared, 0xff, emu_shared_bytes);",
        f"            {launch.name}({', '.join(args)});",
        "            unsigned emu_me = 1 + emu_i + emu_bx * (emu_j + emu_by * emu_k);",
        "            for (unsigned long emu_b = 0; emu_b < emu_shared_bytes; ++emu_b) {",
        "                if (emu_shared[emu_b] == 0xff) continue;",
        "                if (emu_owner[emu_b] && emu_owner[emu_b] != emu_me)"
        " emu_shared_conflict = 1;",
        "                emu_owner[emu_b] = emu_me;",
        "            }",
        "        }",
        "    }",
        "    free(emu_owners);",
        "}"])


def host_has_fma() -> bool:
    try:
        return " fma " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


def contraction_flags(fast_math: bool) -> list[str]:
    """g++ flags that contract as NVRTC does with (``--fmad=true``) and without
    (``--fmad=false``) fast math."""
    if fast_math and host_has_fma():  # GCC forms FMAs from -O2 on
        return ["-O2", "-mfma", "-ffp-contract=fast"]
    return ["-ffp-contract=off"]


def _library(source: str, plan, fast_math: bool = False) -> ctypes.CDLL:
    from stencilkit.codegen.cuda import CudaPrinter

    printer = CudaPrinter()
    # each thread's view of the block's shared memory: the launch's allocation
    source = _EXTERN_SHARED.sub(r"\1 *\2 = (\1 *)emu_shared;", source)
    text = SHIM + source + "\n" + "\n".join(_driver(lc, printer) for lc in plan.launches())
    flags = contraction_flags(fast_math)
    key = hashlib.sha256((" ".join(flags) + text).encode()).hexdigest()[:24]
    if key not in _built:
        src, lib = _dir / f"{key}.cpp", _dir / f"{key}.so"
        src.write_text(text)
        done = subprocess.run(["g++", "-O1", *flags, "-shared", "-fPIC", "-w", "-o", str(lib),
                               str(src)], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"the emulator could not compile {src}:\n{done.stderr}")
        _built[key] = ctypes.CDLL(str(lib))
    return _built[key]


def _span(a: np.ndarray) -> tuple[int, int]:
    """The addresses [first, last) of the elements of ``a`` (not empty)."""
    lo = a.ctypes.data + sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    hi = a.ctypes.data + sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    return lo, hi + a.itemsize


def _snapshot(a: np.ndarray, keep: list) -> int:
    """The address to pass for ``a`` read through a ``const T *__restrict__`` parameter: a
    copy of its memory taken at launch, which is what a non-coherent ``ld.global.nc`` load may
    return on a GPU when the same memory is also written during the launch."""
    if a.size == 0:
        return a.ctypes.data
    lo, hi = _span(a)
    copy = device_empty(hi - lo, np.uint8)  # guarded as the memory it copies
    ctypes.memmove(copy.ctypes.data, lo, hi - lo)
    keep.append(copy)
    return copy.ctypes.data + (a.ctypes.data - lo)


def _functions(self) -> dict[str, object]:
    from stencilkit.ir import kernel as k

    lib = _library(self.source, self.plan, self.fast_math)
    out = {}
    for launch in self.plan.launches():
        fn = getattr(lib, f"emulate_{launch.name}")
        kinds = [("const" if p.has(k.ReadOnly) and p.has(k.Restrict) else None)
                 if p.pointer else _CTYPES[np.dtype(p.dtype).str[1:]] for p in launch.params]

        conflict = ctypes.c_int.in_dll(lib, "emu_shared_conflict")

        def call(grid, block, args, shared_mem=0, fn=fn, kinds=kinds, conflict=conflict):
            c_args, keep = [], []
            for kind, a in zip(kinds, args[:-1]):
                if kind is None:
                    c_args.append(ctypes.c_void_p(a.ctypes.data))
                elif kind == "const" and READ_ONLY_LOADS == "snapshot":
                    c_args.append(ctypes.c_void_p(_snapshot(a, keep)))
                elif kind == "const":
                    c_args.append(ctypes.c_void_p(a.ctypes.data))
                else:
                    c_args.append(kind(a.item()))
            c_args.append(ctypes.c_void_p(int(args[-1])))  # the status word's address
            # exactly the bytes the launcher asked for, before a guard page (as every
            # "device" allocation): a thread indexing past them dies loudly
            if shared_mem > SHARED_WITHOUT_OPT_IN:  # the driver refuses such a launch
                raise RuntimeError(f"a launch asked for {shared_mem} bytes of dynamic shared "
                                   "memory, more than 48 KiB without cudaFuncSetAttribute")
            shared = device_empty(shared_mem, np.uint8) if shared_mem else None
            fn(*c_args, *(ctypes.c_uint(v) for v in (*grid, *block)),
               ctypes.c_void_p(shared.ctypes.data if shared is not None else None),
               ctypes.c_ulong(shared_mem))
            if conflict.value:
                conflict.value = 0
                raise AssertionError("two threads of a block wrote the same bytes of its "
                                     "shared memory")
        out[launch.name] = call
    return out


def _cupy_fill_value(value: object) -> None:
    """CuPy's rule: ``fill`` (and so an assignment of anything but a device array) takes a
    scalar; a host array is refused, never copied implicitly."""
    if isinstance(value, np.ndarray) and not isinstance(value, DeviceArray) and value.ndim:
        raise ValueError("non-scalar numpy.ndarray cannot be used for fill")


class DeviceArray(np.ndarray):
    """The emulator's "device" array: host memory that says it is on a GPU. Assignments
    and ``fill`` take scalars and device arrays only, as CuPy's do; ``data.ptr`` is its
    address, as CuPy's ``MemoryPointer`` gives it. A read-only one stands for another
    library's device array (CuPy's are never read-only): it has no ``data.ptr``, only
    ``__cuda_array_interface__``."""

    @property
    def data(self):  # type: ignore[override]
        if not self.flags.writeable:
            return super().data
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def fill(self, value: object) -> None:
        _cupy_fill_value(value)
        super().fill(value)

    def __setitem__(self, key: object, value: object) -> None:
        _cupy_fill_value(value)
        super().__setitem__(key, value)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "strides": self.strides,
                "data": (self.ctypes.data, not self.flags.writeable), "version": 3}


class DLPackOnly:
    """A device array known only by DLPack (JAX's, say): CUDA memory by
    ``__dlpack_device__``, with no ``__cuda_array_interface__``; the fake CuPy's
    ``from_dlpack`` views its memory as a real one would."""

    def __init__(self, memory: DeviceArray) -> None:
        self.memory = memory

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, stream=None):
        raise AssertionError("the emulator has no DLPack capsules: from_dlpack views memory")


_PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)


def device_empty(shape: object, dtype: object = float) -> DeviceArray:
    """A "device allocation" of exactly its bytes, ending where a page that may not be
    touched begins: a kernel that reads or writes past the end of a device array (any
    element of an empty one) dies with SIGSEGV instead of reading a neighbour's memory
    unseen. (On a GPU the same access is cudaErrorIllegalAddress, which poisons the
    process's CUDA context.) C-contiguous, as CuPy's allocations are."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)  # type: ignore
    nbytes = int(np.prod(shape)) * dtype.itemsize
    pages = -(-nbytes // _PAGE)
    memory = mmap.mmap(-1, (pages + 1) * _PAGE)
    raw = np.frombuffer(memory, np.uint8)  # keeps the mapping alive as long as the array
    guard = raw.ctypes.data + pages * _PAGE
    if _libc.mprotect(ctypes.c_void_p(guard), ctypes.c_size_t(_PAGE), 0) != 0:  # PROT_NONE
        raise OSError(ctypes.get_errno(), "mprotect of the emulator's guard page failed")
    start = pages * _PAGE - nbytes
    return raw[start:start + nbytes].view(dtype).reshape(shape).view(DeviceArray)


def _device_copy(a: object) -> DeviceArray:
    host = np.asarray(a)
    out = device_empty(host.shape, host.dtype)
    np.copyto(out.view(np.ndarray), host)
    return out


def _device_zeros(shape: object, dtype: object = float) -> DeviceArray:
    out = device_empty(shape, dtype)
    out.view(np.ndarray)[...] = 0
    return out


class PinnedMemory(mmap.mmap):
    """``cupy.cuda.alloc_pinned_memory``'s pointer: host memory a kernel may store into
    (here the kernels run on the host anyway) with its address as ``ptr``; a buffer, so that
    ``np.frombuffer`` views it."""

    @property
    def ptr(self) -> int:
        view = ctypes.c_char.from_buffer(self)
        try:
            return ctypes.addressof(view)
        finally:
            del view  # an exported buffer would keep the mapping from closing


def alloc_pinned_memory(size: int) -> PinnedMemory:
    return PinnedMemory(-1, max(int(size), 1))


#: whether an event recorded after an emulated launch is complete when first queried: the
#: launches ran at once here, but on a GPU a query usually finds them still running. False:
#: ``done`` stays False until ``synchronize`` (the wait path, for tests)
EVENTS_COMPLETE = True
#: what the events were asked, for tests: records, queries (``done``), waits
EVENT_CALLS: dict[str, int] = {"record": 0, "query": 0, "synchronize": 0}


class Event:
    """``cupy.cuda.Event``: ``record`` on a stream, ``done`` (a query, no wait) and
    ``synchronize`` (a wait for what was recorded), each counted in ``EVENT_CALLS``."""

    def __init__(self, block: bool = False, disable_timing: bool = False,
                 interprocess: bool = False) -> None:
        self.recorded = self.waited = False

    def record(self, stream: object = None) -> None:
        EVENT_CALLS["record"] += 1
        self.recorded, self.waited = True, False

    @property
    def done(self) -> bool:
        EVENT_CALLS["query"] += 1
        return not self.recorded or EVENTS_COMPLETE or self.waited

    def synchronize(self) -> None:
        EVENT_CALLS["synchronize"] += 1
        self.waited = True


class Stream:
    """CuPy's current stream: a wait waits for nothing (the launches ran at once); a test
    sets ``capturing`` to stand for a CUDA graph capture in progress."""

    def __init__(self) -> None:
        self.capturing = False

    def is_capturing(self) -> bool:
        return self.capturing

    def synchronize(self) -> None:
        pass


def _fake_cupy() -> types.ModuleType:
    device = types.SimpleNamespace(compute_capability="90")
    stream = Stream()
    fake = types.ModuleType("cupy")
    fake.__dict__.update(
        ndarray=DeviceArray,
        # a "transfer": never the caller's memory
        asarray=_device_copy,
        asnumpy=lambda a: np.array(a).view(np.ndarray),
        zeros=_device_zeros,
        empty=device_empty,
        from_dlpack=lambda a: a.memory,  # the same memory (a DLPackOnly's)
        int32=np.int32,
        cuda=types.SimpleNamespace(Device=lambda: device, Event=Event,
                                   alloc_pinned_memory=alloc_pinned_memory,
                                   get_current_stream=lambda: stream),
    )
    return fake


def install(monkeypatch=None) -> None:
    """Make "cuda" available here, running on the emulator (tests only): for the whole
    process, or undone by ``monkeypatch`` (a pytest fixture) after one test."""
    from stencilkit import registry, storage
    from stencilkit.runtime import cuda as runtime

    setattr_ = monkeypatch.setattr if monkeypatch is not None else setattr
    if runtime.CudaEntry.functions is not _functions:
        REPLACED["functions"] = runtime.CudaEntry.functions
    fake = _fake_cupy()  # not in sys.modules: GT4Py, for one, looks for the real CuPy
    setattr_(runtime, "_cupy", lambda: fake)
    setattr_(storage, "array_module", lambda backend: fake)
    setattr_(runtime.CudaEntry, "functions", _functions)
    available = dataclasses.replace(registry.REGISTRY["cuda"], probe=lambda: None)
    if monkeypatch is not None:
        monkeypatch.setitem(registry.REGISTRY, "cuda", available)
    else:
        registry.REGISTRY["cuda"] = available
