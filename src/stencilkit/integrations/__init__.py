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


def is_device(value: object) -> bool:
    """True for an array on a GPU (``__cuda_array_interface__``: CuPy, Numba, PyTorch)."""
    return hasattr(type(value), "__cuda_array_interface__")


def any_foreign(values: Iterable[object]) -> bool:
    return any(type(v).__module__.partition(".")[0] in _FOREIGN_ROOTS for v in values)


def point_call(st, args: tuple, out: object):
    """A point kernel called with at least one dask array or DataArray (API.md section 8)."""
    from . import xarray as xr_support

    if xr_support.has_dataarray(args, out):
        return xr_support.point_call(st, args, out)
    from . import dask as dask_support

    return dask_support.point_call(st, args, out)


def computation_field(stencil: str, name: str, value: object) -> object:
    """A computation's field given as a DataArray (or a dask array): its NumPy data."""
    from . import xarray as xr_support

    return xr_support.field_data(stencil, name, value)
