"""Running a CUDA launch plan through CuPy.

``CudaEntry`` is called like the C backend's entry points (the same arguments, in the same
order, the same returned status), so the shared launchers drive it: ``PointCall`` checks
(``CudaPointCall``), ``CompiledComputationCall``, the ParLoop block runner. Per call it

1. puts every array on the device: CuPy arrays, and arrays with
   ``__cuda_array_interface__``/``__dlpack__``, are used in place; NumPy arrays are copied
   to the device, and the ones the kernel may write are copied back after the run;
2. binds the kernel's parameters (pointers, shapes, strides in elements, scalars of their
   declared types) by the properties of their symbols (``bind``);
3. walks the plan: host loops in Python, each launch with a grid that covers its dimensions
   (``launch_config``: ``start``/``stop`` evaluated on the host by ``ir.host_eval``), the device
   status word last;
4. reads the status word back and returns it (0, or a ``STATUS_*`` code) when NumPy arrays
   were copied back (that copy waits for the kernels anyway). When every array stayed on the
   device, nothing waits: the call returns 0 and its status word is read by the next call
   of the same entry or by ``sk.synchronize()``, which raise its error then (contract.md
   section 9). Launches go to the caller's current CuPy stream.

The module is compiled (NVRTC, cached on disk per source and compute capability) and loaded
on the first call, so building an entry needs no device: ``generate(backend="cuda")`` works
anywhere. Only steps 1, 3 (the launches) and 4 need a GPU; the rest is unit-tested without
one (tests/test_cuda_runtime.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import config
from ..errors import StencilError
from ..ir import kernel as k
from ..ir.host_eval import (
    evaluate,  # noqa: F401 (re-exported: tests)
    extents,
    host_launches,
)
from ..ir.plan import Launch, LaunchPlan, Step, Variant
from .cuda_variants import Variants, choose
from .launch import PointCall, StandardArrays, status_error

#: threads per block by the number of grid dimensions; x (the unit-stride axis) widest, a
#: warp or more along it so that a warp's loads coalesce; every block with grid dimensions is
#: whole warps (the reductions shuffle across all 32 lanes)
BLOCKS = {0: (1, 1, 1), 1: (256, 1, 1), 2: (32, 8, 1), 3: (32, 4, 2)}
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # beyond these, the grid-stride loops take over


def _cupy():
    import cupy  # noqa: PLC0415 (optional dependency, imported on use)

    return cupy


#: the status words of launches nobody has waited for: (entry, device word), in call order
_PENDING: list[tuple[CudaEntry, object]] = []


def synchronize() -> None:
    """``sk.synchronize()``: wait for every stencil call on the GPU, then raise the first
    run-time error any of them reported (the ``sk.ArgumentError`` naming its stencil), as
    the call itself would have raised it had it waited."""
    if not _PENDING:
        return
    cp = _cupy()
    stream = _current_stream(cp)
    if stream is not None:
        stream.synchronize()
    pending = list(_PENDING)
    _PENDING.clear()
    first = _first_error(cp, pending)
    if first is not None:
        raise first


def _current_stream(cp) -> object | None:
    """CuPy's current stream (None where the module has no streams: the tests' stand-in)."""
    current = getattr(getattr(cp, "cuda", None), "get_current_stream", None)
    return current() if current is not None else None


def _first_error(cp, pending: list[tuple[CudaEntry, object]]) -> StencilError | None:
    """Every status word of ``pending`` read (each read waits for its launch); the error of
    the first that reported one."""
    first: StencilError | None = None
    for entry, word in pending:
        code = int(cp.asnumpy(word)[0])
        if code and first is None:
            first = entry.error_for(code)
    return first


_PROBE_SOURCE = 'extern "C" __global__ void sk_probe(int *x) { x[threadIdx.x] += 1; }\n'


def probe_kernel() -> str | None:
    """None when a one-line kernel compiles (NVRTC, for the current device's architecture),
    loads (the driver takes the PTX: a driver older than NVRTC refuses it) and runs, as the
    backend's own kernels do (``CudaEntry.functions``); else why not."""
    from ..build.cuda import compile_ptx
    from ..errors import BackendError

    try:
        cp = _cupy()
        arch = "sm_" + cp.cuda.Device().compute_capability
        ptx = compile_ptx(_PROBE_SOURCE, arch, "probe")
        module = cp.cuda.function.Module()
        module.load(ptx.encode())
        x = cp.zeros(4, dtype=np.int32)
        module.get_function("sk_probe")((1,), (4,), (x,))
        got = cp.asnumpy(x).tolist()
    except BackendError as exc:
        return f"NVRTC cannot compile a one-line kernel ({exc.bare_message.splitlines()[0]})"
    except Exception as exc:  # CuPy's CUDADriverError/CUDARuntimeError: driver, device
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"a one-line kernel does not run on the CUDA device ({type(exc).__name__}: {first})"
    return None if got == [1, 1, 1, 1] else "a one-line kernel gave a wrong result on CUDA"


# ---------------------------------------------------------------- grids


def launch_config(launch: Launch, env: Mapping[str, object], covering: bool = False
                  ) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """(grid, block) covering the launch's dimensions, or None when one is empty. Beyond
    ``GRID_LIMITS`` the kernels' grid-stride loops cover the rest, except in a ``covering``
    plan, whose threads compute one point each (its variant was chosen so that this never
    happens: a RuntimeError if it does)."""
    block = BLOCKS[len(launch.dims)]
    grid = [1, 1, 1]
    for i, n in enumerate(extents(launch, env)):
        if n <= 0:
            return None
        grid[i] = math.ceil(n / block[i])
        if grid[i] > GRID_LIMITS[i]:
            if covering:
                raise RuntimeError(f"{launch.name}: {n} points along grid axis {i} need "
                                   f"{grid[i]} blocks, more than a grid has (a stencilkit bug)")
            grid[i] = GRID_LIMITS[i]
    return (grid[0], grid[1], grid[2]), block


# ---------------------------------------------------------------- parameters


def bind(params: Sequence[k.Symbol], names: Sequence[k.ArgumentKey], args: Sequence[object]
         ) -> dict[str, object]:
    """Each parameter's value from the Python-level arguments ``args`` (named ``names``):
    arrays for base pointers, their shapes and strides (in elements), scalars."""
    by_name = dict(zip(names, args))
    env: dict[str, object] = {}
    for p in params:
        for prop in p.properties:
            match prop:
                case k.BasePointer(buffer=b):
                    env[p.name] = by_name[b]
                case k.ShapeOf(buffer=b, dim=dim):
                    env[p.name] = int(by_name[b].shape[dim])  # type: ignore[attr-defined]
                case k.StrideOf(buffer=b, dim=dim):
                    a = by_name[b]
                    env[p.name] = int(a.strides[dim]) // a.itemsize  # type: ignore[attr-defined]
                case k.ScalarArgument(key=n):
                    env[p.name] = by_name[n]
    return env


def kernel_arguments(launch: Launch, env: Mapping[str, object], status: object) -> tuple:
    """The arguments of one launch: device arrays for pointers, NumPy scalars of each
    parameter's type (CuPy passes them by value), the status word last."""
    out: list[object] = []
    for p in launch.params:
        v = env[p.name]
        out.append(v if p.pointer else np.dtype(p.dtype).type(v))
    out.append(status)
    return tuple(out)


def check_dtype(name: str, array: object, dtype: np.dtype) -> None:
    if np.dtype(array.dtype) != dtype:  # type: ignore[attr-defined]
        raise TypeError(f"argument '{name}' must be an array of {dtype}, not {array.dtype}")


def device_layout(a: np.ndarray) -> tuple[int, ...]:
    """The axes of ``a`` outermost first, in the order its strides nest (broadcast axes
    outermost): a contiguous copy made in this order keeps every axis that had unit stride
    unit-stride, which the kernel may have been specialized for."""
    return tuple(sorted(range(a.ndim), key=lambda d: (a.strides[d] == 0, abs(a.strides[d])),
                        reverse=True))


def to_device(cp, a: np.ndarray):
    """A device copy of a host array with the same stride order (a plain ``cp.asarray``
    of a non-contiguous array may choose another layout)."""
    order = device_layout(a)
    inverse = tuple(int(i) for i in np.argsort(order))
    return cp.asarray(np.ascontiguousarray(a.transpose(order))).transpose(inverse)


def on_device(a: object) -> bool:
    return hasattr(a, "__cuda_array_interface__") or (
        hasattr(a, "__dlpack_device__") and a.__dlpack_device__()[0] == 2)  # kDLCUDA


# ---------------------------------------------------------------- the entry


class CudaEntry:
    """A compiled-on-first-use CUDA launch plan, called like a C entry point."""

    def __init__(self, plan: LaunchPlan, source: str, names: Sequence[k.ArgumentKey],
                 writable: frozenset[str], name: str,
                 standard: StandardArrays | None = None,
                 variants: Variants | None = None) -> None:
        self.plan = plan
        # the specializations by layout and index width (a point kernel's): this entry's
        # plan is the one for ``variants.own``; the others are built on first use
        self.variants = variants
        self._variants: dict[Variant, CudaEntry] = {}
        self.owner = self  # whose pending status words this entry's calls leave
        # a point kernel's standard_indexing arrays, checked before any launch as the C
        # entry point checks them (every other argument check is the launcher's, shared
        # with the CPU backends)
        self.standard = standard
        self.source = source
        self.names = tuple(names)
        self.writable = writable  # arguments the kernel may write (copied back from device)
        self.name = name
        # the stencil's option, read now (within its build): the PTX is compiled later
        self.fast_math = config.fast_math()
        self._functions: dict[str, object] | None = None
        self._arch: str | None = None
        self._module: object = None
        # what a status this entry's kernels report is raised as: the launcher that calls it
        # sets its own (the stencil's name and line); this one names the entry only
        self.error_for: Callable[[int], StencilError] = \
            lambda code: status_error(code, name, None)

    def raise_pending(self) -> None:
        """Read the status words of this entry's earlier calls that nobody waited for;
        raise the first error among them."""
        if not any(e is self for e, _ in _PENDING):
            return
        cp = _cupy()
        stream = _current_stream(cp)
        if stream is not None and getattr(stream, "is_capturing", lambda: False)():
            return  # inside a CUDA graph capture nothing may wait: sk.synchronize() reads it
        mine = [(e, w) for e, w in _PENDING if e is self]
        _PENDING[:] = [(e, w) for e, w in _PENDING if e is not self]
        error = _first_error(cp, mine)
        if error is not None:
            raise error

    def functions(self) -> dict[str, object]:
        """The launches' kernels, compiled for the current device and loaded (once)."""
        if self._functions is None:
            cp = _cupy()
            from ..build.cuda import compile_ptx

            self._arch = "sm_" + cp.cuda.Device().compute_capability
            ptx = compile_ptx(self.source, self._arch, self.name, self.fast_math)
            module = cp.cuda.function.Module()
            module.load(ptx.encode())  # cuModuleLoadData: the driver JIT-compiles the PTX
            self._module = module  # the functions live as long as their module
            self._functions = {lc.name: module.get_function(lc.name)
                               for lc in self.plan.launches()}
        return self._functions

    def to_device(self, args: Sequence[object]) -> tuple[list[object], list[tuple]]:
        cp = _cupy()
        dev: list[object] = []
        back: list[tuple[np.ndarray, object]] = []
        for n, a in zip(self.names, args):
            if on_device(a):
                dev.append(a if isinstance(a, cp.ndarray) else cp.asarray(a))  # no copy
            elif isinstance(a, np.ndarray):
                d = to_device(cp, a)  # a copy on the device (documented)
                if n in self.writable:
                    back.append((a, d))
                dev.append(d)
            else:
                dev.append(a)
        return dev, back

    def __call__(self, *args: object) -> int:
        self.raise_pending()
        if self.standard is not None:
            self.standard.check(args)
        dev, back = self.to_device(args)
        entry = self.variant(dev)
        functions = entry.functions()
        env = bind(entry.plan.kernel.params, self.names, dev)
        return entry.run_plan(env, functions, back)

    def variant(self, dev: Sequence[object]) -> CudaEntry:
        """The entry whose kernels are specialized for the layout and sizes of the device
        arguments ``dev`` (``runtime.cuda_variants``): this one, or one built now and kept."""
        if self.variants is None:
            return self
        wanted = choose(self.names, dev, self.variants.out)
        if wanted == self.variants.own:
            return self
        entry = self._variants.get(wanted)
        if entry is None:
            plan, source = self.variants.build(wanted)
            entry = CudaEntry(plan, source, self.names, self.writable, self.name)
            entry.fast_math = self.fast_math  # the stencil's option, not the caller's default
            entry.error_for = lambda code: self.error_for(code)
            entry.owner = self
            self._variants[wanted] = entry
        return entry

    def run_plan(self, env: dict[str, object], functions: dict[str, object],
                 back: list[tuple]) -> int:
        """Scratch arrays and the status word allocated, the plan run, the host arrays in
        ``back`` copied back; the status returned."""
        cp = _cupy()
        for s in self.plan.scratch:
            env[s.symbol.name] = cp.zeros(s.size, dtype=s.symbol.dtype)
        status = cp.zeros(1, dtype=cp.int32)
        self.run(self.plan.steps, env, functions, status)
        if not back:  # everything on the device: no wait now (see the module docstring)
            _PENDING.append((self.owner, status))
            return 0
        for host, d in back:
            host[...] = cp.asnumpy(d)
        return int(cp.asnumpy(status)[0])

    def run(self, steps: tuple[Step, ...], env: dict[str, object],
            functions: dict[str, object], status: object) -> None:
        for launch in host_launches(steps, env):
            config = launch_config(launch, env, self.plan.covering)
            if config is not None:
                grid, block = config
                functions[launch.name](grid, block,  # type: ignore[operator]
                                       kernel_arguments(launch, env, status))


class CudaParLoopEntry(CudaEntry):
    """A ParLoop's loop: called as ``entry(blocks, array, ...)`` (the block runner's
    convention); the arrays bind to the pointer parameters in order, ``nblocks`` is the
    number of rows of ``blocks``."""

    def __call__(self, *args: object) -> int:
        self.raise_pending()
        cp = _cupy()
        functions = self.functions()
        blocks, arrays = args[0], args[1:]
        pointers = [p for p in self.plan.kernel.params if p.pointer]
        dev_blocks = cp.asarray(blocks)
        env: dict[str, object] = {}
        back = []
        for p, a in zip(pointers[1:], arrays):
            if on_device(a):  # a Dat on the GPU: in place
                env[p.name] = a if isinstance(a, cp.ndarray) else cp.asarray(a)
            elif isinstance(a, np.ndarray):  # host data and maps: copied (documented)
                d = to_device(cp, a)
                if not p.has(k.ReadOnly):
                    back.append((a, d))
                env[p.name] = d
            else:
                env[p.name] = a
        env[pointers[0].name] = dev_blocks
        for p in self.plan.kernel.params:
            if not p.pointer:
                env[p.name] = len(blocks)  # type: ignore[arg-type]
        return self.run_plan(env, functions, back)


class CudaPointCall(PointCall):
    """One point-kernel specialization on the GPU: ``out``, writability, overlap and shapes
    checked in Python (the CUDA entry checks nothing itself)."""

    __slots__ = ()

    def __init__(self, entry, *rest, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(entry, *rest, **kw)
        if isinstance(entry, CudaEntry):  # an error found later names this stencil's line
            entry.error_for = lambda code: status_error(code, self.name, self.loc)

    def __call__(self, args: tuple, out: np.ndarray | None) -> np.ndarray:
        args, out, fill = self._checked_in_python(args, out)
        status = self.entry(*args, out, fill, self.cval)
        if status:
            raise status_error(status, self.name, self.loc)
        return out
