# ruff: noqa: F841, F821  (gtscript definitions assign to fields; that looks unused to Python)
"""gtscript features that need the IR, the analyses and both code generators (contract.md section 2):
horizontal regions, writes at a vertical offset, run-time vertical offsets, data dimensions,
the access rules on the levels actually touched, one shared default origin.

Every definition that GT4Py accepts runs on GT4Py's "numpy" backend and on each of ours, and
every array is compared (halo points included: regions outside the domain write there).
"""

from __future__ import annotations

import inspect
import linecache
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import BACKWARD, FORWARD, IJ, PARALLEL, Field, computation, interval

from .requires import needs_c

gt = pytest.importorskip("gt4py.cartesian.gtscript",
                         reason="gt4py is not installed (pip install '.[gt4py]')")

# GT4Py recommends its own allocators for fields with data dimensions; plain arrays are fine
pytestmark = pytest.mark.filterwarnings("ignore:The layout of the field")

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


# ------------------------------------------------------------------ horizontal regions


def _regions_basic(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a
        with horizontal(region[I[0], :], region[:, J[-1]]):
            b = b + 10.0


def _regions_slices(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a
        with horizontal(region[I[0] : I[0] + 2, J[-1]]):
            b = a * 3.0
        with horizontal(region[:, J[0]]):
            b = b - a[1, 0, 0]


def _regions_outside_domain(a: Field[float], b: Field[float], c: Field[float]):
    # t is computed one point beyond the domain, so the regions outside it take effect; b is
    # not (nothing reads it there), so they do not: GT4Py's meaning.
    with computation(PARALLEL), interval(...):
        t = a
        b = a
        with horizontal(region[I[-1] + 1, :]):
            t = a + 100.0
        with horizontal(region[I[-1] + 1, :]):
            b = a + 100.0
        with horizontal(region[I[0] - 1, :], region[:, J[-1] + 1]):
            t = a - 100.0
        c = t[1, 0, 0] + t[-1, 0, 0] + t[0, 1, 0]


def _regions_offset_reads(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        t = a * 2.0
        with horizontal(region[I[0], :]):
            t = a[-1, 0, 0] + a[0, -1, 0]
        with horizontal(region[I[-1], J[0] : J[0] + 2]):
            t = a[1, 0, 0] - a[-1, 0, 0]
        b = t[1, 0, 0] + t[-1, 0, 0]


def _regions_forward(a: Field[float], b: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            b = a
        with interval(1, None):
            b = a + b[0, 0, -1]
            with horizontal(region[I[0], :]):
                b = b[0, 0, -1] * 0.5
                if a > 0.5:
                    b = b + 1.0


def _regions_externals(a: Field[float], b: Field[float]):
    from __externals__ import i_start, j_end
    with computation(PARALLEL), interval(...):
        b = a
        with horizontal(region[i_start, :]):
            b = a + 1.0
        with horizontal(region[:i_start, j_end:]):
            b = a + 2.0


def _regions_mixed_levels(a: Field[float], b: Field[float]):
    # from one end to the other (I[0] + 1 : I[-1]), and plain integers as positions
    with computation(PARALLEL), interval(...):
        t = a
        with horizontal(region[I[0] + 1 : I[-1], J[0] : J[-1] + 1]):
            t = a[-1, 0, 0] + a[1, 0, 0]
        with horizontal(region[:, 1:-1]):
            t = t * 2.0
        b = t[0, 1, 0] - t[0, -1, 0]


REGION_CASES = {
    "basic": (_regions_basic, 2, (0, 0, 0), (6, 5, 3), {}),
    "slices": (_regions_slices, 2, (0, 0, 0), (6, 5, 3), {}),
    "outside_domain": (_regions_outside_domain, 3, (2, 2, 0), (5, 4, 3), {}),
    "offset_reads": (_regions_offset_reads, 2, (2, 2, 0), (5, 4, 2), {}),
    "forward": (_regions_forward, 2, (1, 1, 0), (5, 4, 5), {}),
    "externals": (_regions_externals, 2, (1, 1, 0), (6, 5, 2),
                  {"i_start": sk.gtscript.I[0] + 1, "j_end": sk.gtscript.J[-1] - 1}),
    "mixed_levels": (_regions_mixed_levels, 2, (2, 2, 0), (5, 4, 2), {}),
}


@pytest.mark.parametrize("name", sorted(REGION_CASES))
def test_horizontal_regions_as_gt4py(name, backend):
    func, n_fields, origin, domain, externals = REGION_CASES[name]
    shape = (9, 8, domain[2])
    arrays = [rng.random(shape) for _ in range(n_fields)]
    same_as_gt4py(func, arrays, backend, externals=externals, origin=origin, domain=domain)


def test_region_in_a_computation_run_plane_by_plane(backend):
    # t is read with a horizontal offset in the FORWARD computation that writes it (GT4Py
    # refuses this): plane by plane, each level's region applied before b reads t.
    def regions_planes(a: Field[float], b: Field[float]):
        with computation(FORWARD):
            with interval(0, 1):
                t = a
                b = t[1, 0, 0] + t[-1, 0, 0]
            with interval(1, None):
                t = a + 0.5 * t[0, 0, -1]
                with horizontal(region[I[-1], :]):
                    t = a[-1, 0, 0]
                b = t[1, 0, 0] + t[-1, 0, 0]

    st = sk.stencil(regions_planes, backend=backend)
    assert "executed by planes" in st.ir
    a, b = rng.random((8, 4, 4)), np.zeros((8, 4, 4))
    st(a, b, origin=(2, 0, 0), domain=(4, 4, 4))
    t = np.zeros_like(a)
    ext = slice(1, 7)  # the domain, 2..5, and one point either side
    t[ext, :, 0] = a[ext, :, 0]
    for k in range(1, 4):
        t[ext, :, k] = a[ext, :, k] + 0.5 * t[ext, :, k - 1]
        t[5, :, k] = a[4, :, k]  # I[-1]
    expect = np.zeros_like(b)
    expect[2:6] = t[3:7] + t[1:5]
    np.testing.assert_allclose(b, expect, rtol=1e-12)


def test_region_outside_the_domain_writes_the_halo_of_a_field_read_there(backend):
    # GT4Py refuses to extend the computation of a written parameter; we compute b one point
    # beyond the domain because c reads it there, so b's region after the domain is written.
    def halo_write(a: Field[float], b: Field[float], c: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a
            with horizontal(region[I[-1] + 1, :]):
                b = a + 100.0
        with computation(PARALLEL), interval(...):
            c = b[1, 0, 0]

    a, b, c = rng.random((8, 5, 2)), np.zeros((8, 5, 2)), np.zeros((8, 5, 2))
    st = sk.stencil(halo_write, backend=backend)
    st(a, b, c, origin=(1, 0, 0), domain=(5, 5, 2))
    expect_b = np.zeros_like(b)
    expect_b[1:7] = a[1:7]
    expect_b[6] += 100.0
    np.testing.assert_array_equal(b, expect_b)
    np.testing.assert_array_equal(c[1:6], expect_b[2:7])
    assert "region[end:end+1, :]" in st.ir


def test_region_reads_from_the_far_end_need_a_large_enough_domain(backend):
    # At I[-1], a[-3, 0, 0] stays inside the domain only when it has at least 4 points; with
    # fewer it would read before the array, so the call is refused instead.
    def far(a: Field[float], b: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a
            with horizontal(region[I[-1], :]):
                b = a[-3, 0, 0]

    st = sk.stencil(far, backend=backend)
    assert st.extents["a"] == (0, 0, 0, 0)
    a, b = rng.random((5, 3, 2)), np.zeros((5, 3, 2))
    st(a, b)
    np.testing.assert_array_equal(b[4], a[1])
    with pytest.raises(sk.ArgumentError, match="at least 4"):
        st(a[:3], b[:3])


@pytest.mark.parametrize("text, message", [
    ("region[I[1], :]", "I\\[0\\] or I\\[-1\\]"),
    ("region[J[0], :]", "position along I"),
    ("region[I[0]]", "region\\[I-range, J-range\\]"),
    ("region[I[0] + I[0], :]", "position along I"),
])
def test_malformed_regions_are_rejected(text, message):
    ns = define(f"""
        def bad_region(a: Field[float], b: Field[float]):
            with computation(PARALLEL), interval(...):
                with horizontal({text}):
                    b = a
        """)
    with pytest.raises(sk.StencilSyntaxError, match=message) as info:
        sk.stencil(ns["bad_region"])
    assert ":4:" in str(info.value)


def test_horizontal_inside_an_if_inside_an_if_is_rejected():
    """A region directly in a branch of an `if` of the interval runs as GT4Py's
    (test_gtscript_fidelity); one level deeper it is still refused, with the fix."""
    ns = define("""
        def nested_region(a: Field[float], b: Field[float]):
            with computation(PARALLEL), interval(...):
                if a > 0.0:
                    if a > 0.5:
                        with horizontal(region[I[0], :]):
                            b = a
        """)
    with pytest.raises(sk.StencilSyntaxError, match="inside the horizontal region"):
        sk.stencil(ns["nested_region"])


# ------------------------------------------------------------------ writes at a K offset


def _write_above(a: Field[float], q: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            q = a
            q[0, 0, 1] = q + a[0, 0, 1]
        with interval(1, -1):
            q[0, 0, 1] = q + a[0, 0, 1]


def _write_below(a: Field[float], q: Field[float]):
    with computation(PARALLEL), interval(...):
        q = a
        t = 2.0 * a
    with computation(BACKWARD), interval(1, None):
        q[0, 0, -1] = 0.5 * q + a[0, 0, -1]
        t[0, 0, -1] = t + q
        q[0, 0, -1] += t[0, 0, -1] * 0.25


def _write_temporary_above(a: Field[float], q: Field[float]):
    # t lives in a per-column buffer on the C backend: the write above must fit in it
    with computation(FORWARD):
        with interval(0, 1):
            t = a
            q = t
            t[0, 0, 1] = t * 0.5 + a[0, 0, 1]
        with interval(1, -1):
            q = t
            t[0, 0, 1] = t * 0.5 + a[0, 0, 1]
        with interval(-1, None):
            q = t


K_WRITE_CASES = {
    "temporary_above": (_write_temporary_above, (0, 0, 0), (4, 3, 7)),
    "above": (_write_above, (0, 0, 0), (4, 3, 6)),
    "below": (_write_below, (0, 0, 0), (4, 3, 6)),
}


@pytest.mark.parametrize("name", sorted(K_WRITE_CASES))
def test_writes_at_a_vertical_offset_as_gt4py(name, backend):
    func, origin, domain = K_WRITE_CASES[name]
    arrays = [rng.random((5, 4, domain[2])), np.zeros((5, 4, domain[2]))]
    same_as_gt4py(func, arrays, backend, origin=origin, domain=domain)


def test_write_at_a_vertical_offset_plane_by_plane(backend):
    from .computations import planes, ref_planes

    st = sk.stencil(planes, backend=backend)
    assert "executed by planes" in st.ir
    a, q = rng.random((5, 4, 6)), np.zeros((5, 4, 6))
    expect = ref_planes(a, q)
    st(a, q, origin=(1, 0, 0), domain=(3, 4, 6))
    np.testing.assert_allclose(q, expect, rtol=1e-12)


def test_write_at_a_vertical_offset_needs_room_in_the_field(backend):
    # interval(...) writes q one level above the domain's top: that level must exist.
    def over_top(a: Field[float], q: Field[float]):
        with computation(FORWARD), interval(...):
            q[0, 0, 1] = a

    st = sk.stencil(over_top, backend=backend)
    a, q = rng.random((3, 3, 5)), np.zeros((3, 3, 5))
    info: dict = {}
    st(a, q, exec_info=info)
    assert info["domain"] == (3, 3, 4)  # the default domain leaves the level above
    np.testing.assert_array_equal(q[:, :, 1:], a[:, :, :4])
    with pytest.raises(sk.ArgumentError, match="'q' lacks the halo.*along K"):
        st(a, q, domain=(3, 3, 5))


@pytest.mark.parametrize("body, message", [
    ("with computation(PARALLEL), interval(0, -1):\n        q[0, 0, 1] = a", "PARALLEL"),
    ("with computation(FORWARD), interval(...):\n        q[1, 0, 0] = a",
     "horizontal offset \\(1, 0\\)"),
])
def test_bad_offset_writes_are_rejected(body, message):
    ns = define(f"""
def bad_write(a: Field[float], q: Field[float]):
    {body}
""")
    with pytest.raises(sk.StencilSyntaxError, match=message) as info:
        sk.stencil(ns["bad_write"])
    assert ":4:" in str(info.value)


# ------------------------------------------------------------------ run-time K offsets


def _k_var_field(a: Field[float], lev: Field[np.int64], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a[0, 0, lev] + 2.0 * a[0, 0, lev - 1]


def _k_var_index(a: Field[float], b: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            k_index = 0
        with interval(1, None):
            k_index = k_index[0, 0, -1] + 1
    with computation(PARALLEL), interval(...):
        b = a[0, 0, -k_index]  # every level reads level 0


def _k_var_scalar(a: Field[float], b: Field[float], shift: int):
    with computation(PARALLEL), interval(0, -2):
        t = 2.0 * a[0, 0, shift]
        b = t + a[0, 0, shift - 1]


def _k_var_temporary(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        t = a * 3.0
        down = -1 if a > 0.5 else 0
    with computation(PARALLEL), interval(1, -1):
        b = t[0, 0, down] + a[0, 0, down + 1]


K_VAR_CASES = {
    "field": (_k_var_field, (0, 0, 0), (4, 5, 6), {}),
    "index": (_k_var_index, (0, 0, 0), (5, 5, 6), {}),
    "scalar": (_k_var_scalar, (0, 0, 0), (5, 5, 6), {"shift": 2}),
    "temporary": (_k_var_temporary, (0, 0, 0), (5, 5, 6), {}),
}


@pytest.mark.parametrize("name", sorted(K_VAR_CASES))
def test_runtime_vertical_offsets_as_gt4py(name, backend):
    func, origin, domain, scalars = K_VAR_CASES[name]
    shape = (5, 5, 6)
    arrays = [rng.random(shape), np.zeros(shape)]
    if name == "field":  # k + lev and k + lev - 1 stay within the 6 levels
        k = np.arange(6)
        arrays.insert(1, (rng.integers(1, 6, size=shape) - k).astype(np.int64))
    same_as_gt4py(func, arrays, backend, origin=origin, domain=domain, **scalars)


def test_runtime_vertical_offset_in_a_sequential_computation(backend):
    # (GT4Py's numpy backend fails on this one: a shape error in its generated code.)
    def k_var_backward(a: Field[float], b: Field[float], shift: int):
        with computation(BACKWARD):
            with interval(-2, None):
                b = a
            with interval(0, -2):
                b = 2.0 * a[0, 0, shift] + b[0, 0, shift]

    a, b = rng.random((3, 4, 7)), np.zeros((3, 4, 7))
    sk.stencil(k_var_backward, backend=backend)(a, b, shift=2)
    expect = a.copy()
    for k in range(4, -1, -1):
        expect[:, :, k] = 2.0 * a[:, :, k + 2] + expect[:, :, k + 2]
    np.testing.assert_allclose(b, expect, rtol=1e-12)


def test_runtime_vertical_offset_with_a_horizontal_offset(backend):
    # GT4Py's numpy backend drops the horizontal part of a[1, 0, lev] (it reads a[0, 0, lev]);
    # we read the neighbour, as written. The reference is a loop over the points.
    def k_var_ij(a: Field[float], lev: Field[np.int64], b: Field[float]):
        with computation(PARALLEL), interval(...):
            b = a[1, 0, lev] + a[0, -1, lev - 1]

    shape = (5, 5, 6)
    a, b = rng.random(shape), np.zeros(shape)
    lev = (rng.integers(1, 6, size=shape) - np.arange(6)).astype(np.int64)
    st = sk.stencil(k_var_ij, backend=backend)
    assert st.extents["a"] == (0, 1, -1, 0)
    st(a, lev, b, origin=(0, 1, 0), domain=(4, 4, 6))
    expect = np.zeros(shape)
    for i in range(4):
        for j in range(1, 5):
            for k in range(6):
                n = lev[i, j, k]
                expect[i, j, k] = a[i + 1, j, k + n] + a[i, j - 1, k + n - 1]
    np.testing.assert_allclose(b, expect, rtol=1e-12)


def test_runtime_vertical_offset_outside_the_field_is_an_error(backend):
    st = sk.stencil(_k_var_scalar, backend=backend)
    a, b = rng.random((4, 4, 6)), np.zeros((4, 4, 6))
    st(a, b, shift=2)  # levels 0..3 read 2..5: inside
    with pytest.raises(sk.ArgumentError, match=r"run-time vertical offset.*'a' \(line \d+\)") \
            as info:
        st(a, b, shift=3)
    assert "test_gtscript_ir_features.py" in str(info.value)
    with pytest.raises(sk.ArgumentError, match="outside the field"):
        st(a, b, shift=-1)


def test_runtime_vertical_offset_far_outside_never_reads_out_of_bounds(tmp_path):
    needs_c()
    # A huge offset on the C backend, in a child process: a crash fails the test, not the run.
    code = textwrap.dedent("""
        import numpy as np, stencilkit as sk
        from stencilkit import Field, computation, interval, PARALLEL

        def far(a: Field[float], lev: Field[np.int64], b: Field[float]):
            with computation(PARALLEL), interval(...):
                b = a[0, 0, lev]

        st = sk.stencil(far, backend="c")
        a, b = np.random.rand(64, 64, 8), np.zeros((64, 64, 8))
        lev = np.full((64, 64, 8), 1 << 40, dtype=np.int64)
        lev[::2] = -(1 << 40)
        try:
            st(a, lev, b)
        except sk.ArgumentError as e:
            print("ArgumentError", e)
        """)
    script = tmp_path / "far_k_offset.py"
    script.write_text(code)
    with open(os.devnull) as devnull:
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                             timeout=240, stdin=devnull, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert "ArgumentError" in out.stdout and "'a'" in out.stdout


def test_runtime_vertical_offset_of_a_field_written_in_parallel_is_rejected():
    ns = define("""
        def k_var_bad(a: Field[float], b: Field[float], lev: int):
            with computation(PARALLEL), interval(...):
                b = a
                a = b[0, 0, lev]
        """)
    with pytest.raises(sk.AccessRuleError, match="PARALLEL.*'b'.*run-time"):
        sk.stencil(ns["k_var_bad"])


def test_float_vertical_offset_is_a_type_error():
    ns = define("""
        def k_float(a: Field[float], b: Field[float]):
            with computation(PARALLEL), interval(...):
                b = a[0, 0, a]
        """)
    with pytest.raises(sk.StencilTypeError, match="not an integer"):
        sk.stencil(ns["k_float"])


# ------------------------------------------------------------------ data dimensions


def _ddim_sum(v: Field[(np.float64, (4,))], out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = v[0, 0, 0][0] + 2.0 * v[0, 0, 0][3] - v[1, 0, 0][2] + v[0, -1, 0][1]


def _ddim_write(a: Field[float], v: Field[(np.float64, (3,))]):
    with computation(FORWARD):
        with interval(0, 1):
            v[0, 0, 0][0] = a
            v[0, 0, 0][1] = 2.0 * a
            v[0, 0, 0][2] = v[0, 0, 0][0] + v[0, 0, 0][1]
        with interval(1, None):
            v[0, 0, 0][0] = a + v[0, 0, -1][2]
            v[0, 0, 0][1] = v[0, 0, 0][0] * 0.5
            v[0, 0, 0][2] = v[0, 0, 0][1] - a


def _ddim_2d(a: Field[float], w: Field[IJ, (np.float64, (2,))], out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = a * w[0, 0][0] + w[1, 0][1]


DDIM_CASES = {
    "sum": (_ddim_sum, lambda: [rng.random((6, 5, 3, 4)), np.zeros((6, 5, 3))], (0, 1, 0),
            (5, 4, 3)),
    "write": (_ddim_write, lambda: [rng.random((4, 3, 5)), np.zeros((4, 3, 5, 3))],
              (0, 0, 0), (4, 3, 5)),
    "two_d": (_ddim_2d, lambda: [rng.random((5, 4, 3)), rng.random((5, 4, 2)),
                                 np.zeros((5, 4, 3))], (0, 0, 0), (4, 4, 3)),
}


@pytest.mark.parametrize("name", sorted(DDIM_CASES))
def test_data_dimensions_as_gt4py(name, backend):
    func, make, origin, domain = DDIM_CASES[name]
    same_as_gt4py(func, make(), backend, origin=origin, domain=domain)


def test_data_dimensions_in_the_ir_and_the_type():
    st = sk.stencil(_ddim_sum, backend="numpy")
    assert "v: Field[IJK, (float64, (4,))]" in st.ir
    assert repr(Field[(np.float64, (8,))]) == "Field[IJK, (float64, (8,))]"
    assert Field[sk.gtscript.IJ, (np.float32, (2, 3))].data_dims == (2, 3)


def test_data_dimension_array_of_the_wrong_shape_is_an_argument_error(backend):
    st = sk.stencil(_ddim_sum, backend=backend)
    with pytest.raises(sk.ArgumentError, match=r"data dimensions \(4,\).*shape \(6, 5, 3, 3\)"):
        st(np.zeros((6, 5, 3, 3)), np.zeros((6, 5, 3)))
    with pytest.raises(sk.ArgumentError, match="4-D"):
        st(np.zeros((6, 5, 3)), np.zeros((6, 5, 3)))


@pytest.mark.parametrize("body, error, message", [
    ("out = v", sk.StencilTypeError, r"data dimensions \(4,\).*v\[0, 0, 0\]\[i\]"),
    ("out = v[0, 0, 0][4]", sk.StencilSyntaxError, r"integer constant in \[0, 4\)"),
    ("out = v[0, 0, 0][0, 1]", sk.StencilSyntaxError, "give 1 index"),
    ("out = out[0, 0, 0][0]", sk.StencilSyntaxError, "no data dimensions"),
    # (`v = out` writes every element of v: GT4Py's element-wise meaning, test_gtscript_fidelity)
    ("out = 2.0 * v", sk.StencilTypeError, r"data dimensions \(4,\).*v\[0, 0, 0\]\[i\]"),
])
def test_bad_data_dimension_accesses(body, error, message):
    ns = define(f"""
        def bad_ddim(v: Field[(np.float64, (4,))], out: Field[float]):
            with computation(PARALLEL), interval(...):
                {body}
        """)
    with pytest.raises(error, match=message) as info:
        sk.stencil(ns["bad_ddim"])
    assert ":4:" in str(info.value)


def test_field_type_with_bad_data_dimensions_is_a_clear_error():
    with pytest.raises(ValueError, match="positive integers"):
        Field[(np.float64, (0,))]



def test_runtime_vertical_offset_of_a_field_written_in_a_forward_sweep(backend):
    # b[0, 0, lev] with lev = -1 or -2 reads levels this FORWARD sweep already wrote.
    def k_var_sweep(a: Field[float], lev: Field[np.int64], b: Field[float]):
        with computation(FORWARD):
            with interval(0, 2):
                b = a
            with interval(2, None):
                b = a + 0.5 * b[0, 0, lev]

    shape = (4, 3, 8)
    a, b = rng.random(shape), np.zeros(shape)
    lev = -rng.integers(1, 3, size=shape).astype(np.int64)
    sk.stencil(k_var_sweep, backend=backend)(a, lev, b)
    expect = a.copy()
    for k in range(2, 8):
        for i in range(4):
            for j in range(3):
                expect[i, j, k] = a[i, j, k] + 0.5 * expect[i, j, k + lev[i, j, k]]
    np.testing.assert_allclose(b, expect, rtol=1e-12)


@pytest.mark.parametrize("case", ["regions:forward", "regions:offset_reads", "ddim:sum",
                                  "ddim:write"])
def test_fortran_ordered_arrays_give_the_same_result(case):
    # The C backend orders its loops by the arrays' layout (I contiguous here).
    needs_c()
    kind, name = case.split(":")
    if kind == "regions":
        func, n, origin, domain, externals = REGION_CASES[name]
        arrays = [rng.random((9, 8, domain[2])) for _ in range(n)]
    else:
        func, make, origin, domain = DDIM_CASES[name]
        arrays, externals = make(), {}
    fortran = [np.asfortranarray(x) for x in arrays]
    sk.stencil(func, backend="c", externals=externals)(*fortran, origin=origin, domain=domain)
    sk.stencil(func, backend="numpy", externals=externals)(*arrays, origin=origin,
                                                           domain=domain)
    for x, y in zip(fortran, arrays):
        np.testing.assert_allclose(x, y, rtol=1e-12)
