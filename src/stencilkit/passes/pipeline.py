"""The point-kernel pipeline as data: named stages, each a pure function, each printable.

``STENCILKIT_DUMP=ir,typed,kernel,code`` prints the output of the stages it names as they run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..analysis import neighborhood as nbh
from ..analysis.typing import ArgType, type_point_kernel
from ..codegen.kernel_text import kernel_ir_text
from ..config import current
from ..errors import StencilTypeError
from ..ir import definition as d
from ..ir import kernel as k
from ..ir.verify import checked
from .lower_point import Layout, PointLowering
from .single_exit import single_exit

#: The stages in order; their names are part of the point kernels' cache keys.
POINT_PIPELINE = ("parse", "neighborhood", "single_exit", "typing", "lower")


def dump(stage: str, title: str, text: str) -> None:
    if stage in current().dump:
        bar = "-" * 20
        print(f"{bar} {stage}: {title} {bar}\n{text}\n", file=sys.stderr)


@dataclass(frozen=True)
class TypedPointKernel:
    """What the analyses produce for one call signature."""

    kernel: d.PointKernel
    neighborhood: nbh.NeighborhoodResult


def analyse(kernel: d.PointKernel, args: tuple[ArgType, ...],
            explicit: nbh.Neighborhood | None) -> TypedPointKernel:
    """Stages "neighborhood", "single_exit" and "typing" for one call signature."""
    dump("ir", kernel.name, d.format_point_kernel(kernel))
    if not args or not args[0].is_array:
        raise StencilTypeError("the first argument to a stencil kernel must be the primary "
                               "input array", stencil=kernel.name, loc=kernel.loc,
                               hint="pass an array as the first argument")
    result = nbh.infer(kernel, args[0].ndim, explicit)
    typed = type_point_kernel(single_exit(kernel), args)
    dump("typed", kernel.name, d.format_point_kernel(typed))
    return TypedPointKernel(typed, result)


def lower(typed: TypedPointKernel, layout: Layout, line_text: Callable[[int], str],
          filename: str, out_dtype: np.dtype, mode: str = "constant") -> k.KernelFunction:
    """Stage "lower": the kernel IR of one specialization (``mode``: the border mode)."""
    kf = PointLowering(typed.kernel, typed.neighborhood.border, layout, line_text, filename,
                       out_dtype=out_dtype, mode=mode).lower()
    kf = checked(kf)
    dump("kernel", typed.kernel.name, kernel_ir_text(kf))
    return kf
