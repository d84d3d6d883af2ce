"""Identifiers of the numba printers that Numba's own renamings cannot collide with.

Numba renames variables twice on the way to a ``prange`` loop: SSA versions ``x.1``, and,
for the gufunc a parfor becomes, ``ir_utils.legalize_names``: ``_`` -> ``__``, ``.`` and
``$`` -> ``_``, whose result is added to a dictionary that refuses a key twice. Kernel
names from the user namespace (``x`` -> ``x_``, ``x_`` -> ``x__``) or from
``KernelContext.symbol``'s counters (``t``, ``t_1``) collide with those renamings: with
``x_`` and ``x__`` both in a loop, ``x_`` legalizes to ``x__``, and Numba fails with "key
already in dictionary: 'x__'"; with ``t`` and ``t_1``, ``t.1`` legalizes to ``t_1``.

The invariant ``numba_safe`` gives every printed variable name (``safe``):

- no ``__``: what legalizing a name with ``_`` gives always has ``__``;
- no leading ``_``: what legalizing Numba's temporaries (``$phi3``) gives starts with ``_``;
- no trailing ``_<digits>``: what legalizing an SSA version ``t.1`` of a name without ``_``
  gives;
- not a Python keyword nor a name the module uses (``range``, ``abs``, ...).

A name that already has it is printed as it is (so the code stays readable); the others get
the nearest name that has it and that no other name of the function has.
"""

from __future__ import annotations

import dataclasses
import keyword
import re

from ..ir import kernel as k

# Names the printed module reads as globals or builtins inside a kernel function
_RESERVED = frozenset({"range", "abs", "min", "max", "complex", "int", "float", "bool",
                       "parallel", "serial", "inline"})
_TRAILING_COUNTER = re.compile(r"_\d+$")


def safe(name: str) -> bool:
    """Whether ``name`` satisfies the invariant of the module docstring."""
    return ("__" not in name and not name.startswith("_")
            and not _TRAILING_COUNTER.search(name) and not keyword.iskeyword(name)
            and name not in _RESERVED and name.isidentifier())


def numba_names(names: set[str] | frozenset[str]) -> dict[str, str]:
    """An injective map of ``names`` to names that are all ``safe``; safe names map to
    themselves."""
    table = {n: n for n in names if safe(n)}
    taken = set(table)
    for name in sorted(names - taken):
        user = name.endswith("_")  # keep the user namespace's mark
        stem = re.sub(r"_+", "_", name).strip("_") or "v"
        candidate, n = stem + ("_" if user else ""), 0
        while not safe(candidate) or candidate in taken:
            n += 1
            candidate = f"{stem}v{n}" + ("_" if user else "")
        table[name] = candidate
        taken.add(candidate)
    return table


def numba_safe(kf: k.KernelFunction) -> k.KernelFunction:
    """``kf`` with every symbol renamed by ``numba_names`` (the same object when all are
    safe already)."""
    names: set[str] = set()
    _collect(kf, names)
    table = numba_names(names)
    if all(a == b for a, b in table.items()):
        return kf
    return _rename(kf, table)


def _collect(value: object, names: set[str]) -> None:
    if isinstance(value, k.Symbol):
        names.add(value.name)
    elif isinstance(value, tuple):
        for v in value:
            _collect(v, names)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _collect(getattr(value, f.name), names)


def _rename(value, table: dict[str, str]):
    if isinstance(value, k.Symbol):
        return dataclasses.replace(value, name=table[value.name])
    if isinstance(value, tuple):
        return tuple(_rename(v, table) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = _rename(old, table)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value
