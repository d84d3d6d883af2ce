"""The C entry keeps the GIL for short calls and releases it for long ones
(codegen/c.py HOLD_GIL_BELOW): another Python thread runs during a call of many points, and
waits out a call of few points (which is short in practice; here made long on purpose)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.codegen.c import HOLD_GIL_BELOW

from .requires import needs_c


def spin(a, n):
    s = a[0]
    for _ in range(n):
        s = s * 0.999999 + 1e-9  # a chain of dependent operations: no shortcut
    return s


def _longest_pause(call) -> float:
    """The longest gap between two steps of a Python loop in this thread while ``call``
    runs in another."""
    done = threading.Event()

    def worker():
        call()
        done.set()

    thread = threading.Thread(target=worker)
    last, longest = time.perf_counter(), 0.0
    thread.start()
    while not done.is_set():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    thread.join()
    return longest


@pytest.mark.parametrize("points, held", [(HOLD_GIL_BELOW // 2, True),
                                          (HOLD_GIL_BELOW * 2, False)])
def test_short_calls_keep_the_gil_and_long_ones_release_it(points, held):
    needs_c()
    st = sk.stencil(backend="c")(spin)
    a = np.ones(points)
    n = max(1, int(2e7 / points))  # 2e7 chained operations in all: about 0.1 s
    took = min(_timed(lambda: st(a, n)) for _ in range(2))
    pause = _longest_pause(lambda: st(a, n))
    if held:  # this thread could not run while the call ran
        assert pause > 0.7 * took
    else:  # it ran: only the interpreter's switch interval and the scheduler paused it
        assert pause < 0.5 * took


def _timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started
