"""Stencils on other array libraries' objects: dask arrays, xarray DataArrays, device
arrays (``device.py``); pickling.

The user objects reach these through the adapter protocol (``stencilkit.adapters``), never
directly: an adapter claims an argument by the module that defined its type, without
importing dask or xarray. Everything here imports its library lazily, on the first such call.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..adapters import is_device  # noqa: F401 (moved: the adapters' structural test)

_FOREIGN_ROOTS = ("dask", "xarray")


def is_foreign(value: object) -> bool:
    """True for a dask array or an xarray object (by the defining module of its type)."""
    return type(value).__module__.partition(".")[0] in _FOREIGN_ROOTS


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
