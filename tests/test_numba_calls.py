"""Point kernels called from inside numba.njit functions, against numba.stencil called the
same way: values and dtypes, plain and parallel=True callers, the stencil as a global, a
closure variable and an argument, out=, scalar arguments, a 50-step time loop in one jitted
function, errors, and cache=True callers after the stencil's definition changes.

Numba compiles are slow (seconds each): the jitted callers are module-level and shared, and
the arrays are small.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stencilkit as sk

from . import kernels as K

numba = pytest.importorskip("numba", reason="numba is not installed (pip install .[test])")

rng = np.random.default_rng(7)
F2 = rng.random((19, 23))
F3 = rng.random((6, 7, 8))
I2 = rng.integers(-50, 50, (12, 13)).astype(np.int32)
F32 = rng.random((11, 14)).astype(np.float32)

#: Every backend's stencil is callable from jitted code (the call runs generated Numba code).
BACKENDS = [b for b in sk.registry.implemented() if sk.registry.REGISTRY[b].available]

OURS = {b: sk.stencil(K.blur, backend=b) for b in BACKENDS}
blur = OURS[BACKENDS[0]]
nb_blur = numba.stencil(K.blur)
lap3d, nb_lap3d = sk.stencil(K.lap3d), numba.stencil(K.lap3d)
int_add, nb_int_add = sk.stencil(K.int_add), numba.stencil(K.int_add)
scale, nb_scale = sk.stencil(K.float_scale), numba.stencil(K.float_scale)
scalar, nb_scalar = sk.stencil(K.scalar_arg), numba.stencil(K.scalar_arg)
two, nb_two = sk.stencil(K.two_arrays), numba.stencil(K.two_arrays)
cval_blur, nb_cval_blur = sk.stencil(K.blur, cval=-2.0), numba.stencil(K.blur, cval=-2.0)


def _call(a):
    return st(a)  # noqa: F821 (each copy gets its own global 'st')


def _call_out(a, out):
    st(a, out=out)  # noqa: F821
    return out


def _callers(ours, ref):
    """The same jitted code around our stencil and Numba's, plain and parallel."""
    made = {}
    for fn in (_call, _call_out):
        for parallel in (False, True):
            for label, st in (("ours", ours), ("ref", ref)):
                f = type(fn)(fn.__code__, {"st": st, "__name__": __name__}, fn.__name__)
                made[fn.__name__.strip("_"), parallel, label] = numba.njit(parallel=parallel)(f)
    return made


BLUR = _callers(blur, nb_blur)


def _same_error(jitted: BaseException, python: BaseException) -> bool:
    """The same error, message and all, but for the call site a call from Python adds
    ("called at FILE:LINE": the jitted call's site is the jitted function's)."""
    def bare(e: BaseException) -> str:
        return str(e).split("\n  called at ")[0]
    return isinstance(jitted, type(python)) and bare(jitted) == bare(python)


@pytest.mark.parametrize("parallel", [False, True], ids=["njit", "parallel"])
def test_blur_from_njit_matches_numba_stencil(parallel):
    ours = BLUR["call", parallel, "ours"](F2)
    ref = BLUR["call", parallel, "ref"](F2)
    assert ours.dtype == ref.dtype
    np.testing.assert_array_equal(ours, ref)
    np.testing.assert_array_equal(ours, blur(F2))  # as from Python


@pytest.mark.parametrize("parallel", [False, True], ids=["njit", "parallel"])
def test_out_from_njit_matches_numba_stencil(parallel):
    ours = BLUR["call_out", parallel, "ours"](F2, np.full(F2.shape, 5.0))
    ref = BLUR["call_out", parallel, "ref"](F2, np.full(F2.shape, 5.0))
    np.testing.assert_array_equal(ours, ref)
    assert ours[0, 0] == 5.0  # the border is left alone, as in Numba


@numba.njit
def _dtypes_ours(i, f):
    return int_add(i), scale(f), lap3d(F3_CONST), cval_blur(f)


@numba.njit
def _dtypes_ref(i, f):
    return nb_int_add(i), nb_scale(f), nb_lap3d(F3_CONST), nb_cval_blur(f)


F3_CONST = F3


def test_dtypes_and_cval_match_numba_stencil():
    """int32 + int32 -> int64, float32 * 2.5 -> float64, 3-D, cval: as Numba's stencil."""
    for ours, ref in zip(_dtypes_ours(I2, F32), _dtypes_ref(I2, F32)):
        assert ours.dtype == ref.dtype
        np.testing.assert_array_equal(ours, ref)


@numba.njit(parallel=True)
def _scalars_ours(a, b, s):
    return scalar(a, s), scalar(a, 2), two(a, b)


@numba.njit(parallel=True)
def _scalars_ref(a, b, s):
    return nb_scalar(a, s), nb_scalar(a, 2), nb_two(a, b)


def test_scalar_and_secondary_arguments():
    b = rng.random(F2.shape)  # numba.stencil in parallel code needs equal shapes
    for ours, ref in zip(_scalars_ours(F2, b, 1.5), _scalars_ref(F2, b, 1.5)):
        assert ours.dtype == ref.dtype
        np.testing.assert_array_equal(ours, ref)


@numba.njit
def _as_argument(st, a):
    return st(a)


