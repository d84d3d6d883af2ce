"""Stencil objects pickle by definition and options and rebuild on the other side: in this
process, in a ``multiprocessing`` worker, and in a process where the defining file no longer
exists. Results are compared with the original object's NumPy calls."""

from __future__ import annotations

import multiprocessing
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

from . import dask_kernels as kk


def _args(func, shape_extra, rng):
    for f, ndim, options, extras in kk.KERNELS:
        if f is func:
            shape = (7, 6, 5)[:ndim]
            a = rng.random(shape)
            args = [a]
            for extra in extras:
                args.append(rng.random(tuple(n + 1 for n in shape)) if extra == "array" else
                            rng.random(3) if extra == "weights" else extra)
            if func is kk.k2_int:
                args = [np.asarray(x * 100, np.int64) for x in args]
            return options, args
    raise AssertionError(func)


@pytest.mark.parametrize("func", [k[0] for k in kk.KERNELS], ids=lambda f: f.__name__)
def test_point_kernel_round_trip(func):
    options, args = _args(func, 1, np.random.default_rng(0))
    stencil = sk.stencil(func, **options)
    ref = stencil(*args)
    clone = pickle.loads(pickle.dumps(stencil))
    assert clone is not stencil and isinstance(clone, sk.PointStencil)
    assert clone.__name__ == stencil.__name__
    assert clone.explicit_neighborhood == stencil.explicit_neighborhood
    assert clone.cval == stencil.cval and clone.standard_indexing == stencil.standard_indexing
    got = clone(*args)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
    assert clone.neighborhood == stencil.neighborhood


def test_backend_option_travels(backend):
    stencil = sk.stencil(kk.k2_uneven, backend=backend, cval=3.0)
    clone = pickle.loads(pickle.dumps(stencil))
    assert clone.backend == backend
    a = np.random.default_rng(1).random((6, 7))
    np.testing.assert_array_equal(clone(a), stencil(a))


def test_closures_keep_their_values():
    three, five = kk.scaled(3.0), kk.scaled(5.0)
    a = np.arange(10.0)
    c3, c5 = pickle.loads(pickle.dumps(three)), pickle.loads(pickle.dumps(five))
    np.testing.assert_array_equal(c3(a), three(a))
    np.testing.assert_array_equal(c5(a), five(a))
    assert not np.array_equal(c3(a), c5(a))


def test_lambdas_on_one_line_and_nested_definitions():
    first, second = sk.stencil(lambda a: a[1] - a[0]), sk.stencil(lambda a: a[-1] * 2)

    def factory():
        @sk.stencil(cval=-1.0)
        def nested(a):
            return a[0] + a[2]
        return nested

    a = np.arange(8.0)
    for stencil in (first, second, factory()):
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(stencil))(a), stencil(a))


def test_unpickling_twice_in_one_process_rebuilds_once():
    data = pickle.dumps(sk.stencil(kk.k1_uneven))
    assert pickle.loads(data) is pickle.loads(data)


def test_a_value_that_does_not_pickle_is_a_clear_error(tmp_path):
    """(Point kernels and computations accept only numbers as values from their scope, so
    their frontend refuses such a value first; a ParLoop kernel is parsed when it runs.)"""
    handle = open(tmp_path / "f", "w")  # noqa: SIM115
    try:
        @sk.kernel
        def uses_handle(x):
            x[0] = handle

        with pytest.raises(sk.StencilError, match="(?s)uses 'handle'.*TextIOWrapper.*fix:"):
            pickle.dumps(uses_handle)
        with pytest.raises(sk.StencilError, match="(?s)'handle' is a TextIOWrapper"):
            pickle.dumps(sk.stencil(lambda a: a[0] + handle))
    finally:
        handle.close()


@sk.function
def twice(x):
    return 2 * x


