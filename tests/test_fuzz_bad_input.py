"""Fuzz: hypothesis draws bad inputs of every kind (issue 9) and feeds them to every backend.

Every outcome must be a StencilError naming the stencil, or the correct result (what the
"numpy" backend gives on clean copies of the same inputs). The cases run in batches in a
child process (tests/fuzz_child.py) with a timeout, so a segfault, an abort or a hang fails
the batch instead of killing the test run. Set STENCILKIT_FUZZ_COUNTS=FILE to have the
outcome counts per area written there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from stencilkit.registry import REGISTRY, implemented

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTS: Counter = Counter()
# Each example is a batch run in a child process: a few batches, no shrinking (the failure
# message names the case; shrinking would re-run children for minutes).
FUZZ = settings(max_examples=2, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    path = os.environ.get("STENCILKIT_FUZZ_COUNTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({f"{a}|{b}|{o}": n for (a, b, o), n in COUNTS.items()}) + "\n")


def run_batch(backend: str, area: str, cases: list[dict], must_work: set[str] = frozenset(),
              timeout: float = 240) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(HERE), "src") + os.pathsep + \
        env.get("PYTHONPATH", "")
    for i, c in enumerate(cases):
        c["label"] = f"{area}#{i}"
    try:
        proc = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_child.py"), backend],
                              input=json.dumps(cases), capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        done = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout
        n = len((done or "").splitlines())
        pytest.fail(f"{area}/{backend}: the child hung on case {n}: {cases[n]}")
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        n = len(lines)
        pytest.fail(f"{area}/{backend}: the child died ({proc.returncode}) on case {n}: "
                    f"{cases[n] if n < len(cases) else '?'}\n{proc.stderr[-3000:]}")
    assert len(lines) == len(cases), proc.stderr[-3000:]
    bad = []
    for case, line in zip(cases, lines):
        result = json.loads(line)
        COUNTS[(area, backend, result["outcome"])] += 1
        allowed = {"ok"} if case.get("must") == "ok" else \
            {"stencil_error"} if case.get("must") == "error" else {"ok", "stencil_error"}
        if result["outcome"] not in allowed:
            bad.append((case, result))
    assert not bad, f"{area}/{backend}: {len(bad)} bad outcome(s), first: {bad[0]}"


# ---------------------------------------------------------------- value encodings


def enc(v: object) -> object:
    """JSON-safe tagged values (see fuzz_child.decode)."""
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": str(v)} if abs(v) > 2**53 else v
    if isinstance(v, float):
        return {"t": "float", "v": repr(v)}
    if isinstance(v, complex):
        return {"t": "complex", "v": [v.real, v.imag]}
    if v is None:
        return {"t": "none"}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    return v


def mostly(good, bad, every: int = 4):
    """``good`` most of the time, ``bad`` one draw in ``every``: a case with one bad input
    among good ones tests that input, one with several bad ones tests only the first check."""
    return st.integers(0, every - 1).flatmap(lambda i: bad if i == 0 else good)


SPECIAL_FLOATS = [float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 9.3e18, -9.3e18,
                  2.0**63, -(2.0**63), 0.5, -0.5, 0.0, -0.0, 3.0, -3.0, 1e-310]
DTYPES = ["float64", "float32", "int64", "int32", "uint8", "int8", "uint64", "bool",
          "complex128", "complex64", ">f8", ">i4", "<U1", "object"]
ANY_DTYPE = st.sampled_from(DTYPES)
LAYOUTS = ["C", "F", "reversed", "strided", "broadcast", "misaligned", "odd_strides"]

shapes_2d = st.tuples(st.integers(0, 7), st.integers(0, 7))
any_shape = st.one_of(
    shapes_2d.map(list),
    st.lists(st.integers(0, 4), min_size=0, max_size=4),
    st.just([1] * 32),
)


@st.composite
def array_spec(draw, shape=any_shape, dtypes=None, layouts=LAYOUTS,
               values=None, writeable=None) -> dict:
    spec = {"kind": "array", "shape": draw(shape), "dtype": draw(ANY_DTYPE if dtypes is None else dtypes),
            "layout": draw(st.sampled_from(layouts)), "seed": draw(st.integers(0, 2**16)),
            "writeable": draw(st.booleans() if writeable is None else writeable)}
    if values is not None:
        spec["values"] = [enc(v) for v in draw(values)]
    return spec


non_arrays = st.one_of(
    st.just({"kind": "value", "value": enc(None)}),
    st.just({"kind": "value", "value": enc("abc")}),
    st.just({"kind": "list", "value": [[1.0, 2.0], [3.0]]}),  # ragged
    st.just({"kind": "list", "value": [[1.0, "x"], [3.0, 4.0]]}),
    st.just({"kind": "list", "value": [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]}),
    st.just({"kind": "value", "value": {"t": "ndarray0", "v": 1.5}}),
    st.just({"kind": "value", "value": enc(1j)}),
    st.just({"kind": "value", "value": enc(2**70)}),
    # objects whose own methods raise (issue 25): an error naming the stencil, never theirs
    st.sampled_from(["array", "getattr", "dtype", "function"]).map(
        lambda w: {"kind": "hostile", "which": w, "shape": [6, 7]}),
)

scalars = st.one_of(
    st.integers(-(2**70), 2**70).map(enc),
    st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1])
      .map(enc),
    st.sampled_from(SPECIAL_FLOATS).map(enc),
    st.floats(allow_nan=True, allow_infinity=True).map(enc),
    st.complex_numbers(max_magnitude=1e6).map(enc),
    st.booleans().map(enc),
    st.sampled_from(["int8", "uint8", "int32", "uint64", "float32", "bool", "complex64"]).flatmap(
        lambda t: st.integers(0, 100).map(lambda v: {"t": "np", "v": [t, v]})),
    st.sampled_from([None, "x"]).map(enc),
    st.just({"t": "ndarray0", "v": 2.0}),
)


# ---------------------------------------------------------------- areas

_ONLY = [b for b in os.environ.get("STENCILKIT_TEST_BACKENDS", "").split(",") if b]
# The backends that build both kinds the areas call (the sanitizer CI step runs only "c")
BACKENDS = [pytest.param(b, id=b, marks=[pytest.mark.skip(reason=f"backend {b}: {why}")]
                         if (why := REGISTRY[b].probe()) else [])
            for b in implemented() if {"point", "computation"} <= REGISTRY[b].capabilities.kinds
            and (not _ONLY or b in _ONLY)]


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(st.one_of(array_spec(), non_arrays), min_size=24, max_size=24),
       st.lists(array_spec(shape=shapes_2d.map(list), dtypes=st.sampled_from(
           ["float64", "float32", ">f8", "int32"])), min_size=8, max_size=8))
def test_fuzz_array_arguments(backend, specs, good_specs):
    """Arrays of every dtype, dimension, size and memory layout as the stencil's input."""
    cases = [{"target": "fz_blur", "args": [s]} for s in specs]
    # 2-D numeric arrays in any layout must work (ANY strided array is accepted)
    cases += [{"target": "fz_blur", "args": [s], "must": "ok"} for s in good_specs]
    run_batch(backend, "arrays", cases)


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(scalars, min_size=30, max_size=30))
def test_fuzz_scalar_arguments(backend, values):
    """Scalars of every kind and range, including ints beyond 64 bits."""
    cases = []
    for i, v in enumerate(values):
        arr = {"kind": "array", "shape": [4, 5], "dtype": ["float64", "int64"][i % 2],
               "layout": "C", "seed": i}
        case = {"target": "fz_plus", "args": [arr, {"kind": "value", "value": v}]}
        if isinstance(v, dict) and v.get("t") == "int" and not -(2**63) <= int(v["v"]) < 2**64:
            case["must"] = "error"  # never reduced mod 2**64
        cases.append(case)
    run_batch(backend, "scalars", cases)


