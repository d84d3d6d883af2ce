"""STREAM copy and triad, measured in the same run as the cases by a C kernel built with the
"c" backend's compiler and flags: the bandwidth the cases' GB/s are read against."""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ._internals import c_compiler
from .timing import median_times

_STREAM_C = r"""
#include <stdint.h>
void copy(double *restrict c, const double *restrict a, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) c[i] = a[i];
}
void triad(double *restrict a, const double *restrict b, const double *restrict c,
           double s, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""



def stream(n: int, repeats: int) -> dict[str, float]:
    """STREAM copy and triad bandwidth in GB/s (copy counts 16 bytes/element, triad 24)."""
    cc, flags = c_compiler()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "stream.c"
        src.write_text(_STREAM_C)
        lib = Path(tmp) / "stream.so"
        subprocess.run([cc, *flags, str(src), "-o", str(lib)], check=True)
        dll = ctypes.CDLL(str(lib))
    a, b, c = np.ones(n), np.ones(n), np.empty(n)
    pa, pb, pc = (x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, c))
    dll.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    dll.triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double, ctypes.c_int64]
    t = median_times({"copy": lambda: dll.copy(pc, pa, n),
                       "triad": lambda: dll.triad(pa, pb, pc, 3.0, n)}, repeats)
    return {"copy": 16 * n / t["copy"] / 1e9, "triad": 24 * n / t["triad"] / 1e9}

