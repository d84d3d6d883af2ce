"""MPI scale-out (contract.md section 8): decompositions, distributed arrays, halo exchange.

mpi4py is imported only when a :class:`Decomposition` is created or used.
"""

from .array import DistributedArray
from .decomposition import Decomposition

__all__ = ["Decomposition", "DistributedArray"]