def test_stencil_as_argument_and_closure_of_every_backend():
    ref = nb_blur(F2)
    for b, st in OURS.items():
        np.testing.assert_array_equal(_as_argument(st, F2), ref, err_msg=b)

    def make(st):
        @numba.njit
        def closure(a):
            return st(a)
        return closure

    np.testing.assert_array_equal(make(OURS[BACKENDS[-1]])(F2), ref)
    # two stencils of one definition share a Numba type; another definition does not
    assert numba.typeof(blur) == numba.typeof(sk.stencil(K.blur))
    assert numba.typeof(blur) != numba.typeof(cval_blur)


def _time_loop(st):
    def loop(a, steps):
        for _ in range(steps):
            a = st(a)
        return a
    return loop


@pytest.mark.parametrize("parallel", [False, True], ids=["njit", "parallel"])
def test_time_loop_of_50_steps_matches_numba_stencil(parallel):
    ours = numba.njit(parallel=parallel)(_time_loop(blur))(F2, 50)
    ref = numba.njit(parallel=parallel)(_time_loop(nb_blur))(F2, 50)
    np.testing.assert_array_equal(ours, ref)
    py = F2
    for _ in range(50):
        py = blur(py)
    np.testing.assert_array_equal(ours, py)


def test_parallel_caller_runs_the_loop_in_parallel():
    """The stencil's loop becomes a parfor of a parallel=True caller, and stays a serial
    loop in a plain njit caller (as numba.stencil)."""
    par = BLUR["call", True, "ours"]
    plain = BLUR["call", False, "ours"]
    par(F2), plain(F2)
    assert any("parfor" in text for text in par.inspect_llvm().values())
    assert not any("parfor" in text for text in plain.inspect_llvm().values())


def test_errors_are_the_same_as_from_python():
    wrong_ndim = np.zeros((3, 3, 3))
    with pytest.raises(sk.ArgumentError) as py:
        blur(F2, out=wrong_ndim)
    with pytest.raises(sk.ArgumentError) as jit:  # at compile time: the types decide
        BLUR["call_out", True, "ours"](F2, wrong_ndim)
    assert _same_error(jit.value, py.value)

    wrong_shape = np.zeros((4, 4))
    with pytest.raises(sk.ArgumentError) as py:
        blur(F2, out=wrong_shape)
    for parallel in (False, True):
        with pytest.raises(sk.ArgumentError) as jit:  # at run time
            BLUR["call_out", parallel, "ours"](F2, wrong_shape)
        assert _same_error(jit.value, py.value)

    small = F2[:5, :5]
    with pytest.raises(sk.ArgumentError) as py:
        two(F2, small)
    with pytest.raises(sk.ArgumentError) as jit:
        _scalars_ours(F2, small, 1.0)
    assert _same_error(jit.value, py.value)


def test_out_overlapping_the_input_reads_the_input_as_before():
    a = F2.copy()
    expected = blur(a)
    expected[0, :] = expected[-1, :] = expected[:, 0] = expected[:, -1] = 0
    got = a.copy()
    BLUR["call_out", True, "ours"](got, got)
    interior = (slice(1, -1), slice(1, -1))
    np.testing.assert_array_equal(got[interior], expected[interior])


_CACHED = '''
import sys
import numba
import numpy as np
import stencilkit as sk

@sk.stencil
def st(a):
    return a[0, 1] * FACTOR

def make(s):
    @numba.njit(cache=True)
    def closure(a):
        return s(a)
    return closure

@numba.njit(cache=True)
def as_argument(s, a):
    return s(a)

a = np.ones((4, 4))
print(as_argument(st, a)[1, 1], make(st)(a)[1, 1])
'''


def test_cache_true_callers_never_run_a_stale_stencil(tmp_path):
    """A cached caller taking the stencil as an argument, and one capturing it in a
    closure, see a changed definition in the next process (the stencil's module changes,
    the callers' does not)."""
    caller = tmp_path / "caller.py"
    caller.write_text(_CACHED.replace("import stencilkit as sk\n",
                                      "import stencilkit as sk\nfrom defs import FACTOR\n"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    outputs = []
    for factor in (2.0, 3.0, 3.0):
        (tmp_path / "defs.py").write_text(f"FACTOR = {factor}\n")
        run = subprocess.run([sys.executable, str(caller)], capture_output=True, text=True,
                             env=env, timeout=300, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout.split())
    assert outputs == [["2.0", "2.0"], ["3.0", "3.0"], ["3.0", "3.0"]]
    assert list((tmp_path / "__pycache__").glob("caller.as_argument*.nbi"))


def test_cached_caller_of_a_stencil_from_another_module_is_not_cached(tmp_path):
    """A global stencil imported from another module could change without Numba's check of
    the caller's file noticing: such a caller is compiled, run, and not cached."""
    (tmp_path / "defs.py").write_text("import stencilkit as sk\n\n\n@sk.stencil\n"
                                      "def st(a):\n    return a[0, 1] * 2.0\n")
    (tmp_path / "caller.py").write_text(textwrap.dedent("""
        import warnings
        import numba
        import numpy as np
        from defs import st

        @numba.njit(cache=True)
        def run(a):
            return st(a)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            print(run(np.ones((4, 4)))[1, 1])
        print(any("dynamic globals" in str(w.message) for w in caught))
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    run = subprocess.run([sys.executable, str(tmp_path / "caller.py")], capture_output=True,
                         text=True, env=env, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["2.0", "True"]
    assert not list((tmp_path / "__pycache__").glob("caller.run*.nbi"))


def test_generated_module_is_a_file_with_prange():
    st = sk.stencil(K.blur, backend="numba")
    st(F2)
    source = st.generate()
    assert "_nb.prange(" in source and "parallel = _nb.njit(parallel=True" in source
    compile(textwrap.dedent(source), "<generated>", "exec")
