"""The old home of the adapters' implementations, kept for the names tests import: the
dask adapter module and the device-array test. The code lives in ``stencilkit.adapters``
(``dask``, ``xarray``, ``device``, ``pickling``) and the user objects reach it through the
adapter protocol only."""

from __future__ import annotations

from ..adapters import dask
from ..arrays import is_device

__all__ = ["dask", "is_device"]
