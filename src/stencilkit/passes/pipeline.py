"""The point-kernel pipeline as data: named stages, each a pure function, each printable.

``STENCILKIT_DUMP=ir,typed,kernel,code`` prints the output of the stages it names as they run.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from ..analysis import neighborhood as nbh
from ..analysis.typing import ArgType, type_point_kernel
from ..config import current
from ..ir import definition as d
from ..ir import kernel as k
from .lower_point import Layout, PointLowering
from .single_exit import single_exit

#: The stages in order; their names are part of every cache key.
POINT_PIPELINE = ("parse", "neighborhood", "single_exit", "typing", "lower")


def dump(stage: str, title: str, text: str) -> None:
    if stage in current().dump:
        bar = "-" * 20
        print(f"{bar} {stage}: {title} {bar}\n{text}\n", file=sys.stderr)


@dataclass
class PipelineTimings:
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TypedPointKernel:
    """What the analyses produce for one call signature."""

    kernel: d.PointKernel
    neighborhood: nbh.NeighborhoodResult


def analyse(kernel: d.PointKernel, args: tuple[ArgType, ...],
            explicit: nbh.Neighborhood | None) -> TypedPointKernel:
    dump("ir", kernel.name, d.format_point_kernel(kernel))
    result = nbh.infer(kernel, args[0].ndim if args and args[0].is_array else 0, explicit) \
        if args and args[0].is_array else None
    if result is None:
        type_point_kernel(kernel, args)  # raises the right error for a scalar first argument
        raise AssertionError("unreachable")
    typed = type_point_kernel(single_exit(kernel), args)
    dump("typed", kernel.name, d.format_point_kernel(typed))
    return TypedPointKernel(typed, result)


def lower(typed: TypedPointKernel, layout: Layout, line_text, filename: str) -> k.KernelFunction:
    start = time.perf_counter()
    fn = PointLowering(typed.kernel, typed.neighborhood.border, layout, line_text,
                       filename).lower()
    del start
    return fn
