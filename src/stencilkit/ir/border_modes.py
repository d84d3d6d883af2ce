"""Border modes of point kernels (``func_or_mode``, docs/site/contract.md sections 1 and 9).

A mode is one name for every axis (``"constant"``, or scipy.ndimage's ``"nearest"``,
``"reflect"``, ``"mirror"``, ``"wrap"``) or a tuple with one name per axis of the first
argument. Invariant of a normalized mode: a tuple has at least two distinct names (a tuple
of one repeated name is that name), so equal meanings compare, print and key caches alike.

Along a ``"constant"`` axis an output element whose neighbourhood leaves the array is
``cval`` (Numba's rule); along the other axes every element is computed, reads outside an
array remapped into it by the axis's mode.
"""

from __future__ import annotations

MODES = ("constant", "nearest", "reflect", "mirror", "wrap")

Mode = str | tuple[str, ...]


def normalize(value: object) -> Mode:
    """``value`` as a normalized mode; ValueError (with the reason) when it is none."""
    if isinstance(value, str):
        if value not in MODES:
            raise ValueError(f"unsupported mode style {value!r}")
        return value
    if isinstance(value, (tuple, list)):
        names = tuple(value)
        bad = [n for n in names if not isinstance(n, str) or n not in MODES]
        if not names or bad:
            raise ValueError(f"unsupported mode style {value!r}" + (
                f": {bad[0]!r} is no border mode" if bad else ": no axis"))
        return names[0] if len(set(names)) == 1 else names
    raise ValueError(f"unsupported mode style {value!r}")


def per_axis(mode: Mode, ndim: int) -> tuple[str, ...]:
    """One mode name per axis (a tuple mode must have ``ndim`` entries)."""
    if isinstance(mode, str):
        return (mode,) * ndim
    if len(mode) != ndim:
        raise ValueError(f"{len(mode)} border modes given for {ndim} dimensional input")
    return mode


def any_constant(mode: Mode) -> bool:
    """Some axis is "constant": ``cval`` applies (and ``out=``'s border may be filled)."""
    return mode == "constant" or (isinstance(mode, tuple) and "constant" in mode)


def any_remapping(mode: Mode) -> bool:
    return mode != "constant"


def np_pad_mode(name: str) -> str:
    """The ``np.pad`` mode that pads an axis as border mode ``name`` reads it."""
    return {"nearest": "edge", "reflect": "symmetric", "mirror": "reflect", "wrap": "wrap",
            "constant": "constant"}[name]
