"""The Numba adapter: the Numba types of stencil objects, so that ``@njit`` code calls them
(``numba.typeof`` reads ``_numba_type_``, which asks ``adapters.numba_type``). The types and
their lowering live in ``numba_calls`` (point kernels) and ``numba_computation_calls``
(computations); this module is imported only once Numba asks, so numba is loaded."""

from __future__ import annotations

from . import Adapter, register


class NumbaAdapter(Adapter):
    name = "numba"

    def numba_type(self, obj: object) -> object | None:
        from ..api.multistage import ComputationStencil
        from ..api.stencil import PointStencil

        if isinstance(obj, PointStencil):
            from .numba_calls import stencil_type

            return stencil_type(obj)
        if isinstance(obj, ComputationStencil):
            from .numba_computation_calls import computation_type

            return computation_type(obj)
        return None


register(NumbaAdapter())
