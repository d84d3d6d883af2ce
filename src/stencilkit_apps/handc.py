"""Hand-written C peers of ``stencilkit bench``'s cases, built with our toolchain and flags
and called through ctypes in the same process as everything else they are timed against.

Each is the loop a C programmer would write for the case: OpenMP over the outermost index,
the innermost index contiguous; hdiff fused into one loop nest; the tridiagonal solve on
C-ordered arrays (K contiguous) as one Thomas recurrence per column and, faster, per block of
8 columns copied into level-major buffers (the block's 8 recurrences then run as vector
operations), and as K-outer sweeps over IJ planes (rows of J contiguous) on K-outermost
storages. Each ``GCC ivdep`` has clang's ``assume_safety`` beside it, as a programmer
writing for both compilers would: inside an OpenMP region clang proves nothing about the
restrict-qualified arrays (``targets.c.CPlatform.vector_loop``).
"""

from __future__ import annotations

import ctypes
import functools
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ._internals import c_compiler

_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#define IDX3(i, j, k) ((i) * s0 + (j) * s1 + (k))

void jacobi2d(const double *restrict a, double *restrict out, int64_t n0, int64_t n1) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 1; i < n0 - 1; ++i)
        for (int64_t j = 1; j < n1 - 1; ++j)
            out[i * n1 + j] = 0.25 * (a[(i - 1) * n1 + j] + a[(i + 1) * n1 + j]
                                      + a[i * n1 + j - 1] + a[i * n1 + j + 1]);
}

void lap3d(const double *restrict a, double *restrict out, int64_t n0, int64_t n1, int64_t n2) {
    const int64_t s0 = n1 * n2, s1 = n2;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 1; i < n0 - 1; ++i)
        for (int64_t j = 1; j < n1 - 1; ++j)
            for (int64_t k = 1; k < n2 - 1; ++k)
                out[IDX3(i, j, k)] = a[IDX3(i - 1, j, k)] + a[IDX3(i + 1, j, k)]
                    + a[IDX3(i, j - 1, k)] + a[IDX3(i, j + 1, k)] + a[IDX3(i, j, k - 1)]
                    + a[IDX3(i, j, k + 1)] - 6.0 * a[IDX3(i, j, k)];
}

void hdiff(const double *restrict in, const double *restrict coeff, double *restrict out,
           int64_t ni, int64_t nj, int64_t nk) {
    const int64_t s0 = nj * nk, s1 = nk;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 2; i < ni - 2; ++i)
        for (int64_t j = 2; j < nj - 2; ++j)
            #pragma GCC ivdep
            #pragma clang loop vectorize(assume_safety)
            for (int64_t k = 0; k < nk; ++k) {
#define LAP(p, q) (4.0 * in[IDX3(p, q, k)] - (in[IDX3(p + 1, q, k)] + in[IDX3(p - 1, q, k)] \
                   + in[IDX3(p, q + 1, k)] + in[IDX3(p, q - 1, k)]))
                double c = in[IDX3(i, j, k)];
                double lc = LAP(i, j), le = LAP(i + 1, j), lw = LAP(i - 1, j);
                double ln = LAP(i, j + 1), ls = LAP(i, j - 1);
                double r = le - lc;
                double fxc = r * (in[IDX3(i + 1, j, k)] - c) > 0 ? 0.0 : r;
                r = lc - lw;
                double fxw = r * (c - in[IDX3(i - 1, j, k)]) > 0 ? 0.0 : r;
                r = ln - lc;
                double fyc = r * (in[IDX3(i, j + 1, k)] - c) > 0 ? 0.0 : r;
                r = lc - ls;
                double fys = r * (c - in[IDX3(i, j - 1, k)]) > 0 ? 0.0 : r;
                out[IDX3(i, j, k)] = c - coeff[IDX3(i, j, k)] * (fxc - fxw + fyc - fys);
#undef LAP
            }
}

