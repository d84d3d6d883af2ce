"""Distances in units in the last place, and the documented bounds of the GPU's math
functions (docs/numerics.md).

Arithmetic and correctly rounded operations are bit-identical on every backend (0 ulps);
transcendental functions on "cuda" come from libdevice. ``CUDA_MAX_ULPS`` is the maximum
error of each libdevice function against the correctly rounded result, from the CUDA C++
Programming Guide's "Mathematical Functions" appendix (CUDA 12; NVIDIA's bounds come from
extensive but not exhaustive tests). The CPU's result has an error of its own, so a GPU
result is within ``gpu_bound(func, dtype)`` ulps of NumPy's: libdevice's bound plus
``CPU_SLACK``.
"""

from __future__ import annotations

import numpy as np

#: func -> (double, float) maximum ulp error of libdevice (full range unless stated)
CUDA_MAX_ULPS: dict[str, tuple[int, int]] = {
    "sqrt": (0, 0),  # IEEE (NVRTC's default --prec-sqrt=true, kept explicitly)
    "cbrt": (1, 1), "hypot": (2, 3),
    "exp": (1, 2), "exp2": (1, 2), "expm1": (1, 1),
    "log": (1, 1), "log2": (1, 1), "log10": (1, 2), "log1p": (1, 1),
    "sin": (2, 2), "cos": (2, 2), "tan": (2, 4),
    "arcsin": (2, 2), "arccos": (2, 2), "arctan": (2, 2), "arctan2": (2, 3),
    "sinh": (2, 3), "cosh": (1, 2), "tanh": (1, 2),
    "arcsinh": (3, 3), "arccosh": (3, 4), "arctanh": (2, 3),
    "power": (2, 4),
}
#: what the CPU's own result may be off by (glibc's and NumPy's SIMD loops for these
#: functions are within 1-2 ulps of the correctly rounded result, NumPy's float32 AVX-512
#: paths included)
CPU_SLACK = 2


def gpu_bound(func: str, dtype: np.dtype) -> int:
    double, single = CUDA_MAX_ULPS[func]
    return (double if np.dtype(dtype) == np.float64 else single) + CPU_SLACK


def _ordered(x: np.ndarray) -> np.ndarray:
    """The floats' bit patterns as integers that order like the floats (-0.0 == +0.0)."""
    x = np.asarray(x)
    itype = {4: np.int32, 8: np.int64}[x.dtype.itemsize]
    bits = x.view(itype).astype(np.int64)
    top = np.int64(np.iinfo(itype).min)
    return np.where(bits < 0, top - bits, bits)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable numbers lie between ``a`` and ``b`` (same dtype), elementwise:
    0 where they are equal (±0 and NaN with NaN included), 2**62 where only one is NaN."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.dtype.kind == "f", (a.dtype, b.dtype)
    d = np.abs(_ordered(a) - _ordered(b))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    d = np.where(nan_a & nan_b, 0, d)
    return np.where(nan_a ^ nan_b, np.int64(2**62), d)
