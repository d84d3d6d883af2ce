"""The launches of a CUDA call whose signature an earlier call settled: no checks, no
binding, a status word taken without a copy.

The device adapters (``adapters.device``) keep one bound call per stencil and argument
signature (dtypes, shapes, strides, the scalars' types, the border fill). What a call with
that signature can still change is the arrays' addresses and the free scalars' values:
the adapter checks what depends on the addresses (an input overlapping ``out``), puts the
arrays in the entry's argument order (the launch ABI's ``LaunchDescription`` order, the
C entry point's) and hands them to ``DeviceLaunch.run``, which

1. takes the status word of the entry's previous call (``runtime.cuda_status``: a query
   of its event, a wait only if it has not finished, a load from pinned memory) and
   raises its error, as the entry itself would;
2. replays the launches of the plan bound to the signature (``runtime.cuda_bound``) with
   this call's pointers and free scalars, on the caller's current CuPy stream;
3. records the entry's event after them and marks the word pending.

Inside a CUDA graph capture nothing is read or recorded (as in ``CudaEntry.finish``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .cuda import CudaEntry
from .cuda_status import replay


class DeviceLaunch:
    """The bound launches of ``entry`` for the signature of ``values`` (the entry's
    arguments, all arrays on the device): binds them if the entry has not yet. ``settled``:
    the positions of arguments whose values the caller's signature fixes."""

    __slots__ = ("entry", "plan", "word", "current_stream", "keyed")

    def __init__(self, entry: CudaEntry, cp: Any, values: Sequence[object],
                 settled: frozenset[int] = frozenset()) -> None:
        self.entry = entry
        self.plan = entry.bound_for(cp, values).settled(values, settled)
        self.word = entry.status_word(cp)
        self.current_stream = cp.cuda.get_current_stream
        # the scalars the launch bounds read, with this signature's values, but those the
        # caller's own key fixes (``settled``): a call with other values takes the entry's
        # own path, which binds for them
        self.keyed = tuple((i, values[i]) for i in entry.keyed_positions()
                           if i not in settled)

    def matches(self, values: Sequence[object]) -> bool:
        """Whether the scalars the launch bounds read have this plan's values."""
        return all(type(values[i]) is type(v) and values[i] == v for i, v in self.keyed)

    def run(self, values: Sequence[object]) -> None:
        entry, word = self.entry, self.word
        if self.keyed and not self.matches(values):
            entry(*values)  # binds for these bounds (all arrays on the device: no status)
            return
        replay(entry, word, self.current_stream(), ((self.plan, values),))
