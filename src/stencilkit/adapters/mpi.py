"""The MPI adapter: calls with a ``DistributedArray`` run on each rank's block after a halo
exchange (``adapters.mpi_point`` for point kernels, ``adapters.mpi_computation`` for
computations; the decompositions, halo exchange and border fills they call are the library
layer in ``stencilkit.distributed``)."""

from __future__ import annotations

from ..distributed.array import DistributedArray
from . import Adapter, register


class MPIAdapter(Adapter):
    name = "MPI-distributed"
    priority = 10  # split across ranks first: each rank's call may pass other adapters' arrays

    def claims_type(self, cls: type) -> bool:
        return cls is DistributedArray

    def point_call(self, st, args: tuple, out: object) -> object:
        from . import mpi_point

        return mpi_point.call(st, args, out)

    def computation_call(self, st, args: tuple, kwargs: dict, origin: object, domain: object,
                         validate_args: bool, exec_info: dict | None) -> None:
        from . import mpi_computation

        return mpi_computation.call(st, args, kwargs, origin, domain, validate_args, exec_info)


register(MPIAdapter())
