"""``sk.Decomposition``: a global index space split in blocks over a Cartesian communicator.

Blocks are as even as possible: along an axis of ``n`` points over ``p`` ranks, the first
``n % p`` ranks own ``n // p + 1`` points, the others ``n // p`` (MPI's usual split). Every
rank can compute every other rank's block, so decisions that depend on the split (is a block
thinner than the halo a stencil needs?) are taken identically on all ranks without talking.

``data`` of a :class:`DistributedArray` is the owned block padded by ``halo[i]`` points on
both sides of every axis, C-ordered; the owned block starts at ``halo`` in it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from . import halo as _halo
from .array import DistributedArray


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ArgumentError(f"sk.Decomposition needs mpi4py, which does not import: {exc}",
                            hint="pip install 'stencilkit[mpi]' (mpi4py and the mpich wheel)"
                            ) from None
    return MPI


def _per_axis(value: object, ndim: int, what: str, kind: type) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) != ndim:
            raise ArgumentError(f"{what} has {len(value)} entries for a {ndim}-D shape",
                                hint=f"give one {what} per axis, or a single value")
        return tuple(value)
    return (value,) * ndim


def split(n: int, parts: int, index: int) -> tuple[int, int]:
    """The [start, stop) of block ``index`` of ``n`` points cut in ``parts`` blocks."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


