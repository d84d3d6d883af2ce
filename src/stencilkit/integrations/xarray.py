"""Stencils on xarray objects: labelled in, labelled out.

A point kernel whose first argument is a ``DataArray`` (or ``Variable``) returns one with the
same dims, coords, attrs and name, holding the result of the call on the underlying data
(NumPy, or a lazy dask array when the data is dask-backed). Other DataArray arguments are
passed by their data; relatively indexed ones must have the first one's dims, in its order,
since the kernel's relative indices are positional. A computation takes DataArrays as fields
and writes into their data.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError


def _xr_types() -> tuple[type, ...]:
    import xarray as xr

    return (xr.DataArray, xr.Variable)


def _is_labelled(value: object) -> bool:
    if type(value).__module__.partition(".")[0] != "xarray":
        return False
    return isinstance(value, _xr_types())


def has_dataarray(args: tuple, out: object) -> bool:
    return any(type(a).__module__.partition(".")[0] == "xarray" for a in (*args, out))


def _refuse_other(st, i: int | None, value: object) -> None:
    """xarray objects other than DataArray/Variable (a Dataset, a Coordinates...)."""
    what = "'out'" if i is None else f"argument {i + 1}"
    raise ArgumentError(f"{what} is an xarray {type(value).__name__}, not a DataArray",
                        stencil=st.__name__,
                        hint="pass one variable of it: ds['name']")


def point_call(st, args: tuple, out: object):
    """``st(*args, out=out)`` with xarray objects among them."""
    labelled = _xr_types()
    for i, a in enumerate((*args, out)):
        if type(a).__module__.partition(".")[0] == "xarray" and not isinstance(a, labelled):
            _refuse_other(st, None if i == len(args) else i, a)
    template = args[0] if args and isinstance(args[0], labelled) else None
    if template is not None:
        kernel, _ = st._parse()
        relative = {i for i, p in enumerate(kernel.params) if p in kernel.relative}
        for i, a in enumerate(args[1:], 1):
            if i in relative and isinstance(a, labelled) and a.dims != template.dims:
                raise ArgumentError(
                    f"argument {i + 1} has dims {a.dims} but the first argument has dims "
                    f"{template.dims}; relative indices are positional, so they must agree",
                    stencil=st.__name__,
                    hint=f"pass it as arg.transpose(*{template.dims!r}) (or rename its dims)")
    data = tuple(a.data if isinstance(a, labelled) else a for a in args)
    if out is not None and isinstance(out, labelled):
        target = out.data
        if not isinstance(target, np.ndarray):
            raise ArgumentError(
                f"'out' is a DataArray backed by {type(target).__module__.partition('.')[0]} "
                f"{type(target).__name__}, which cannot be written in place",
                stencil=st.__name__,
                hint="pass out= backed by a NumPy array (out.load()), or use the returned "
                     "array")
        st(*data, out=target)
        return out
    result = st(*data, out=out)
    if out is not None or template is None:
        return result
    # same dims, coords, attrs and name; the coords are shared, not copied
    return template.copy(deep=False, data=result)


def field_data(stencil: str, name: str, value: object) -> np.ndarray:
    """A computation's field given as a DataArray: its NumPy data, which the call writes.

    Dask-backed (or lazily loaded) data is loaded into the DataArray first, so that the
    writes land in the array the caller holds; a bare dask array cannot be written in place.
    """
    if type(value).__module__.partition(".")[0] == "dask":
        raise ArgumentError(
            f"field '{name}' is a dask array; computations run at once and write their "
            "fields in place, which a dask array cannot take", stencil=stencil,
            hint="pass x.compute() (NumPy), or wrap it in a DataArray, whose data the call "
                 "loads and writes")
    if not _is_labelled(value):
        raise ArgumentError(f"field '{name}' is an xarray {type(value).__name__}, not a "
                            "DataArray", stencil=stencil,
                            hint="pass one variable: ds['name']")
    if not isinstance(value.data, np.ndarray):
        value.load()  # in place: the DataArray now holds NumPy data the call can write
    data = value.data
    if not isinstance(data, np.ndarray):
        raise ArgumentError(f"field '{name}' is a DataArray backed by "
                            f"{type(data).__name__}, not a NumPy array", stencil=stencil,
                            hint="pass a DataArray holding NumPy data")
    return data
