"""Compiled point-kernel calls: the per-signature objects on the hot call path.

A call is: allocate or check ``out``, then one foreign call (C) or one function call
(NumPy). Everything that can be decided once per signature (output dtype, the converted
``cval``, the compiled entry point) is decided when the object is built.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ArgumentError, Location


class PointCall:
    """Runs one specialization of a point kernel."""

    __slots__ = ("entry", "out_dtype", "cval", "has_cval", "name", "loc", "checks_shapes",
                 "array_positions", "relative_positions", "source")

    def __init__(self, entry: Callable[..., int], out_dtype: np.dtype, cval: object,
                 has_cval: bool, name: str, loc: Location | None, *, checks_shapes: bool,
                 array_positions: tuple[int, ...], relative_positions: tuple[int, ...],
                 source: str) -> None:
        self.entry = entry
        self.out_dtype = out_dtype
        self.cval = cval
        self.has_cval = has_cval
        self.name = name
        self.loc = loc
        self.checks_shapes = checks_shapes  # the C entry re-checks shapes itself
        self.array_positions = array_positions
        self.relative_positions = relative_positions
        self.source = source

    def __call__(self, args: tuple, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            out = np.empty(args[0].shape, self.out_dtype)
            fill = True
        else:
            if not out.flags.writeable:
                raise ArgumentError("'out' is read-only", stencil=self.name, loc=self.loc,
                                    hint="pass a writable array as out=")
            fill = self.has_cval
            args = self._unalias(args, out)
        if not self.checks_shapes:
            check_shapes(args, out, self.relative_positions, self.name, self.loc)
        try:
            status = self.entry(*args, out, fill, self.cval)
        except (ValueError, BufferError, TypeError) as exc:
            raise ArgumentError(str(exc), stencil=self.name, loc=self.loc,
                                hint="check the arrays' shapes, dtypes and strides") from None
        except IndexError as exc:  # the NumPy backend's index checks
            status = 1 if "relative" in str(exc) else 2
        if status:
            what = ("a run-time relative index left the declared neighborhood" if status == 1
                    else "an absolute (standard_indexing) index was out of range")
            raise ArgumentError(what, stencil=self.name, loc=self.loc,
                                hint="widen neighborhood= or fix the indices; the result "
                                     "is incomplete")
        return out

    def _unalias(self, args: tuple, out: np.ndarray) -> tuple:
        """Inputs that share memory with ``out`` are copied: every element then sees the
        input as it was before the call (Numba's sequential order is not defined in parallel)."""
        if not any(np.may_share_memory(args[i], out) for i in self.array_positions):
            return args
        return tuple(a.copy() if i in self.array_positions and np.may_share_memory(a, out)
                     else a for i, a in enumerate(args))


def check_shapes(args: tuple, out: np.ndarray | None, relative: tuple[int, ...], name: str,
                 loc: Location | None) -> None:
    """Secondary relatively indexed arrays cover the first; ``out`` has its shape."""
    first = args[0].shape
    for i in relative:
        a = args[i]
        if i and any(n < m for n, m in zip(a.shape, first)):
            raise ArgumentError(
                f"secondary stencil array (argument {i + 1}) of shape {a.shape} has some "
                f"dimension smaller than the first argument's {first}", stencil=name, loc=loc,
                hint="pass arrays at least as large as the first argument")
    if out is not None and out.shape != first:
        raise ArgumentError(f"'out' has shape {out.shape} but the first argument has shape "
                            f"{first}", stencil=name, loc=loc,
                            hint="pass out= with the shape of the first argument")
