"""Stencils on xarray objects: labelled in, labelled out.

A point kernel whose first argument is a ``DataArray`` (or ``Variable``) returns one with the
same dims, coords, attrs and name, holding the result of the call on the underlying data
(NumPy, or a lazy dask array when the data is dask-backed). Other DataArray arguments are
passed by their data; relatively indexed ones must have the first one's dims, in its order,
since the kernel's relative indices are positional. With ``dims=`` on the stencil, the kernel's
axes run over those named dimensions and every other dimension is broadcast (contract.md section 9).
A computation takes DataArrays as fields, maps their dims to I, J, K by name, and writes
into their data.
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
    if template is not None and st.dims is not None:
        return _named_dims_call(st, args, out, template)
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


#: dimension names a computation's field maps to each grid axis (compared in lower case):
#: GT4Py's and the usual model and CF names (FV3's grid_xt, WRF's west_east, ...)
AXIS_NAMES = {
    "I": ("i", "x", "lon", "longitude", "xc", "grid_xt", "grid_x", "xaxis_1", "west_east",
          "nlon", "ncol_x"),
    "J": ("j", "y", "lat", "latitude", "yc", "grid_yt", "grid_y", "yaxis_1", "south_north",
          "nlat"),
    "K": ("k", "z", "lev", "level", "levels", "height", "plev", "pfull", "phalf", "depth",
          "altitude", "zaxis_1", "bottom_top", "pressure", "model_level_number", "nz",
          "interface"),
}
_AXIS_OF = {n: axis for axis, names in AXIS_NAMES.items() for n in names}


def _axis_order(stencil: str, name: str, dims: tuple, axes: str) -> tuple[int, ...]:
    """The permutation of ``dims`` that puts the field's grid axes first, in ``axes``' order
    (by the dims' names), then its data dimensions; an ArgumentError when the names do not
    say which dimension is which axis."""
    found = {d: _AXIS_OF.get(str(d).lower()) for d in dims}
    grid = {}
    for d, axis in found.items():
        if axis is None:
            continue
        if axis not in axes or axis in grid:
            why = (f"'{d}' is a{'n' if axis == 'I' else ''} {axis} dimension, which field "
                   f"'{name}' ({axes}) does not have" if axis not in axes else
                   f"both '{grid[axis]}' and '{d}' name axis {axis}")
            raise ArgumentError(f"field '{name}' is a DataArray with dims {dims}: {why}",
                                stencil=stencil, hint=_rename_hint(axes))
        grid[axis] = d
    missing = [a for a in axes if a not in grid]
    if missing:
        raise ArgumentError(
            f"field '{name}' is a DataArray with dims {dims}: none of them names axis "
            f"{missing[0]} of the field ({axes}), so which dimension is which is unknown",
            stencil=stencil, hint=_rename_hint(axes))
    order = [dims.index(grid[a]) for a in axes]
    return tuple(order + [i for i in range(len(dims)) if i not in order])


def _rename_hint(axes: str) -> str:
    names = ", ".join(f"{a}: {AXIS_NAMES[a][:4]}" for a in axes)
    return (f"rename the dims to names of the axes ({names}, ...), e.g. "
            "arr.rename(time='lev'), or pass arr.data to index positionally")


def field_data(stencil: str, name: str, value: object, axes: str = "IJK") -> np.ndarray:
    """A computation's field given as a DataArray: its NumPy data, which the call writes,
    its dimensions put in the field's axis order by their names (``AXIS_NAMES``: ``lat``
    is J wherever it stands), the data dimensions after them.

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
    order = _axis_order(stencil, name, tuple(value.dims), axes)
    # a view: the call writes into the caller's memory whatever the dims' order
    return data if order == tuple(range(data.ndim)) else data.transpose(order)


def _relative_positions(st) -> set[int]:
    kernel, _ = st._parse()
    return {i for i, p in enumerate(kernel.params) if p in kernel.relative}


