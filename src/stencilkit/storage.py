"""Storages: arrays laid out the way a backend's generated code runs fastest on.

On a backend whose capabilities ask for it (``k_planes_storage``: the "c" backend) a 3-D
storage of shape (I, J, K) keeps each IJ plane contiguous (J the unit-stride axis, K the
outermost in memory): vertical solvers then sweep K over whole planes and vectorize along J.
Every storage is aligned to 64 bytes. Stencils accept any strided array; storages are only
the fastest.
"""

from __future__ import annotations

import numpy as np

from . import dtypes, registry
from .arrays import is_device
from .errors import StencilError
from .ir.abi import Device

ALIGNMENT = 64


def _aligned_empty(n_items: int, dtype: np.dtype) -> np.ndarray:
    raw = np.empty(n_items * dtype.itemsize + ALIGNMENT, np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset: offset + n_items * dtype.itemsize].view(dtype)


def array_module(backend: registry.Backend):
    """The array library a backend's arrays come from (NumPy, CuPy), imported on use."""
    import importlib

    return importlib.import_module(backend.pieces.array_module)  # type: ignore[union-attr]


def _normalize(shape: object, halo: object) -> tuple[int, ...]:
    dims = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)  # type: ignore
    h = (int(halo),) * len(dims) if np.isscalar(halo) else tuple(int(x) for x in halo)  # type: ignore
    if len(h) != len(dims) or min(h, default=0) < 0 or min(dims, default=0) < 0:
        raise StencilError(f"bad storage shape {shape!r} or halo {halo!r}",
                           hint="give non-negative sizes and one halo per dimension (or one int)")
    return tuple(n + 2 * x for n, x in zip(dims, h))


class Storage(np.ndarray):
    """A NumPy storage that carries GT4Py's ``__gt_origin__``: the ``aligned_index`` it was
    allocated with, which a computation called without ``origin=`` takes as the field's
    origin (as GT4Py does). Arrays derived from it (views, slices, results of arithmetic)
    carry ``None``: their first element is no longer where the origin was counted from."""

    __gt_origin__: tuple[int, ...] | None

    def __array_finalize__(self, obj: object) -> None:
        self.__gt_origin__ = None


_AXES = ("I", "J", "K")


def _gt_layout(shape: tuple[int, ...], aligned_index: object, dimensions: object
               ) -> tuple[tuple[int, ...] | None, bool]:
    """GT4Py's ``aligned_index`` (checked: one non-negative int per dimension, inside the
    shape) and whether ``dimensions`` allow the backend's own layout (I, J, K in order)."""
    nd = len(shape)
    own_layout = True
    if dimensions is not None:
        try:
            dims = tuple(str(d) for d in dimensions)  # type: ignore[union-attr]
        except TypeError:
            dims = ()
        axes = [d for d in dims if d in _AXES]
        if len(dims) != nd or len(set(axes)) != len(axes) or axes != sorted(axes):
            raise StencilError(f"dimensions={dimensions!r} do not describe a {nd}-D storage",
                               hint='name one dimension per axis, the grid axes in order, '
                                    'e.g. dimensions=("I", "J", "K") or ("I", "J") or ("K",)')
        own_layout = tuple(axes) == _AXES and dims[:3] == _AXES
    if aligned_index is None:
        return None, own_layout
    try:
        index = tuple(int(x) for x in aligned_index)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        index = None  # type: ignore[assignment]
    if index is None or len(index) != nd or any(not 0 <= i <= n for i, n in zip(index, shape)):
        raise StencilError(f"aligned_index={aligned_index!r} is not an index of a storage of "
                           f"shape {shape}", hint=f"give {nd} integers, each within the shape")
    return index, own_layout


def _with_origin(array, origin: tuple[int, ...] | None):
    """``array`` as a ``Storage`` carrying ``origin`` (NumPy arrays; others as they are)."""
    if origin is None or type(array) is not np.ndarray:
        return array
    out = array.view(Storage)
    out.__gt_origin__ = origin
    return out


