"""What issue 25's fault campaign found: a crash and raw Python exceptions where bad input
must get an ``sk.StencilError`` naming the stencil (or argument), file and line, and the fix.
Crash-capable cases run in a child process (``run_isolated``)."""

from __future__ import annotations

import importlib
import json
import os

import numpy as np
import pytest

import stencilkit as sk

from .requires import needs_c
from .test_hostile_input import run_isolated


def test_c_kernel_names_must_be_c_identifiers():
    needs_c()
    # The name is pasted into the generated C as the function to call: "kc(0,0); int x"
    # compiled, and running the loop killed the interpreter (SIGSEGV).
    out = run_isolated("""
        import json, numpy as np, stencilkit as sk

        code = "void kc(double *a) { a[0] += 1.0; }"
        cells = sk.Set(5)
        results = {}
        for name in ["kc(0); int x", "kc(0,0); int x", "kc(0,0)", "kc;", "k c", "1kc", "int", "double",
                     "__attribute__", "k\\u00e9", "kc\\n", 5, ("kc",)]:
            d = sk.Dat(cells, data=np.zeros(5))
            try:
                sk.par_loop(sk.Kernel(code, name), cells, d(sk.INC), backend="c")
                results[repr(name)] = "ran"
            except sk.StencilError as exc:
                results[repr(name)] = str(exc)
        d = sk.Dat(cells, data=np.zeros(5))
        sk.par_loop(sk.Kernel(code, "kc"), cells, d(sk.INC), backend="c")
        results["good"] = d.data.tolist()
        print(json.dumps(results))
    """)
    results = json.loads(out.splitlines()[-1])
    assert results.pop("good") == [1.0] * 5
    for name, message in results.items():
        assert "not a C identifier" in message or "a C keyword" in message or \
            "not a string" in message, (name, message)
        assert "child.py:" in message and "fix:" in message, message
    assert "a C keyword" in results["'int'"]


def test_a_python_kernel_may_carry_any_name():
    needs_c()
    # Its name reaches C only through a mangled stem (sk_<stem>_kernel): no check applies
    def plus_one(a):
        a[0] += 1.0

    cells = sk.Set(4)
    d = sk.Dat(cells, data=np.zeros(4))
    sk.par_loop(sk.Kernel(plus_one, "int x; (odd)"), cells, d(sk.RW), backend="c")
    np.testing.assert_array_equal(d.data, np.ones(4))


# ---------------------------------------------------------------- offsets and literals near 2**63


def _off_max(a):
    return a[9223372036854775807, 0]


def _off_min(a):
    return a[0, -9223372036854775808]


def _off_uint(a):
    return a[1, 0] + a[9223372036854775808, 0]


def _off_limit(a):
    return a[0, 0] + a[1099511627777, 0]  # 2**40 + 1


def _off_at_limit(a):
    return a[-1099511627776, 0] + a[0, 1]  # -2**40: allowed, never meets the array


@pytest.mark.parametrize("kernel", [_off_max, _off_min, _off_uint, _off_limit],
                         ids=lambda k: k.__name__)
def test_relative_offsets_beyond_2_40_are_refused(backend, kernel):
    # near 2**63 this raised "Python integer ... out of bounds for uint64" (issue 25)
    with pytest.raises(sk.StencilTypeError, match="exceeds 2\\*\\*40") as info:
        sk.stencil(kernel, backend=backend)(np.ones((5, 6)))
    assert kernel.__name__ in str(info.value) and "test_fault_campaign.py:" in str(info.value)


def test_relative_offset_at_2_40_matches_numba(backend, numba_stencil):
    a = np.arange(30.0).reshape(5, 6)
    np.testing.assert_array_equal(sk.stencil(_off_at_limit, backend=backend)(a),
                                  numba_stencil(_off_at_limit)(a))


def _lit_neg_min(a):
    return a[0, 0] * 0 + -9223372036854775808


def _lit_neg_neg_min(a):
    return a[0, 0] * 0 + -(-9223372036854775808)  # noqa: B002 (folded to 2**63)


def _lit_pow(a):
    return a[0, 0] * 0 + 2**63


def _lit_shift(a):
    return a[0, 0] * 0 + (1 << 63) - (2**62 + 2**62)


def _lit_negative_power(a):
    return a[0, 0] + 2**-1 + (~5) + 7 // 2 - (-7 % 3)


