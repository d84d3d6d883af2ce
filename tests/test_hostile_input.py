"""Regression tests for issue 9 (point kernels and computations): inputs that crashed, hung,
gave wrong answers or raw Python exceptions. Each gets a StencilError naming the stencil, or
the right result."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk

# Values whose conversion to an integer C leaves undefined; Numba (LLVM fptosi on x86-64)
# gives the "integer indefinite" value for NaN and everything out of range.
EDGE = np.array([[np.nan, 1e300, -1e300, np.inf], [-np.inf, 2.5, -2.5, 9.3e18],
                 [1.5, -9.3e18, 9.2e18, 1e19], [300.0, -300.0, 70000.5, 3e9]])
I64_MIN = -(2**63)


def _to_int_then_float(a):
    return float(int(a[0, 0]))


def _to_int_times_one(a):
    return int(a[0, 0]) * 1.0


def _to_int32(a):
    return np.int32(a[0, 0])


def _to_int8(a):
    return np.int8(a[0, 0])


def _to_uint16(a):
    return np.uint16(a[0, 0])


def _expected_int(x: float, bits: int) -> int:
    lo, hi = -(2**(bits - 1)), 2**(bits - 1)
    return int(x) if np.isfinite(x) and lo <= int(x) < hi else lo


@pytest.mark.parametrize("kernel", [_to_int_then_float, _to_int_times_one])
def test_int_of_nan_and_out_of_range_is_int64_min(backend, kernel):
    got = sk.stencil(kernel, backend=backend)(EDGE)
    want = np.array([float(_expected_int(x, 64)) for x in EDGE.ravel()]).reshape(EDGE.shape)
    np.testing.assert_array_equal(got, want)


def test_narrow_integer_conversions_match_numba(backend):
    want32 = np.array([_expected_int(x, 32) for x in EDGE.ravel()]).reshape(EDGE.shape)
    np.testing.assert_array_equal(sk.stencil(_to_int32, backend=backend)(EDGE), want32)
    # 8 and 16 bits: the 32-bit conversion, truncated (what LLVM emits on x86-64)
    np.testing.assert_array_equal(sk.stencil(_to_int8, backend=backend)(EDGE),
                                  want32.astype(np.int8))
    np.testing.assert_array_equal(sk.stencil(_to_uint16, backend=backend)(EDGE),
                                  want32.astype(np.uint16))


def test_int_conversions_agree_with_numba(numba_stencil):
    for kernel in (_to_int_then_float, _to_int_times_one, _to_int32, _to_int8, _to_uint16):
        ref = numba_stencil(kernel)(EDGE)
        np.testing.assert_array_equal(sk.stencil(kernel, backend="c")(EDGE), ref)


# ---------------------------------------------------------------- crash-capable cases


def run_isolated(code: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter (a crash or hang fails the test, not the run);
    returns its stdout."""
    import os
    import subprocess
    import sys
    import tempfile
    import textwrap

    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:  # a file: kernels need readable source
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        try:
            proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the child process hung (> {timeout} s)")
    assert proc.returncode == 0, f"child died with {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_range_with_zero_step_raises_instead_of_hanging(backend):
    out = run_isolated(f"""
        import numpy as np, stencilkit as sk

        def looping(a, s):
            acc = 0.0
            for i in range(5, 0, s):   # 5 > 0: a zero step would loop forever in C
                acc += a[0, 0]
            return acc

        st = sk.stencil(looping, backend={backend!r})
        a = np.ones((4, 5))
        assert st(a, -1)[1, 1] == 5.0
        try:
            st(a, 0)
        except sk.ArgumentError as e:
            assert "looping" in str(e) and "must not be zero" in str(e), e
            print("raised")
    """, timeout=60)
    assert out.strip() == "raised"


def test_range_with_data_dependent_zero_step_c():
    out = run_isolated("""
        import numpy as np, stencilkit as sk

        def step_from_data(a):
            acc = 0
            for i in range(3, 0, int(a[0, 0])):
                acc += 1
            return acc

        st = sk.stencil(step_from_data, backend="c")
        assert st(np.full((3, 3), -1.0))[1, 1] == 3
        try:
            st(np.full((3, 3), 0.5))
        except sk.ArgumentError as e:
            assert "must not be zero" in str(e)
            print("raised")
    """, timeout=60)
    assert out.strip() == "raised"


def test_constant_zero_step_is_refused_at_definition(backend):
    def const_step(a):
        acc = 0.0
        for _i in range(0, 3, 1 - 1):
            acc += a[0, 0]
        return acc

    with pytest.raises(sk.StencilSyntaxError, match="zero") as info:
        sk.stencil(const_step, backend=backend)(np.ones((3, 3)))
    assert "const_step" in str(info.value)
