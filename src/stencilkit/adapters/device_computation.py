"""Computation calls on device arrays bound per signature: after the first call, the
pointer checks and the launches only.

A computation's checks, geometry (origins, domain, temporaries' shapes), temporaries and
compiled entry depend on its fields' dtypes, shapes and strides, on the scalars' types, and
on ``origin=``/``domain=``/``validate_args=``: together the signature (``computation_key``).
The first call with a signature runs the general path (``DeviceAdapter.computation_call``:
``bind_call``, ``computation_fields``, ``run_bound``), which hands what it ran to
``BoundComputationCall.of``: the entry's arguments in the launch description's order, with
the temporaries, origins and domain extents in place. A later call with the signature

- puts its fields and scalars into that tuple (each scalar checked as ``bind`` checks it:
  its range depends on its value, and converted as the entry takes it);
- checks what depends on the addresses: each field's alignment and the overlap of a
  written field with another (integer compares of the pointers against the spans kept per
  signature); a call that fails one takes the general path, which raises its error;
- launches (``runtime.cuda_calls.DeviceLaunch``).

Calls with 2-D temporaries (new zeroed planes per call), with ``exec_info``, with fields
that are not the array module's own ndarray, or on a variant that snapshots aliased fields
are never bound: they always take the general path. Bound calls are kept per thread, as
the temporaries are (``ComputationStencil._local``).
"""

from __future__ import annotations

import threading
from typing import Any

from ..config import current

_SCALARS = (int, float, bool, complex)
#: signatures a stencil keeps bound per thread (each holds its temporaries): the oldest
#: dropped beyond it
BOUND_CALLS = 16


def _hashable(value: object) -> object:
    """``origin=``/``domain=`` as part of a key (``api.multistage._hashable``'s rule)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return tuple(sorted((k, tuple(v)) for k, v in value.items()))
    return tuple(value)  # type: ignore[arg-type]


def _relative_span(a: Any) -> tuple[int, int] | None:
    """The bytes [first, last) a CuPy array spans relative to its pointer (None: empty)."""
    if 0 in a.shape:
        return None
    lo = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    return lo, hi + a.dtype.itemsize


def computation_key(st, args: tuple, kwargs: dict, origin: object, domain: object,
                    validate_args: bool) -> tuple | None:
    """The signature of a computation call, or None when one of its values has none (a
    field that is no array, a malformed origin: the general path decides and reports)."""
    try:
        return (st.backend or current().backend,
                tuple([type(a) if type(a) in _SCALARS else
                       (type(a), a.dtype, a.shape, a.strides) for a in args]),
                tuple([(k, type(a) if type(a) in _SCALARS else
                        (type(a), a.dtype, a.shape, a.strides)) for k, a in kwargs.items()]),
                None if origin is None else _hashable(origin),
                None if domain is None else _hashable(domain), bool(validate_args))
    except Exception:  # noqa: BLE001 - no signature: the general path decides
        return None


class DeviceComputationCalls:
    """A computation's bound device calls by ``computation_key``, per thread. The stencil
    holds it as ``_device`` and calls it first: True when it ran the call, False when it
    has not bound the call's signature."""

    __slots__ = ("st", "local")

    def __init__(self, st) -> None:
        self.st = st
        self.local = threading.local()

    def calls(self) -> dict[tuple, BoundComputationCall]:
        calls = getattr(self.local, "calls", None)
        if calls is None:
            calls = self.local.calls = {}
        return calls

    def __call__(self, args: tuple, kwargs: dict, origin: object, domain: object,
                 validate_args: bool) -> bool:
        key = computation_key(self.st, args, kwargs, origin, domain, validate_args)
        call = self.calls().get(key) if key is not None else None
        return call is not None and call(args, kwargs)

    def keep(self, key: tuple, call: BoundComputationCall) -> None:
        calls = self.calls()
        calls[key] = call
        if len(calls) > BOUND_CALLS:
            del calls[next(iter(calls))]


def dispatcher(st) -> DeviceComputationCalls:
    """The stencil's ``DeviceComputationCalls``, made on its first device call."""
    device = st.__dict__.get("_device")
    if device is None:
        device = st.__dict__["_device"] = DeviceComputationCalls(st)
    return device


