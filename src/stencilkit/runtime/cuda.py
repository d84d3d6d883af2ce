"""Running a CUDA launch plan through CuPy.

``CudaEntry`` is called like the C backend's entry points (the same arguments, in the same
order, the same returned status), so the shared launchers drive it: ``PointCall`` checks
(``CudaPointCall``), ``CompiledComputationCall``, the ParLoop block runner. A call

1. puts every array on the device: CuPy arrays, and arrays with
   ``__cuda_array_interface__``/``__dlpack__``, are used in place; NumPy arrays are copied
   to the device, and the ones the kernel may write are copied back after the run;
2. looks up the plan bound to the arguments' signature (shapes, strides, the scalars the
   launch bounds read: ``runtime.cuda_bound``). The first call with a signature binds it:
   chooses the variant (``runtime.cuda_variants``), binds the kernel's parameters by the
   properties of their symbols (``bind``), walks the plan's host loops and sizes each
   launch's grid in Python (``ir.host_eval``), and keeps the launches with their argument
   tuples. Every later call swaps in its pointers and free scalars and launches: the cost
   of a bare launch per kernel, on the caller's current CuPy stream;
3. returns the status (0, or a ``STATUS_*`` code) when NumPy arrays were copied back (that
   copy waits for the kernels anyway). When every array stayed on the device nothing waits:
   the call returns 0, and the entry's status word is read by the next call of the same
   entry or by ``sk.synchronize()``, which raise its error then (docs/site/contract.md section 9).

The status word is one device word per entry, allocated with its first bound plan: kernels
store into it only on an error, so it stays 0 and is reset only after an error was read.
A call therefore allocates nothing (a CUDA graph capture may record it), and inside a
capture it reads nothing either: the word of a captured call is read by every later
``sk.synchronize()`` (each replay may write it).

The module is compiled (NVRTC, cached on disk per source and compute capability) and loaded
on the first call, so building an entry needs no device: ``generate(backend="cuda")`` works
anywhere. Only the launches and the copies need a GPU; the rest is tested without one
(tests/test_cuda_runtime.py, tests/test_cuda_host.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import config
from ..errors import StencilError
from ..ir import kernel as k
from ..ir.host_eval import (
    evaluate,  # noqa: F401 (re-exported: tests)
    extents,
)
from ..ir.plan import Launch, LaunchPlan, Variant
from . import cuda_status
from .cuda_bound import BOUND_LIMIT, BoundPlan, host_read_symbols, positions_of, signature
from .cuda_status import CAPTURED, PENDING, StatusWord, capturing, current_stream
from .cuda_variants import Variants, choose, shared_block
from .launch import PointCall, StandardArrays, status_error

#: threads per block by the number of grid dimensions; x (the unit-stride axis) widest, a
#: warp or more along it so that a warp's loads coalesce; every block with grid dimensions is
#: whole warps (the reductions shuffle across all 32 lanes)
BLOCKS = {0: (1, 1, 1), 1: (256, 1, 1), 2: (32, 8, 1), 3: (32, 4, 2)}
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # beyond these, the grid-stride loops take over


def _cupy():
    import cupy  # noqa: PLC0415 (optional dependency, imported on use)

    return cupy


# the registries of pending and captured status words (runtime.cuda_status), by their
# former names: tests and the ParLoop runner clear and test them
_PENDING = PENDING
_CAPTURED = CAPTURED


def synchronize() -> None:
    """``sk.synchronize()``: wait for every stencil call on the GPU, then raise the first
    run-time error any of them reported (the ``sk.ArgumentError`` naming its stencil), as
    the call itself would have raised it had it waited."""
    if PENDING or CAPTURED:
        cuda_status.synchronize(_cupy(), lambda entry, code: entry.error_for(code))


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
    if launch.shared is not None:  # as many threads as their shared memory fits
        per_thread = launch.shared.bytes_per_thread(int(evaluate(launch.shared.per_thread, env)))
        fitting = shared_block(block, per_thread)
        if fitting is None:
            raise RuntimeError(f"{launch.name}: {per_thread} bytes of shared memory per thread "
                               "do not fit a warp's block (a stencilkit bug: the variant "
                               "should have kept them in global memory)")
        block = fitting
    grid = [1, 1, 1]
    for i, n in enumerate(extents(launch, env)):
        if n <= 0:
            return None
        grid[i] = -(-n // block[i])
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
        self.owner = self  # whose status word this entry's launches write
        # a point kernel's standard_indexing arrays, checked before any launch as the C
        # entry point checks them (every other argument check is the launcher's, shared
        # with the CPU backends); none to check: nothing to do per call
        self.standard = standard if standard is not None and standard.positions else None
        self.source = source
        self.names = tuple(names)
        self.writable = writable  # arguments the kernel may write (copied back from device)
        self.name = name
        # the stencil's option, read now (within its build): the PTX is compiled later
        self.fast_math = config.fast_math()
        self._functions: dict[str, object] | None = None
        self._arch: str | None = None
        self._module: object = None
        # the plans bound per signature (``runtime.cuda_bound``), least recently bound first
        self._bound: OrderedDict[tuple, BoundPlan] = OrderedDict()
        # the positions of the scalar arguments the host reads (part of the signature):
        # known once the first plan is bound
        self._keyed: tuple[int, ...] = ()
        self._status: StatusWord | None = None  # made with the first bound plan
        # what a status this entry's kernels report is raised as: the launcher that calls it
        # sets its own (the stencil's name and line); this one names the entry only
        self.error_for: Callable[[int], StencilError] = \
            lambda code: status_error(code, name, None)

    def raise_pending(self) -> None:
        """Take the status of this entry's earlier calls that nobody read (waiting on their
        event only where they have not finished); raise its error."""
        word = PENDING.get(self)
        if word is None:
            return
        cp = _cupy()
        if capturing(cp):
            return  # inside a CUDA graph capture nothing may wait: sk.synchronize() reads it
        del PENDING[self]
        code = word.take()
        if code:
            raise self.error_for(code)

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

    def status_word(self, cp) -> StatusWord:
        """This entry's status word (made once: kernels write it only on an error, and a
        read that finds one resets it)."""
        if self._status is None:
            self._status = StatusWord(cp)
        return self._status

    def to_device(self, args: Sequence[object]) -> tuple[list[object], list[tuple]]:
        cp = _cupy()
        array = cp.ndarray
        dev: list[object] = []
        back: list[tuple[np.ndarray, object]] = []
        for n, a in zip(self.names, args):
            if isinstance(a, array):
                dev.append(a)
            elif on_device(a):
                dev.append(cp.asarray(a))  # no copy: a view of the same memory
            elif isinstance(a, np.ndarray):
                d = to_device(cp, a)  # a copy on the device (documented)
                if n in self.writable:
                    back.append((a, d))
                dev.append(d)
            else:
                dev.append(a)
        return dev, back

    def __call__(self, *args: object) -> int:
        if self in _PENDING:
            self.raise_pending()
        if self.standard is not None:
            self.standard.check(args)
        dev, back = self.to_device(args)
        cp = _cupy()
        self.bound_for(cp, dev).run(dev)
        return self.finish(cp, back)

    def bound_for(self, cp, dev: Sequence[object]) -> BoundPlan:
        """The plan bound to the signature of the device arguments ``dev`` (bound now if
        none is yet)."""
        bound = self._bound.get(signature(dev, self._keyed, cp.ndarray))
        return bound if bound is not None else self.bind_plan(cp, dev)

    def keyed_positions(self) -> tuple[int, ...]:
        """The positions of the scalar arguments whose values the launch bounds read (part
        of a bound plan's signature), as far as the plans bound so far know."""
        return self._keyed

    def bind_plan(self, cp, dev: Sequence[object]) -> BoundPlan:
        """The plan of the variant for ``dev`` bound to their signature (kept)."""
        entry = self.variant(dev)
        params = entry.plan.kernel.params
        positions, free, keyed = positions_of(params, self.names,
                                              host_read_symbols(entry.plan.steps))
        if not set(keyed) <= set(self._keyed):  # a scalar the bounds read: now in the key
            self._keyed = tuple(sorted({*self._keyed, *keyed}))
            self._bound.clear()
        bound = BoundPlan.build(entry.plan, entry.functions(), bind(params, self.names, dev),
                                positions, free, self.status_word(cp).argument,
                                lambda n, dtype: cp.zeros(n, dtype=dtype), launch_config)
        self._bound[signature(dev, self._keyed, cp.ndarray)] = bound
        if len(self._bound) > BOUND_LIMIT:
            self._bound.popitem(last=False)
        return bound

    def finish(self, cp, back: list[tuple]) -> int:
        """After the launches: nothing to wait for when every array is on the device (the
        status word is taken later); else the host arrays in ``back`` copied back and the
        status taken and returned."""
        word = self.status_word(cp)
        if not back:
            stream = current_stream(cp)
            if stream is not None and stream.is_capturing():
                PENDING[self] = CAPTURED[self] = word  # no event inside a capture
                return 0
            word.launched()
            PENDING[self] = word
            return 0
        word.launched()
        for host, d in back:
            host[...] = cp.asnumpy(d)
        return word.take()

    def variant(self, dev: Sequence[object]) -> CudaEntry:
        """The entry whose kernels are specialized for the layout and sizes of the device
        arguments ``dev`` (``runtime.cuda_variants``): this one, or one built now and kept."""
        if self.variants is None:
            return self
        wanted = self.variants.wanted(choose(self.names, dev, self.variants.out), self.names,
                                      dev)
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