@pytest.mark.parametrize("kernel", [_lit_neg_min, _lit_neg_neg_min, _lit_pow, _lit_shift,
                                    _lit_negative_power],
                         ids=lambda k: k.__name__)
def test_integer_literal_expressions_are_constants_as_in_numba(backend, numba_stencil, kernel):
    """CPython folds literal arithmetic before Numba sees it: 2**63 is one uint64 constant,
    not an int64 power that wraps, and 2**-1 is 0.5."""
    a = np.arange(30.0).reshape(5, 6)
    got = sk.stencil(kernel, backend=backend)(a)
    want = numba_stencil(kernel)(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_integer_literal_beyond_64_bits_is_refused():
    def big(a):
        return a[0, 0] + -(2**64)

    with pytest.raises(sk.StencilTypeError, match="does not fit in 64 bits"):
        sk.stencil(big, backend="numpy")(np.ones((3, 3)))


# ---------------------------------------------------------------- arrays whose own code raises


class Boom(Exception):
    pass


class _ArrayRaises:
    def __array__(self, *args, **kwargs):
        raise Boom("__array__ failed")


class _InterfaceRaises:
    @property
    def __array_interface__(self):
        raise Boom("__array_interface__ failed")


class _GetattrRaises:
    def __getattr__(self, name):
        raise Boom(f"no {name} today")


class _DtypeRaises(np.ndarray):
    @property
    def dtype(self):
        raise Boom("dtype failed")


class _StridesRaises(np.ndarray):
    @property
    def strides(self):
        raise Boom("strides failed")


class _FunctionRaises(np.ndarray):
    def __array_function__(self, *args, **kwargs):
        raise Boom("__array_function__ failed")


class _UfuncRaises(np.ndarray):
    def __array_ufunc__(self, *args, **kwargs):
        raise Boom("__array_ufunc__ failed")


class _SetitemRaises(np.ndarray):
    def __setitem__(self, index, value):
        raise Boom("__setitem__ failed")


def _blur(a):
    return a[0, 1] + a[0, -1]


def _hostile(kind: str, shape: tuple[int, ...]) -> object:
    base = np.arange(float(np.prod(shape))).reshape(shape)
    return {"array": _ArrayRaises(), "interface": _InterfaceRaises(),
            "getattr": _GetattrRaises(), "dtype": base.view(_DtypeRaises),
            "strides": base.view(_StridesRaises),
            "function": base.view(_FunctionRaises), "ufunc": base.view(_UfuncRaises),
            "setitem": base.view(_SetitemRaises)}[kind]


HOSTILE = ["array", "interface", "getattr", "dtype", "strides", "function", "ufunc", "setitem"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_point_arguments_whose_methods_raise_are_named(backend, kind):
    st = sk.stencil(_blur, backend=backend)
    a = np.arange(42.0).reshape(6, 7)
    want = sk.stencil(_blur, backend="numpy")(a)
    for args, out, label in [((_hostile(kind, (6, 7)),), None, "argument 1 ('a')"),
                             ((a,), _hostile(kind, (6, 7)), "'out'")]:
        try:
            got = st(*args, out=out) if out is not None else st(*args)
        except sk.StencilError as exc:  # never the raw Boom; always naming the argument
            text = str(exc)
            assert label.split(" (")[0] in text and "_blur" in text, text
            if "raised Boom" in text:
                assert label in text and "test_fault_campaign.py" in text, text
                assert isinstance(exc.__cause__, Boom)
        else:  # a subclass read as the plain array it is: computed right
            # (with out=, the border columns keep what out held)
            np.testing.assert_array_equal(np.ndarray.view(got, np.ndarray)[:, 1:-1],
                                          want[:, 1:-1])


def _copy(a: sk.Field[float], b: sk.Field[float]):
    with sk.computation(sk.PARALLEL), sk.interval(...):
        b = a[1, 0, 0]  # noqa: F841 (a field write)


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("which", ["a", "b"])
def test_computation_fields_whose_methods_raise_are_named(backend, kind, which):
    st = sk.stencil(_copy, backend=backend)
    fields = {"a": np.ones((6, 6, 4)), "b": np.zeros((6, 6, 4))}
    fields[which] = _hostile(kind, (6, 6, 4))
    try:
        st(fields["a"], fields["b"], origin=(0, 0, 0), domain=(5, 6, 4))
    except sk.StencilError as exc:  # never the raw Boom; always naming the field
        assert f"field '{which}'" in str(exc) and "_copy" in str(exc), str(exc)
    else:  # a subclass read as the plain array it is: computed right
        b = np.ndarray.view(fields["b"], np.ndarray)
        a = np.ndarray.view(fields["a"], np.ndarray)
        np.testing.assert_array_equal(b[:5], a[1:])


def test_an_exception_no_argument_raised_is_not_blamed_on_one(monkeypatch):
    """A failure inside stencilkit (simulated) with an argument that reads cleanly stays
    what it is."""
    stencil_module = importlib.import_module("stencilkit.api.stencil")

    def broken(*args, **kwargs):
        raise RuntimeError("internal")

    monkeypatch.setattr(stencil_module.PointStencil, "_specialize", broken)
    with pytest.raises(RuntimeError, match="internal"):
        sk.stencil(_blur, backend="numpy")([[1.0] * 7] * 6)  # a list: user code could run


# ---------------------------------------------------------------- func_or_mode twice


def test_func_or_mode_given_twice_is_a_stencil_error():
    # was Python's own TypeError ("got multiple values for argument 'func_or_mode'")
    with pytest.raises(sk.StencilError, match="both by position and by name") as info:
        sk.stencil(_blur, func_or_mode="wrap")
    assert "_blur" in str(info.value) and "test_fault_campaign.py:" in str(info.value)
    with pytest.raises(sk.StencilError, match="both by position and by name"):
        sk.stencil("nearest", func_or_mode="wrap")


def test_func_or_mode_by_name_alone_is_the_mode():
    a = np.arange(42.0).reshape(6, 7)
    by_name = sk.stencil(func_or_mode="wrap", backend="numpy")(_blur)
    by_position = sk.stencil("wrap", backend="numpy")(_blur)
    np.testing.assert_array_equal(by_name(a), by_position(a))
    assert by_name(a)[0, 0] == a[0, 1] + a[0, -1]  # wrapped, not cval
    with pytest.raises(sk.StencilError, match="unsupported mode"):
        sk.stencil(func_or_mode="bogus")


# ---------------------------------------------------------------- Numba's files in a cache entry

_NUMBA_CHILD = """
    import warnings, numpy as np, stencilkit as sk

    def lap(a):
        return a[-1, 0] + a[1, 0] - 2.0 * a[0, 0]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = sk.stencil(lap, backend="numba")(np.arange(30.0).reshape(5, 6) ** 2)
    print(float(r.sum()))
    for w in caught:
        print("WARNING", w.message)
"""


@pytest.mark.parametrize("damage", ["truncated"] + [  # each case compiles twice with Numba
    pytest.param(d, marks=pytest.mark.full) for d in ("garbage", "empty", "writable", "foreign")])
def test_numba_cache_files_of_an_entry_are_checked_before_numba_loads_them(tmp_path, damage):
    """Numba keeps an entry's machine code in its __pycache__ and unpickles it unverified: a
    damaged file ended in a raw UnpicklingError/EOFError/IndexError (issue 25), one planted
    by another user would run its code. Now it is discarded and compiled again."""
    from stencilkit.registry import REGISTRY

    if REGISTRY["numba"].probe():
        pytest.skip(f"backend numba: {REGISTRY['numba'].probe()}")
    if damage == "foreign" and (not hasattr(os, "geteuid") or os.geteuid() != 0):
        pytest.skip("a file owned by another user needs root (chown)")
    env = {"STENCILKIT_CACHE_DIR": str(tmp_path)}
    first = run_isolated(_NUMBA_CHILD, env=env).split()
    files = sorted(tmp_path.glob("v*/??/*/__pycache__/*.nb[ic]"))
    assert files, "Numba wrote no cache files into the entry"
    for f in files:
        data = f.read_bytes()
        if damage == "truncated":
            f.write_bytes(data[: len(data) // 2])
        elif damage == "garbage":
            f.write_bytes(b"\0" * len(data))
        elif damage == "empty":
            f.write_bytes(b"")
        elif damage == "writable":
            f.chmod(0o666)
        else:
            os.chown(f, 65534, 65534)
    again = run_isolated(_NUMBA_CHILD, env=env)
    assert again.split()[0] == first[0]
    assert "Numba's cache" in again and "is not loaded because" in again, again
