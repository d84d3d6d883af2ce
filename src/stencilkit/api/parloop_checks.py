"""Checks before each run of a ParLoop: what the generated code trusts about its arguments.

They read the user's objects (Dats, Maps, Sparsities), so they run on the user's side of
the launch ABI, before ``ParLoop.bind`` hands the arrays to a launcher."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import adapters
from ..errors import ArgumentError
from ..ir.abi import ArgKind
from .parloop import READ

if TYPE_CHECKING:
    from .loop import ParLoop


def check_objects(loop: ParLoop, gpu: bool = False) -> None:
    """Before each run, what the generated code trusts: every array still has the
    shape, dtype and layout the loop was built for, and is writable where written.
    O(arguments), whatever the sizes; Map values and Set sizes cannot change (see
    parloop.Map), so their contents need no check here. Data on a GPU (a Dat built on a
    CuPy array) is checked on its host stand-in, and only a ``gpu`` backend takes it."""
    name, n = loop.kernel.name, loop.iterset.size
    for i, (a, spec) in enumerate(zip(loop.args, loop.specs)):
        obj, m = a.obj, a.map
        what = f"argument {i + 1} ({type(obj).__name__} {obj.name})"
        if a.kind is ArgKind.MAT:
            sp = obj.sparsity  # type: ignore[union-attr]
            if sp.versions != (sp.rowmap.version, sp.colmap.version):
                raise ArgumentError(f"{what}: a map of its Sparsity was given new values "
                                    "after the Sparsity was built", stencil=name,
                                    loc=loop.loc,
                                    hint="build a new sk.Sparsity and sk.Mat on the maps")
            expected: tuple[int, ...] = (sp.nnz,)
        elif a.kind is ArgKind.GLOBAL:
            expected = (spec.dim,)
        else:
            rows = n if m is None else m.to_set.size
            expected = (rows,) if spec.dim == 1 else (rows, spec.dim)
        data = obj._data
        if adapters.is_device(data):
            if not gpu:
                raise ArgumentError(f"{what} holds a device array, which needs a GPU "
                                    "backend", stencil=name, loc=loop.loc,
                                    hint="run the loop on a GPU backend (sk.backends() "
                                         "lists them), or build the Dat on host data")
            data = adapters.for_value(data).host_view(data, writable=True)  # type: ignore[union-attr]
        if (not isinstance(data, np.ndarray) or obj.dim != spec.dim
                or data.shape != expected or data.dtype != spec.dtype
                or not data.flags.c_contiguous):
            got = (f"shape {data.shape}, dtype {data.dtype}" if isinstance(data, np.ndarray)
                   else type(data).__name__)
            raise ArgumentError(f"{what} now holds {got} (dim {obj.dim}); the loop was "
                                f"built for shape {expected}, dtype {spec.dtype}",
                                stencil=name, loc=loop.loc,
                                hint="shape, dtype and dim of a Dat are fixed: assign "
                                     "values with x.data[...] = v, or build a new Dat "
                                     "and ParLoop")
        if a.mode is not READ and not data.flags.writeable:
            raise ArgumentError(f"{what} is read-only (its .data was made read-only) but "
                                f"the loop writes it ({a.mode.value})", stencil=name,
                                loc=loop.loc,
                                hint="pass it READ, or make it writeable again: "
                                     "x.data.flags.writeable = True")
        if m is not None and (m.values.shape != (n, spec.arity)
                              or m.values.dtype != spec.index):
            raise ArgumentError(f"{what}: map {m.name} no longer has {n} rows of "
                                f"{spec.arity} {spec.index} entries", stencil=name,
                                loc=loop.loc, hint="build a new Map and ParLoop")
    if gpu:
        _check_device_overlap(loop)


def _check_device_overlap(loop: ParLoop) -> None:
    """Dats built on device arrays keep the caller's memory, so two of them may share it (a
    host Dat copies its data: never). The generated code passes each argument through its
    own ``__restrict__`` pointer, read-only ones as ``const`` (non-coherent loads on a GPU):
    a written argument may share memory with no other, as with computations' fields."""
    spans = [(i, a, adapters.for_value(a.obj._data).byte_span(a.obj._data))  # type: ignore[union-attr]
             for i, a in enumerate(loop.args) if adapters.is_device(a.obj._data)]
    for i, a, mine in spans:
        if a.mode is READ or mine is None:
            continue
        for j, b, span in spans:
            if b.obj is not a.obj and span and mine[0] < span[1] and span[0] < mine[1]:
                raise ArgumentError(
                    f"argument {i + 1} ({type(a.obj).__name__} {a.obj.name}, {a.mode.value}) "
                    f"shares device memory with argument {j + 1} ({type(b.obj).__name__} "
                    f"{b.obj.name})", stencil=loop.kernel.name, loc=loop.loc,
                    hint="build the Dats on separate device arrays (copy one of them)")
