"""Issue 30, the knobs added after the first tuner (tests/test_tuning.py has the mechanism):
the OpenMP schedule and team as measured candidates (bit-identical, never applied to a
reduction), the short vector from the machine profile, the per-stencil ``autotune=``
option (validated, not part of the front key, and deciding what a call measures), and the
streaming stores' fence once per thread."""

from __future__ import annotations

import dataclasses
import pickle
import re

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.build import machine, tuning
from stencilkit.build.tuning import DEFAULT, Variant
from stencilkit.codegen import c as cgen
from stencilkit.lower import parloop as lpl
from stencilkit.registry import c_autotune
from stencilkit.targets.c import CKnobs, CPlatform

from .test_tuning import (
    COMPUTATION_CASES,
    _point_result,
    _wisdom_files,
    hdiff,
    jacobi2d,
    lap3d,
    small_tuning,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.skipif(sk.registry.REGISTRY["c"].probe() is not None,
                                reason="no working C compiler")

F64 = np.dtype(np.float64)
_CHUNKED, _FEWER = Variant(chunk=machine.SCHEDULE_CHUNK), Variant(threads=1)
_THREAD_VARIANTS = (_CHUNKED, _FEWER, Variant(chunk=3, threads=1))


def _profile(**changes) -> machine.MachineProfile:
    return dataclasses.replace(machine.REFERENCE, **changes)


# ---------------------------------------------------------------- the OpenMP knobs


@pytest.mark.parametrize("func, shape", [(lap3d, (9, 11, 453)), (jacobi2d, (41, 1001))])
def test_every_schedule_and_team_is_bit_identical_on_point_kernels(func, shape):
    a = np.random.default_rng(11).standard_normal(shape)
    with sk.configure(autotune="off"):
        expected = _point_result(func, a, DEFAULT)
        for v in _THREAD_VARIANTS:
            assert np.array_equal(_point_result(func, a, v), expected), v


@pytest.mark.parametrize("definition, fields, run", COMPUTATION_CASES)
def test_every_schedule_and_team_is_bit_identical_on_computations(definition, fields, run):
    results = []
    for v in (DEFAULT, *_THREAD_VARIANTS):
        f = fields(np.random.default_rng(5))
        with tuning.building(v):
            run(sk.stencil(definition, backend="c"), f)
        results.append(f[-1])
    for v, out in zip(_THREAD_VARIANTS, results[1:]):
        assert np.array_equal(out, results[0]), v


# ---------------------------------------------------------------- the column block


def _tridiag_build(variant: Variant, fields):
    """The tridiagonal solve's result on ``fields`` and the source built for their layout,
    as ``variant``."""
    definition, _, run = COMPUTATION_CASES[1]
    with tuning.building(variant):
        st = sk.stencil(definition, backend="c")
        run(st, fields)
    (source,) = [source for source, _ in st._builds.values()]
    return fields[-1], source


@pytest.mark.parametrize("block", sorted({*c_autotune.COLUMN_BLOCKS, 3, 16}))
def test_every_column_block_is_bit_identical(block):
    """K contiguous, 7 columns: blocks of 3, 4 (the candidate) and 16 leave a partial
    block (16: only one); each column's recurrence is computed alone, so the values are
    the default's."""
    _, fields, _ = COMPUTATION_CASES[1]
    expected, default_source = _tridiag_build(DEFAULT, fields(np.random.default_rng(8)))
    got, source = _tridiag_build(Variant(column_block=block),
                                 fields(np.random.default_rng(8)))
    assert np.array_equal(got, expected)
    assert f"jb += {block})" in source and "jb += 8)" in default_source


def test_the_column_block_is_offered_where_columns_are_blocked():
    _, fields, _ = COMPUTATION_CASES[1]
    _, source = _tridiag_build(DEFAULT, fields(np.random.default_rng(8)))
    blocks = [Variant(column_block=b) for b in c_autotune.COLUMN_BLOCKS]
    assert blocks in c_autotune.computation_knobs(source, _profile(cpus=2))
    # I contiguous (Fortran order): the columns of a row are swept together, no blocks
    _, source = _tridiag_build(DEFAULT, [np.asfortranarray(f)
                                         for f in fields(np.random.default_rng(8))])
    assert "jb" not in source
    knobs = c_autotune.computation_knobs(source, _profile(cpus=2))
    assert not any(v.column_block for knob in knobs for v in knob)
    assert Variant.from_json({"column_block": 4}) == Variant(column_block=4)
    with pytest.raises(ValueError):
        Variant.from_json({"column_block": "4"})


def test_the_variant_writes_its_schedule_and_team_into_the_pragmas():
    a = np.ones((40, 300))
    with tuning.building(DEFAULT):
        plain = sk.stencil(backend="c")(jacobi2d).generate(a)
    with tuning.building(Variant(chunk=16, threads=3)):
        tuned = sk.stencil(backend="c")(jacobi2d).generate(a)
    assert "schedule(static, " not in plain and "sk_team_size() < " not in plain
    scheduled = re.findall(r"#pragma omp[^\n]*schedule[^\n]*", tuned)
    teams = re.findall(r"#pragma omp parallel[^\n]*", tuned)
    assert scheduled and all("schedule(static, 16)" in p for p in scheduled)
    assert teams and all("num_threads(sk_team_size() < 3 ? sk_team_size() : 3)" in p
                         for p in teams)


def _parloop_source(with_reduction: bool, knobs: CKnobs) -> str:
    specs = [lpl.ArgSpec("direct", "WRITE", F64, 1, (1,)),
             lpl.ArgSpec("indirect", "READ", F64, 2, (3, 2), arity=3)]
    if with_reduction:
        specs.append(lpl.ArgSpec("global", "INC", F64, 1, (1,)))
    kf = lpl.LoopLowering("sk_parloop_t", "t", "sk_t_kernel", tuple(specs), True,
                          True).lower()
    return cgen.kernel_source(CPlatform(knobs).lower(kf))[0]


def test_a_reduction_keeps_the_whole_team_and_static_blocks():
    """Another team, or another dealing of iterations, would combine the partial sums in
    another order."""
    knobs = CKnobs(team_threads=1, schedule_chunk=16)
    reducing = _parloop_source(True, knobs)
    assert "reduction(+" in reducing
    assert "schedule(static, 16)" not in reducing and "sk_team_size() < 1" not in reducing
    plain = _parloop_source(False, knobs)
    assert "schedule(static, 16)" in plain and "sk_team_size() < 1" in plain


def test_the_thread_knobs_are_offered_where_they_apply():
    assert machine.team_candidates(_profile(cpus=8)) == (4,)
    assert machine.team_candidates(_profile(cpus=2)) == (1,)
    assert machine.team_candidates(_profile(cpus=1)) == ()
    assert machine.schedule_candidates(_profile(cpus=2)) == (machine.SCHEDULE_CHUNK,)
    assert machine.schedule_candidates(_profile(cpus=1)) == ()
    parallel = "    #pragma omp parallel for schedule(static) num_threads(sk_team_size())\n"
    assert c_autotune.thread_knobs(parallel, _profile(cpus=4)) == [
        [Variant(chunk=machine.SCHEDULE_CHUNK)], [Variant(threads=2)]]
    assert c_autotune.thread_knobs(parallel, _profile(cpus=1)) == []
    assert c_autotune.thread_knobs(parallel.replace(")\n", ") reduction(+: s[:1])\n"),
                                   _profile(cpus=4)) == []
    assert c_autotune.thread_knobs("int f(void) { return 0; }", _profile(cpus=4)) == []


def test_the_thread_knobs_round_trip_as_wisdom():
    v = Variant(streaming=False, threads=1, chunk=16)
    assert Variant.from_json(v.to_json()) == v and v.key != DEFAULT.key
    assert v.flags == ()  # the knobs are in the code, not in the compiler's flags
    for bad in ({"threads": "2"}, {"chunk": 1.5}):
        with pytest.raises(ValueError):
            Variant.from_json(bad)


# ---------------------------------------------------------------- the short vector


def test_the_short_vector_comes_from_the_machine():
    a = np.ones((40, 300))

    def lanes(profile):
        with machine.assumed(profile):
            source = sk.stencil(backend="c")(jacobi2d).generate(a)
        return set(re.findall(r"simdlen\((\d+)\)", source))

    # 32 bytes for rows shorter than a whole 64-byte vector, 64 for the whole vectors of
    # the others: what the goldens hold
    assert lanes(machine.REFERENCE) == {"4", "8"}
    assert lanes(_profile(isa=("sse2", "sse4.2"))) == {"2"}  # 16-byte vectors only


# ---------------------------------------------------------------- autotune= per stencil


def test_a_bad_autotune_option_names_the_stencil_and_its_line():
    for bad in ("sometimes", True, 1):
        with pytest.raises(sk.StencilError) as info:
            sk.stencil(jacobi2d, autotune=bad)
        text = str(info.value)
        assert f"autotune={bad!r}" in text and "'jacobi2d'" in text, text
        assert "test_tuning.py:" in text and "'measure'" in text, text
    with pytest.raises(sk.StencilError, match="'hdiff'.*autotune='never'"):
        sk.stencil(hdiff, autotune="never")


def test_the_option_is_kept_shown_and_pickled():
    st = sk.stencil(jacobi2d, autotune="measure")
    comp = sk.stencil(hdiff, backend="c", autotune="off")
    assert st.autotune == "measure" and comp.autotune == "off"
    assert "autotune" in repr(st) and "autotune" in repr(comp)
    assert sk.stencil(jacobi2d).autotune is None  # sk.configure's, read at each call
    assert pickle.loads(pickle.dumps(st)).autotune == "measure"
    assert pickle.loads(pickle.dumps(comp)).autotune == "off"


def test_the_option_decides_what_a_call_measures(small_tuning, tmp_path):  # noqa: F811
    a = np.random.default_rng(1).standard_normal((40, 300))
    expected = sk.stencil(backend="numpy")(jacobi2d)(a)
    # configured "on", the stencil's "off": nothing measured
    assert np.array_equal(sk.stencil(backend="c", autotune="off")(jacobi2d)(a), expected)
    assert _wisdom_files(tmp_path) == []
    # configured "off", the stencil's "on": measured and stored
    sk.configure(autotune="off")
    assert np.array_equal(sk.stencil(backend="c", autotune="on")(jacobi2d)(a), expected)
    (wisdom,) = _wisdom_files(tmp_path)
    stored = wisdom.stat().st_mtime_ns
    # "on" again: the stored choice; "measure": measured again (the record rewritten)
    sk.stencil(backend="c", autotune="on")(jacobi2d)(a)
    assert wisdom.stat().st_mtime_ns == stored
    sk.stencil(backend="c", autotune="measure")(jacobi2d)(a)
    assert wisdom.stat().st_mtime_ns != stored
    # a computation's option likewise
    x = np.random.default_rng(4).standard_normal((8, 9, 10))
    sk.stencil(hdiff, backend="c", autotune="on")(x, np.ones_like(x), np.zeros_like(x),
                                                  origin=(2, 2, 0), domain=(4, 5, 10))
    assert len(_wisdom_files(tmp_path)) == 2


def test_the_option_does_not_change_the_code_or_its_key(tmp_path):
    """The front key (and so every build) is the same whatever the option says: a stencil
    differing only in autotune= reuses the other's build."""
    from stencilkit.compile import driver

    sk.configure(cache_dir=tmp_path, autotune="off")
    a = np.ones((6, 7))
    keys = []
    real = driver.run

    def recording(request):
        from stencilkit.compile.keys import front_key

        keys.append(front_key(request))
        return real(request)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "run", recording)
        for option in (None, "off", "on", "measure"):
            st = sk.stencil(backend="c", autotune=option)(jacobi2d)
            st(a)
            assert st.generate(a) == sk.stencil(backend="c")(jacobi2d).generate(a)
    assert len(keys) == 4 and len(set(keys)) == 1