class Decomposition:
    """``Decomposition(comm, shape, *, halo, periodic=False, dims=None)`` (contract.md section 8).

    ``dims`` defaults to ``MPI.Compute_dims`` over the axes, except that the third axis of a
    3-D shape is not split (computations never split K; pass ``dims`` to split it for point
    kernels). Creating one is collective over ``comm``.
    """

    def __init__(self, comm: object, shape: Sequence[int], *, halo: int | Sequence[int],
                 periodic: bool | Sequence[bool] = False,
                 dims: Sequence[int] | None = None) -> None:
        MPI = _mpi()
        try:
            self.shape = tuple(int(n) for n in shape)
        except (TypeError, ValueError):
            raise ArgumentError(f"shape must be a tuple of integers, got {shape!r}") from None
        ndim = len(self.shape)
        if ndim == 0 or any(n < 1 for n in self.shape):
            raise ArgumentError(f"shape {self.shape} must have 1 or more axes of 1 or more points")
        self.ndim = ndim
        self.halo = tuple(int(h) for h in _per_axis(halo, ndim, "halo", int))
        if any(h < 0 for h in self.halo):
            raise ArgumentError(f"halo {self.halo} must not be negative")
        self.periodic = tuple(bool(p) for p in _per_axis(periodic, ndim, "periodic", bool))
        size = comm.Get_size()  # type: ignore[attr-defined]
        if dims is None:
            fixed = [0] * ndim
            if ndim == 3:
                fixed[2] = 1
            dims = MPI.Compute_dims(size, fixed)
            #: the axes a job of more ranks would split: every one but K (3-D)
            self.splittable = tuple(f == 0 for f in fixed)
        else:  # the caller's layout: the axes it splits
            self.splittable = tuple(int(d) > 1 for d in dims)
        self.dims = tuple(int(d) for d in dims)
        if len(self.dims) != ndim or any(d < 1 for d in self.dims) \
                or int(np.prod(self.dims)) != size:
            raise ArgumentError(f"dims {self.dims} do not split {size} ranks over {ndim} axes",
                                hint=f"give {ndim} positive integers whose product is {size}")
        thin = [i for i in range(ndim) if self.dims[i] > self.shape[i]]
        if thin:
            i = thin[0]
            raise ArgumentError(f"axis {i} has {self.shape[i]} points but is split over "
                                f"{self.dims[i]} ranks", hint="use fewer ranks along that axis "
                                "(dims=...) or a larger shape")
        self.comm = comm.Create_cart(list(self.dims), periods=list(self.periodic),  # type: ignore
                                     reorder=False)
        self.rank = self.comm.Get_rank()
        self.size = size
        self.coords = tuple(self.comm.Get_coords(self.rank))
        self.bounds = tuple(split(n, p, c) for n, p, c in zip(self.shape, self.dims, self.coords))
        self.local_slices = tuple(slice(s, e) for s, e in self.bounds)
        self.local_shape = tuple(e - s for s, e in self.bounds)
        self.data_shape = tuple(n + 2 * h for n, h in zip(self.local_shape, self.halo))
        self.owned_in_data = tuple(slice(h, h + n) for h, n in zip(self.halo, self.local_shape))
        # the thinnest block along each axis (what a halo exchange can take from one neighbour)
        self.min_block = tuple(n // p for n, p in zip(self.shape, self.dims))
        self._neighbors: dict[tuple[int, ...], int] = {}
        self._wrapped: dict[tuple[bool, ...], Decomposition] = {}
        self.exchanger = _halo.Exchanger(self)

    # ------------------------------------------------------------ geometry

    @property
    def layout(self) -> tuple:
        """What two decompositions must share for their arrays to be used together."""
        return (self.shape, self.dims, self.periodic, self.halo, self.size)

    def exchanged(self, axis: int) -> bool:
        """Whether halos along ``axis`` come from other blocks (split or periodic)."""
        return self.dims[axis] > 1 or self.periodic[axis]

    def wrapped(self, periodic: tuple[bool, ...]) -> Decomposition:
        """This decomposition with the axes ``periodic`` exchanged across the global edge
        (border mode "wrap" on a non-periodic split axis): the same communicator, blocks
        and exchanger, its own neighbours. Local: no communication."""
        if periodic == self.periodic:
            return self
        other = self._wrapped.get(periodic)
        if other is None:
            other = copy.copy(self)
            other.periodic = periodic
            other._neighbors = {}
            other._wrapped = {}
            self._wrapped[periodic] = other
        return other

    def as_split(self) -> Decomposition:
        """This decomposition with every axis it may split exchanged: what a call needs of
        the halos whatever the number of ranks. For checks only (contract.md section 8: a halo
        too small is refused on one rank as on many, also where no axis is split here)."""
        return self.wrapped(tuple(p or s for p, s in zip(self.periodic, self.splittable)))

    def block(self, coords: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """The [start, stop) per axis of the block at Cartesian ``coords``."""
        return tuple(split(n, p, c) for n, p, c in zip(self.shape, self.dims, coords))

    def neighbor(self, direction: tuple[int, ...]) -> int:
        """The rank of the block at ``coords + direction`` (wrapping along periodic axes),
        or ``MPI.PROC_NULL`` beyond a non-periodic edge."""
        rank = self._neighbors.get(direction)
        if rank is None:
            MPI = _mpi()
            coords = []
            for c, d, p, per in zip(self.coords, direction, self.dims, self.periodic):
                c += d
                if not 0 <= c < p:
                    if not per:
                        coords = None
                        break
                    c %= p
                coords.append(c)
            rank = MPI.PROC_NULL if coords is None else self.comm.Get_cart_rank(coords)
            self._neighbors[direction] = rank
        return rank

    # ------------------------------------------------------------ arrays

    def empty(self, dtype: object = float) -> DistributedArray:
        return DistributedArray(self, np.empty(self.data_shape, dtype))

    def zeros(self, dtype: object = float) -> DistributedArray:
        return DistributedArray(self, np.zeros(self.data_shape, dtype))

    def full(self, fill_value: object, dtype: object = None) -> DistributedArray:
        return DistributedArray(self, np.full(self.data_shape, fill_value, dtype))

    def scatter(self, array: np.ndarray | None, out: DistributedArray | None = None, *,
                root: int = 0) -> DistributedArray:
        """Each rank's block of ``array`` (read on ``root`` only), into ``out`` or a new
        array of ``array``'s dtype. Collective. The halo is not filled (stencil calls
        exchange what they need; ``exchange`` fills all of it)."""
        if out is not None and (type(out) is not DistributedArray
                                or out.decomposition.layout != self.layout):
            raise ArgumentError("scatter(out=...) needs a DistributedArray of this "
                                "decomposition", hint="allocate it with dec.empty(...)")
        problem = None
        if self.comm.Get_rank() == root:
            a = np.asarray(array) if array is not None else None
            if a is None or a.shape != self.shape:
                problem = (f"scatter got an array of shape {None if a is None else a.shape}, "
                           f"the decomposition's shape is {self.shape}")
            meta = (problem, None if problem else a.dtype.str)  # type: ignore[union-attr]
        else:
            meta = None
        problem, dtype = self.comm.bcast(meta, root=root)
        if problem:
            raise ArgumentError(problem, hint="pass the global array on the root rank")
        if out is None:
            out = self.empty(np.dtype(dtype))
        MPI = _mpi()
        if self.comm.Get_rank() == root:
            cast = a.astype(out.dtype, copy=False)  # type: ignore[union-attr]
            reqs = []
            for r in range(self.size):
                sl = tuple(slice(s, e) for s, e in self.block(self.comm.Get_coords(r)))
                if r == root:
                    out.local[...] = cast[sl]
                else:
                    buf = np.ascontiguousarray(cast[sl])
                    reqs.append((self.comm.Isend([buf, MPI.BYTE], dest=r, tag=7), buf))
            MPI.Request.Waitall([q for q, _ in reqs])
        else:
            buf = np.empty(self.local_shape, out.dtype)
            self.comm.Recv([buf, MPI.BYTE], source=root, tag=7)
            out.local[...] = buf
        return out

    def gather(self, array: DistributedArray, *, root: int = 0) -> np.ndarray | None:
        """The global array on ``root`` (None elsewhere), from every rank's owned block.
        Collective."""
        if type(array) is not DistributedArray or array.decomposition.layout != self.layout:
            raise ArgumentError("gather needs a DistributedArray of this decomposition")
        MPI = _mpi()
        if self.comm.Get_rank() != root:
            self.comm.Send([np.ascontiguousarray(array.local), MPI.BYTE], dest=root, tag=8)
            return None
        out = np.empty(self.shape, array.dtype)
        out[self.local_slices] = array.local
        for r in range(self.size):
            if r == root:
                continue
            block = self.block(self.comm.Get_coords(r))
            buf = np.empty(tuple(e - s for s, e in block), array.dtype)
            self.comm.Recv([buf, MPI.BYTE], source=r, tag=8)
            out[tuple(slice(s, e) for s, e in block)] = buf
        return out

    def exchange(self, *arrays: DistributedArray) -> None:
        """Fill the whole halo (faces and corners) of each array from its neighbours
        (wrapping along periodic axes). Collective."""
        for a in arrays:
            if type(a) is not DistributedArray or a.decomposition.layout != self.layout:
                raise ArgumentError("exchange needs DistributedArrays of this decomposition")
        need = _halo.full_need(self)
        _halo.check_blocks(self, [("array", need)], None)
        self.exchanger.run(list(arrays), [need] * len(arrays))

    def __repr__(self) -> str:
        return (f"Decomposition(shape={self.shape}, dims={self.dims}, halo={self.halo}, "
                f"periodic={self.periodic}; rank {self.rank} at {self.coords} owns "
                f"{self.bounds})")
