"""Regression tests for issue 9 (point kernels and computations): inputs that crashed, hung,
gave wrong answers or raw Python exceptions. Each gets a StencilError naming the stencil, or
the right result."""

from __future__ import annotations

import os

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


# runs the script named by argv[1] as __main__ after installing the CUDA emulator, as
# conftest.py installs it (the script keeps its file: kernels need readable source)
_EMULATED_CHILD = (
    "import runpy, sys; sys.path.insert(0, " + repr(os.path.dirname(os.path.abspath(__file__)))
    + "); from cuda_emulator import install; install(); script = sys.argv.pop(1); "
    "runpy.run_path(script, run_name='__main__')")


def run_isolated(code: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter (a crash or hang fails the test, not the run);
    returns its stdout."""
    import subprocess
    import sys
    import tempfile
    import textwrap

    env = {**os.environ, **(env or {})}
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:  # a file: kernels need readable source
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        command = [sys.executable, script]
        if env.get("STENCILKIT_CUDA_EMULATOR") == "1":  # "cuda" on the emulator there too
            command = [sys.executable, "-c", _EMULATED_CHILD, script]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=env)
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


# ---------------------------------------------------------------- point-kernel call checks

A = np.random.default_rng(1).random((6, 7))


def _plus(a, s):
    return a[0, 0] + s


def _blur(a):
    return 0.5 * (a[-1, 0] + a[1, 0])


def _with_table(a, t):
    return a[0, 0] + t[1]


def _named(exc: BaseException, name: str) -> None:
    assert isinstance(exc, sk.StencilError), type(exc)
    assert name in str(exc), str(exc)


def test_empty_standard_indexing_array_is_refused_before_running(backend):
    # (the out-of-bounds read itself is what the sanitizer CI step catches)
    st = sk.stencil(_with_table, standard_indexing=("t",), backend=backend)
    with pytest.raises(sk.ArgumentError) as info:
        st(A, np.zeros(0))
    _named(info.value, "_with_table")
    np.testing.assert_array_equal(st(A, np.arange(3.0)), A + 1.0)
    # no interior point, so nothing is read: a result, as on every backend
    assert st(np.zeros((7, 0)), np.zeros(0)).shape == (7, 0)


@pytest.mark.parametrize("shape", [(2, 2), (1, 3)])
def test_empty_standard_indexing_array_in_a_border_mode(backend, shape):
    """In the border modes every point runs the body, even where no interior point exists:
    refused before running there too (the "opencl" launcher looked for interior points only
    and ran the kernel, which reported the read afterwards; on "cuda" a launch may not read
    an empty array at all: the emulator's guard page stops it)."""
    st = sk.stencil("wrap", standard_indexing=("t",), neighborhood=((-1, 1), (-1, 1)),
                    backend=backend)(_with_table)
    with pytest.raises(sk.ArgumentError) as info:
        st(np.ones(shape), np.zeros(0))
    _named(info.value, "_with_table")
    np.testing.assert_array_equal(st(np.ones(shape), np.arange(3.0)), np.full(shape, 2.0))
    assert st(np.zeros((0, 4)), np.zeros(0)).shape == (0, 4)  # no point: nothing is read


def test_empty_standard_indexing_array_is_never_read_under_asan():
    """The same call with AddressSanitizer watching the generated code (issue 9, item 3)."""
    import shutil
    import subprocess

    cc = shutil.which("gcc")
    lib = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                         text=True).stdout.strip() if cc else ""
    if not lib or not os.path.isabs(lib):
        pytest.skip("gcc with AddressSanitizer is not available")
    out = run_isolated("""
        import numpy as np, stencilkit as sk

        def table(a, t):
            return a[0, 0] + t[1]

        try:
            sk.stencil(table, standard_indexing=("t",), backend="c")(np.ones((4, 4)),
                                                                      np.zeros(0))
        except sk.ArgumentError:
            print("raised")
    """, timeout=180, env={"STENCILKIT_SANITIZE": "1", "LD_PRELOAD": lib, "CC": cc,
                           "ASAN_OPTIONS": "detect_leaks=0"})  # gcc's runtime: gcc builds
    assert out.strip() == "raised"


@pytest.mark.parametrize("value", [2**64, 2**64 + 5, -(2**63) - 1, 10**30])
def test_python_int_scalar_outside_64_bits_raises(backend, value):
    st = sk.stencil(_plus, backend=backend)
    ints = np.ones((4, 4), np.int64)
    st(ints, 3)  # the int64 specialization exists; it must not take the big value mod 2**64
    with pytest.raises(sk.ArgumentError, match="64-bit") as info:
        st(ints, value)
    _named(info.value, "_plus")


def test_python_int_scalar_in_uint64_range_is_uint64_as_in_numba(backend):
    st = sk.stencil(_plus, backend=backend)
    ints = np.ones((4, 4), np.int64)
    assert st(ints, 3)[1, 1] == 4
    # Numba types 2**63 + 5 as uint64; int64 + uint64 is int64 and wraps
    assert st(ints, 2**63 + 5)[1, 1] == -(2**63) + 6


def test_matmul_operator_is_a_syntax_error(backend):
    def matmul(a, b):
        return a[0, 0] @ b[0, 0]

    with pytest.raises(sk.StencilSyntaxError, match="@") as info:
        sk.stencil(matmul, backend=backend)(A, A)
    _named(info.value, "matmul")


def test_huge_cval_and_integer_constant(backend):
    with pytest.raises(sk.StencilTypeError, match="cval") as info:
        sk.stencil(_plus, cval=10**400, backend=backend)(A, 1.0)
    _named(info.value, "_plus")

    def huge_constant(a):
        return a[0, 0] + 100000000000000000000000

    with pytest.raises(sk.StencilTypeError, match="64 bits") as info:
        sk.stencil(huge_constant, backend=backend)(A)
    _named(info.value, "huge_constant")


@pytest.mark.parametrize("nb", [3, ((1,), (0, 0)), ((0.5, 1), (0, 0)), ((1, -1), (0, 0)),
                                (("a", "b"), (0, 0)), ((-(10**20), 1), (0, 0)), (),
                                ((True, 1), (0, 0))])
def test_malformed_neighborhood(nb):
    with pytest.raises(sk.StencilTypeError, match="neighborhood") as info:
        sk.stencil(_plus, neighborhood=nb)
    _named(info.value, "_plus")


def test_ragged_list_argument(backend):
    with pytest.raises(sk.ArgumentError, match="rectangular") as info:
        sk.stencil(_plus, backend=backend)([[1.0, 2.0], [3.0]], 1.0)
    _named(info.value, "_plus")


def test_non_native_byte_order_is_computed_on(backend):
    st = sk.stencil(_blur, backend=backend)
    np.testing.assert_array_equal(st(A.astype(">f8")), st(A))
    with pytest.raises(sk.ArgumentError, match="byte order") as info:
        st(A, out=np.zeros(A.shape, ">f8"))
    _named(info.value, "_blur")


def _misaligned(shape, dtype=np.float64):
    """An array at an odd address (not a multiple of its item size)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer(bytearray(n + 1), np.uint8)[1:].view(dtype).reshape(shape)


def _odd_strides(shape, dtype=np.float64):
    """Strides that are not multiples of the item size (12 bytes for 8-byte items)."""
    item = np.dtype(dtype).itemsize
    buf = bytearray(int(np.prod(shape)) * (item + 4) + item)
    return np.ndarray(shape, dtype, buf, 0, (shape[1] * (item + 4), item + 4))


@pytest.mark.parametrize("make", [_misaligned, _odd_strides])
def test_unaligned_and_odd_strided_arrays_work(backend, make):
    st = sk.stencil(_blur, backend=backend)
    ref = st(A)
    a = make(A.shape)
    a[...] = A
    np.testing.assert_array_equal(st(a), ref)
    out = make(A.shape)
    out[...] = -1.0
    st(A, out=out)
    np.testing.assert_array_equal(out[1:-1], ref[1:-1])
    assert (out[0] == -1.0).all()  # no cval: the border is left alone
    out2 = make(A.shape)
    st(a, out=out2)
    np.testing.assert_array_equal(out2[1:-1], ref[1:-1])


# ---------------------------------------------------------------- long kernels


def _load_generated(tmp_path, name: str, text: str):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("terms", [200, 400, 2000])
def test_long_sums_compile_and_keep_the_order_of_operations(backend, tmp_path, terms):
    if backend == "numba" and terms > 400:
        pytest.skip("Numba's own compile time grows steeply with the function's size (minutes "
                    "for 2000 terms with parallel=True); numba is checked up to 400 terms")
    offsets = [(i % 3 - 1, (i * 7) % 3 - 1) for i in range(terms)]
    body = " + ".join(f"a[{i}, {j}]" for i, j in offsets)
    mod = _load_generated(tmp_path, f"long_sum_{terms}", f"def long_sum(a):\n    return {body}\n")
    a = np.random.default_rng(terms).random((5, 6))
    got = sk.stencil(mod.long_sum, backend=backend)(a)
    acc = a[1 + offsets[0][0]:4 + offsets[0][0], 1 + offsets[0][1]:5 + offsets[0][1]]
    for i, j in offsets[1:]:  # left to right, as Python and Numba evaluate it
        acc = acc + a[1 + i:4 + i, 1 + j:5 + j]
    np.testing.assert_array_equal(got[1:-1, 1:-1], acc)


@pytest.mark.parametrize("count", [300, 1000])
def test_many_scalar_arguments(backend, tmp_path, count):
    if backend == "numba" and count > 300:
        pytest.skip("Numba's own compile time grows steeply with the argument count; numba "
                    "is checked with 300 scalar arguments")
    names = [f"s{i}" for i in range(count)]
    text = (f"def many(a, {', '.join(names)}):\n"
            f"    return a[0, 0] * {names[0]} + {' + '.join(names[1:])}\n")
    mod = _load_generated(tmp_path, f"many_{count}", text)
    values = [float(i) for i in range(count)]
    a = np.random.default_rng(count).random((3, 4))
    got = sk.stencil(mod.many, backend=backend)(a, *values)
    acc = a * values[0] + values[1]
    for v in values[2:]:
        acc = acc + v
    np.testing.assert_array_equal(got, acc)


def test_long_and_or_and_comparison_chains(backend, tmp_path):
    # 600 terms: built as a left-nested chain (as before the balanced trees), the frontend's
    # recursion already fails from ~500 terms (a StencilSyntaxError), and the printed
    # parentheses exceed Python's 200 nesting levels: the balanced trees are what lets 600
    # terms compile. (Measured with the chain builder swapped back; 1500 terms proved no
    # more and cost minutes of compile time on "numba" and "c".)
    n = 600
    chain = " and ".join(f"a[0, 0] > {-i}" for i in range(n))  # true iff a > 0
    alts = " or ".join(f"a[0, 0] == {i}" for i in range(n))  # true iff a in 0..n-1
    compare = " < ".join(["-1"] + [f"a[0, {j % 3 - 1}] + {i}" for i, j in
                                   enumerate(range(n))])
    text = (f"def deep_and(a):\n    return 1.0 if ({chain}) else 0.0\n\n"
            f"def deep_or(a):\n    return {alts}\n\n"
            f"def deep_compare(a):\n    return {compare}\n")
    mod = _load_generated(tmp_path, "deep_bool", text)
    # inner points on both sides of both chains' bounds: -2, -0.5, 0, 3, n - 1, n
    a = np.array([[9.0, 9.0, 9.0, 9.0, 9.0], [9.0, -2.0, -0.5, 0.0, 9.0],
                  [9.0, 3.0, n - 1.0, float(n), 9.0], [9.0, 9.0, 9.0, 9.0, 9.0]])
    inner = a[1:-1, 1:-1]
    got = sk.stencil(mod.deep_and, backend=backend)(a)
    np.testing.assert_array_equal(got[1:-1, 1:-1], (inner > 0).astype(float))
    got = sk.stencil(mod.deep_or, backend=backend)(a)
    np.testing.assert_array_equal(got[1:-1, 1:-1], np.isin(inner, np.arange(float(n))))
    b = np.arange(12.0).reshape(3, 4)  # rows increase by 1 per column: the chain holds
    got = sk.stencil(mod.deep_compare, backend=backend)(b)
    np.testing.assert_array_equal(got[1:-1, 1:-1], _compare_chain(b, n))


def _compare_chain(b: np.ndarray, n: int) -> np.ndarray:
    out = np.ones((1, 2), bool)
    prev = np.full((1, 2), -1.0)
    for i, j in enumerate(range(n)):
        cur = b[1:-1, 1 + j % 3 - 1:3 + j % 3 - 1] + i
        out &= prev < cur
        prev = cur
    return out


def test_too_deep_conditional_nesting_is_a_stencil_error(backend, tmp_path):
    nested = " ".join(f"{i}.0 if a[0, 0] > {i / 1000} else" for i in range(900)) + " 0.0"
    mod = _load_generated(tmp_path, "deep_if", f"def deep_if(a):\n    return {nested}\n")
    with pytest.raises(sk.StencilSyntaxError, match="nested too deeply") as info:
        sk.stencil(mod.deep_if, backend=backend)(np.ones((3, 3)))
    _named(info.value, "deep_if")


# ---------------------------------------------------------------- computations

from stencilkit import PARALLEL, Field, computation, interval  # noqa: E402


def shift_scale(a: Field[float], b: Field[float], s: float, n: int):
    with computation(PARALLEL), interval(...):
        b = a[1, 0, 0] * s + n  # noqa: F841 (a field write)


def with_temporary(a: Field[float], b: Field[float], s: float):
    with computation(PARALLEL), interval(...):
        tmp = a * s
        b = tmp[1, 0, 0] + tmp[-1, 0, 0] + tmp[0, 1, 0]  # noqa: F841


F = np.random.default_rng(2).random((7, 6, 5))


def _reference(a=F, s=2.0, n=1):
    b = np.zeros(a.shape)
    b[:-1] = a[1:] * s + n
    return b


def test_read_only_and_broadcast_input_fields_are_accepted(backend):
    st = sk.stencil(shift_scale, backend=backend)
    ro = F.copy()
    ro.flags.writeable = False
    b = np.zeros(F.shape)
    st(ro, b, 2.0, 1)
    np.testing.assert_array_equal(b, _reference())
    row = np.broadcast_to(F[:, :1, :], F.shape)  # zero strides, read-only
    b = np.zeros(F.shape)
    st(row, b, 2.0, 1)
    np.testing.assert_array_equal(b, _reference(np.array(row)))


@pytest.mark.parametrize("out", ["read-only", "broadcast"])
def test_read_only_output_field(backend, out):
    st = sk.stencil(shift_scale, backend=backend)
    if out == "read-only":
        b = np.zeros(F.shape)
        b.flags.writeable = False
    else:
        b = np.broadcast_to(np.zeros(F.shape[1:]), F.shape)
    with pytest.raises(sk.ArgumentError, match="read-only") as info:
        st(F, b, 2.0, 1)
    _named(info.value, "shift_scale")


@pytest.mark.parametrize("which", ["in", "out", "both"])
@pytest.mark.parametrize("make", ["misaligned", "odd-strides"])
def test_unaligned_and_odd_strided_fields_work(backend, which, make):
    def new():
        item = 8
        if make == "misaligned":
            return np.frombuffer(bytearray(F.nbytes + 1), np.uint8)[1:].view(
                np.float64).reshape(F.shape)
        nx, ny, nz = F.shape
        return np.ndarray(F.shape, np.float64, bytearray(F.size * (item + 4)), 0,
                          (ny * nz * (item + 4), nz * (item + 4), item + 4))

    a = new() if which in ("in", "both") else F.copy()
    a[...] = F
    b = new() if which in ("out", "both") else np.zeros(F.shape)
    b[...] = 0.0
    sk.stencil(shift_scale, backend=backend)(a, b, 2.0, 1)
    np.testing.assert_array_equal(b, _reference())


@pytest.mark.parametrize("s, n, match", [
    ("x", 1, "got a str"), (1j, 1, "complex"), (None, 1, "NoneType"), (1.0, 1.5, "float"),
    (1.0, 2**70, "range"), (1.0, -(2**63) - 1, "range"), (np.ones(3), 1, "ndarray"),
])
def test_bad_scalars(backend, s, n, match):
    with pytest.raises(sk.ArgumentError, match=match) as info:
        sk.stencil(shift_scale, backend=backend)(F, np.zeros(F.shape), s, n)
    _named(info.value, "shift_scale")


def test_good_scalars_of_other_kinds(backend):
    b = np.zeros(F.shape)
    sk.stencil(shift_scale, backend=backend)(F, b, np.float32(2.0), np.int8(1))
    np.testing.assert_array_equal(b, _reference())
    sk.stencil(shift_scale, backend=backend)(F, b, 2, True)
    np.testing.assert_array_equal(b, _reference())


@pytest.mark.parametrize("kwargs, match", [
    ({"domain": "abc"}, "domain"), ({"domain": (1, 2)}, "domain"),
    ({"domain": (-1, 2, 2)}, "negative"), ({"domain": (10**20, 2, 2)}, "range"),
    ({"domain": (1.5, 2, 2)}, "domain"), ({"origin": "abc"}, "origin"),
    ({"origin": (0, 0, 0, 0)}, "origin"), ({"origin": {"zz": (0, 0, 0)}}, "zz"),
    ({"origin": (-1, 0, 0)}, "halo"), ({"origin": 3}, "origin"),
    ({"exec_info": [1]}, "exec_info"), ({"exec_info": "x"}, "exec_info"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_call_options(backend, kwargs, match):
    with pytest.raises(sk.ArgumentError, match=match) as info:
        sk.stencil(shift_scale, backend=backend)(F, np.zeros(F.shape), 2.0, 1, **kwargs)
    _named(info.value, "shift_scale")


def test_validate_args_false_still_checks_halos(backend):
    st = sk.stencil(shift_scale, backend=backend)
    with pytest.raises(sk.ArgumentError, match="halo"):
        st(F, np.zeros(F.shape), 2.0, 1, origin=(0, 0, 0), domain=F.shape,
           validate_args=False)


def test_for_loop_in_a_definition_is_refused_when_defined():
    def looped(a: Field[float], b: Field[float]):
        with computation(PARALLEL), interval(...):
            for _i in range(3):
                b = a  # noqa: F841

    with pytest.raises(sk.StencilSyntaxError, match="for loops") as info:
        sk.stencil(looped)
    _named(info.value, "looped")


def test_numpy_computations_are_thread_safe():
    from concurrent.futures import ThreadPoolExecutor

    st = sk.stencil(with_temporary, backend="numpy")
    a = np.random.default_rng(3).random((64, 64, 32))
    scales = [float(i + 1) for i in range(8)]
    refs = []
    for s in scales:
        out = np.zeros(a.shape)
        st(a, out, s)
        refs.append(out)

    def run(i: int) -> bool:
        ok = True
        for _ in range(6):
            out = np.zeros(a.shape)
            st(a, out, scales[i])
            ok &= bool(np.array_equal(out, refs[i]))
        return ok

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(run, range(len(scales))))


@pytest.mark.parametrize("bad", [np.array(1.5), np.zeros((7, 6)), [[[1.0]]]])
def test_validate_args_false_still_checks_dimensions(backend, bad):
    # found by the fuzz test: a 0-d field gave a raw IndexError
    with pytest.raises(sk.ArgumentError) as info:
        sk.stencil(shift_scale, backend=backend)(bad, np.zeros(F.shape), 2.0, 1,
                                                 validate_args=False)
    _named(info.value, "shift_scale")


def test_misaligned_input_without_out_fills_the_border():
    # found by the fuzz test: the aligned retry kept the first attempt's uninitialised out
    a = np.frombuffer(bytearray(2 * 4 + 1), np.uint8)[1:].view(np.int32).reshape(2, 1)
    a[...] = 7
    np.testing.assert_array_equal(sk.stencil(_blur, backend="c")(a), np.zeros((2, 1)))
