"""What issue 25's fault campaign found: a crash and raw Python exceptions where bad input
must get an ``sk.StencilError`` naming the stencil (or argument), file and line, and the fix.
Crash-capable cases run in a child process (``run_isolated``)."""

from __future__ import annotations

import json

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
