"""The lazy-evaluation queue: with ``sk.configure(lazy=True)`` loops are queued here and run,
in program order, when data is read or on ``sk.flush()``."""

from __future__ import annotations

from collections.abc import Callable

from .. import config

_queue: list[Callable[[], None]] = []
_running = False


def enqueue(thunk: Callable[[], None]) -> None:
    _queue.append(thunk)


def pending() -> int:
    return len(_queue)


def flush() -> None:
    """Run everything queued, oldest first."""
    global _running
    if _running or not _queue:
        return
    _running = True
    try:
        while _queue:
            _queue.pop(0)()
    finally:
        _running = False


def _flush_when_lazy_ends(previous: config.Config, new: config.Config) -> None:
    if previous.lazy and not new.lazy:  # what was queued runs now, as without lazy evaluation
        flush()


# the configuration imports no runtime module: the queue subscribes to its changes
config.on_change(_flush_when_lazy_ends)
