"""Arguments whose own code raises: an array-like object whose ``__array__``, properties or
``__getattr__`` raise, or an ndarray subclass whose ``dtype``, ``strides`` or NumPy overrides
do. Reading such an argument raises its exception deep in a call; ``blame`` turns it into an
``ArgumentError`` naming the argument (issue 25: the raw exception said nothing of which one).
An exception no argument raises again when read is not blamed on one: the caller re-raises
it as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError, Location, StencilError

#: Objects no user code runs for when read
_PLAIN = (np.ndarray, np.generic, int, float, complex, bool, str, type(None))


def blame(exc: Exception, named: Sequence[tuple[str, object]], stencil: str,
          loc: Location | None) -> ArgumentError | None:
    """The error for ``exc`` naming the first argument of ``named`` (label, value) that
    raises when read as an array, or None if none does."""
    if isinstance(exc, StencilError):
        return None
    label = next((lb for lb, v in named if type(v) not in _PLAIN and not _reads_cleanly(v)),
                 None)
    if label is None:
        return None
    return ArgumentError(f"{label} raised {type(exc).__name__} when read as an array: {exc}",
                         stencil=stencil, loc=loc,
                         hint=f"pass a NumPy array as {label}, or fix the object's array "
                              "methods")


def _reads_cleanly(value: object) -> bool:
    """Whether the reads a call makes of an array argument all succeed."""
    try:
        if isinstance(value, np.ndarray):
            for attr in ("dtype", "shape", "strides", "ndim", "flags", "size", "itemsize"):
                getattr(value, attr)
            np.may_share_memory(value, value)  # __array_function__
        else:
            np.asarray(value)
    except Exception:  # noqa: BLE001 - any failure is the object's
        return False
    return True
