"""Temporaries computed on the fly never see a write made after their definition (issue 8).

Each definition is run on every backend against a NumPy reference that applies statement
after statement to the whole domain (the gtscript meaning).
"""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

SHAPE = (7, 6, 4)
INNER = (slice(1, -1), slice(1, -1), slice(None))
rng = np.random.default_rng(8)


def swap(x: Field[float], y: Field[float]):
    with computation(PARALLEL), interval(...):
        tmp = x
        x = y
        y = tmp


def rotate(a: Field[float], b: Field[float], c: Field[float]):
    with computation(PARALLEL), interval(...):
        t = a
        a = b
        b = c
        c = t


def through_temporary(x: Field[float], y: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        t = 2.0 * x
        u = y + 1.0
        x = u
        out = t + x  # noqa: F841


def reused_after_two_writes(x: Field[float], y: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        t = x * y
        x = y + 1.0
        y = x * 3.0
        out = t - y  # noqa: F841


def shifted_reads(x: Field[float], y: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        t = x[1, 0, 0] - x[-1, 0, 0]
        x = y
        out = t[0, 1, 0] + t[0, -1, 0] + t  # noqa: F841


def nested_temporaries(x: Field[float], y: Field[float]):
    with computation(PARALLEL), interval(...):
        s = x + 1.0
        t = s[1, 0, 0] * 2.0
        x = y
        y = t + s


def _ref_swap(x, y):
    return {"x": y.copy(), "y": x.copy()}


def _ref_rotate(a, b, c):
    return {"a": b.copy(), "b": c.copy(), "c": a.copy()}


def _ref_through_temporary(x, y, out):
    t = 2.0 * x
    x = y + 1.0
    return {"x": x, "out": t + x}


def _ref_reused_after_two_writes(x, y, out):
    t = x * y
    x = y + 1.0
    y = x * 3.0
    return {"x": x, "y": y, "out": t - y}


def _ref_shifted_reads(x, y, out):
    out = out.copy()
    t = np.zeros_like(x)
    t[1:-1, :] = x[2:, :] - x[:-2, :]
    out[1:-1, 1:-1] = t[1:-1, 2:] + t[1:-1, :-2] + t[1:-1, 1:-1]
    x = x.copy()
    x[1:-1, 1:-1] = y[1:-1, 1:-1]
    return {"x": x, "out": out}


def _ref_nested_temporaries(x, y):
    s = x + 1.0
    t = np.zeros_like(x)
    t[:-1] = 2.0 * s[1:]
    newx = x.copy()
    newx[1:-1, 1:-1] = y[1:-1, 1:-1]
    newy = y.copy()
    newy[1:-1, 1:-1] = (t + s)[1:-1, 1:-1]
    return {"x": newx, "y": newy}


CASES = [(swap, _ref_swap, False), (rotate, _ref_rotate, False),
         (through_temporary, _ref_through_temporary, False),
         (reused_after_two_writes, _ref_reused_after_two_writes, False),
         (shifted_reads, _ref_shifted_reads, True),
         (nested_temporaries, _ref_nested_temporaries, True)]


@pytest.mark.parametrize("defn, ref, halo", CASES, ids=[c[0].__name__ for c in CASES])
def test_written_input_is_not_reread(backend, defn, ref, halo):
    names = list(defn.__annotations__)
    arrays = {n: rng.random(SHAPE) for n in names}
    expect = ref(**{n: a.copy() for n, a in arrays.items()})
    kw = {"origin": (1, 1, 0), "domain": (SHAPE[0] - 2, SHAPE[1] - 2, SHAPE[2])} if halo else {}
    sk.stencil(defn, backend=backend)(*arrays.values(), **kw)
    for n, want in expect.items():
        np.testing.assert_array_equal(arrays[n], want, err_msg=n)


def test_on_the_fly_values_move_only_when_needed():
    """hdiff keeps every shifted value where it is first read (nothing is overwritten), so
    the fix costs it nothing."""
    from stencilkit.lower.inline_temporaries import _inline_interval
    from stencilkit_apps.definitions import hdiff

    defn = sk.stencil(hdiff, backend="c").definition
    (block,) = defn.blocks
    inliner = _inline_interval(block.intervals[0].body, dict(defn.temporaries), set())
    assert inliner is not None and inliner.eager == {}
    swapped = sk.stencil(swap, backend="c").definition
    inliner = _inline_interval(swapped.blocks[0].intervals[0].body,
                               dict(swapped.temporaries), set())
    assert inliner is not None and inliner.eager == {("tmp", 0): {(0, 0, 0)}}
