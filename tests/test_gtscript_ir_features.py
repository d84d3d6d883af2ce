# ruff: noqa: F841, F821  (gtscript definitions assign to fields; that looks unused to Python)
"""gtscript features that need the IR, the analyses and both code generators (API.md section 2):
horizontal regions, writes at a vertical offset, run-time vertical offsets, data dimensions,
the access rules on the levels actually touched, one shared default origin.

Every definition that GT4Py accepts runs on GT4Py's "numpy" backend and on each of ours, and
every array is compared (halo points included: regions outside the domain write there).
"""

from __future__ import annotations

import inspect
import linecache
import textwrap

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import BACKWARD, FORWARD, PARALLEL, Field, computation, interval

gt = pytest.importorskip("gt4py.cartesian.gtscript",
                         reason="gt4py is not installed (pip install '.[gt4py]')")

rng = np.random.default_rng(11)
_n = [0]
_GT_NAMES = ("Field", "IJ", "K", "I", "J", "computation", "interval", "horizontal", "region",
             "PARALLEL", "FORWARD", "BACKWARD")


def as_gt4py(func, externals=None):
    """Re-define ``func`` from its source with gtscript's names in place of ours."""
    _n[0] += 1
    filename = f"<gt4py-{func.__name__}-{_n[0]}>"
    source = textwrap.dedent(inspect.getsource(func))
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {name: getattr(gt, name) for name in _GT_NAMES}
    ns["np"] = np
    exec(compile(source, filename, "exec"), ns)
    return gt.stencil(backend="numpy", definition=ns[func.__name__], externals=externals or {})


def same_as_gt4py(func, arrays, backend, *, externals=None, **call):
    """Run ``func`` on GT4Py's numpy backend and on ``backend``; every array must agree."""
    ref = [a.copy() for a in arrays]
    ours = [a.copy() for a in arrays]
    gt_ext = {k: _gt_value(v) for k, v in (externals or {}).items()}
    as_gt4py(func, gt_ext)(*ref, **call)
    sk.stencil(func, backend=backend, externals=externals)(*ours, **call)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
    return ours


def _gt_value(v):
    """Our axis positions as GT4Py's (the same ``I[0] + 1`` written with gtscript's I, J)."""
    AxisIndex = getattr(sk.gtscript, "AxisIndex", ())
    if isinstance(v, AxisIndex):
        return gt.AxisIndex(v.axis, v.index, v.offset)
    return v


def define(source: str) -> dict:
    """Execute a definition given as text, with a file name so that its source is found."""
    _n[0] += 1
    filename = f"<definition-{_n[0]}>"
    source = textwrap.dedent(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"Field": Field, "computation": computation, "interval": interval, "np": np,
          "PARALLEL": PARALLEL, "FORWARD": FORWARD, "BACKWARD": BACKWARD}
    exec(compile(source, filename, "exec"), ns)
    return ns


# ------------------------------------------------------------------ access rules


def test_parallel_k_offset_read_of_levels_not_written_is_accepted(backend):
    # p is written at level 0 only; p[0, 0, 1] in interval(1, None) reads levels 2.. .
    def k_rule_ok(p: Field[float], q: Field[float]):
        with computation(PARALLEL):
            with interval(0, 1):
                p = 2.0
            with interval(1, -1):
                q = p[0, 0, 1]

    p, q = rng.random((3, 3, 6)), np.zeros((3, 3, 6))
    p0 = p.copy()
    ours = same_as_gt4py(k_rule_ok, [p, q], backend, origin=(0, 0, 0), domain=(3, 3, 6))
    np.testing.assert_array_equal(ours[1][:, :, 1:5], p0[:, :, 2:6])
    assert (ours[0][:, :, 0] == 2.0).all()


@pytest.mark.parametrize("read, dk, write", [("interval(2, None)", -1, "interval(0, 2)"),
                                              ("interval(0, -1)", 1, "interval(-1, None)"),
                                              ("interval(1, -1)", 1, "interval(-1, None)")])
def test_parallel_k_offset_read_of_written_levels_is_rejected(read, dk, write):
    ns = define(f"""
        def k_rule_bad(p: Field[float], q: Field[float]):
            with computation(PARALLEL):
                with {write}:
                    p = 2.0
                with {read}:
                    q = p[0, 0, {dk}]
        """)
    with pytest.raises(sk.AccessRuleError, match="PARALLEL.*'p'.*vertical offset"):
        sk.stencil(ns["k_rule_bad"])


def test_temporary_written_then_read_in_one_if_body_is_defined(backend):
    def if_body(a: Field[float], b: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a
            if a > 0.5:
                t = a * 2.0
                b = t + 1.0

    same_as_gt4py(if_body, [rng.random((4, 3, 2)), np.zeros((4, 3, 2))], backend)


def test_while_condition_on_a_temporary_set_just_before_the_loop(backend):
    def while_temp(a: Field[float], b: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a
            if a > 0.25:
                n = a
                while n < 3.0:
                    n = n + 1.0
                b = n

    a = rng.random((4, 3, 2))
    b = sk.stencil(while_temp, backend=backend)
    out = np.zeros_like(a)
    b(a, out)
    expect = np.where(a > 0.25, a + np.ceil(3.0 - a), a)
    np.testing.assert_allclose(out, expect, rtol=1e-12)


def test_temporary_read_in_an_if_body_before_its_write_is_rejected():
    def if_bad(a: Field[float], b: Field[float]):
        with computation(PARALLEL), interval(...):
            if a > 0.5:
                b = t + 1.0
                t = a * 2.0

    with pytest.raises(sk.AccessRuleError, match="undefined read.*'t'") as info:
        sk.stencil(if_bad)
    assert f":{if_bad.__code__.co_firstlineno + 3}:" in str(info.value)


def test_overlapping_intervals_are_rejected_with_the_line():
    def overlap(a: Field[float], b: Field[float]):
        with computation(FORWARD):
            with interval(0, 3):
                b = a
            with interval(2, None):
                b = 2.0 * a

    with pytest.raises(sk.AccessRuleError, match=r"interval\(start\+2, end\) overlaps") as info:
        sk.stencil(overlap)
    assert f":{overlap.__code__.co_firstlineno + 4}:" in str(info.value)


def test_intervals_from_both_ends_do_not_overlap_as_in_gt4py(backend):
    def ends(a: Field[float], b: Field[float]):
        with computation(BACKWARD):
            with interval(-1, None):
                b = 2.0 * a
            with interval(0, 2):
                b = a + b[0, 0, 1]

    same_as_gt4py(ends, [rng.random((2, 2, 5)), np.zeros((2, 2, 5))], backend)