index_values = st.lists(st.sampled_from(SPECIAL_FLOATS + [1.0, 2.0, -1.0, -7.0, 40.0]),
                        min_size=1, max_size=4)


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(st.tuples(array_spec(shape=shapes_2d.map(list),
                                     dtypes=st.sampled_from(["float64", "float32", "int64"]),
                                     layouts=["C", "misaligned", "reversed"],
                                     values=index_values),
                          array_spec(shape=st.lists(st.integers(0, 5), min_size=1, max_size=1),
                                     dtypes=st.sampled_from(["float64", "int32", "bool"]),
                                     layouts=["C", "strided", "broadcast", "odd_strides"])),
                min_size=16, max_size=16),
       st.lists(st.tuples(array_spec(shape=st.just([5, 6]), layouts=["C"]),
                          array_spec(shape=st.just([5, 6]), dtypes=st.sampled_from(
                              ["float64", "float32", "int8"]), values=index_values)),
                min_size=12, max_size=12))
def test_fuzz_data_dependent_indices(backend, gathers, offsets):
    """NaN/inf/huge values used as absolute indices (empty tables included) and as relative
    offsets: an error or the right element, never an out-of-bounds read."""
    cases = [{"target": "fz_gather", "args": [a, t], "options": {"standard_indexing": ["t"]}}
             for a, t in gathers]
    cases += [{"target": "fz_reloff", "args": [a, b],
               "options": {"neighborhood": [[-1, 1], [0, 0]]}} for a, b in offsets]
    run_batch(backend, "indices", cases)


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(st.one_of(st.integers(-6, 6), st.sampled_from([0, 0, 2**63 - 1, -(2**63)])),
                min_size=10, max_size=10))
