"""Launchers of built computations: the entry point called with the fields, temporaries,
origins, scalars and domain of one call (``multistage.ComputationStencil`` has checked them
and computed the geometry). A launcher is called as ``launcher(values, temps, geometry)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from ..ir import abi
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


AXES = "IJK"


@dataclass(frozen=True)
class ComputationBinding:
    """How one call's values become a compiled computation's arguments, as its launch
    description lists them: the arrays (fields and temporaries held in memory, by name),
    each origin (array, axis index), the scalars (name, declared type), the domain's extents
    (axis index). ``order``: where each argument of that grouping goes in the description's
    order (None: it is that order already, as the lowering makes it)."""

    arrays: tuple[str, ...]
    origins: tuple[tuple[str, int], ...]
    scalars: tuple[tuple[str, np.dtype], ...]
    domain: tuple[int, ...]
    order: tuple[int, ...] | None

    @classmethod
    def of(cls, launch: abi.LaunchDescription) -> ComputationBinding:
        arrays: list[str] = []
        origins: list[tuple[str, int]] = []
        scalars: list[tuple[str, np.dtype]] = []
        domain: list[int] = []
        placed: list[tuple[int, int]] = []  # each argument's (group, position in it)
        for p in launch.arguments:
            if p.role in (abi.Role.FIELD, abi.Role.TEMPORARY):
                arrays.append(str(p.key))
                placed.append((0, len(arrays) - 1))
            elif p.role is abi.Role.ORIGIN and p.field is not None and p.axis is not None:
                origins.append((p.field, AXES.index(p.axis)))
                placed.append((1, len(origins) - 1))
            elif p.role is abi.Role.SCALAR:
                scalars.append((str(p.key), p.dtype))
                placed.append((2, len(scalars) - 1))
            elif p.role is abi.Role.DOMAIN_EXTENT and p.axis is not None:
                domain.append(AXES.index(p.axis))
                placed.append((3, len(domain) - 1))
            else:
                raise ValueError(f"the launch description of {launch.function} lists a "
                                 f"{p.role.value} argument ({p.name}), which a computation's "
                                 "entry point does not take (a stencilkit bug)")
        starts = np.cumsum([0, len(arrays), len(origins), len(scalars)]).tolist()
        order = tuple(starts[group] + i for group, i in placed)
        return cls(tuple(arrays), tuple(origins), tuple(scalars), tuple(domain),
                   None if order == tuple(range(len(order))) else order)

    def arguments(self, values, temps, geo, field_names, scalar) -> list[object]:
        """The entry's arguments for one call (``scalar(value, dtype)``: a scalar as the
        entry takes it)."""
        args: list[object] = [values[n] if n in field_names else temps[n] for n in self.arrays]
        origins, domain = geo.origins, geo.domain
        args += [origins[n][a] for n, a in self.origins]
        args += [scalar(values[s], t) for s, t in self.scalars]
        args += [domain[a] for a in self.domain]
        if self.order is not None:
            args = [args[i] for i in self.order]
        return args

    def positions(self) -> dict[tuple[str, str], int]:
        """Where ``arguments`` puts each array (``("array", name)``) and each scalar
        (``("scalar", name)``) in the entry's argument list."""
        grouped = [("array", n) for n in self.arrays] + [("origin", f"{n}.{a}")
                                                         for n, a in self.origins]
        grouped += [("scalar", s) for s, _ in self.scalars]
        grouped += [("domain", str(a)) for a in self.domain]
        final = grouped if self.order is None else [grouped[i] for i in self.order]
        return {what: i for i, what in enumerate(final)}


def _python_number(value: object, t: np.dtype) -> object:
    return t.type(value).item()


def _numpy_scalar(value: object, t: np.dtype) -> object:
    return t.type(value)


class CompiledComputationCall:
    """Calls a compiled entry point with the arguments its launch description lists, in its
    order: the arrays (fields and temporaries), their origins, the scalars as Python numbers
    of their declared types, the domain's extents. A non-zero status is a run-time K offset
    read that left its field (the entry point's own checks raise ValueError/TypeError
    before running)."""

    __slots__ = ("entry", "defn", "launch", "binding", "field_names")

    scalar = staticmethod(_python_number)

    def __init__(self, entry: Callable[..., int], defn: c.ComputationDef,
                 launch: abi.LaunchDescription) -> None:
        self.entry = entry
        if hasattr(entry, "error_for"):  # a GPU entry may report after the call: name the line
            entry.error_for = lambda code: computation_status_error(code, defn)
        self.defn = defn
        self.launch = launch
        self.binding = ComputationBinding.of(launch)
        self.field_names = frozenset(f.name for f in defn.fields)

    def __call__(self, values, temps, geo) -> None:
        status = self.entry(*self.binding.arguments(values, temps, geo, self.field_names,
                                                    self.scalar))
        if status:
            raise computation_status_error(status, self.defn)


class NumbaComputationCall(CompiledComputationCall):
    """Calls the "numba" backend's jitted entry point: the arguments of a compiled one, but
    checked here (a Numba dispatcher would compile a new specialization for an array of
    another dtype or dimension instead of refusing it: each array must have the dimensions
    and dtype its description gives), and the scalars as NumPy scalars of their declared
    types."""

    __slots__ = ("arrays",)

    scalar = staticmethod(_numpy_scalar)

    def __init__(self, entry: Callable[..., int], defn: c.ComputationDef,
                 launch: abi.LaunchDescription) -> None:
        super().__init__(entry, defn, launch)
        self.arrays = tuple((p.key, p.ndim, p.dtype) for p in launch.arguments if p.pointer)

    def __call__(self, values, temps, geo) -> None:
        field_names = self.field_names
        for n, ndim, dtype in self.arrays:
            a = values[n] if n in field_names else temps[n]
            if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != ndim:
                what = (f"{a.ndim}-D {a.dtype}" if isinstance(a, np.ndarray)
                        else type(a).__name__)
                raise TypeError(f"field '{n}' must be a {ndim}-D {dtype} array, got {what}")
        super().__call__(values, temps, geo)
