"""Compiled point-kernel calls: the per-signature objects on the hot call path.

A call is: allocate ``out`` (or take the caller's), then one foreign call (C) or one function
call (NumPy). Everything that can be decided once per signature — output dtype, the converted
``cval``, the entry point — is decided when the object is built. The C entry point re-checks
shapes, strides, writability and overlap itself, so the Python side of a C call does nothing
else; the rare outcomes (an error, an overlapping ``out``) take a slow path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..codegen.numba import PARALLEL_MIN_WORK
from ..errors import ArgumentError, Location
from ..ir import abi
from ..ir.kernel import STATUS_INDEX, STATUS_MEMORY, STATUS_OFFSET, STATUS_RANGE_STEP
from .numpy_support import RangeStepError

# the kernel's codes are the kernel IR's; 3 is the C entry point's own (out overlaps an input)
STATUS_NEIGHBORHOOD = STATUS_OFFSET
STATUS_OVERLAP = abi.STATUS_OVERLAP.code


class PointCall:
    """Runs one specialization of a point kernel through a C entry point.

    ``launch`` is the entry's calling convention (``ir.abi``): the caller's arguments, then
    the output, the border-fill flag and cval. Which of the caller's arguments are arrays
    (copied when they overlap ``out``) and which are read relatively (they must cover the
    first) is read from it."""

    __slots__ = ("entry", "exact", "out_dtype", "cval", "has_cval", "name", "loc", "launch",
                 "array_positions", "relative_positions", "source")

    def __init__(self, entry: Callable[..., int], out_dtype: np.dtype, cval: object,
                 has_cval: bool, name: str, loc: Location | None, *,
                 launch: abi.LaunchDescription, source: str) -> None:
        self.entry = entry
        # ``call_exact`` of a C entry's module (``codegen.c.exact_entry``), else None
        self.exact = getattr(getattr(entry, "__self__", None), "call_exact", None)
        self.out_dtype = out_dtype
        self.cval = cval
        self.has_cval = has_cval
        self.name = name
        self.loc = loc
        self.launch = launch
        self.array_positions, self.relative_positions = point_positions(launch)
        self.source = source

    def __call__(self, args: tuple, out: np.ndarray | None) -> np.ndarray:
        given = out
        try:
            if out is None:
                out = np.empty(args[0].shape, self.out_dtype)
                status = self.entry(*args, out, True, self.cval)
            else:
                status = self.entry(*args, out, self.has_cval, self.cval)
        except (ValueError, BufferError, TypeError) as exc:
            if _misaligned(args, given):
                return self._aligned_call(args, given)
            raise self._argument_error(args, out, exc) from None
        if status:
            return self._after(status, args, out)
        return out

    def _aligned_call(self, args: tuple, out: np.ndarray | None) -> np.ndarray:
        """Arrays whose address or strides are not multiples of the item size (the generated
        code indexes in elements): run on aligned copies, then copy the result back."""
        args = tuple(np.array(a) if isinstance(a, np.ndarray) and _misaligned((a,), None)
                     else a for a in args)
        if out is None or not _misaligned((), out):
            return self(args, out)
        if not out.flags.writeable:
            raise ArgumentError("'out' is read-only", stencil=self.name, loc=self.loc,
                                hint="pass a writable array as out=")
        aligned = np.array(out)  # keeps the border when no cval was given
        self(args, aligned)
        out[...] = aligned
        return out

    def _after(self, status: int, args: tuple, out: np.ndarray) -> np.ndarray:
        if status == STATUS_OVERLAP:
            copied = unaliased(args, out, self.array_positions)
            if copied is args:  # the extents met although NumPy sees no sharing (or through
                # an argument the kernel never reads, which the entry checks too): copy all
                copied = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
            status = self.entry(*copied, out, self.has_cval, self.cval)
            if not status:
                return out
        raise status_error(status, self.name, self.loc)

    def _argument_error(self, args: tuple, out: np.ndarray | None, exc: Exception) -> Exception:
        if out is not None and not out.flags.writeable:
            return ArgumentError("'out' is read-only", stencil=self.name, loc=self.loc,
                                 hint="pass a writable array as out=")
        try:
            check_shapes(args, out, self.relative_positions, self.name, self.loc)
        except ArgumentError as detailed:
            return detailed
        return ArgumentError(str(exc), stencil=self.name, loc=self.loc,
                             hint="check the arrays' shapes, dtypes and strides")

    def _checked_in_python(self, args: tuple, out: np.ndarray | None
                           ) -> tuple[tuple, np.ndarray, bool]:
        """The checks a C entry point makes itself, for entry points that make none:
        allocates ``out`` or checks it (writable, no overlap with the inputs), checks the
        shapes; returns the arguments to pass and whether to fill the border."""
        # A Python int beyond int64 is a uint64 scalar (its specialization says so); NumPy
        # would refuse it next to an int64 array (NEP 50).
        args = tuple(np.uint64(a) if type(a) is int and a >= 2**63 else a for a in args)
        if out is None:
            out, fill = np.empty(args[0].shape, self.out_dtype), True
        else:
            if not out.flags.writeable:
                raise ArgumentError("'out' is read-only", stencil=self.name, loc=self.loc,
                                    hint="pass a writable array as out=")
            args, fill = unaliased(args, out, self.array_positions), self.has_cval
        check_shapes(args, out, self.relative_positions, self.name, self.loc)
        return args, out, fill


class NumpyPointCall(PointCall):
    """Runs one specialization through generated NumPy code (checks done in Python)."""

    __slots__ = ()

    def __call__(self, args: tuple, out: np.ndarray | None) -> np.ndarray:
        args, out, fill = self._checked_in_python(args, out)
        try:
            self.entry(*args, out, fill, self.cval)
        except IndexError as exc:
            status = STATUS_NEIGHBORHOOD if "relative" in str(exc) else STATUS_INDEX
            raise status_error(status, self.name, self.loc) from None
        except RangeStepError:
            raise status_error(STATUS_RANGE_STEP, self.name, self.loc) from None
        return out


class NumbaPointCall(PointCall):
    """Runs one specialization through the Numba-compiled kernel of the "numba" backend
    (``entry`` is the generated module: its ``parallel`` dispatcher, or ``serial`` below
    ``MIN_WORK`` points); shapes, writability and overlap are checked in Python, the kernel
    returns the error status."""

    MIN_WORK = PARALLEL_MIN_WORK

    __slots__ = ()

    def __call__(self, args: tuple, out: np.ndarray | None) -> np.ndarray:
        args, out, fill = self._checked_in_python(args, out)
        run = self.entry.parallel if out.size >= self.MIN_WORK else self.entry.serial
        status = run(*args, out, fill, self.cval)
        if status:
            raise status_error(status, self.name, self.loc)
        return out


def point_positions(launch: abi.LaunchDescription) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The positions in the call of the arrays the kernel reads, and of those read relatively
    (the first argument's, and the secondary ones that must cover it), as ``launch`` says.
    Refuses a description whose entry point does not take the caller's arguments first, then
    the output, the border-fill flag and cval: what every point launcher passes."""
    roles = [p.role for p in launch.arguments]
    caller = [r for r in roles if r in abi.POINT_INPUTS or r is abi.Role.SCALAR]
    tail = roles[len(caller):]
    if (launch.kind is not abi.Kind.POINT or roles[:len(caller)] != caller
            or abi.Role.OUTPUT not in tail
            or tail != [r for r in abi.POINT_TAIL if r in tail]):
        raise ValueError(
            f"the launch description of {launch.function} ({launch.kind.value}: "
            f"{', '.join(r.value for r in roles)}) is not a point kernel's entry point, which "
            "takes the caller's arguments, then the output, the border-fill flag and cval (a "
            "stencilkit bug: the driver describes the entry it built)")
    return (launch.call_positions(abi.POINT_INPUTS),
            launch.call_positions(frozenset({abi.Role.PRIMARY_INPUT, abi.Role.RELATIVE_INPUT})))


