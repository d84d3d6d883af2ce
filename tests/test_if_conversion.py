"""`if` statements on temporaries in PARALLEL bodies become selections, so that they fuse
like conditional expressions (inline_temporaries): same results as the "numpy" backend
(which keeps the statements) on every backend, one loop nest where the rewrite applies, and
the statements kept where it must not (fields assigned, integer division, a temporary with
no earlier value)."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

rng = np.random.default_rng(11)


def limiter_if(q: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        d = q[1, 0, 0] - q
        lim = d
        if d * (q - q[-1, 0, 0]) > 0:
            lim = 0.5 * d
            d = lim + 1.0
        else:
            lim = -d
        out = lim[-1, 0, 0] + lim + d[0, 1, 0]  # noqa: F841


def limiter_expr(q: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        d = q[1, 0, 0] - q
        c = d * (q - q[-1, 0, 0]) > 0
        lim = 0.5 * d if c else -d
        d = lim + 1.0 if c else d
        out = lim[-1, 0, 0] + lim + d[0, 1, 0]  # noqa: F841


def assigns_field(q: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        t = q[1, 0, 0] - q
        out = t[-1, 0, 0]
        if t > 0.5:
            out = 2.0 * t[-1, 0, 0]  # noqa: F841


def integer_division(q: Field[float], n: Field[np.int64], out: Field[float]):
    with computation(PARALLEL), interval(...):
        m = n
        if n != 0:
            m = 7 // n
        out = q[1, 0, 0] + m  # noqa: F841


def no_earlier_value(q: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        if q > 0.5:
            t = q
        else:
            t = -q
        out = t[-1, 0, 0] + q[1, 0, 0]  # noqa: F841


def _run(defn, backend, *arrays):
    arrays = [a.copy() for a in arrays]
    sk.stencil(defn, backend=backend)(*arrays, origin=(2, 1, 0), domain=(5, 6, 3))
    return arrays[-1]


def test_if_statements_match_numpy(backend):
    q = rng.random((8, 9, 3))
    out = np.zeros_like(q)
    want = _run(limiter_if, "numpy", q, out)
    np.testing.assert_allclose(want, _run(limiter_expr, "numpy", q, out), rtol=0)
    np.testing.assert_allclose(_run(limiter_if, backend, q, out), want, rtol=1e-14)


@pytest.mark.parametrize("defn", [assigns_field, no_earlier_value])
def test_statements_kept_where_not_rewritten_match_numpy(backend, defn):
    q = rng.random((8, 9, 3))
    out = np.zeros_like(q)
    np.testing.assert_allclose(_run(defn, backend, q, out), _run(defn, "numpy", q, out),
                               rtol=1e-14)


def test_integer_division_by_zero_is_not_evaluated(backend):
    q = rng.random((8, 9, 3))
    n = rng.integers(-2, 3, size=q.shape).astype(np.int64)
    n[2, 3, :] = 0
    out = np.zeros_like(q)
    np.testing.assert_allclose(_run(integer_division, backend, q, n, out),
                               _run(integer_division, "numpy", q, n, out), rtol=1e-14)


def test_if_statements_fuse_into_one_loop_nest():
    pytest.importorskip("stencilkit.codegen.c")
    nests = {f.__name__: sk.stencil(f, backend="c").generate(backend="c").count("omp parallel")
             for f in (limiter_if, limiter_expr, assigns_field, no_earlier_value)}
    assert nests["limiter_if"] == nests["limiter_expr"] == 1
    assert nests["assigns_field"] > 1 and nests["no_earlier_value"] > 1
