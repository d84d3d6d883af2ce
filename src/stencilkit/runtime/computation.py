"""Launchers of built computations: the entry point called with the fields, temporaries,
origins, scalars and domain of one call (``multistage.ComputationStencil`` has checked them
and computed the geometry). A launcher is called as ``launcher(values, temps, geometry)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ArgumentError
from ..ir import computation as c
from ..ir.kernel import STATUS_MEMORY
from .launch import memory_error


def computation_status_error(status: int, defn: c.ComputationDef) -> ArgumentError:
    """The error a compiled computation's non-zero status stands for."""
    if status == STATUS_MEMORY:
        return memory_error(defn.name, defn.loc)
    from ..analysis.schedule import variable_k_reads

    return k_offset_error(defn, variable_k_reads(defn))


def k_offset_error(defn: c.ComputationDef, culprits: list) -> ArgumentError:
    """The error after a call in which a read at a run-time K offset left its field."""
    first = culprits[0]
    where = ", ".join(sorted({f"'{a.field}' (line {a.loc.line})" if a.loc else f"'{a.field}'"
                              for a in culprits}))
    return ArgumentError(
        f"a read at a run-time vertical offset fell outside the field: {where}; that level "
        "was not read (the results of the call are incomplete)", stencil=defn.name,
        loc=first.loc or defn.loc, hint="keep k + offset within the field's levels (give it "
                                        "more levels, or bound the offset expression)")


class NumpyComputationCall:
    """Calls generated NumPy code: arrays by name order, then temporaries, then scalars of
    their declared types; it returns the indices (into ``k_reads``) of the run-time K
    offset reads that left their field."""

    __slots__ = ("fn", "defn", "k_reads", "names", "temps", "scalars", "scalar_types")

    def __init__(self, fn: Callable[..., list], defn: c.ComputationDef, k_reads: tuple) -> None:
        self.fn = fn
        self.defn = defn
        self.k_reads = k_reads
        self.names = [f.name for f in defn.fields]
        self.temps = [t for t, _ in defn.temporaries]
        self.scalars = [s.name for s in defn.scalars]
        self.scalar_types = {s.name: s.dtype for s in defn.scalars}

    def __call__(self, values, temp_arrays, geo) -> None:
        args = [values[n] for n in self.names] + [temp_arrays[t] for t in self.temps]
        args += [self.scalar_types[s].type(values[s]) for s in self.scalars]
        failed = self.fn(*args, geo.origins, geo.domain)
        if failed:
            raise k_offset_error(self.defn, [self.k_reads[i] for i in failed])


class CompiledComputationCall:
    """Calls a compiled entry point: the buffers (fields and temporaries, in the kernel's
    order), each buffer's origin along its axes, the scalars as Python numbers of their
    declared types, the domain. A non-zero status is a run-time K offset read that left its
    field (the entry point's own checks raise ValueError/TypeError before running)."""

    __slots__ = ("entry", "defn", "buffers", "axes", "field_names", "scalar_types")

    def __init__(self, entry: Callable[..., int], defn: c.ComputationDef,
                 buffers: tuple[str, ...], axes: dict[str, tuple[str, ...]]) -> None:
        self.entry = entry
        if hasattr(entry, "error_for"):  # a GPU entry may report after the call: name the line
            entry.error_for = lambda code: computation_status_error(code, defn)
        self.defn = defn
        self.buffers = buffers
        self.axes = axes
        self.field_names = {f.name for f in defn.fields}
        self.scalar_types = {s.name: s.dtype for s in defn.scalars}

    def __call__(self, values, temps, geo) -> None:
        buffers, axes, field_names = self.buffers, self.axes, self.field_names
        args: list[object] = [values[n] if n in field_names else temps[n] for n in buffers]
        args += [geo.origins[n]["IJK".index(a)] for n in buffers for a in axes[n]]
        args += [t.type(values[s]).item() for s, t in self.scalar_types.items()]
        args += list(geo.domain)
        status = self.entry(*args)
        if status:
            raise computation_status_error(status, self.defn)


class NumbaComputationCall(CompiledComputationCall):
    """Calls the "numba" backend's jitted entry point: the arguments of a compiled one, but
    checked here (a Numba dispatcher would compile a new specialization for an array of
    another dtype or dimension instead of refusing it), and the scalars as NumPy scalars of
    their declared types."""

    __slots__ = ("ndims", "dtypes")

    def __init__(self, entry: Callable[..., int], defn: c.ComputationDef,
                 buffers: tuple[str, ...], axes: dict[str, tuple[str, ...]],
                 dtypes: dict[str, np.dtype]) -> None:
        super().__init__(entry, defn, buffers, axes)
        fields = {f.name: f for f in defn.fields}
        self.ndims = {n: fields[n].ndim if n in fields else 3 for n in buffers}
        self.dtypes = dtypes

    def __call__(self, values, temps, geo) -> None:
        buffers, axes, field_names = self.buffers, self.axes, self.field_names
        args: list[object] = [values[n] if n in field_names else temps[n] for n in buffers]
        for n, a in zip(buffers, args):
            if not isinstance(a, np.ndarray) or a.dtype != self.dtypes[n] \
                    or a.ndim != self.ndims[n]:
                what = (f"{a.ndim}-D {a.dtype}" if isinstance(a, np.ndarray)
                        else type(a).__name__)
                raise TypeError(f"field '{n}' must be a {self.ndims[n]}-D {self.dtypes[n]} "
                                f"array, got {what}")
        args += [geo.origins[n]["IJK".index(a)] for n in buffers for a in axes[n]]
        args += [t.type(values[s]) for s, t in self.scalar_types.items()]
        args += list(geo.domain)
        status = self.entry(*args)
        if status:
            raise computation_status_error(status, self.defn)