# ---------------------------------------------------------------- the store fence


@pytest.mark.parametrize("func, shape", [(jacobi2d, (40, 300)), (lap3d, (9, 11, 453))])
def test_streaming_stores_are_fenced_once_per_thread_not_per_row(func, shape):
    """The fence waits for the streaming stores before it to reach memory: once per thread
    before the team's barrier is what correctness needs, and per row it cost jacobi2d 4096^2
    2-6% (docs/performance.md)."""
    a = np.random.default_rng(2).standard_normal(shape)
    source = sk.stencil(backend="c")(func).generate(a)
    lines = source.splitlines()
    fences = [n for n, ln in enumerate(lines) if ln.strip() == "sk_store_fence();"]
    assert len(fences) == 2, fences  # the parallel path's and the serial copy's
    for n in fences:  # each after its whole loop over the outermost index, at its depth
        loop = max(i for i in range(n) if "for (int64_t i0 = " in lines[i])
        indent = len(lines[n]) - len(lines[n].lstrip())
        assert len(lines[loop]) - len(lines[loop].lstrip()) == indent, lines[loop:n + 1]
    assert "#pragma omp for schedule(static) nowait" in source
    expected = sk.stencil(backend="numpy")(func)(a)
    with tuning.building(Variant(streaming=True)):  # every row streams at this size
        got = sk.stencil(backend="c")(func)(a)
    assert np.array_equal(got, expected)
