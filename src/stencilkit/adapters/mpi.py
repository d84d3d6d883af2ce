"""The MPI adapter: calls with a ``DistributedArray`` run on each rank's block after a halo
exchange (``distributed.point`` for point kernels, ``distributed.computation`` for
computations)."""

from __future__ import annotations

from ..distributed.array import DistributedArray
from . import Adapter, register


class MPIAdapter(Adapter):
    name = "MPI-distributed"
    priority = 10  # split across ranks first: each rank's call may pass other adapters' arrays

    def claims_type(self, cls: type) -> bool:
        return cls is DistributedArray

    def point_call(self, st, args: tuple, out: object) -> object:
        from ..distributed import point

        return point.call(st, args, out)

    def computation_call(self, st, args: tuple, kwargs: dict, origin: object, domain: object,
                         validate_args: bool, exec_info: dict | None) -> None:
        from ..distributed import computation

        return computation.call(st, args, kwargs, origin, domain, validate_args, exec_info)


register(MPIAdapter())
