"""The pickling adapter: the library's stencil objects pickle by definition
(``integrations.pickling``: the kernel's source text and options travel, and the object is
rebuilt on the other side)."""

from __future__ import annotations

from . import Adapter, register


class PicklingAdapter(Adapter):
    name = "pickling"
    priority = 1000  # the default: an adapter registered by an application may pickle first

    def reduce(self, obj: object) -> tuple | None:
        from ..gtscript import GTFunction
        from ..integrations import pickling
        from ..multistage import ComputationStencil
        from ..parloop import Kernel
        from ..stencil import PointStencil

        if isinstance(obj, PointStencil):
            return pickling.reduce_point(obj)
        if isinstance(obj, ComputationStencil):
            return pickling.reduce_computation(obj)
        if isinstance(obj, Kernel):
            return pickling.reduce_kernel(obj)
        if isinstance(obj, GTFunction):
            return pickling.reduce_gtfunction(obj)
        return None


register(PicklingAdapter())