@sk.stencil(externals={"OFFSET": 1.5})
def with_helper(a: Field[float], b: Field[float], *, f: float = 2.0):
    from __externals__ import OFFSET

    with computation(PARALLEL), interval(...):
        b = twice(a[1, 0, 0]) * f + OFFSET  # noqa: F841 (a field written)


def test_computation_round_trip(backend):
    stencil = sk.stencil(with_helper.func, backend=backend, externals={"OFFSET": 1.5})
    clone = pickle.loads(pickle.dumps(stencil))
    assert clone.externals == {"OFFSET": 1.5} and clone.backend == backend
    a = np.random.default_rng(2).random((5, 4, 3))
    ref, got = np.zeros_like(a), np.zeros_like(a)
    stencil(a, ref, f=3.0)
    clone(a, got, f=3.0)
    np.testing.assert_array_equal(got, ref)
    assert ref.any()


def test_parloop_kernels_round_trip():
    @sk.kernel
    def axpy(y, x):
        y[0] += 2.5 * x[0]

    c_kernel = sk.Kernel("void axpy_c(double *y, const double *x) { y[0] += 2.5 * x[0]; }",
                         "axpy_c")
    cells = sk.Set(10)
    x = np.arange(10.0)
    results = []
    for kern in (axpy, pickle.loads(pickle.dumps(axpy)), pickle.loads(pickle.dumps(c_kernel))):
        y = sk.Dat(cells, data=np.ones(10))
        sk.ParLoop(kern, cells, y(sk.INC), sk.Dat(cells, data=x)(sk.READ)).compute()
        results.append(y.data.copy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_multiprocessing_worker():
    stencil = sk.stencil(kk.k2_math)
    comp = pickle.loads(pickle.dumps(with_helper))
    a = np.random.default_rng(3).random((6, 5))
    a3 = np.random.default_rng(4).random((5, 4, 3))
    ref3 = np.zeros_like(a3)
    comp(a3, ref3)
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited
    with ctx.Pool(1) as pool:
        got = pool.apply(kk.apply, (stencil, a))
        got3 = pool.apply(kk.run_computation, (with_helper, a3, np.zeros_like(a3)))
    np.testing.assert_array_equal(got, stencil(a))
    np.testing.assert_array_equal(got3, ref3)


def test_defining_file_gone(tmp_path):
    """The source travels: the worker has no copy of the file; errors still name it."""
    module = tmp_path / "gone_model.py"
    module.write_text(textwrap.dedent("""\
        import numpy as np
        import stencilkit as sk

        GAIN = 3.0

        def make():
            @sk.stencil(cval=-2.0)
            def smooth(a):
                return GAIN * np.sqrt(abs(a[-1, 0])) + a[1, 1]
            return smooth
        """))
    sender = textwrap.dedent(f"""\
        import pickle, sys
        import numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        import gone_model
        st = gone_model.make()
        a = np.random.default_rng(5).random((6, 7))
        pickle.dump((st, a, st(a)), open({str(tmp_path / "blob")!r}, "wb"))
        """)
    receiver = textwrap.dedent(f"""\
        import pickle
        import numpy as np
        import stencilkit as sk
        st, a, ref = pickle.load(open({str(tmp_path / "blob")!r}, "rb"))
        assert np.array_equal(st(a), ref)
        try:
            st(a, a)
        except sk.ArgumentError as exc:
            print("ERROR:", exc)
        print("OK")
        """)
    run = [sys.executable, "-c"]
    done = subprocess.run(run + [sender], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    module.unlink()
    done = subprocess.run(run + [receiver], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path.parent))
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout
    assert "gone_model.py:8" in done.stdout  # the original file and the def's line


@pytest.mark.parametrize("mode", kk.supported_modes())
def test_border_mode_travels(mode):
    stencil = kk.make(kk.k2_uneven, {}, mode)
    clone = pickle.loads(pickle.dumps(stencil))
    a = np.random.default_rng(8).random((5, 6))
    np.testing.assert_array_equal(clone(a), stencil(a))
