"""ParLoop safety (issue 9): objects the generated loop trusts cannot change behind its back,
bad input gets a clear StencilError, and the C and NumPy backends agree with plain loops.

Cases that crashed the interpreter before the fix run in a subprocess with a timeout, so a
regression fails the test instead of killing the run.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.api.loop import block_coloring
from stencilkit.runtime.parloop_blocks import coloring


def run_isolated(code: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter; it must print OK (a crash or hang fails). The
    code goes to a file: kernels need their source."""
    env = dict(os.environ, OMP_NUM_THREADS="2")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "case.py"
        script.write_text(textwrap.dedent(code))
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=timeout, env=env)
    assert proc.returncode == 0 and "OK" in proc.stdout, (
        f"exit status {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return proc.stdout


@sk.kernel
def spread(v, acc):
    for i in range(3):
        acc[i, 0] += v[0]


def ring(n_cells: int, n_nodes: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_nodes, (n_cells, 3))


def inc_reference(values: np.ndarray, targets: np.ndarray, n_nodes: int) -> np.ndarray:
    out = np.zeros(n_nodes)
    np.add.at(out, targets.reshape(-1), np.repeat(values, targets.shape[1]))
    return out


# ------------------------------------------------------------------ maps own their values


def test_map_copies_and_never_freezes_the_callers_array():
    cells, nodes = sk.Set(4), sk.Set(3)
    mine = np.array([[0, 1, 2]] * 4, np.int32)
    m = sk.Map(cells, nodes, 3, mine)
    assert mine.flags.writeable          # was made read-only (issue item 9)
    mine[0, 0] = 2
    assert m.values[0, 0] == 0           # a private copy
    with pytest.raises(ValueError):
        m.values[0, 0] = 1
    with pytest.raises(ValueError):      # and it cannot be made writable again
        m.values.flags.writeable = True
    with pytest.raises((ValueError, AttributeError)):
        m.values.base.flags.writeable = True  # type: ignore[union-attr]


def test_map_from_an_int32_view_whose_base_changes_later():
    # used to segfault: the Map kept the view, the base was overwritten with huge indices
    run_isolated("""
        import numpy as np, stencilkit as sk
        base = np.zeros((40000, 3), np.int32)
        base[:] = np.random.default_rng(1).integers(0, 100, base.shape)
        cells, nodes = sk.Set(20000), sk.Set(100)
        m = sk.Map(cells, nodes, 3, base[1000:21000])     # a contiguous int32 view
        want = base[1000:21000].copy()
        base[:] = 2**30                      # behind the Map's back
        v, acc = sk.Dat(cells, data=np.ones(20000)), sk.Dat(nodes)
        @sk.kernel
        def spread(v, acc):
            for i in range(3):
                acc[i, 0] += v[0]
        for backend, race in (("c", "atomic"), ("c", "color"), ("numpy", None)):
            acc.data[:] = 0
            if race:
                sk.configure(race=race)
            sk.par_loop(spread, cells, v(sk.READ), acc(sk.INC, m), backend=backend)
            assert np.array_equal(acc.data, np.bincount(want.ravel(), minlength=100)), backend
        print("OK")
    """)


def test_map_values_reassigned_are_validated_and_used():
    # used to segfault: `values` was a plain attribute the C loop trusted
    run_isolated("""
        import numpy as np, stencilkit as sk
        cells, nodes = sk.Set(6000), sk.Set(50)
        rng = np.random.default_rng(2)
        m = sk.Map(cells, nodes, 3, rng.integers(0, 50, (6000, 3)))
        v, acc = sk.Dat(cells, data=np.ones(6000)), sk.Dat(nodes)
        @sk.kernel
        def spread(v, acc):
            for i in range(3):
                acc[i, 0] += v[0]
        loop = sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), backend="c")
        loop.compute()
        for bad, what in ((np.full((6000, 3), -5), "outside"), (np.full((6000, 3), 10**9),
                          "outside"), (np.zeros((6000, 2), int), "shape"),
                          (np.zeros((6000, 3)), "integers")):
            try:
                m.values = bad
            except sk.ArgumentError as e:
                assert what in str(e), e
            else:
                raise AssertionError("accepted bad map values")
        new = rng.integers(0, 50, (6000, 3))
        m.values = new
        acc.data[:] = 0
        loop.compute()                        # the new values and a new colouring
        assert np.array_equal(acc.data, np.bincount(new.ravel(), minlength=50))
        print("OK")
    """)


def test_set_size_cannot_change():
    # used to segfault: the loop ran over the new size, past the Dats' rows
    run_isolated("""
        import numpy as np, stencilkit as sk
        s = sk.Set(10)
        d = sk.Dat(s)
        @sk.kernel
        def one(x):
            x[0] = 1.0
        try:
            s.size = 10**8
        except sk.ArgumentError as e:
            assert "cannot change" in str(e)
        else:
            raise AssertionError("Set.size changed")
        sk.par_loop(one, s, d(sk.WRITE), backend="c")
        assert s.size == 10 and d.data.sum() == 10
        print("OK")
    """)


def test_map_fields_are_fixed():
    cells, nodes = sk.Set(2), sk.Set(3)
    m = sk.Map(cells, nodes, 1, [0, 2])
    for field, value in (("arity", 5), ("to_set", sk.Set(1)), ("from_set", sk.Set(9))):
        with pytest.raises(AttributeError):
            setattr(m, field, value)


def test_int64_map_values_for_a_target_set_of_2_31_elements():
    # were read as int32 in C: wrong targets (or a crash). The target Dat is int8 and
    # allocated lazily by the OS, so 2**31 rows cost only the pages touched.
    run_isolated("""
        import numpy as np, stencilkit as sk
        big = sk.Set(2**31 + 16)
        cells = sk.Set(4)
        idx = np.array([2**31 + 5, 7, 2**31 + 15, 2**31 + 5])
        m = sk.Map(cells, big, 1, idx)
        assert m.values.dtype == np.int64
        @sk.kernel
        def bump(y):
            y[0, 0] += 1
        for backend in ("c", "numpy"):
            d = sk.Dat(big, dtype=np.int8)
            loop = sk.ParLoop(bump, cells, d(sk.INC, m), backend=backend)
            if backend == "c":
                assert "const int64_t *restrict m0" in loop.generate()
            loop.compute()
            got = d.data
            assert got[2**31 + 5] == 2 and got[7] == 1 and got[2**31 + 15] == 1, backend
            assert int(got[:2**20].sum()) == 1, backend
            del d, got
        print("OK")
    """, timeout=240)


# ------------------------------------------------------------------ colouring


def test_coloring_is_not_inherited_by_a_new_map_that_reuses_an_id():
    # the cache was keyed by id(values): a new map at a recycled address got the old map's
    # colouring, whose colours share targets of the new map, and lost INC updates. Trials
    # alternate between maps whose blocks are disjoint (one colour suffices) and maps whose
    # blocks all share node 0 (one colour per block), so a stale colouring is always wrong.
    n_blocks, per_block = 8, 2048
    n_cells, n_nodes = n_blocks * per_block, n_blocks * 50
    cells, nodes = sk.Set(n_cells), sk.Set(n_nodes)
    rng = np.random.default_rng(5)
    keep = sk.Map(cells, nodes, 3, rng.integers(0, n_nodes, (n_cells, 3)))  # holds the cache
    v = sk.Dat(cells, data=rng.random(n_cells))
    block_of = np.arange(n_cells) // per_block

    @sk.kernel
    def spread2(w, v, acc):
        for i in range(3):
            acc[i, 0] += v[0] + 0.0 * w[i, 0]

    w = sk.Dat(nodes)
    for trial in range(20):
        targets = block_of[:, None] * 50 + rng.integers(0, 50, (n_cells, 3))
        if trial % 2:
            targets[:, 0] = 0
        m = sk.Map(cells, nodes, 3, targets)
        acc = sk.Dat(nodes)
        loop = sk.ParLoop(spread2, cells, w(sk.READ, keep), v(sk.READ), acc(sk.INC, m),
                          backend="c", race="color")
        for blocks in coloring(loop.bind()):     # no two blocks of a colour share a node
            seen: set[int] = set()
            for s, t in blocks:
                here = set(targets[s:t].ravel().tolist())
                assert not here & seen, f"trial {trial}: stale colouring"
                seen |= here
        loop.compute()
        np.testing.assert_allclose(acc.data, inc_reference(v.data, targets, n_nodes))
        del m, loop, acc


def test_block_coloring_beyond_64_colours():
    n = 70 * 64
    tri = np.zeros((n, 1), np.int64)      # every element hits node 0: one colour per block
    colours = block_coloring(n, [tri], [1], block=64)
    assert len(colours) == 70
    assert sorted(int(s) for blocks in colours for s, _ in blocks) == list(range(0, n, 64))


@pytest.mark.parametrize("race", ["color", "atomic"])
def test_min_max_through_a_map_needing_more_than_64_colours(backend, race):
    # refused with "more than 64 colours" on C, also with the race="atomic" it suggested
    n = 66 * 2048 + 100
    rng = np.random.default_rng(3)
    targets = np.stack([np.zeros(n, int), rng.integers(0, 1000, n)], axis=1)
    cells, nodes = sk.Set(n), sk.Set(1000)
    m = sk.Map(cells, nodes, 2, targets)
    vals = rng.random(n)
    v, lo, hi = sk.Dat(cells, data=vals), sk.Dat(nodes, data=np.full(1000, 0.5)), sk.Dat(nodes)

    @sk.kernel
    def extremes(v, lo, hi):
        for i in range(2):
            lo[i, 0] = min(lo[i, 0], v[0])
            hi[i, 0] = max(hi[i, 0], v[0])

    sk.ParLoop(extremes, cells, v(sk.READ), lo(sk.MIN, m), hi(sk.MAX, m), backend=backend,
               race=race).compute()
    exp_lo, exp_hi = np.full(1000, 0.5), np.zeros(1000)
    np.minimum.at(exp_lo, targets.ravel(), np.repeat(vals, 2))
    np.maximum.at(exp_hi, targets.ravel(), np.repeat(vals, 2))
    np.testing.assert_array_equal(lo.data, exp_lo)
    np.testing.assert_array_equal(hi.data, exp_hi)


# ------------------------------------------------------------------ conflicting arguments


def test_same_dat_inc_and_read_through_one_map_is_rejected(backend):
    # gave 9 on NumPy and 31 on C; now a clear error on both
    cells, nodes = sk.Set(4), sk.Set(3)
    m = sk.Map(cells, nodes, 3, [[0, 1, 2]] * 4)
    d = sk.Dat(nodes, data=np.ones(3))

    @sk.kernel
    def feed(x, y):
        for i in range(3):
            y[i, 0] += x[i, 0] + 1.0

    with pytest.raises(sk.ArgumentError, match="only if all of them READ") as info:
        sk.par_loop(feed, cells, d(sk.READ, m), d(sk.INC, m), backend=backend)
    assert "feed" in str(info.value)
    np.testing.assert_array_equal(d.data, np.ones(3))


def test_same_dat_read_twice_is_fine(backend):
    cells, nodes = sk.Set(4), sk.Set(3)
    m = sk.Map(cells, nodes, 3, [[0, 1, 2], [2, 1, 0], [1, 1, 1], [0, 0, 2]])
    d, out = sk.Dat(nodes, data=[1.0, 2.0, 4.0]), sk.Dat(cells)

    @sk.kernel
    def two(x, y, o):
        o[0] = x[0, 0] + y[0]

    sk.par_loop(two, cells, d(sk.READ, m), d(sk.READ, m[2]), out(sk.WRITE), backend=backend)
    np.testing.assert_array_equal(out.data, [5.0, 5.0, 4.0, 5.0])


def test_global_inc_and_read_together_is_rejected():
    s = sk.Set(3)
    g = sk.Global(1, 1.0)

    @sk.kernel
    def k(a, b):
        a[0] += b[0]

    with pytest.raises(sk.ArgumentError, match="also reads"):
        sk.ParLoop(k, s, g(sk.INC), g(sk.READ))


# ------------------------------------------------------------------ plain exceptions before


@pytest.mark.parametrize("make, match", [
    (lambda s: sk.Map(50, s, 1, [0]), "must be an sk.Set"),
    (lambda s: sk.Map(s, 50, 1, [0]), "must be an sk.Set"),
    (lambda s: sk.Map(s, s, 0, np.zeros((3, 0), int)), "arity must be a positive"),
    (lambda s: sk.Map(s, s, "3", [0, 1, 2]), "arity must be a positive"),
    (lambda s: sk.Map(s, s, 1, [[0, 1, 2]]), "shape"),
    (lambda s: sk.Map(s, s, 1, [True, False, True]), "integers"),
    (lambda s: sk.Map(s, s, 1, [0, 1, 2])["x"], "out of range"),
    (lambda s: sk.Dat(s, dim=-1), "dim must be a positive"),
    (lambda s: sk.Dat(s, dim=0), "dim must be a positive"),
    (lambda s: sk.Dat(3), "must be an sk.Set"),
    (lambda s: sk.Dat(s, data=[[1, 2], [3]]), "not a numeric array"),
    (lambda s: sk.Dat(s)("WRTIE"), "not an access mode"),
    (lambda s: sk.Dat(s, dim=2, data=np.zeros((2, 3))), "transpose"),
    (lambda s: sk.Dat(sk.Set(2**62), dim=4), "no memory"),
    (lambda s: sk.Dat(s)(sk.READ, 5), "not a map"),
    (lambda s: sk.Global(-2), "dim must be a positive"),
    (lambda s: sk.Global(1)(7), "not an access mode"),
    (lambda s: setattr(sk.Global(2), "data", [1.0, 2.0, 3.0]), "cannot assign"),
    (lambda s: setattr(sk.Dat(s), "data", np.ones(4)), "cannot assign"),
    (lambda s: setattr(sk.Dat(s, dtype=int), "data", np.ones(3) + 1j), "cannot assign"),
    (lambda s: sk.Set("x"), "non-negative integer"),
    (lambda s: sk.Set(None), "non-negative integer"),
    (lambda s: sk.Sparsity(1, 2), "two sk.Map"),
    (lambda s: sk.Mat(None), "Sparsity"),
])
def test_bad_constructor_input_is_a_stencil_error(make, match):
    with pytest.raises(sk.StencilError, match=match):
        make(sk.Set(3))


def test_access_mode_by_name(backend):
    s = sk.Set(3)
    d = sk.Dat(s)

    @sk.kernel
    def one(x):
        x[0] = 1.0

    sk.par_loop(one, s, d("WRITE"), backend=backend)     # was an AttributeError
    np.testing.assert_array_equal(d.data, np.ones(3))


def test_dat_data_assignment_copies_in(backend):
    s = sk.Set(3)
    d = sk.Dat(s, dim=2)
    d.data = [[1, 2], [3, 4], [5, 6]]
    np.testing.assert_array_equal(d.data, [[1, 2], [3, 4], [5, 6]])
    assert d.data.dtype == np.float64


def test_read_only_dat_data(backend):
    s = sk.Set(3)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    d = sk.Dat(s, data=ro)                       # the Dat copies: writable
    assert d.data.flags.writeable
    d.data.flags.writeable = False               # made read-only: READ works, writes refused
    out = sk.Dat(s)

    @sk.kernel
    def copy(a, b):
        b[0] = a[0]

    sk.par_loop(copy, s, d(sk.READ), out(sk.WRITE), backend=backend)
    np.testing.assert_array_equal(out.data, [0.0, 1.0, 2.0])
    with pytest.raises(sk.ArgumentError, match="read-only") as info:
        sk.par_loop(copy, s, out(sk.READ), d(sk.WRITE), backend=backend)
    assert "copy" in str(info.value) and "test_parloop_safety.py" in str(info.value)


def test_dat_changed_in_place_after_the_loop_was_built():
    # dim and shape changes would let the C loop run past the data
    run_isolated("""
        import numpy as np, stencilkit as sk
        s = sk.Set(1000)
        d = sk.Dat(s, dim=2)
        @sk.kernel
        def fill(x):
            for j in range(2):
                x[j] = 1.0
        for backend in ("c", "numpy"):
            loop = sk.ParLoop(fill, s, d(sk.WRITE), backend=backend)
            d.dim = 50
            try:
                loop.compute()
            except sk.ArgumentError as e:
                assert "fill" in str(e) and "dim 50" in str(e), e
            else:
                raise AssertionError("ran with a changed dim")
            d.dim = 2
            d._data = np.zeros((10, 2))          # reassigned behind the property's back
            try:
                loop.compute()
            except sk.ArgumentError as e:
                assert "shape (10, 2)" in str(e), e
            else:
                raise AssertionError("ran with a changed shape")
            d._data = np.zeros((1000, 2))
            loop.compute()
            assert d.data.sum() == 2000
        print("OK")
    """)


def test_run_time_index_out_of_range(backend):
    cells, nodes = sk.Set(4), sk.Set(3)
    m = sk.Map(cells, nodes, 3, [[0, 1, 2]] * 4)

    @sk.kernel
    def oob(x, y):
        for i in range(4):
            y[i, 0] += x[0]

    y = sk.Dat(nodes)
    with pytest.raises(sk.ArgumentError, match="out of range at run time") as info:
        sk.par_loop(oob, cells, sk.Dat(cells)(sk.READ), y(sk.INC, m), backend=backend)
    assert "oob" in str(info.value) and "test_parloop_safety.py" in str(info.value)


def test_float_increment_of_an_int_dat_is_rejected():
    s = sk.Set(4)
    counts = sk.Dat(s, data=np.arange(4))

    @sk.kernel
    def half(c):
        c[0] += 0.5                 # silently added 0 on both backends

    with pytest.raises(sk.StencilTypeError, match="fraction would be dropped") as info:
        sk.ParLoop(half, s, counts(sk.INC))
    assert "half" in str(info.value)

    @sk.kernel
    def explicit(c, x):
        c[0] += int(x[0])
        c[0] = np.int32(c[0] + 1.0)

    for backend in ("numpy", "c"):
        counts.data[:] = [0, 1, 2, 3]
        sk.par_loop(explicit, s, counts(sk.RW), sk.Dat(s, data=[1.5] * 4)(sk.READ),
                    backend=backend)
        np.testing.assert_array_equal(counts.data, [2, 3, 4, 5])


def test_huge_arity_is_refused_not_a_stack_overflow():
    # a (100000, 2) float64 local block on the OpenMP thread's stack crashed
    run_isolated("""
        import numpy as np, stencilkit as sk
        cells, nodes = sk.Set(3), sk.Set(5)
        m = sk.Map(cells, nodes, 100000, np.zeros((3, 100000), int))
        @sk.kernel
        def k(x, y):
            y[0] = x[0, 0]
        try:
            sk.par_loop(k, cells, sk.Dat(nodes, dim=2)(sk.READ, m), sk.Dat(cells)(sk.WRITE),
                        backend="c")
        except sk.ArgumentError as e:
            assert "too large" in str(e) and "'k'" in str(e)
        else:
            raise AssertionError("ran")
        print("OK")
    """)


def test_empty_sets(backend):
    empty, nodes = sk.Set(0), sk.Set(3)
    m = sk.Map(empty, nodes, 2, np.zeros((0, 2), int))
    acc = sk.Dat(nodes, data=np.ones(3))
    lo = sk.Global(1, 7.0)
    tot = sk.Global(1, 2.0)

    @sk.kernel
    def k(v, a, lo, tot):
        for i in range(2):
            a[i, 0] += v[0]
        lo[0] = min(lo[0], v[0])
        tot[0] += v[0]

    sk.par_loop(k, empty, sk.Dat(empty)(sk.READ), acc(sk.INC, m), lo(sk.MIN), tot(sk.INC),
                backend=backend, race="color")
    np.testing.assert_array_equal(acc.data, np.ones(3))
    assert lo.data[0] == 7.0 and tot.data[0] == 2.0


def test_non_contiguous_inputs(backend):
    cells, nodes = sk.Set(4), sk.Set(3)
    targets = np.asfortranarray(np.array([[0, 1], [1, 2], [2, 0], [0, 0]], np.int32))
    m = sk.Map(cells, nodes, 2, targets)
    v = sk.Dat(cells, data=np.arange(8.0)[::2])
    acc = sk.Dat(nodes)

    @sk.kernel
    def k(v, a):
        for i in range(2):
            a[i, 0] += v[0]

    sk.par_loop(k, cells, v(sk.READ), acc(sk.INC, m), backend=backend)
    np.testing.assert_array_equal(acc.data, inc_reference(np.arange(8.0)[::2], targets, 3))


def test_sparsity_built_before_its_map_changed():
    cells, nodes = sk.Set(2), sk.Set(3)
    m = sk.Map(cells, nodes, 2, [[0, 1], [1, 2]])
    mat = sk.Mat(sk.Sparsity(m, m))

    @sk.kernel
    def ones(a):
        for i in range(2):
            for j in range(2):
                a[i, j] += 1.0

    m.values = [[0, 2], [2, 1]]
    for backend in ("numpy", "c"):
        with pytest.raises(sk.ArgumentError, match="new values after the Sparsity"):
            sk.par_loop(ones, cells, mat(sk.INC, (m, m)), backend=backend)


def test_lazy_loops_see_objects_as_they_were_when_queued():
    cells, nodes = sk.Set(3), sk.Set(3)
    m = sk.Map(cells, nodes, 1, [0, 0, 0])
    acc = sk.Dat(nodes)
    v = sk.Dat(cells, data=[1.0, 2.0, 3.0])

    @sk.kernel
    def k(v, a):
        a[0, 0] += v[0]

    sk.configure(lazy=True)
    sk.par_loop(k, cells, v(sk.READ), acc(sk.INC, m), backend="c")
    sk.Map(cells, nodes, 1, [1, 1, 1])   # a new map does not force the queue
    assert sk.api.loop.lazy.pending() == 1
    m.values = [2, 2, 2]                 # runs the queued loop first, with the old values
    v.data = [10.0, 20.0, 30.0]
    sk.par_loop(k, cells, v(sk.READ), acc(sk.INC, m), backend="c")
    with pytest.raises(sk.ArgumentError):
        cells.size = 1
    sk.flush()
    np.testing.assert_array_equal(acc.data, [6.0, 0.0, 60.0])


@pytest.mark.parametrize("star", [False, True])
def test_rw_through_a_map_with_shared_targets(backend, star):
    # NumPy gathered every element's values before any scatter, so elements sharing a node
    # overwrote each other's update (counted once); C runs each block serially (counted
    # every time). Both now count every element.
    n_cells, n_nodes = 3000, 200
    rng = np.random.default_rng(4)
    targets = rng.integers(0, n_nodes, (n_cells, 3))
    if star:
        targets[:100, 0] = 7          # one node shared by a hundred elements
    cells, nodes = sk.Set(n_cells), sk.Set(n_nodes)
    m = sk.Map(cells, nodes, 3, targets)
    count = sk.Dat(nodes, data=np.full(n_nodes, 0.5))

    @sk.kernel
    def visit(c):
        for i in range(3):
            c[i, 0] = c[i, 0] + 1.0

    sk.par_loop(visit, cells, count(sk.RW, m), backend=backend)
    expected = np.full(n_nodes, 0.5)
    for row in targets:                    # gather, update, scatter, element by element
        local = expected[row] + 1.0
        expected[row] = local
    np.testing.assert_array_equal(count.data, expected)


def test_few_entries_of_a_huge_target_set():
    # colouring and the NumPy scatter work on the distinct targets, not on every row
    from stencilkit.api.loop import scatter_add

    rng = np.random.default_rng(6)
    idx = rng.integers(0, 10**6, (50, 2))
    idx[:10, 0] = 123
    target = np.ones((10**6, 2))
    values = rng.random((50, 2, 2))
    expected = target.copy()
    np.add.at(expected, idx.reshape(-1), values.reshape(-1, 2))
    scatter_add(target, idx, values)
    np.testing.assert_allclose(target, expected)
    colours = block_coloring(50, [idx], [10**6], block=4)
    for blocks in colours:
        seen: set[int] = set()
        for s, t in blocks:
            here = set(idx[s:t].ravel().tolist())
            assert not here & seen
            seen |= here


def test_loop_level_bad_input(backend):
    s = sk.Set(4)

    @sk.kernel
    def nothing():
        pass

    @sk.kernel
    def one(x):
        x[0] = 1.0

    with pytest.raises(sk.ArgumentError, match="at least one argument"):   # was IndexError
        sk.par_loop(nothing, s, backend=backend)
    with pytest.raises(sk.ArgumentError, match="race='bogus' is not one of"):  # was ignored
        sk.par_loop(one, s, sk.Dat(s)(sk.WRITE), backend=backend, race="bogus")
    with pytest.raises(sk.StencilError, match="race='colour'"):  # refused by configure
        sk.configure(race="colour")
    # STENCILKIT_RACE is read as it is, so the loop checks the mode in force too
    sk.config._current = dataclasses.replace(sk.config.current(), race="colour")
    with pytest.raises(sk.ArgumentError, match="'colour'"):
        sk.par_loop(one, s, sk.Dat(s)(sk.WRITE), backend=backend)