/* Thomas solve along k; element (i, j, k) at i * si + j * sj + k * sk. */
void tridiag_columns(const double *restrict a, const double *restrict b, double *restrict c,
                     double *restrict d, int64_t ni, int64_t nj, int64_t nk) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < ni; ++i)
        for (int64_t j = 0; j < nj; ++j) {
            const int64_t o = (i * nj + j) * nk;
            c[o] /= b[o];
            d[o] /= b[o];
            for (int64_t k = 1; k < nk; ++k) {
                double m = 1.0 / (b[o + k] - a[o + k] * c[o + k - 1]);
                c[o + k] *= m;
                d[o + k] = (d[o + k] - a[o + k] * d[o + k - 1]) * m;
            }
            for (int64_t k = nk - 2; k >= 0; --k) d[o + k] -= c[o + k] * d[o + k + 1];
        }
}

/* Blocks of TB columns: copied (contiguous reads) into level-major buffers of L1 size, the
 * sweeps run over the block's columns as vectors, c and d copied back. Measured against
 * jamming the block's columns under K on the arrays themselves (strided, not vectorized:
 * 1.2-1.3x), a K-outer sweep over each I's row of J (1.5x), blocks of 16 (1.1x), and
 * forward sweeps reading the columns in place (1.3x). */
#define TB 8
/* The w (<= TB) columns from o0 of a, b, c, d, each nk long, into level-major buffers. */
static inline void block_in(const double *restrict a, const double *restrict b,
                            const double *restrict c, const double *restrict d,
                            double *restrict ta, double *restrict tb, double *restrict tc,
                            double *restrict td, int64_t o0, int64_t w, int64_t nk) {
    for (int64_t j = 0; j < w; ++j)
        for (int64_t k = 0; k < nk; ++k) {
            ta[k * TB + j] = a[o0 + j * nk + k];
            tb[k * TB + j] = b[o0 + j * nk + k];
            tc[k * TB + j] = c[o0 + j * nk + k];
            td[k * TB + j] = d[o0 + j * nk + k];
        }
}

void tridiag_blocks(const double *restrict a, const double *restrict b, double *restrict c,
                    double *restrict d, int64_t ni, int64_t nj, int64_t nk) {
    #pragma omp parallel
    {
    double *buf = __builtin_alloca(sizeof(double) * 4 * TB * nk);
    double *ta = buf, *tb = buf + TB * nk, *tc = buf + 2 * TB * nk, *td = buf + 3 * TB * nk;
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < ni; ++i)
        for (int64_t jb = 0; jb < nj; jb += TB) {
            const int64_t w = jb + TB <= nj ? TB : nj - jb, o0 = (i * nj + jb) * nk;
            block_in(a, b, c, d, ta, tb, tc, td, o0, w, nk);
            for (int64_t j = 0; j < w; ++j) {
                tc[j] /= tb[j];
                td[j] /= tb[j];
            }
            for (int64_t k = 1; k < nk; ++k)
                #pragma GCC ivdep
                #pragma clang loop vectorize(assume_safety)
                for (int64_t j = 0; j < w; ++j) {
                    double m = 1.0 / (tb[k * TB + j] - ta[k * TB + j] * tc[(k - 1) * TB + j]);
                    tc[k * TB + j] *= m;
                    td[k * TB + j] = (td[k * TB + j] - ta[k * TB + j] * td[(k - 1) * TB + j]) * m;
                }
            for (int64_t k = nk - 2; k >= 0; --k)
                #pragma GCC ivdep
                #pragma clang loop vectorize(assume_safety)
                for (int64_t j = 0; j < w; ++j)
                    td[k * TB + j] -= tc[k * TB + j] * td[(k + 1) * TB + j];
            for (int64_t j = 0; j < w; ++j)
                for (int64_t k = 0; k < nk; ++k) {
                    c[o0 + j * nk + k] = tc[k * TB + j];
                    d[o0 + j * nk + k] = td[k * TB + j];
                }
        }
    }
}

/* GT4Py's spelling (a, b, c, d unchanged; cp and dp temporaries; the solution in x), as a
 * good C programmer writes it for C-ordered arrays: tridiag_blocks' scheme, with cp, dp and x
 * in the block's level-major buffers and only x copied back. */
