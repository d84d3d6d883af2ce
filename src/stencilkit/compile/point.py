"""The analyses of a point kernel for one call signature.

``analyse`` runs once per call signature (the caller checks the call against its result
before anything is built); its result goes into the ``PointRequest`` the driver builds.
``STENCILKIT_DUMP=ir,typed`` prints the parsed and the typed definition.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis import neighborhood as nbh
from ..analysis.typing import ArgType, type_point_kernel
from ..errors import StencilTypeError
from ..ir import definition as d
from ..lower.single_exit import single_exit
from .hooks import dump

#: The analyses in order, before the driver's stages (``compile.driver.PIPELINES``).
ANALYSES = ("parse", "neighborhood", "single_exit", "typing")


@dataclass(frozen=True)
class TypedPointKernel:
    """What the analyses produce for one call signature."""

    kernel: d.PointKernel
    neighborhood: nbh.NeighborhoodResult


def analyse(kernel: d.PointKernel, args: tuple[ArgType, ...],
            explicit: nbh.Neighborhood | None) -> TypedPointKernel:
    """Analyses "neighborhood", "single_exit" and "typing" for one call signature."""
    dump("ir", kernel.name, d.format_point_kernel(kernel))
    if not args or not args[0].is_array:
        raise StencilTypeError("the first argument to a stencil kernel must be the primary "
                               "input array", stencil=kernel.name, loc=kernel.loc,
                               hint="pass an array as the first argument")
    result = nbh.infer(kernel, args[0].ndim, explicit)
    typed = type_point_kernel(single_exit(kernel), args)
    dump("typed", kernel.name, d.format_point_kernel(typed))
    return TypedPointKernel(typed, result)
