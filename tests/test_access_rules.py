"""The six examples of the GridTools access restrictions, written in our DSL.

GridTools leaves violations undefined. Our meaning is sequential (each statement acts on the
whole extended plane before the next), so several of its "error" examples have one
well-defined result: for those we assert that we compile them and compute that result.
"""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

rng = np.random.default_rng(7)
N = (8, 6, 3)


def _fields(k: int) -> list[np.ndarray]:
    return [rng.random(N) for _ in range(k)]


def test_example_1_read_after_write_is_ok(backend):
    # GridTools: ok. stage 0 writes a, stage 1 reads a[i+1]: a is computed one point further.
    def ex1(a: Field[float], b: Field[float], v: Field[float]):
        with computation(PARALLEL), interval(...):
            a = v
            b = a[1, 0, 0]

    a, b, v = _fields(3)
    sk.stencil(ex1, backend=backend)(a, b, v, origin=(0, 0, 0), domain=(7, 6, 3))
    np.testing.assert_array_equal(a, v)            # written on the extended domain too
    np.testing.assert_array_equal(b[:7], v[1:8])


def test_example_2_read_after_write_everywhere_is_ok(backend):
    def ex2(a: Field[float], b: Field[float], c: Field[float], d: Field[float],
            v: Field[float], w: Field[float]):
        with computation(PARALLEL), interval(...):
            a = v
            b = a
            c = w
            d = c[1, 0, 0]

    a, b, c, d, v, w = _fields(6)
    sk.stencil(ex2, backend=backend)(a, b, c, d, v, w, origin=(0, 0, 0), domain=(7, 6, 3))
    np.testing.assert_array_equal(b[:7], v[:7])
    np.testing.assert_array_equal(d[:7], w[1:8])


def test_example_3_rule_4a_has_a_sequential_meaning(backend):
    # GridTools: error (rule 4a: a is written in an extended stage after being read). Ours: b
    # receives a as it was, then a is overwritten; the extension of c does not touch b.
    def ex3(a: Field[float], b: Field[float], c: Field[float], d: Field[float],
            v: Field[float], w: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a
            a = v
            c = w
            d = c[1, 0, 0]

    a, b, c, d, v, w = _fields(6)
    a_old = a.copy()
    sk.stencil(ex3, backend=backend)(a, b, c, d, v, w, origin=(0, 0, 0), domain=(7, 6, 3))
    np.testing.assert_array_equal(b[:7], a_old[:7])
    np.testing.assert_array_equal(a[:7], v[:7])
    np.testing.assert_array_equal(d[:7], w[1:8])


def test_example_4_rule_4b_has_a_sequential_meaning(backend):
    # GridTools: error (rule 4b: a read with an offset, then written). Ours: b sees the old a
    # at i+1 everywhere, because the two statements become separate stages.
    def ex4(a: Field[float], b: Field[float], v: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a[1, 0, 0]
            a = v

    a, b, v = _fields(3)
    a_old = a.copy()
    st = sk.stencil(ex4, backend=backend)
    assert "stage 0: writes b" in st.ir and "stage 1: writes a" in st.ir
    st(a, b, v, origin=(0, 0, 0), domain=(7, 6, 3))
    np.testing.assert_array_equal(b[:7], a_old[1:8])
    np.testing.assert_array_equal(a[:7], v[:7])


def test_example_5_temporary_read_before_write():
    # GridTools: ok (rule 5) — but the read sees whatever the temporary held, which is only
    # meaningful when an earlier multistage wrote it. Without one, ours has no defined value
    # to read, so it is rejected; with one, the sequential result is computed.
    def ex5(b: Field[float], v: Field[float]):
        with computation(PARALLEL), interval(...):
            b = tmp[1, 0, 0]
            tmp = v

    with pytest.raises(sk.AccessRuleError, match="tmp") as info:
        sk.stencil(ex5)
    assert "test_access_rules.py" in str(info.value)


def test_example_5_with_an_earlier_multistage(backend):
    def ex5b(b: Field[float], v: Field[float], w: Field[float]):
        with computation(PARALLEL), interval(...):
            tmp = w
        with computation(PARALLEL), interval(...):
            b = tmp[1, 0, 0]
            tmp = v

    b, v, w = _fields(3)
    sk.stencil(ex5b, backend=backend)(b, v, w, origin=(0, 0, 0), domain=(7, 6, 3))
    np.testing.assert_array_equal(b[:7], w[1:8])


def test_example_6_rule_2_has_a_sequential_meaning(backend):
    # GridTools: error (rule 2: tmp_a written in two stages). Ours: tmp_b takes the first
    # value of tmp_a, which is then overwritten.
    def ex6(out_a: Field[float], out_b: Field[float], v: Field[float], w: Field[float]):
        with computation(PARALLEL), interval(...):
            tmp_a = v
            tmp_b = tmp_a
            tmp_a = w
            out_a = tmp_a
            out_b = tmp_b

    oa, ob, v, w = _fields(4)
    sk.stencil(ex6, backend=backend)(oa, ob, v, w)
    np.testing.assert_array_equal(oa, w)
    np.testing.assert_array_equal(ob, v)


def test_reading_the_written_field_with_an_offset_is_rejected():
    def bad(a: Field[float]):
        with computation(PARALLEL), interval(...):
            a = a[1, 0, 0] + 1.0

    with pytest.raises(sk.AccessRuleError, match=r"rule 2.*'a'") as info:
        sk.stencil(bad)
    assert ":4" in str(info.value) or "test_access_rules.py" in str(info.value)


def test_parallel_vertical_offset_of_a_written_field_is_rejected():
    def bad(a: Field[float], b: Field[float], c: Field[float]):
        with computation(PARALLEL), interval(0, -1):
            b = a
            c = b[0, 0, 1]

    with pytest.raises(sk.AccessRuleError, match="PARALLEL.*'b'"):
        sk.stencil(bad)


def test_parallel_vertical_offset_through_a_temporary_is_rejected():
    def bad(a: Field[float], c: Field[float]):
        with computation(PARALLEL), interval(1, None):
            t = a * 2.0
            c = t[0, 0, -1]

    with pytest.raises(sk.AccessRuleError, match="'t'"):
        sk.stencil(bad)
