"""``sk.DistributedArray``: one rank's block of a global array, with its halo.

Imports nothing from mpi4py, so that ``stencil.py`` and ``multistage.py`` can recognise a
distributed argument without importing MPI (``involved``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .decomposition import Decomposition


class DistributedArray:
    """This rank's part of a global array split by a :class:`Decomposition`.

    ``data`` is the block with its halo (``halo[i]`` points on both sides of axis ``i``),
    ``local`` the view of the owned block inside it. Stencil calls exchange the halo
    themselves; ``decomposition.exchange(a)`` does it explicitly.
    """

    __slots__ = ("data", "local", "decomposition")

    def __init__(self, decomposition: Decomposition, data: np.ndarray) -> None:
        expected = decomposition.data_shape
        if data.shape != expected:
            raise ValueError(f"the block with its halo must have shape {expected}, got "
                             f"{data.shape}")
        self.decomposition = decomposition
        self.data = data
        self.local = data[decomposition.owned_in_data]

    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self.decomposition.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def __repr__(self) -> str:
        dec = self.decomposition
        return (f"DistributedArray(global shape {dec.shape}, {self.dtype}, rank {dec.rank} of "
                f"{dec.size} owns {dec.local_slices} with halo {dec.halo})")


def involved(args: tuple, values: object = ()) -> bool:
    """Whether any positional argument or value (of a dict's values) is distributed."""
    for a in args:
        if type(a) is DistributedArray:
            return True
    return any(type(v) is DistributedArray for v in values)  # type: ignore[union-attr]
