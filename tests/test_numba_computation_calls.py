"""Computations called from inside numba.njit functions (default origin and domain), against
the same calls from Python: hdiff (horizontal halos, temporaries) and an implicit vertical
solver (FORWARD/BACKWARD), plain and parallel=True callers, a time loop of several steps in
one jitted function, the jitted geometry against the Python one, errors, cache=True callers.

Numba compiles are slow: the jitted callers are module-level and shared, the arrays small.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import stencilkit as sk

from . import computations as C

numba = pytest.importorskip("numba", reason="numba is not installed (pip install .[test])")

from stencilkit.adapters import numba_computation_calls as ncc  # noqa: E402 (needs numba)

rng = np.random.default_rng(11)
IN = rng.random((14, 15, 6))
COEFF = rng.random((14, 15, 6)) * 0.1

#: What the Python call runs on: "c" and "numba" agree with a call from jitted code bit for
#: bit, "numpy" to rounding (the jitted call always runs the "numba" backend's code).
AVAILABLE = [b for b in ("c", "numba", "numpy") if sk.registry.REGISTRY[b].available]
HDIFF = {b: sk.stencil(C.hdiff, backend=b) for b in AVAILABLE}
IMPLICIT = {b: sk.stencil(C.implicit_diffusion, backend=b) for b in AVAILABLE}
hdiff = HDIFF[AVAILABLE[0]]
implicit = IMPLICIT[AVAILABLE[0]]


def _hdiff_steps(a, out, coeff, steps):
    for _ in range(steps):
        hdiff(a, out, coeff)  # fields positional
        a, out = out, a
    return a


def _implicit_steps(q, steps):
    for _ in range(steps):
        implicit(q=q, nu=0.25)  # fields and scalars by keyword
    return q


JITTED = {(fn.__name__.strip("_"), parallel): numba.njit(parallel=parallel)(fn)
          for fn in (_hdiff_steps, _implicit_steps) for parallel in (False, True)}


def _compare(got, backend, expected):
    if backend == "numpy":
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    else:
        np.testing.assert_array_equal(got, expected)


def _same_error(jitted: BaseException, python: BaseException) -> bool:
    """The same error, message and all, but for the call site a call from Python adds
    ("called at FILE:LINE": the jitted call's site is the jitted function's)."""
    def bare(e: BaseException) -> str:
        return str(e).split("\n  called at ")[0]
    return isinstance(jitted, type(python)) and bare(jitted) == bare(python)


@pytest.mark.parametrize("parallel", [False, True], ids=["njit", "parallel"])
def test_hdiff_time_loop_matches_python_calls(parallel):
    a, out = IN.copy(), np.zeros_like(IN)
    got = JITTED["hdiff_steps", parallel](a, out, COEFF, 3)
    for backend, st in HDIFF.items():
        pa, pout = IN.copy(), np.zeros_like(IN)
        for _ in range(3):
            st(pa, pout, COEFF)
            pa, pout = pout, pa
        _compare(got, backend, pa)
    assert np.abs(got[2:-2, 2:-2] - IN[2:-2, 2:-2]).max() > 0  # it did something


@pytest.mark.parametrize("parallel", [False, True], ids=["njit", "parallel"])
def test_vertical_solver_time_loop_matches_python_calls(parallel):
    got = JITTED["implicit_steps", parallel](IN.copy(), 4)
    for backend, st in IMPLICIT.items():
        q = IN.copy()
        for _ in range(4):
            st(q, nu=0.25)
        _compare(got, backend, q)
    assert not np.allclose(got, IN)


def test_a_single_call_writes_the_fields_in_place():
    a, out = IN.copy(), np.zeros_like(IN)
    JITTED["hdiff_steps", False](a, out, COEFF, 1)
    expected = np.zeros_like(IN)
    hdiff(IN, expected, COEFF)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(a, IN)


def test_fortran_ordered_and_strided_fields():
    """Layouts other than C: the build loops over the unit-stride axis innermost (F), or
    takes the default order (a strided view, Numba's layout 'A')."""
    f_in, f_coeff = np.asfortranarray(IN), np.asfortranarray(COEFF)
    out, expected = np.zeros_like(f_in), np.zeros_like(f_in)
    JITTED["hdiff_steps", False](f_in.copy(order="F"), out, f_coeff, 1)
    hdiff(f_in, expected, f_coeff)
    np.testing.assert_array_equal(out, expected)
    wide = np.zeros((IN.shape[0], IN.shape[1], 2 * IN.shape[2]))
    view = wide[:, :, ::2]  # not contiguous
    JITTED["hdiff_steps", False](IN.copy(), view, COEFF, 1)
    expected = np.zeros_like(IN)
    hdiff(IN, expected, COEFF)
    np.testing.assert_array_equal(view, expected)
    assert not wide[:, :, 1::2].any()


GEOMETRY_CASES = [
    (C.hdiff, {"in_field": (3, 3, 5), "out_field": (3, 3, 5), "coeff": (3, 3, 5)}),
    (C.regions, {"a": (3, 8, 2), "b": (3, 8, 2)}),
    (C.regions, {"a": (6, 8, 2), "b": (6, 8, 2)}),
    (C.regions, {"a": (8, 8, 2), "b": (4, 9, 2)}),
    (C.hdiff, {"in_field": (9, 10, 4), "out_field": (9, 10, 4), "coeff": (9, 10, 4)}),
    (C.hdiff, {"in_field": (9, 10, 4), "out_field": (5, 6, 4), "coeff": (9, 11, 4)}),
    (C.hdiff, {"in_field": (9, 10, 4), "out_field": (9, 10, 3), "coeff": (9, 10, 5)}),
    (C.upwind, {"q": (4, 5, 7), "w": (4, 5, 7), "out": (4, 5, 7)}),
    (C.upwind, {"q": (4, 5, 9), "w": (4, 5, 7), "out": (4, 5, 6)}),
    (C.implicit_diffusion, {"q": (3, 4, 6)}),
    (C.column_ops, {"u": (5, 6, 3), "surface": (5, 6), "profile": (3,), "out": (5, 6, 3)}),
    (C.column_ops, {"u": (5, 6, 3), "surface": (6, 6), "profile": (4,), "out": (4, 6, 3)}),
    (C.column_sum, {"u": (2, 2, 5), "total": (2, 2, 5)}),
    (C.corners, {"u": (3, 3, 2), "out": (3, 3, 2)}),
    (C.lap3d, {"u": (6, 6, 6), "out": (6, 6, 6)}),
    (C.lap3d, {"u": (2, 6, 6), "out": (6, 6, 6)}),
]


def _check_geometry(defn, shapes) -> int:
    """``_geometry`` (what a jitted call runs) against ``ComputationStencil._geometry`` with
    the default origin and domain: the same origins, domain and temporaries, or the same
    error. Returns the status."""
    comp = sk.stencil(defn, backend="numba")
    backend = sk.registry.REGISTRY["numba"]
    plan = comp._plan(backend)
    fields = {f.name: np.zeros(shapes[f.name]) for f in comp.definition.fields}
    tables = ncc.geometry_tables(comp, plan)
    array_shapes = np.zeros((len(fields), 3), np.int64)
    for i, f in enumerate(comp.definition.fields):
        for pos, a in enumerate(f.axes):
            array_shapes[i, "IJK".index(a)] = shapes[f.name][pos]
    status, info, origins, dom, t_shapes = ncc._geometry(
        array_shapes, tables["HAS"], tables["OWN"], tables["HI"], tables["IJK"],
        tables["ORDER"], tables["KF"], tables["MIN"], tables["KT"], tables["TEXT"])
    jit_error = ncc._error(comp, "geometry", [int(status), *map(int, info)]) if status else None
    try:
        geo = comp._geometry(fields, None, None, True, plan)
    except sk.ArgumentError as exc:
        assert _same_error(jit_error, exc)
        return int(status)
    assert status == 0, jit_error
    names = [f.name for f in comp.definition.fields] + [t for t, _ in
                                                         plan.definition.temporaries]
    assert tuple(dom) == geo.domain
    assert {n: tuple(origins[i]) for i, n in enumerate(names)} == geo.origins
    temps = [t for t, _ in plan.definition.temporaries]
    assert {t: tuple(t_shapes[i]) for i, t in enumerate(temps)} == geo.temp_shapes
    return 0


@pytest.mark.parametrize("case", range(len(GEOMETRY_CASES)))
def test_jitted_geometry_is_the_python_geometry(case):
    _check_geometry(*GEOMETRY_CASES[case])


def test_geometry_cases_reach_both_errors():
    statuses = {_check_geometry(*case) for case in GEOMETRY_CASES}
    assert statuses == {0, 1, 2}  # fine, domain below the regions' minimum, halo too small


@numba.njit
def _hdiff_once(a, out, coeff):
    hdiff(a, out, coeff)


@numba.njit
def _with_origin(a, out, coeff):
    hdiff(a, out, coeff, origin=(2, 2, 0))


def test_errors_are_the_same_as_from_python():
    f32 = IN.astype(np.float32)
    with pytest.raises(sk.ArgumentError) as py:
        hdiff(f32, np.zeros_like(IN), COEFF)
    with pytest.raises(sk.ArgumentError) as jit:  # at compile time: the types decide
        _hdiff_once(f32, np.zeros_like(IN), COEFF)
    assert _same_error(jit.value, py.value)

    small = IN[:3, :3].copy()
    with pytest.raises(sk.ArgumentError) as py:
        hdiff(small, np.zeros_like(small), small)
    with pytest.raises(sk.ArgumentError) as jit:  # at run time: the shapes decide
        _hdiff_once(small, np.zeros_like(small), small)
    assert _same_error(jit.value, py.value) and "halo" in str(py.value)

    # one array as input and output: a Python call reads the old values, as GT4Py does
    # (frontend/aliasing.py); a jitted call refuses it before writing anything
    shared = IN.copy()
    with pytest.raises(sk.ArgumentError, match="'out_field' is written and shares memory "
                                               "with field 'in_field'"):
        _hdiff_once(shared, shared, COEFF)
    np.testing.assert_array_equal(shared, IN)
    separate = np.zeros_like(IN)
    hdiff(IN.copy(), separate, COEFF)
    hdiff(shared, shared, COEFF)
    np.testing.assert_array_equal(shared[2:-2, 2:-2], separate[2:-2, 2:-2])

    with pytest.raises(sk.ArgumentError, match="origin= is not supported in a call from "
                                               "jitted code"):
        _with_origin(IN, np.zeros_like(IN), COEFF)


_CACHED = '''
import numba
import numpy as np
import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval
from defs import FACTOR


@sk.stencil(backend="c")
def scale(a: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = a[1, 0, 0] * FACTOR


def make(s):
    @numba.njit(cache=True)
    def closure(a, out):
        s(a, out)
    return closure


@numba.njit(cache=True)
def as_argument(s, a, out):
    s(a, out)


a = np.ones((4, 4, 2))
o1, o2 = np.zeros_like(a), np.zeros_like(a)
as_argument(scale, a, o1)
make(scale)(a, o2)
print(o1[1, 1, 1], o2[1, 1, 1])
'''


def test_cache_true_callers_never_run_a_stale_computation(tmp_path):
    """Cached callers taking the computation as an argument, and capturing it in a closure,
    see a changed constant of another module in the next process."""
    (tmp_path / "caller.py").write_text(_CACHED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    outputs = []
    for factor in (2.0, 3.0, 3.0, "again", 3.0, 3.0):
        if factor == "again":
            # callers compiled anew around an entry point that Numba loads from its cache,
            # then loaded from the cache themselves: they must still start Numba's threads
            shutil.rmtree(tmp_path / "__pycache__")
            continue
        (tmp_path / "defs.py").write_text(f"FACTOR = {factor}\n")
        run = subprocess.run([sys.executable, str(tmp_path / "caller.py")], capture_output=True,
                             text=True, env=env, timeout=600, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout.split())
    assert outputs == [["2.0", "2.0"]] + [["3.0", "3.0"]] * 4
    assert list((tmp_path / "__pycache__").glob("caller.as_argument*.nbi"))