def _misaligned(args: tuple, out: np.ndarray | None) -> bool:
    for a in (*args, out):
        if isinstance(a, np.ndarray) and (
                a.ctypes.data % a.itemsize or any(st % a.itemsize for st in a.strides)):
            return True
    return False


def memory_error(name: str, loc: Location | None) -> ArgumentError:
    return ArgumentError("a local buffer of the generated code (a column of many K levels) "
                         "could not be allocated: out of memory", stencil=name, loc=loc,
                         hint="free memory, or run on fewer levels at a time; the outputs "
                              "are incomplete")


def status_error(status: int, name: str, loc: Location | None) -> ArgumentError:
    if status == STATUS_MEMORY:
        return memory_error(name, loc)
    if status == STATUS_RANGE_STEP:
        return ArgumentError("range() arg 3 must not be zero (a loop's step was 0 at run "
                             "time)", stencil=name, loc=loc,
                             hint="give range() a non-zero step; out is incomplete")
    what = ("a run-time relative index left the declared neighborhood"
            if status == STATUS_NEIGHBORHOOD
            else "an absolute (standard_indexing) index was out of range")
    return ArgumentError(what, stencil=name, loc=loc,
                         hint="widen neighborhood= or fix the indices; out is incomplete")


def unaliased(args: tuple, out: np.ndarray, positions: tuple[int, ...]) -> tuple:
    """``args`` with every input that shares memory with ``out`` copied: each element then
    sees the inputs as they were before the call (Numba's sequential order has no parallel
    meaning)."""
    if not any(np.may_share_memory(args[i], out) for i in positions):
        return args
    return tuple(a.copy() if i in positions and np.may_share_memory(a, out) else a
                 for i, a in enumerate(args))