void tridiag_x_blocks(const double *restrict a, const double *restrict b,
                      const double *restrict c, const double *restrict d, double *restrict x,
                      int64_t ni, int64_t nj, int64_t nk) {
    #pragma omp parallel
    {
    double *buf = malloc(sizeof(double) * 7 * TB * nk);
    double *ta = buf, *tb = ta + TB * nk, *tc = tb + TB * nk, *td = tc + TB * nk;
    double *cp = td + TB * nk, *dp = cp + TB * nk, *tx = dp + TB * nk;
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < ni; ++i)
        for (int64_t jb = 0; jb < nj; jb += TB) {
            const int64_t w = jb + TB <= nj ? TB : nj - jb, o0 = (i * nj + jb) * nk;
            block_in(a, b, c, d, ta, tb, tc, td, o0, w, nk);
            for (int64_t j = 0; j < w; ++j) {
                cp[j] = tc[j] / tb[j];
                dp[j] = td[j] / tb[j];
            }
            for (int64_t k = 1; k < nk; ++k)
                #pragma GCC ivdep
                #pragma clang loop vectorize(assume_safety)
                for (int64_t j = 0; j < w; ++j) {
                    double m = 1.0 / (tb[k * TB + j] - ta[k * TB + j] * cp[(k - 1) * TB + j]);
                    cp[k * TB + j] = tc[k * TB + j] * m;
                    dp[k * TB + j] = (td[k * TB + j] - ta[k * TB + j] * dp[(k - 1) * TB + j]) * m;
                }
            for (int64_t j = 0; j < w; ++j) tx[(nk - 1) * TB + j] = dp[(nk - 1) * TB + j];
            for (int64_t k = nk - 2; k >= 0; --k)
                #pragma GCC ivdep
                #pragma clang loop vectorize(assume_safety)
                for (int64_t j = 0; j < w; ++j)
                    tx[k * TB + j] = dp[k * TB + j] - cp[k * TB + j] * tx[(k + 1) * TB + j];
            for (int64_t j = 0; j < w; ++j)
                for (int64_t k = 0; k < nk; ++k) x[o0 + j * nk + k] = tx[k * TB + j];
        }
    free(buf);
    }
}

/* GT4Py's spelling where J has unit stride and K is outermost (the peer-bench's "kij"): each
 * thread sweeps K over its own rows of J, cp and dp in per-thread row buffers. */
void tridiag_x_planes(const double *restrict a, const double *restrict b,
                      const double *restrict c, const double *restrict d, double *restrict x,
                      int64_t ni, int64_t nj, int64_t nk, int64_t si, int64_t sk) {
    #pragma omp parallel
    {
    double *cp = malloc(sizeof(double) * 2 * nj * nk), *dp = cp + nj * nk;
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < ni; ++i) {
        const int64_t r = i * si;
        #pragma GCC ivdep
        #pragma clang loop vectorize(assume_safety)
        for (int64_t j = 0; j < nj; ++j) {
            cp[j] = c[r + j] / b[r + j];
            dp[j] = d[r + j] / b[r + j];
        }
        for (int64_t k = 1; k < nk; ++k) {
            const int64_t o = r + k * sk;
            double *cpk = cp + k * nj, *dpk = dp + k * nj;
            #pragma GCC ivdep
            #pragma clang loop vectorize(assume_safety)
            for (int64_t j = 0; j < nj; ++j) {
                double m = 1.0 / (b[o + j] - a[o + j] * cpk[j - nj]);
                cpk[j] = c[o + j] * m;
                dpk[j] = (d[o + j] - a[o + j] * dpk[j - nj]) * m;
            }
        }
        #pragma GCC ivdep
        #pragma clang loop vectorize(assume_safety)
        for (int64_t j = 0; j < nj; ++j)
            x[r + (nk - 1) * sk + j] = dp[(nk - 1) * nj + j];
        for (int64_t k = nk - 2; k >= 0; --k) {
            const int64_t o = r + k * sk;
            #pragma GCC ivdep
            #pragma clang loop vectorize(assume_safety)
            for (int64_t j = 0; j < nj; ++j)
                x[o + j] = dp[k * nj + j] - cp[k * nj + j] * x[o + sk + j];
        }
    }
    free(cp);
    }
}

