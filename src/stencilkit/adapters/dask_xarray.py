"""The dask/xarray adapter: point kernels map over a dask array's chunks with the halo
they need (``adapters.dask``) and over a DataArray's named dimensions (``adapters.xarray``);
a computation's field given as a DataArray (or a dask array) runs on its data, its
dimensions put in the field's axis order by name."""

from __future__ import annotations

from . import Adapter, register

_ROOTS = ("dask", "xarray")


class DaskXarrayAdapter(Adapter):
    name = "dask/xarray"
    priority = 30

    def claims_type(self, cls: type) -> bool:
        return cls.__module__.partition(".")[0] in _ROOTS

    def point_call(self, st, args: tuple, out: object) -> object:
        """A point kernel called with at least one dask array or DataArray (contract.md
        section 8): labelled arguments first (their data may be dask arrays)."""
        from . import xarray

        if xarray.has_dataarray(args, out):
            return xarray.point_call(st, args, out)
        from . import dask

        return dask.point_call(st, args, out)

    def computation_call(self, st, args: tuple, kwargs: dict, origin: object, domain: object,
                         validate_args: bool, exec_info: dict | None) -> None:
        from . import xarray

        def converted(name: str, axes: str, value: object) -> object:
            if type(value).__module__.partition(".")[0] in _ROOTS:
                return xarray.field_data(st.__name__, name, value, axes)
            return value

        values, fields, origin = st.bind_call(args, kwargs, origin, exec_info, converted)
        return st.run_bound(values, fields, origin, domain, validate_args, exec_info)


register(DaskXarrayAdapter())