class BoundComputationCall:
    """One signature's call: ``template`` is the entry's argument list with this
    signature's constants in place; ``positional``/``named`` say which slots take which
    argument of the call; ``scalars`` (slot, name, dtype) are checked and converted per
    call; ``fields`` (slot, itemsize, relative span) and ``overlaps`` (pairs of indices
    into ``fields``: a written field and another) are the address checks."""

    __slots__ = ("template", "positional", "named", "scalars", "fields", "overlaps", "check",
                 "convert", "launch")

    def __init__(self, template: list, positional: tuple, named: tuple, scalars: tuple,
                 fields: tuple, overlaps: tuple, check, convert, launch) -> None:
        self.template, self.positional, self.named = template, positional, named
        self.scalars, self.fields, self.overlaps = scalars, fields, overlaps
        self.check, self.convert, self.launch = check, convert, launch

    @staticmethod
    def of(st, args: tuple, kwargs: dict, run, values: dict, temps: dict, geo
           ) -> BoundComputationCall | None:
        """The bound call for the signature of the call (``args``, ``kwargs``) that just
        ran ``run`` (a ``CompiledComputationCall`` of a CUDA entry) on ``values`` with
        ``temps`` and ``geo``; None when it cannot be bound."""
        from ..runtime.computation import CompiledComputationCall
        from ..runtime.cuda import CudaEntry, _cupy
        from ..runtime.cuda_calls import DeviceLaunch

        if not isinstance(run, CompiledComputationCall) or not isinstance(run.entry,
                                                                          CudaEntry):
            return None
        binding, field_names = run.binding, run.field_names
        # each entry argument: ("value", name) per call, or a constant of the signature
        slots: list[tuple[str, object]] = [
            ("value", n) if n in field_names else ("const", temps[n]) for n in binding.arrays]
        slots += [("const", geo.origins[n][a]) for n, a in binding.origins]
        slots += [("value", s) for s, _ in binding.scalars]
        slots += [("const", geo.domain[a]) for a in binding.domain]
        if binding.order is not None:
            slots = [slots[i] for i in binding.order]
        positional_names = dict(zip(st._arguments.positional, range(len(args))))
        template: list[object] = []
        positional, named, per_call = [], [], set()
        for slot, (kind, what) in enumerate(slots):
            if kind == "const":
                template.append(what)
            elif what in positional_names:
                positional.append((slot, positional_names[what]))
                template.append(None)
            elif what in kwargs:
                named.append((slot, what))
                template.append(None)
            else:  # a default: the same value every call
                template.append(values[what])
                kind = "const"
            if kind == "value":
                per_call.add(slot)
        types = dict(binding.scalars)
        named_slots = [(slot, what) for slot, (kind, what) in enumerate(slots)
                       if kind == "value"]
        scalars = tuple((slot, what, types[what]) for slot, what in named_slots
                        if what in types and slot in per_call)
        defaults = {slot: values[what] for slot, what in named_slots
                    if what in types and slot not in per_call}
        for slot, value in defaults.items():
            template[slot] = run.scalar(value, types[slots[slot][1]])  # type: ignore[index]
        fields: list[tuple[int, int, tuple[int, int] | None]] = []
        index_of: dict[str, int] = {}
        for slot, what in named_slots:
            if what in field_names and slot in per_call:
                a = values[what]
                if type(a) is not _cupy().ndarray:
                    return None  # a view through __cuda_array_interface__/DLPack: general
                index_of[what] = len(fields)
                fields.append((slot, a.dtype.itemsize, _relative_span(a)))
        written = [w for w in st._arguments.written_fields if w in index_of]
        overlaps = tuple((index_of[w], index_of[o]) for w in written for o in index_of
                         if o != w)
        entry_values = template.copy()
        for slot in per_call:
            entry_values[slot] = values[slots[slot][1]]
        for slot, _, t in scalars:
            entry_values[slot] = run.scalar(entry_values[slot], t)
        launch = DeviceLaunch(run.entry, _cupy(), entry_values,
                              frozenset(range(len(slots))) - per_call)
        return BoundComputationCall(template, tuple(positional), tuple(named), scalars,
                                    tuple(fields), overlaps, st._arguments.check_scalar,
                                    run.scalar, launch)

    def __call__(self, args: tuple, kwargs: dict) -> bool:
        """Run the call; False (nothing run) when an address check fails: the general path
        then raises the error."""
        values = self.template.copy()
        for slot, i in self.positional:
            values[slot] = args[i]
        for slot, name in self.named:
            values[slot] = kwargs[name]
        for slot, name, t in self.scalars:
            self.check(name, t, values[slot])
            values[slot] = self.convert(values[slot], t)
        spans: list[Any] = []
        for slot, itemsize, span in self.fields:
            at = values[slot].data.ptr
            if at % itemsize:
                return False  # not aligned: computation_fields says so
            spans.append(None if span is None else (at + span[0], at + span[1]))
        for w, o in self.overlaps:
            mine, other = spans[w], spans[o]
            if mine and other and mine[0] < other[1] and other[0] < mine[1]:
                return False  # a written field shares memory: computation_fields says so
        self.launch.run(values)
        return True
