"""What the driver is asked to build: one request per kind, frozen.

A request holds the analysed definition, the options that decide its generated code and the
backend that builds it. ``definition`` and ``options`` are what the front key
(``compile.keys.front_key``) is made of, so everything that changes the generated source
must be in one of them; what only the launch needs (a call's cval, its array positions)
stays with the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..ir.abi import Kind  # the kinds of kernels: one enum for the driver and the ABI

if TYPE_CHECKING:
    from ..analysis.schedule import Schedule
    from ..analysis.typing import ArgType
    from ..frontend.source import SourceFunction
    from ..ir.computation import ComputationDef
    from ..ir.definition import PointKernel
    from ..lower.parloop import ArgSpec
    from ..lower.point import Layout
    from ..registry.base import Backend
    from .point import TypedPointKernel


def _source_text(src: SourceFunction | None) -> str:
    # generated code quotes the definition's lines in comments, with its file name
    return "" if src is None else f"{src.filename}\n{src.text}"


@dataclass(frozen=True, eq=False)
class PointRequest:
    """One specialization of a point kernel: the typed kernel for one call signature."""

    kind: ClassVar[Kind] = Kind.POINT
    backend: Backend
    typed: TypedPointKernel
    layout: Layout
    src: SourceFunction
    out_dtype: np.dtype
    types: tuple[ArgType, ...]
    mode: str | tuple[str, ...] = "constant"  # the border mode: a name, or one per axis
    fast_math: bool = False
    #: the stencil's ``autotune=`` (None: the configured one): which variant a call runs,
    #: not what any variant's code is, so it is in neither ``definition`` nor ``options``
    autotune: str | None = None

    @property
    def name(self) -> str:
        return self.typed.kernel.name

    def definition(self) -> str:
        from ..ir.definition import format_point_kernel

        return "\n".join([format_point_kernel(self.typed.kernel),
                          repr(self.typed.neighborhood.border), _source_text(self.src)])

    def options(self) -> tuple:
        return (self.layout, str(self.out_dtype), tuple(map(repr, self.types)), self.mode,
                self.fast_math)


@dataclass(frozen=True, eq=False)
class ComputationRequest:
    """A scheduled computation; ``fields`` (None: not known yet) decide the layout on the
    backends that declare a ``layout_key``."""

    kind: ClassVar[Kind] = Kind.COMPUTATION
    backend: Backend
    defn: ComputationDef
    sched: Schedule
    src: SourceFunction
    fields: dict[str, np.ndarray] | None = None
    fast_math: bool = False
    autotune: str | None = None  # as PointRequest's: not part of the front key

    @property
    def name(self) -> str:
        return self.defn.name

    def definition(self) -> str:
        from ..ir.computation import format_computation

        # (the schedule is a function of the definition)
        return "\n".join([format_computation(self.defn), _source_text(self.src)])

    def options(self) -> tuple:
        from .declared import layout_key

        return (layout_key(self.backend, self.fields, self.defn), self.fast_math)


@dataclass(frozen=True, eq=False)
class ParLoopRequest:
    """A ParLoop's kernel and loop: ``typed`` is the typed Python kernel, or None when the
    kernel is C source ``code``; ``atomic``: shared increments are atomic (else coloured)."""

    kind: ClassVar[Kind] = Kind.PARLOOP
    backend: Backend
    name: str
    typed: PointKernel | None
    specs: tuple[ArgSpec, ...]
    src: SourceFunction | None
    code: str | None
    atomic: bool
    fast_math: bool = False

    def definition(self) -> str:
        from ..ir.definition import format_point_kernel

        kernel = self.code if self.typed is None else format_point_kernel(self.typed)
        return "\n".join([self.name, kernel or "", _source_text(self.src)])

    def options(self) -> tuple:
        return (self.specs, self.atomic, self.fast_math)


Request = PointRequest | ComputationRequest | ParLoopRequest
