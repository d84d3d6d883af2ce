"""Non-temporal stores of large point-kernel outputs on "c" (``StreamedRow``,
docs/performance.md): the rows of an output of at least ``STREAM_MIN_BYTES`` are computed
in chunks into a row buffer and streamed out. The values must be bit-identical to the
"numpy" backend's on both sides of the threshold, with unaligned chunks and rows, views
as ``out``, every dtype and every border mode. The threshold is lowered through
STENCILKIT_STREAM_MIN_BYTES so that small arrays take the streaming path.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.build import machine
from stencilkit.build.toolchain import find_compiler
from stencilkit.lower.point import STREAM_CHUNK

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C compiler")

MODES = ("constant", "nearest", "reflect", "mirror", "wrap")


def cross2(a):
    return a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1] - a[0, 0]


def cross3(a):
    return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]


def _data(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    t = np.dtype(dtype)
    if t.kind in "iu":
        return rng.integers(-100 if t.kind == "i" else 0, 100, shape).astype(t)
    if t.kind == "c":
        return (rng.random(shape) + 1j * rng.random(shape)).astype(t)
    return rng.random(shape).astype(t)


def _check(func, a: np.ndarray, out: np.ndarray, mode: str) -> None:
    """``out`` of the array's dtype (int8 sums are int64 in Numba's typing: the output's
    dtype converts them, as on "numpy")."""
    c = sk.stencil(func_or_mode=mode, backend="c")(func)
    ref = np.zeros(out.shape, out.dtype)  # the border of a given out is left as it is
    sk.stencil(func_or_mode=mode, backend="numpy")(func)(a, out=ref)
    out[...] = 0
    c(a, out=out)
    np.testing.assert_array_equal(out, ref, strict=True)
    # same bits (NaN payloads and signed zeros included)
    assert out.tobytes() == np.ascontiguousarray(ref).tobytes()


@pytest.mark.parametrize("dtype", ["int8", "int32", "float32", "float64", "complex128"])
@pytest.mark.parametrize("above", [False, True])
def test_threshold_both_sides(monkeypatch, dtype, above):
    a = _data((7, 2 * STREAM_CHUNK + 37), dtype)  # odd: chunks and rows start unaligned
    nbytes = a.size * a.dtype.itemsize
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", str(nbytes if above else nbytes + 1))
    _check(cross2, a, np.empty_like(a), "constant")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["int8", "float64"])
def test_border_modes_streamed(monkeypatch, mode, dtype):
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", "64")
    _check(cross2, _data((9, STREAM_CHUNK + 3), dtype), np.empty((9, STREAM_CHUNK + 3), dtype),
           mode)
    _check(cross3, _data((5, 6, 131), dtype), np.empty((5, 6, 131), dtype), mode)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float32", "float64", "complex128"])
def test_misaligned_and_strided_out(monkeypatch, dtype):
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", "64")
    a = _data((6, 1029), dtype)
    base = np.zeros(a.size + 1, dtype)
    _check(cross2, a, base[1:].reshape(a.shape), "constant")  # starts one element in
    wide = np.zeros((6, 2 * 1029), dtype)
    _check(cross2, a, wide[:, ::2], "constant")  # non-unit last stride: plain stores
    rows = np.zeros((6, 1029 + 5), dtype)
    _check(cross2, a, rows[:, 3:-2], "constant")  # rows padded: each row starts elsewhere


def _function(source: str) -> str:
    """The point kernel's own C function (not the prelude's helpers)."""
    start = re.search(r"^int sk_\w+_point\(", source, re.M)
    assert start is not None, source[:2000]
    return source[start.start():]


def test_generated_c_streams_large_outputs_only(monkeypatch):
    monkeypatch.delenv("STENCILKIT_STREAM_MIN_BYTES", raising=False)
    st = sk.stencil(cross2, backend="c")
    a = np.zeros((4, 4))
    fn = _function(st.generate(a, backend="c", out=np.zeros((4, 4))))
    # the streaming path runs when the output has STREAM_MIN_BYTES or more ...
    # (derived from this machine's last-level cache: build/machine.py)
    assert f"if (sk_work >= {machine.current().stream_min_bytes() // 8})" in fn
    assert "sk_stream_copy(" in fn and "sk_store_fence();" in fn
    # ... and the plain loop otherwise: the store to out is in the else branch
    # (through the row's base: lower/hoist_rows.py)
    assert re.search(r"} else \{.*\bout\[out_row \+ i1\] = ", fn, re.S)
    # a non-unit-stride output, a 1-D kernel, and OpenCL never stream
    strided = np.zeros((4, 8))[:, ::2]
    assert "sk_stream_copy(" not in _function(st.generate(a, backend="c", out=strided))
    one = sk.stencil(lambda a: a[-1] + a[1], backend="c")
    assert "sk_stream_copy(" not in _function(one.generate(np.zeros(8), backend="c",
                                                           out=np.zeros(8)))


def test_compiler_emits_streaming_stores(monkeypatch, tmp_path):
    """The kernel's C (without its CPython entry point), compiled as the toolchain does,
    has non-temporal stores (where objdump and x86-64 exist)."""
    import platform
    import shutil
    import subprocess

    if platform.machine() not in ("x86_64", "AMD64") or shutil.which("objdump") is None:
        pytest.skip("objdump on x86-64 needed to read the compiled code")
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", "64")
    st = sk.stencil(cross2, backend="c")
    a = np.zeros((4, 300))
    source = st.generate(a, backend="c", out=np.zeros_like(a))
    assert "if (sk_work >= 8)" in _function(source)  # the threshold is in the source
    c_file = tmp_path / "k.c"
    c_file.write_text(source.split("#define PY_SSIZE_T_CLEAN")[0])
    obj = tmp_path / "k.o"
    subprocess.run([*find_compiler().split(), "-O2", "-fopenmp", "-c", str(c_file), "-o",
                    str(obj)], check=True, capture_output=True)
    text = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True).stdout
    assert re.search(r"\bv?movnt(dq|pd|ps)\b", text)
    assert "sfence" in text