def test_fuzz_range_steps(backend, steps):
    """range() steps from an argument, 0 included (an endless loop in C without the guard)."""
    arr = {"kind": "array", "shape": [4, 4], "dtype": "float64", "layout": "C"}
    cases = [{"target": "fz_loop", "args": [arr, {"kind": "value", "value": enc(s)}],
              **({"must": "error"} if s == 0 else {"must": "ok"})} for s in steps]
    run_batch(backend, "range", cases)


neighborhoods = st.one_of(
    st.integers(-3, 3), st.just([]), st.just(None),
    st.lists(st.lists(st.one_of(st.integers(-3, 3), st.integers(-(2**70), 2**70),
                                st.floats(allow_nan=True), st.booleans(), st.just("a")),
                      min_size=0, max_size=3), min_size=0, max_size=3),
)
cvals = st.one_of(st.none(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                  st.complex_numbers(max_magnitude=10), st.just("x"), st.booleans())


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(st.tuples(mostly(st.none(), neighborhoods), mostly(st.none(), cvals)),
                min_size=20, max_size=20))
def test_fuzz_options(backend, options):
    """Malformed neighborhood= and cval= values of every kind."""
    cases = []
    for nb, cval in options:
        opts = {}
        if nb is not None:
            opts["neighborhood"] = nb if not isinstance(nb, list) else [
                [enc(x) for x in p] for p in nb]
        if cval is not None:
            opts["cval"] = enc(cval)
        arr = {"kind": "array", "shape": [5, 6], "dtype": "float64", "layout": "C"}
        cases.append({"target": "fz_plus", "args": [arr, {"kind": "value", "value": 1.0}],
                      "options": opts})
    # the mode also by name, next to the kernel by position: refused (issue 25)
    cases.append({"target": "fz_plus", "args": [arr, {"kind": "value", "value": 1.0}],
                  "options": {"func_or_mode": enc("wrap")}, "must": "error"})
    run_batch(backend, "options", cases)


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(mostly(
    array_spec(shape=st.just([6, 7]), dtypes=st.sampled_from(["float64", "float32", "int64"]),
               layouts=["C", "F", "reversed", "strided", "misaligned", "odd_strides"]),
    st.one_of(array_spec(shape=st.one_of(st.just([6, 7]), shapes_2d.map(list)),
                         dtypes=st.sampled_from(["float64", ">f8", "complex128", "bool"])),
              st.just("alias"), non_arrays), every=2), min_size=16, max_size=16),
    st.lists(mostly(st.just({}), st.sampled_from([{"bogus": 1}, {"s": 2.0}])), min_size=16,
             max_size=16))