void tridiag_planes(const double *restrict a, const double *restrict b, double *restrict c,
                    double *restrict d, int64_t ni, int64_t nj, int64_t nk,
                    int64_t si, int64_t sk) {
    /* rows of j contiguous (unit stride), each thread sweeps k over its own rows */
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < ni; ++i) {
        const int64_t r = i * si;
        for (int64_t j = 0; j < nj; ++j) {
            c[r + j] /= b[r + j];
            d[r + j] /= b[r + j];
        }
        for (int64_t k = 1; k < nk; ++k) {
            const int64_t o = r + k * sk, p = o - sk;
            #pragma GCC ivdep
            #pragma clang loop vectorize(assume_safety)
            for (int64_t j = 0; j < nj; ++j) {
                double m = 1.0 / (b[o + j] - a[o + j] * c[p + j]);
                c[o + j] *= m;
                d[o + j] = (d[o + j] - a[o + j] * d[p + j]) * m;
            }
        }
        for (int64_t k = nk - 2; k >= 0; --k) {
            const int64_t o = r + k * sk, q = o + sk;
            #pragma GCC ivdep
            #pragma clang loop vectorize(assume_safety)
            for (int64_t j = 0; j < nj; ++j) d[o + j] -= c[o + j] * d[q + j];
        }
    }
}
"""


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The peers, compiled once per process with the toolchain our "c" backend uses."""
    cc, flags = c_compiler()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "handc.c"
        src.write_text(_SOURCE)
        lib = Path(tmp) / "handc.so"
        subprocess.run([cc, *flags, str(src), "-o", str(lib)], check=True)
        return ctypes.CDLL(str(lib))


def _ptr(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)


def _ints(*v: int) -> list[ctypes.c_int64]:
    return [ctypes.c_int64(int(n)) for n in v]


def jacobi2d(a: np.ndarray, out: np.ndarray) -> Callable[[], object]:
    f, args = library().jacobi2d, [_ptr(a), _ptr(out), *_ints(*a.shape)]
    return lambda: f(*args)


def lap3d(a: np.ndarray, out: np.ndarray) -> Callable[[], object]:
    f, args = library().lap3d, [_ptr(a), _ptr(out), *_ints(*a.shape)]
    return lambda: f(*args)


def hdiff(inp: np.ndarray, coeff: np.ndarray, out: np.ndarray) -> Callable[[], object]:
    f, args = library().hdiff, [_ptr(inp), _ptr(coeff), _ptr(out), *_ints(*inp.shape)]
    return lambda: f(*args)


def tridiag(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray, *,
            columns: bool = False) -> Callable[[], object]:
    """Blocks of columns through level-major buffers (or, with ``columns``, one column at a
    time) on C-ordered arrays, K-outer plane sweeps where J has unit stride and K is
    outermost (``sk.zeros`` storages); the four arrays share one layout."""
    ni, nj, nk = a.shape
    item = a.itemsize
    ptrs = [_ptr(x) for x in (a, b, c, d)]
    if a.flags.c_contiguous:
        f = library().tridiag_columns if columns else library().tridiag_blocks
        args = [*ptrs, *_ints(ni, nj, nk)]
    elif a.strides[1] == item and a.strides[2] >= a.strides[0] * ni:
        f, args = library().tridiag_planes, [*ptrs, *_ints(ni, nj, nk, a.strides[0] // item,
                                                           a.strides[2] // item)]
    else:
        raise ValueError(f"no hand-written tridiagonal solve for strides {a.strides}")
    return lambda: f(*args)


def tridiag_x(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray,
              x: np.ndarray) -> Callable[[], object]:
    """GT4Py's spelling (cp/dp temporaries, output ``x``; the inputs unchanged): blocks of
    columns on C-ordered arrays, K-outer sweeps over per-thread row buffers where J has unit
    stride and K is outermost; the five arrays share one layout."""
    ni, nj, nk = a.shape
    item = a.itemsize
    ptrs = [_ptr(v) for v in (a, b, c, d, x)]
    if a.flags.c_contiguous:
        f, args = library().tridiag_x_blocks, [*ptrs, *_ints(ni, nj, nk)]
    elif a.strides[1] == item and a.strides[2] >= a.strides[0] * ni:
        f, args = library().tridiag_x_planes, [*ptrs, *_ints(ni, nj, nk, a.strides[0] // item,
                                                             a.strides[2] // item)]
    else:
        raise ValueError(f"no hand-written tridiagonal solve for strides {a.strides}")
    return lambda: f(*args)