def empty(shape: object, dtype: object = float, *, backend: str | None = None,
          halo: object = 0, aligned_index: object = None, dimensions: object = None):
    """An uninitialized storage; ``halo`` points are added on both sides of each dimension.

    GT4Py's spelling works too (``stencilkit.storage.empty(shape, dtype, backend=...,
    aligned_index=..., dimensions=...)``): with ``aligned_index`` the result carries it as
    ``__gt_origin__``, the default origin of a computation it is passed to."""
    t = dtypes.as_dtype(dtype)
    full = _normalize(shape, halo)
    origin, own_layout = _gt_layout(full, aligned_index, dimensions)
    chosen = registry.resolve(backend) if backend is not None else registry.resolve(None)
    n = int(np.prod(full))
    planes = bool(chosen.capabilities.k_planes_storage and len(full) == 3  # type: ignore
                  and own_layout)
    if chosen.capabilities.device is Device.GPU:  # type: ignore[union-attr]
        xp = array_module(chosen)
        if planes:
            ni, nj, nk = full
            return xp.empty(n, t).reshape(nk, ni, nj).transpose(1, 2, 0)
        return xp.empty(full, t)
    if planes:
        ni, nj, nk = full
        array = _aligned_empty(n, t).reshape(nk, ni, nj).transpose(1, 2, 0)  # K outermost
    else:
        array = _aligned_empty(n, t).reshape(full)
    return _with_origin(array, origin)


def _assign(out: object, value: object, backend: str | None) -> None:
    """``out[...] = value`` for a storage of any backend. CuPy assigns only scalars and
    device arrays (anything else goes to ``ndarray.fill``, which takes scalars only): a
    host array reaches a device storage as a device copy first."""
    chosen = registry.resolve(backend)
    if chosen.capabilities.device is Device.GPU and not np.isscalar(value) and \
            not is_device(value):  # type: ignore[union-attr]
        value = array_module(chosen).asarray(np.asarray(value))
    out[...] = value  # type: ignore[index]


def zeros(shape: object, dtype: object = float, *, backend: str | None = None,
          halo: object = 0, aligned_index: object = None, dimensions: object = None):
    out = empty(shape, dtype, backend=backend, halo=halo, aligned_index=aligned_index,
                dimensions=dimensions)
    out[...] = 0
    return out


def ones(shape: object, dtype: object = float, *, backend: str | None = None,
         halo: object = 0, aligned_index: object = None, dimensions: object = None):
    out = empty(shape, dtype, backend=backend, halo=halo, aligned_index=aligned_index,
                dimensions=dimensions)
    out[...] = 1
    return out


def full(shape: object, fill_value: object, dtype: object = float, *,
         backend: str | None = None, halo: object = 0, aligned_index: object = None,
         dimensions: object = None):
    """A storage holding ``fill_value``: a scalar, or anything NumPy broadcasts to the
    shape (on every backend)."""
    out = empty(shape, dtype, backend=backend, halo=halo, aligned_index=aligned_index,
                dimensions=dimensions)
    _assign(out, fill_value, backend)
    return out


def from_array(data: object, dtype: object = None, *, backend: str | None = None,
               aligned_index: object = None, dimensions: object = None):
    """GT4Py's ``from_array``: a new storage holding a copy of ``data`` (in ``dtype`` when
    given), laid out for the backend, carrying ``aligned_index`` as ``__gt_origin__``."""
    source = data.get() if hasattr(data, "get") and not isinstance(data, np.ndarray) else data
    values = np.asarray(source)
    t = values.dtype if dtype is None else dtypes.as_dtype(dtype)
    out = empty(values.shape, t, backend=backend, aligned_index=aligned_index,
                dimensions=dimensions)
    _assign(out, values, backend)
    return out


def as_storage(array: object, backend: str | None = None) -> np.ndarray:
    """A copy of ``array`` in the backend's preferred layout (the array itself if it is one);
    a host array for a GPU backend is copied to the device."""
    chosen = registry.resolve(backend)
    gpu = chosen.capabilities.device is Device.GPU  # type: ignore[union-attr]
    if is_device(array):
        if not hasattr(type(array), "__cuda_array_interface__"):  # DLPack only: a view
            array = array_module(chosen).from_dlpack(array) if gpu else array
        if not gpu:
            raise StencilError(f"as_storage: a device array for the {chosen.name!r} backend, "
                               "whose storages are host arrays",
                               hint="copy it to the host first (cupy.asnumpy(a))")
        a, address = array, 0
    else:
        a = np.asarray(array)
        address = a.ctypes.data
    out = empty(a.shape, a.dtype, backend=backend)
    # a device array in the layout is one (the device allocator aligns; the 64 bytes are
    # the host storages' vector alignment)
    if is_device(a) == gpu and out.strides == a.strides and (gpu or address % ALIGNMENT == 0):
        return a  # type: ignore[return-value]
    _assign(out, a, backend)
    return out
