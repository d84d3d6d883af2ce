"""Definition IR of multi-stage computations (the GridTools execution model).

Invariants:
- Every field access is ``definition.Access`` with three integer offsets (I, J, K), whatever
  the field's own dimensions (offsets along absent axes are 0), constants except a K offset
  known at run time (``f[0, 0, lev]``); then one constant index per data dimension.
- A ``VerticalBlock`` is one ``with computation(policy)``; its intervals do not overlap.
- Statements are ``definition`` statements; an ``Assign`` target is a field or a temporary,
  written at offset (0, 0, 0), or at (0, 0, k) for an ``AssignAt`` (FORWARD/BACKWARD only).
- ``If(InRegion(...), body)`` at the top of an interval body is a horizontal region.
- After analysis, ``Schedule`` holds multistages of stages with their extents.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

import numpy as np

from .core import Location, Node
from .definition import Assign, Expr, If, Stmt, format_stmts

Extent = tuple[int, int, int, int]  # (i_lo, i_hi, j_lo, j_hi) with lo <= 0 <= hi


@dataclass(frozen=True, slots=True)
class AxisBound(Node):
    """A K level: ``offset`` levels above the start, or below the end when ``from_end``."""

    offset: int
    from_end: bool

    def resolve(self, nk: int) -> int:
        return nk + self.offset if self.from_end else self.offset

    def __str__(self) -> str:
        if self.from_end:
            return "end" if self.offset == 0 else f"end{self.offset:+d}"
        return "start" if self.offset == 0 else f"start{self.offset:+d}"


Bounds = tuple["AxisBound | None", "AxisBound | None"]  # [start, end); None: unbounded


@dataclass(frozen=True, slots=True)
class InRegion(Expr):
    """True where the point lies in a horizontal region (``with horizontal(region[...])``):
    per axis I and J, [start, end) relative to the compute domain (``I[0]`` is start+0,
    ``I[-1] + 1`` is end+0). A statement ``If(InRegion(...), body)`` is a region's unit."""

    i: Bounds
    j: Bounds

    def __str__(self) -> str:
        def axis(b: Bounds) -> str:
            return ":" if b == (None, None) else f"{b[0] or ''}:{b[1] or ''}"
        return f"region[{axis(self.i)}, {axis(self.j)}]"


@dataclass(frozen=True, slots=True)
class AssignAt(Assign):
    """``target[0, 0, k_offset] = value`` (FORWARD/BACKWARD only): writes the level
    ``k_offset`` away from the current one. Everything that treats an ``Assign`` as a write
    of ``target`` holds for it."""

    k_offset: int = 0
    data_index: tuple[int, ...] = ()  # the element written of a field with data dimensions


def write_offset(stmt: Stmt) -> int:
    """The K offset an assignment writes at (0 for a plain ``Assign``)."""
    return stmt.k_offset if isinstance(stmt, AssignAt) else 0


def region_of(stmt: Stmt) -> InRegion | None:
    """The region a unit is restricted to, if it is a ``with horizontal`` unit."""
    if isinstance(stmt, If) and isinstance(stmt.cond, InRegion):
        return stmt.cond
    return None


@dataclass(frozen=True, slots=True)
class IntervalBlock(Node):
    start: AxisBound
    end: AxisBound
    body: tuple[Stmt, ...]
    _: KW_ONLY
    loc: Location | None = field(default=None, compare=False)

    def bounds(self, nk: int) -> tuple[int, int]:
        return max(0, self.start.resolve(nk)), min(nk, self.end.resolve(nk))


@dataclass(frozen=True, slots=True)
class VerticalBlock(Node):
    policy: str  # "PARALLEL" | "FORWARD" | "BACKWARD"
    intervals: tuple[IntervalBlock, ...]
    _: KW_ONLY
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class FieldDecl:
    name: str
    axes: str  # "IJK", "IJ", "K", ...
    dtype: np.dtype
    data_dims: tuple[int, ...] = ()  # trailing array dimensions: a vector per point

    @property
    def ndim(self) -> int:
        return len(self.axes) + len(self.data_dims)


@dataclass(frozen=True, slots=True)
class ScalarDecl:
    name: str
    dtype: np.dtype


@dataclass(frozen=True, slots=True)
class ComputationDef(Node):
    name: str
    params: tuple[str, ...]
    fields: tuple[FieldDecl, ...]
    scalars: tuple[ScalarDecl, ...]
    blocks: tuple[VerticalBlock, ...]
    temporaries: tuple[tuple[str, np.dtype], ...] = ()
    # fields that are 2-D temporaries (``tmp: Field[IJ, float]``): the stencil allocates
    # them; they are no parameters
    planes: tuple[str, ...] = ()
    # temporaries whose annotation fixes their dtype (``tmp: Field[np.int32] = ...``)
    declared: tuple[tuple[str, np.dtype], ...] = ()
    # a Field[K] the stencil fills with each level's index (``K`` read as a value), or ""
    level_index: str = ""
    _: KW_ONLY
    loc: Location | None = field(default=None, compare=False)

    def field(self, name: str) -> FieldDecl | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def parameter_fields(self) -> tuple[FieldDecl, ...]:
        """The fields the caller passes (all but the 2-D temporaries and the level index)."""
        return tuple(f for f in self.fields
                     if f.name not in self.planes and f.name != self.level_index)


def format_computation(c: ComputationDef) -> str:
    types = dict(c.temporaries)
    for f in c.fields:
        types[f.name] = f.dtype
    head = ", ".join([*(f"{f.name}: Field[{f.axes}, "
                        f"{f'({f.dtype}, {f.data_dims})' if f.data_dims else f.dtype}]"
                        for f in c.fields),
                      *(f"{s.name}: {s.dtype}" for s in c.scalars)])
    lines = [f"computation {c.name}({head}):"]
    if c.temporaries:
        lines.append("    temporaries: " + ", ".join(f"{n}: {t}" for n, t in c.temporaries))
    if c.planes:
        lines.append("    2-D temporaries: " + ", ".join(
            f"{n}: Field[IJ, {c.field(n).dtype}]" for n in c.planes))  # type: ignore[union-attr]
    if c.level_index:
        lines.append(f"    level index (K): {c.level_index}: Field[K, int64]")
    for b in c.blocks:
        lines.append(f"    with computation({b.policy}):")
        for iv in b.intervals:
            lines.append(f"        with interval({iv.start}, {iv.end}):")
            lines += format_stmts(iv.body, "            ", {})
    return "\n".join(lines)
