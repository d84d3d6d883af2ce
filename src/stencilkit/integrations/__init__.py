"""Stencils on other array libraries' objects: dask arrays, xarray DataArrays, device
arrays (``device.py``); pickling.

The user objects reach these through the adapter protocol (``stencilkit.adapters``), never
directly: an adapter claims an argument by the module that defined its type, without
importing dask or xarray. Everything here imports its library lazily, on the first such call.
"""

from __future__ import annotations

from ..arrays import any_foreign, is_device, is_foreign  # noqa: F401  (re-exported)


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
