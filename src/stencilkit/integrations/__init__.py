"""Stencils on other array libraries' objects: dask arrays, xarray DataArrays, device
arrays (``device.py``); pickling.

The core (``stencil.py``, ``multistage.py``) hands a call off here with one test,
:func:`is_foreign`, that never imports dask or xarray: it looks at the module that defined
the argument's type. Everything here imports its library lazily, on the first such call.
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


def point_call(st, args: tuple, out: object):
    """A point kernel called with at least one dask array or DataArray (contract.md section 8)."""
    from . import xarray as xr_support

    if xr_support.has_dataarray(args, out):
        return xr_support.point_call(st, args, out)
    from . import dask as dask_support

    return dask_support.point_call(st, args, out)


def computation_field(stencil: str, name: str, value: object, axes: str = "IJK") -> object:
    """A computation's field given as a DataArray (or a dask array): its NumPy data, its
    dimensions in the field's axis order (``axes``: "IJK", "IJ", "K", ...) by their names."""
    from . import xarray as xr_support

    return xr_support.field_data(stencil, name, value, axes)
