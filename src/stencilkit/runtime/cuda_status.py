"""The status word of a CUDA entry, read without a device-to-host copy.

A kernel that sees a run-time error (an index outside the declared neighbourhood, say)
stores its code into its entry's status word; nothing ever stores a 0, so the word stays 0
until an error and is reset by the host once the error was raised. The word lives in
pinned host memory (``cupy.cuda.alloc_pinned_memory``): with unified addressing (every
64-bit process) its host address is also the address a kernel stores through, so reading
it is a plain load from host memory, not a copy that waits for everything queued on the
stream.

What the load must wait for is only the entry's own launches: each call records an event
on the caller's stream after them (``launched``), and the next read waits on that event,
and only when it has not completed yet (``Event.done``: a query, no wait). Inside a CUDA
graph capture nothing is recorded, queried or read; the captured entries' words are read
by every ``sk.synchronize()`` after the stream was synchronized.

The registries say which words have calls nobody has read yet (``PENDING``) and which were
captured into a graph (``CAPTURED``, held for good: a graph may outlive the stencil, and
its kernels must never write a word that was freed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import StencilError


class StatusWord:
    """One entry's status word: ``argument`` is what its launches take (the device address
    of the word, as a pointer-sized integer), ``host`` the word itself, read by plain loads."""

    __slots__ = ("memory", "host", "argument", "event")

    def __init__(self, cp: Any) -> None:
        self.memory = cp.cuda.alloc_pinned_memory(4)  # kept: the word lives as long as it
        self.host = np.frombuffer(self.memory, np.int32, 1)
        self.host[0] = 0
        # unified addressing: a pinned allocation's host address is valid in kernels too
        # (CUDA runtime API, "Automatic Mapping of Host Allocated Host Memory")
        self.argument = np.uintp(self.memory.ptr)
        # recorded after each call's launches: completes when the latest call's launches
        # have (never recorded: complete)
        self.event = cp.cuda.Event(block=False, disable_timing=True)

    def launched(self, stream: Any = None) -> None:
        """After a call's launches (not inside a capture): mark where they end on
        ``stream`` (None: the current stream)."""
        self.event.record(stream)

    def take(self) -> int:
        """The code the calls recorded so far stored (0: none), once they have finished;
        a non-zero word is reset, so that its error is raised once."""
        event = self.event
        if not event.done:
            event.synchronize()  # the entry's own launches only, not the whole stream
        code = int(self.host[0])
        if code:
            self.host[0] = 0
        return code


#: the entries with calls nobody has read the status of, with their words, in call order
PENDING: dict[object, StatusWord] = {}
#: entries called inside a CUDA graph capture (every replay may write their words)
CAPTURED: dict[object, StatusWord] = {}


def current_stream(cp: Any) -> Any:
    """CuPy's current stream (None where the module has no streams: a test's stand-in)."""
    current = getattr(getattr(cp, "cuda", None), "get_current_stream", None)
    return current() if current is not None else None


def capturing(cp: Any) -> bool:
    stream = current_stream(cp)
    return stream is not None and stream.is_capturing()


def first_error(pending: Mapping[Any, StatusWord],
                error_for: Callable[[Any, int], StencilError]) -> StencilError | None:
    """Every word of ``pending`` taken; the error of the first entry that reported one."""
    first: StencilError | None = None
    for entry, word in pending.items():
        code = word.take()
        if code and first is None:
            first = error_for(entry, code)
    return first


def synchronize(cp: Any, error_for: Callable[[Any, int], StencilError]) -> None:
    """Wait for the current stream (a replayed graph's launches included) and every pending
    call's launches, then raise the first error their words hold."""
    if not PENDING and not CAPTURED:
        return
    stream = current_stream(cp)
    if stream is not None:
        stream.synchronize()
    pending = {**PENDING, **CAPTURED}
    PENDING.clear()
    first = first_error(pending, error_for)
    if first is not None:
        raise first


def replay(entry: Any, word: StatusWord, stream: Any, runs: Any) -> None:
    """Replay a bound call: ``runs``, pairs of a bound plan and its argument values, on
    ``stream`` (the caller's current one), with the status protocol around them: the
    entry's previous call's word taken first (its error raised, as the entry itself would:
    ``entry.error_for``), the entry's event recorded after, the word marked pending. Inside
    a capture nothing is read or recorded (the captured word is read by
    ``sk.synchronize()``)."""
    if stream.is_capturing():
        for plan, values in runs:
            plan.run(values)
        PENDING[entry] = CAPTURED[entry] = word
        return
    if PENDING.pop(entry, None) is not None:
        code = word.take()
        if code:
            raise entry.error_for(code)
    for plan, values in runs:
        plan.run(values)
    word.event.record(stream)
    PENDING[entry] = word
