"""Argument checks of computation calls: binding by position and name, the scalars' kinds
and ranges, the fields' dimensions, dtypes, writability and overlap, and aligned copies for
compiled code. Built once per stencil (``multistage.ComputationStencil``); a call runs the
checks its ``validate_args`` asks for.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, did_you_mean
from ..ir import computation as c


class ComputationArguments:
    """The checks of one computation's arguments, against its typed definition."""

    def __init__(self, definition: c.ComputationDef, name: str, positional: tuple[str, ...],
                 defaults: dict[str, object], written_fields: tuple[str, ...]) -> None:
        self.definition = definition
        self.name = name
        self.positional = positional
        self.defaults = defaults
        self.written_fields = written_fields

    def bind(self, args: tuple, kwargs: dict) -> dict[str, object]:
        """Arguments by position (up to the keyword-only ones) or name; defaults fill the rest."""
        values = self.bind_names(args, kwargs)
        for f in self.definition.fields:
            v = values[f.name]
            if v is None:
                raise self.none_error(f.name)
        for s in self.definition.scalars:
            self.check_scalar(s.name, s.dtype, values[s.name])
        return values

    def none_error(self, name: str) -> ArgumentError:
        return ArgumentError(f"field '{name}' is None but the stencil uses it",
                             stencil=self.name, loc=self.definition.loc,
                             hint=f"pass an array for '{name}'")

    def bind_names(self, args: tuple, kwargs: dict) -> dict[str, object]:
        """``bind`` without looking at the values (also what typing a call from jitted code
        binds, the values being Numba types)."""
        params = self.definition.params
        positional = self.positional
        if len(args) > len(positional):
            kw_only = params[len(positional):]
            raise ArgumentError(f"takes {len(positional)} positional arguments, {len(args)} "
                                "given", stencil=self.name, loc=self.definition.loc,
                                hint=f"the parameters are {', '.join(params)}" + (
                                    f"; pass {', '.join(kw_only)} by name" if kw_only else ""))
        values = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k not in params:
                raise ArgumentError(f"unexpected argument '{k}'" + did_you_mean(k, params),
                                    stencil=self.name,
                                    loc=self.definition.loc,
                                    hint=f"the parameters are {', '.join(params)}")
            if k in values:
                raise ArgumentError(f"argument '{k}' given twice", stencil=self.name)
            values[k] = v
        for p in params:
            if p not in values and p in self.defaults:
                values[p] = self.defaults[p]
        missing = [p for p in params if p not in values]
        if missing:
            raise ArgumentError(f"missing argument(s) {missing}", stencil=self.name,
                                loc=self.definition.loc)
        return values

    def check_scalar(self, name: str, t: np.dtype, v: object) -> None:
        """A scalar must be a number of a kind the parameter's type holds (no complex for a
        float, no float for an int) and, for integers, in its range."""
        kinds = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}[t.kind]
        kind = ("b" if isinstance(v, (bool, np.bool_)) else
                "i" if isinstance(v, (int, np.integer)) else
                "f" if isinstance(v, (float, np.floating)) else
                "c" if isinstance(v, (complex, np.complexfloating)) else None)
        if kind is None or kind not in kinds:
            what = type(v).__name__ if kind is None else f"{type(v).__name__} {v!r}"
            raise ArgumentError(f"scalar parameter '{name}' ({t}) got a {what}",
                                stencil=self.name, loc=self.definition.loc,
                                hint=f"pass a number that converts to {t} without loss of kind")
        if kind == "i" and t.kind in "iu":
            info = np.iinfo(t)
            if not info.min <= int(v) <= info.max:  # type: ignore[call-overload]
                raise self.range_error(name, t, v)

    def range_error(self, name: str, t: np.dtype, v: object) -> ArgumentError:
        info = np.iinfo(t)
        return ArgumentError(f"scalar parameter '{name}' = {v} is outside the range of {t}",
                             stencil=self.name, loc=self.definition.loc,
                             hint=f"pass an integer in [{info.min}, {info.max}]")

    def check_fields(self, fields: dict[str, object], overlap: bool = True) -> None:
        """``overlap=False`` for stand-ins of device arrays, whose host memory says nothing
        (``adapters/device.py`` checks the device addresses)."""
        self.check_arrays(fields)
        for f in self.definition.fields:
            a = fields[f.name]
            if a.dtype != f.dtype:
                raise self.dtype_error(f, a.dtype)
        for name in self.written_fields if overlap else ():
            for other, b in fields.items():
                if other != name and np.may_share_memory(fields[name], b):
                    raise self.overlap_error(name, other)

    def overlap_error(self, name: str, other: str) -> ArgumentError:
        return ArgumentError(f"field '{name}' is written and shares memory with field "
                             f"'{other}'", stencil=self.name, loc=self.definition.loc,
                             hint="pass separate arrays (copy one of them)")

    def dtype_error(self, f: c.FieldDecl, dtype: np.dtype) -> ArgumentError:
        order = "" if dtype.isnative else " (non-native byte order)"
        return ArgumentError(f"field '{f.name}' is declared {f.dtype} but the array is "
                             f"{dtype}{order}", stencil=self.name, loc=self.definition.loc,
                             hint=f"pass a {f.dtype} array (a.astype(np.{f.dtype}))")

    def check_arrays(self, fields: dict[str, object]) -> None:
        """What even ``validate_args=False`` checks (the geometry relies on it): arrays of
        the right dimensions, written ones writable."""
        for f in self.definition.fields:
            a = fields[f.name]
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"field '{f.name}' must be an array, got "
                                    f"{type(a).__name__}", stencil=self.name,
                                    loc=self.definition.loc,
                                    hint="pass a NumPy array (or an sk.zeros storage)")
            if a.ndim != f.ndim or a.shape[len(f.axes):] != f.data_dims:
                raise self.shape_error(f, a.shape)
        for name in self.written_fields:
            if not fields[name].flags.writeable:  # type: ignore[union-attr]
                raise self.read_only_error(name)

    def shape_error(self, f: c.FieldDecl, shape: object) -> ArgumentError:
        """``shape``: the array's shape, or (from jitted code) a phrase such as "2 dimensions"."""
        dims = f" with data dimensions {f.data_dims}" if f.data_dims else ""
        has = f"has shape {shape}" if isinstance(shape, tuple) else f"has {shape}"
        return ArgumentError(f"field '{f.name}' is Field[{f.axes}]{dims} but the array {has}",
                             stencil=self.name, loc=self.definition.loc,
                             hint=f"pass a {f.ndim}-D array" + (
                                 f" whose last dimensions are {f.data_dims}"
                                 if f.data_dims else ""))

    def read_only_error(self, name: str) -> ArgumentError:
        return ArgumentError(f"field '{name}' is written by the stencil but the array is "
                             "read-only", stencil=self.name, loc=self.definition.loc,
                             hint=f"pass a writable array for '{name}' (np.array(...) copies "
                                  "a read-only or broadcast one)")

    def aligned(self, values: dict[str, object], fields: dict[str, np.ndarray]
                 ) -> tuple[dict[str, object], dict[str, np.ndarray]]:
        """The compiled code indexes in elements: a field whose address or strides are not
        multiples of its item size runs on an aligned copy, copied back if written."""
        # flags.aligned is NumPy's own check of the address (and strides) against the
        # dtype's alignment; the strides must moreover be whole elements
        odd = [n for n, a in fields.items() if not a.flags.aligned
               or any(st % a.itemsize for st in a.strides)]
        if not odd:
            return values, {}
        values = dict(values)
        written = {}
        for name in odd:
            values[name] = np.array(fields[name])
            if name in self.written_fields:
                written[name] = fields[name]
        return values, written
