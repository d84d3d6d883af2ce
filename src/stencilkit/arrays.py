"""What kind of array an argument is, told by its type alone: no array library is imported.

A dask array or an xarray object (:func:`is_foreign`: the adapters take such a call) or a
GPU array (:func:`is_device`). The user objects, the runtime and the adapters all ask; the
answers import nothing, so this module sits at the bottom with ``dtypes``.
"""

from __future__ import annotations

from collections.abc import Iterable

_FOREIGN_ROOTS = ("dask", "xarray")


def is_foreign(value: object) -> bool:
    """True for a dask array or an xarray object (by the defining module of its type)."""
    return type(value).__module__.partition(".")[0] in _FOREIGN_ROOTS


#: DLPack device types of memory a CUDA kernel can address (kDLCUDA, kDLCUDAManaged)
_DLPACK_CUDA = (2, 13)


def is_device(value: object) -> bool:
    """True for an array on a GPU: ``__cuda_array_interface__`` (CuPy, Numba, PyTorch) or a
    CUDA ``__dlpack__`` (JAX, ...)."""
    t = type(value)
    if hasattr(t, "__cuda_array_interface__"):
        return True
    if t.__module__ == "numpy" or not hasattr(t, "__dlpack_device__"):
        return False  # NumPy's arrays have __dlpack_device__ too: the CPU, never asked
    try:
        return value.__dlpack_device__()[0] in _DLPACK_CUDA  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 (a foreign object's method: any failure means "no")
        return False


def any_foreign(values: Iterable[object]) -> bool:
    return any(type(v).__module__.partition(".")[0] in _FOREIGN_ROOTS for v in values)