@dataclass(frozen=True)
class StandardArrays:
    """What a point entry needs to refuse an empty standard_indexing array as the C entry
    point does (``registry.c``): the arrays' positions and names, the kernel's border and
    whether the border mode is "constant" (where only interior points run the body)."""

    positions: tuple[int, ...]
    names: tuple[str, ...]
    border: tuple[tuple[int, int], ...]
    constant: bool
    stencil: str
    loc: Location | None

    def check(self, args: tuple) -> None:
        """An empty standard_indexing array when some point runs the kernel's body: every
        read of it is out of range, and the clamped element the kernel reads instead does
        not exist either. Refused before anything runs (on a GPU such a read is not a wrong
        element: it kills the process's CUDA context)."""
        shape = tuple(getattr(args[0], "shape", ()))
        if self.constant:
            runs = all(n > hi - lo for n, (lo, hi) in zip(shape, self.border))
        else:
            runs = all(n > 0 for n in shape)
        if not runs:
            return
        for i in self.positions:
            a = args[i]
            if hasattr(a, "shape") and 0 in tuple(a.shape):
                raise ArgumentError(f"standard_indexing array '{self.names[i]}' is empty, so "
                                    "every read of it is out of range", stencil=self.stencil,
                                    loc=self.loc, hint="pass a non-empty array")


def standard_arrays(launch: abi.LaunchDescription, border, mode: str | tuple[str, ...],
                    stencil: str, loc: Location | None) -> StandardArrays:
    """The ``StandardArrays`` of a point kernel's specialization: its standard_indexing
    arrays as ``launch`` describes them, the kernel's ``border`` and border ``mode``."""
    return StandardArrays(launch.call_positions(frozenset({abi.Role.STANDARD_INPUT})),
                          launch.call_order,
                          tuple((int(lo), int(hi)) for lo, hi in border), mode == "constant",
                          stencil, loc)


def check_shapes(args: tuple, out: np.ndarray | None, relative: tuple[int, ...], name: str,
                 loc: Location | None) -> None:
    """Secondary relatively indexed arrays cover the first; ``out`` has its shape."""
    first = args[0].shape
    for i in relative:
        a = args[i]
        if i and any(n < m for n, m in zip(a.shape, first)):
            raise secondary_shape_error(i, a.shape, first, name, loc)
    if out is not None and out.shape != first:
        raise out_shape_error(out.shape, first, name, loc)


def secondary_shape_error(i: int, shape: tuple, first: tuple, name: str,
                          loc: Location | None) -> ArgumentError:
    return ArgumentError(
        f"secondary stencil array (argument {i + 1}) of shape {tuple(shape)} has some "
        f"dimension smaller than the first argument's {tuple(first)}", stencil=name, loc=loc,
        hint="pass arrays at least as large as the first argument")


def out_shape_error(shape: tuple, first: tuple, name: str, loc: Location | None
                    ) -> ArgumentError:
    return ArgumentError(f"'out' has shape {tuple(shape)} but the first argument has shape "
                         f"{tuple(first)}", stencil=name, loc=loc,
                         hint="pass out= with the shape of the first argument")
