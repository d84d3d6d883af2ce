"""A computation's latest call on NumPy arrays, bound: the next call with the same arrays,
origin and domain goes straight to the launcher.

What a call checks and works out before it launches — the backend, the fields' dimensions,
dtypes, writability, overlap and alignment, the geometry, the build for the fields'
layout, the temporaries — depends only on the configuration, the stencil's options, the
arrays (which objects, their shapes, strides and dtypes), the origin and the domain. A time
loop calls a stencil with the same arrays every step: ``BoundComputationCall`` records the
outcome of one full call and, for a call that passes the same objects with the same
``shape``/``strides``/``dtype``, checks only the scalars (their kinds and ranges, as every
call does) and launches. That work was 26 us of a 28 us call on a 8x8x8 domain (hdiff, 2
vCPUs; docs/performance.md, "A computation's bound call, and no team for small domains").

The binding keeps no user array alive. An array that owns its memory is known by its
``id``: another array that takes that id once the first is freed has memory of its own too,
so it overlaps no other field and is aligned as NumPy allocates, and with the same shape,
strides, dtype and writability every check would come out the same. A view (which might
share memory with another field) is held by weak reference and must be the same object.
Not a weak reference for owners: NumPy refuses to ``resize`` an array that has one.
Anything the binding did not record (another array, another origin, adapters' arrays,
``exec_info``) takes the full path, which binds again.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import config
from ..errors import StencilError
from .computation import CompiledComputationCall, computation_status_error
from .computation_args import ComputationArguments


def plain(value: object) -> bool:
    """Whether ``value`` (an origin or a domain) compares by ``==`` to a bool: None, a
    tuple or list of Python ints, or a dict of such by name."""
    if value is None:
        return True
    if isinstance(value, dict):
        return all(type(k) is str and plain_sizes(v) for k, v in value.items())
    return plain_sizes(value)


def plain_sizes(value: object) -> bool:
    return isinstance(value, (tuple, list)) and type(value) in (tuple, list) \
        and all(type(x) is int for x in value)


#: One field of the bound call: its name; where the call passes it (a position, a keyword);
#: how the array is known (its ``id`` if it owns its memory, else a weak reference); its
#: type (NumPy's or a subclass no adapter claimed, such as ``stencilkit.storage.Storage``),
#: the shape, strides and dtype the checks saw; its ``__gt_origin__`` (None if it has none).
BoundField = tuple[str, "int | str", "int | weakref.ref", type, tuple, tuple, np.dtype, object]


class BoundComputationCall:
    """One call's arguments as ``ComputationStencil.run_bound`` checked and ran them.

    ``options``: what of the stencil decides its build besides the arrays (its backend,
    autotune and fast_math attributes), compared by equality; ``launch(arrays, scalars)``:
    the launcher of the call, on the temporaries and the geometry it ran with."""

    __slots__ = ("config", "options", "nargs", "keywords", "fields", "written", "scalars",
                 "origin", "domain", "validated", "launch")

    @classmethod
    def of(cls, arguments: ComputationArguments, options: tuple, args: tuple,
           kwargs: dict[str, Any], origin: object, domain: object, validated: bool,
           run: Callable[..., None], values: dict[str, Any], temps: dict[str, np.ndarray],
           geo: Any) -> BoundComputationCall | None:
        """The binding of a call that ran on the arrays it was given (no copies), with a
        plain origin and domain; None for a call that left a field to its default."""
        position = {name: i for i, name in enumerate(arguments.positional[:len(args)])}

        def source(name: str) -> int | str | None:
            return position.get(name, name if name in kwargs else None)

        fields = []
        for f in arguments.definition.fields:
            a, where = values[f.name], source(f.name)
            if where is None:
                return None
            known: int | weakref.ref = id(a) if a.flags.owndata else weakref.ref(a)
            fields.append((f.name, where, known, type(a), a.shape, a.strides, a.dtype,
                           getattr(a, "__gt_origin__", None)))
        scalars = tuple((s.name, source(s.name), s.dtype, values[s.name])
                        for s in arguments.definition.scalars)
        return cls(arguments, options, args, kwargs, origin, domain, validated, tuple(fields),
                   scalars, _launcher(run, values, temps, geo, [f[0] for f in fields],
                                      [s[0] for s in scalars]))

    def __init__(self, arguments: ComputationArguments, options: tuple, args: tuple,
                 kwargs: dict[str, Any], origin: object, domain: object, validated: bool,
                 fields: tuple[BoundField, ...], scalars: tuple,
                 launch: Callable[[list, list], None]) -> None:
        self.config = config.current()
        self.options = options
        self.nargs = len(args)
        self.keywords = tuple(kwargs)
        self.fields = fields
        written = set(arguments.written_fields)
        self.written = tuple(i for i, f in enumerate(fields) if f[0] in written)
        self.scalars = scalars
        self.origin = origin
        self.domain = domain
        self.validated = validated
        self.launch = launch

    def match(self, arguments: ComputationArguments, options: tuple, args: tuple,
              kwargs: dict[str, Any], origin: object, domain: object, validate: bool
              ) -> Callable[[], None] | None:
        """The launch of this call if it is the bound one (its scalars checked), else None."""
        if (config.current() is not self.config or len(args) != self.nargs
                or tuple(kwargs) != self.keywords or (validate and not self.validated)
                or options != self.options):
            return None
        if type(origin) is not type(self.origin) or type(domain) is not type(self.domain):
            return None
        try:  # the bound ones are plain: this compares to a bool or raises
            if origin != self.origin or domain != self.domain:
                return None
        except Exception:  # noqa: BLE001 - an element's own __eq__: the full path decides
            return None
        arrays = []
        for _, where, known, cls, shape, strides, dtype, gt_origin in self.fields:
            a: Any = args[where] if type(where) is int else kwargs[where]  # type: ignore[index]
            given = type(a)  # (not ``type(a) is cls``: mypy would then take ``a`` for an object)
            if given is not cls:
                return None
            if type(known) is int:
                if id(a) != known or not a.flags.owndata:
                    return None
            elif known() is not a:  # type: ignore[operator]
                return None
            if a.shape != shape or a.strides != strides or a.dtype is not dtype:
                return None
            if origin is None and getattr(a, "__gt_origin__", None) != gt_origin:
                return None
            arrays.append(a)
        for i in self.written:
            if not arrays[i].flags.writeable:
                return None
        scalars = []
        for name, where, dtype, default in self.scalars:
            v = args[where] if type(where) is int else \
                kwargs[where] if where is not None else default
            try:
                arguments.check_scalar(name, dtype, v)
            except StencilError:
                return None  # the full path reports it (or an adapter takes the call)
            scalars.append(v)
        launch = self.launch
        return lambda: launch(arrays, scalars)


def _launcher(run: Callable[..., None], values: dict[str, object],
              temps: dict[str, np.ndarray], geo: Any, fields: list[str],
              scalars: list[str]) -> Callable[[list, list], None]:
    """``launch(arrays, scalars)``: ``run`` on this call's arrays and scalars (in
    ``fields``' and ``scalars``' order), the rest as bound. A compiled entry point gets its
    argument list with only those slots filled in; another launcher, the values by name."""
    if type(run) is not CompiledComputationCall:
        names = fields + scalars
        base = {n: v for n, v in values.items() if n not in names}

        def launch_values(arrays: list, given: list) -> None:
            run({**base, **dict(zip(names, arrays + given))}, temps, geo)
        return launch_values
    binding, entry, defn = run.binding, run.entry, run.defn
    template = binding.arguments(values, temps, geo, run.field_names, run.scalar)
    at = binding.positions()
    # (the entry takes no field its code does not read or write)
    array_slots = [(at[("array", n)], i) for i, n in enumerate(fields) if ("array", n) in at]
    scalar_slots = [(at[("scalar", n)], t) for n, t in binding.scalars]
    by_name = dict(zip(scalars, range(len(scalars))))
    scalar_order = [by_name[n] for n, _ in binding.scalars]
    convert = run.scalar
    for slot, _ in array_slots:
        template[slot] = None  # the binding holds no user array

    def launch_entry(arrays: list, given: list) -> None:
        call = template.copy()
        for slot, i in array_slots:
            call[slot] = arrays[i]
        for (slot, t), i in zip(scalar_slots, scalar_order):
            call[slot] = convert(given[i], t)
        status = entry(*call)
        if status:
            raise computation_status_error(status, defn)
    return launch_entry