def test_fuzz_out_and_keywords(backend, outs, kwargs):
    """out= of every shape, dtype, layout, writability, aliasing the input; unknown keywords."""
    arr = {"kind": "array", "shape": [6, 7], "dtype": "float64", "layout": "C", "seed": 3}
    cases = []
    for out, kw in zip(outs, kwargs):
        case = {"target": "fz_blur", "args": [arr], "out": out, "kwargs": kw}
        if kw:
            case["must"] = "error"
        cases.append(case)
    run_batch(backend, "out", cases)


field_specs = mostly(
    array_spec(shape=st.one_of(st.just([7, 6, 5]), st.just([8, 7, 5])),
               dtypes=st.just("float64"), writeable=st.just(True)),
    st.one_of(array_spec(shape=st.lists(st.integers(0, 8), min_size=3, max_size=3),
                         dtypes=st.sampled_from(["float64", "float32", ">f8", "int64"])),
              array_spec(shape=st.lists(st.integers(0, 6), min_size=0, max_size=4)),
              non_arrays), every=6)
comp_scalars = mostly(st.sampled_from([1, -3, True, 0, 2**40]).map(enc), scalars, every=6)
origins = mostly(st.none(), st.one_of(
    st.just("abc"), st.integers(-3, 3), st.lists(st.integers(-3, 3), min_size=0, max_size=4),
    st.lists(st.integers(-(2**70), 2**70), min_size=3, max_size=3),
    st.lists(st.floats(allow_nan=True), min_size=3, max_size=3)), every=5)
exec_infos = mostly(st.sampled_from([None, {}]), st.sampled_from([[1], "x", 3]), every=6)


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(st.tuples(field_specs, field_specs, comp_scalars, comp_scalars, origins,
                          origins, exec_infos, st.booleans()), min_size=24, max_size=24))
def test_fuzz_computation_calls(backend, draws):
    """Computations: fields of every layout (read-only, broadcast, unaligned, odd strides),
    dtype and shape; scalars of every kind; malformed origin/domain/exec_info."""
    cases = []
    for a, b, s, n, origin, domain, info, validate in draws:
        kwargs = {}
        if origin is not None:
            kwargs["origin"] = origin if not isinstance(origin, list) else [enc(x) for x in origin]
        if domain is not None:
            kwargs["domain"] = domain if not isinstance(domain, list) else [enc(x) for x in domain]
        if info is not None:
            kwargs["exec_info"] = info
        if not validate:
            kwargs["validate_args"] = False
        cases.append({"target": "fz_comp", "kwargs": kwargs,
                      "args": [a, b, {"kind": "value", "value": s},
                               {"kind": "value", "value": n}]})
    run_batch(backend, "computations", cases)


@pytest.mark.parametrize("backend", BACKENDS)
@FUZZ
@given(st.lists(st.sampled_from(["C", "F", "reversed", "strided", "misaligned", "odd_strides",
                                 "broadcast"]), min_size=8, max_size=8),
       st.lists(st.sampled_from(["C", "F", "reversed", "strided", "misaligned", "odd_strides"]),
                min_size=8, max_size=8))
def test_fuzz_computation_layouts_must_work(backend, in_layouts, out_layouts):
    """ANY strided array works for computations, read-only inputs included."""
    cases = []
    for i, (li, lo) in enumerate(zip(in_layouts, out_layouts)):
        a = {"kind": "array", "shape": [7, 6, 5], "dtype": "float64", "layout": li, "seed": i,
             "writeable": bool(i % 2)}
        b = {"kind": "array", "shape": [7, 6, 5], "dtype": "float64", "layout": lo}
        cases.append({"target": "fz_comp", "must": "ok",
                      "args": [a, b, {"kind": "value", "value": 2.0},
                               {"kind": "value", "value": 1}]})
    run_batch(backend, "computation-layouts", cases)