def _named_dims_call(st, args: tuple, out: object, template):
    """``dims=``: the kernel over the named dimensions, once per index of the others.

    Relatively indexed DataArrays take part by name (``xr.apply_ufunc``: broadcast against
    each other, the named dims moved last, lazily per dask block); other arguments reach
    every application as they are (DataArrays by their data)."""
    import xarray as xr

    labelled = _xr_types()
    dims = st.dims
    relative = _relative_positions(st)
    named = [i for i, a in enumerate(args) if i in relative and isinstance(a, labelled)]
    for i in named:
        _require_dims(st, f"argument {i + 1}", args[i], dims)
    if out is not None and isinstance(out, labelled):
        _require_dims(st, "'out'", out, dims)
    plain = [a.data if isinstance(a, labelled) else a for a in args]
    core_shape = tuple(template.sizes[d] for d in dims)

    def apply_each(*blocks: np.ndarray, target: np.ndarray | None = None) -> np.ndarray:
        nd = len(dims)
        batch = np.broadcast_shapes(*(b.shape[:-nd] for b in blocks))
        blocks = tuple(np.broadcast_to(b, batch + b.shape[-nd:]) for b in blocks)

        def one(index: tuple[int, ...], out_block: np.ndarray | None = None):
            call = list(plain)
            for i, b in zip(named, blocks):
                call[i] = b[index]
            return st(*call, out=out_block)

        if target is not None:
            for index in np.ndindex(batch):
                one(index, target[index])
            return target
        result = None
        for index in np.ndindex(batch):
            value = one(index)
            if result is None:
                result = np.empty(batch + value.shape, value.dtype)
            result[index] = value
        if result is None:  # an empty batch: the dtype from a stand-in application
            sample = one_sample()
            result = np.empty(batch + sample.shape, sample.dtype)
        return result

    def one_sample() -> np.ndarray:
        call = list(plain)
        for i in named:
            call[i] = np.zeros(core_shape, dtype=args[i].dtype)
        return st(*call)

    if out is not None:
        return _named_dims_into(st, args, named, dims, out, apply_each)
    lazy = any(type(args[i].data).__module__.partition(".")[0] == "dask" for i in named)
    result = xr.apply_ufunc(
        apply_each, *(args[i] for i in named),
        input_core_dims=[list(dims)] * len(named), output_core_dims=[list(dims)],
        join="override", dask="parallelized",
        output_dtypes=[one_sample().dtype] if lazy else None,
        # a block must hold the whole of the named dims: the kernel's neighbourhood spans them
        dask_gufunc_kwargs={"allow_rechunk": True})
    result = result.transpose(*template.dims, ...)
    result.attrs = dict(template.attrs)
    result.name = template.name
    return result


def _named_dims_into(st, args, named, dims, out, apply_each):
    """``out=`` with ``dims=``: each application writes its slice of ``out`` in place."""
    labelled = _xr_types()
    if not isinstance(out, labelled):
        raise ArgumentError("with dims=, 'out' must be a DataArray", stencil=st.__name__,
                            hint="pass out= as a DataArray with the dims of the result")
    if not isinstance(out.data, np.ndarray):
        raise ArgumentError("'out' is a DataArray not backed by a NumPy array, which cannot be "
                            "written in place", stencil=st.__name__,
                            hint="pass out= backed by a NumPy array (out.load())")
    batch = [d for d in out.dims if d not in dims]
    blocks = []
    for i in named:
        a = args[i]
        extra = [d for d in a.dims if d not in out.dims]
        if extra:
            raise ArgumentError(f"argument {i + 1} has dimension {extra[0]!r}, which 'out' "
                                f"lacks", stencil=st.__name__,
                                hint=f"pass out= with dims {tuple(batch) + tuple(dims)} "
                                     "(any order)")
        a = a.expand_dims([d for d in batch if d not in a.dims])
        blocks.append(np.asarray(a.transpose(*batch, *dims).data))
    target = out.transpose(*batch, *dims).data  # a view of out's NumPy data
    apply_each(*blocks, target=target)
    return out


def _require_dims(st, what: str, value, dims: tuple[str, ...]) -> None:
    missing = [d for d in dims if d not in value.dims]
    if missing:
        raise ArgumentError(f"{what} has dims {tuple(value.dims)}, without {missing[0]!r}, one "
                            f"of the dims {dims} the kernel runs over", stencil=st.__name__,
                            hint=f"rename its dimension to {missing[0]!r} "
                                 f"(arr.rename({{...: {missing[0]!r}}})) or change dims=")
