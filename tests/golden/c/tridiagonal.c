#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#include <complex.h>
#ifndef CMPLX
#define CMPLX(x, y) __builtin_complex((double)(x), (double)(y))
#endif
#ifndef CMPLXF
#define CMPLXF(x, y) __builtin_complex((float)(x), (float)(y))
#endif

#define SK_SIGNED(T) ((T)-1 < (T)0)
static inline int64_t sk_checked_offset(int64_t x, int64_t lo, int64_t hi, int *err) {
    if (x < lo || x > hi) {  /* outside the declared neighbourhood */
        #pragma omp atomic write
        *err = 1;
        return 0;
    }
    return x;
}
static inline int64_t sk_wrap_index(int64_t x, int64_t n, int *err) {
    if (x < 0) x += n;
    if (x < 0 || x >= n) {
        #pragma omp atomic write
        *err = 2;
        return 0;
    }
    return x;
}

#ifdef _OPENMP
#include <omp.h>
#include <stdlib.h>
/* The team of every parallel region: OMP_NUM_THREADS's first entry, else the CPUs this
 * process may run on (OpenMP's own default), read once; 1 inside a caller's parallel region.
 * Not omp_get_max_threads(): Numba's OpenMP threading layer calls
 * omp_set_num_threads(NUMBA_NUM_THREADS) in the libgomp it shares with us and enables
 * nesting, so after a Numba parallel call that would ignore OMP_NUM_THREADS and a call from
 * inside a parallel region would start a nested team. */
static int sk_team_threads;
/* sk.set_num_threads's process-wide count (runtime/threads.py), found by PyInit; 0: unset */
static int *sk_team_cell;
static inline int sk_team_size(void) {
    if (omp_in_parallel()) return 1;
    if (sk_team_cell != NULL) {
        int set = __atomic_load_n(sk_team_cell, __ATOMIC_RELAXED);
        if (set > 0) return set;
    }
    int n = __atomic_load_n(&sk_team_threads, __ATOMIC_RELAXED);
    if (n <= 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        long v = env ? strtol(env, NULL, 10) : 0;
        n = v > 0 ? (int)v : omp_get_num_procs();
        __atomic_store_n(&sk_team_threads, n, __ATOMIC_RELAXED);
    }
    return n;
}
#endif

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
/* Wide streaming stores through GCC's builtins, not <immintrin.h>: that header costs GCC
 * 0.16 s of every compile, a third of a small kernel's. Other compilers get the header. */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__AVX512F__) || defined(__AVX__))
typedef long long sk_line_t __attribute__((vector_size(64), aligned(1)));  /* unaligned */
typedef long long sk_line_a __attribute__((vector_size(64)));  /* on a line boundary */
typedef long long sk_half_t __attribute__((vector_size(32), aligned(1)));
typedef long long sk_half_a __attribute__((vector_size(32)));
#ifdef __AVX512F__
#define SK_STREAM_LINE(d, s) __builtin_ia32_movntdq512((sk_line_a *)(d), *(const sk_line_t *)(s))
#else
#define SK_STREAM_LINE(d, s) do { \
        __builtin_ia32_movntdq256((sk_half_a *)(d), *(const sk_half_t *)(s)); \
        __builtin_ia32_movntdq256((sk_half_a *)((d) + 32), *(const sk_half_t *)((s) + 32)); \
    } while (0)
#endif
#elif defined(__AVX512F__)
#include <immintrin.h>
#define SK_STREAM_LINE(d, s) _mm512_stream_si512((void *)(d), _mm512_loadu_si512((const void *)(s)))
#elif defined(__AVX__)
#include <immintrin.h>
#define SK_STREAM_LINE(d, s) do { \
        _mm256_stream_si256((__m256i *)(d), _mm256_loadu_si256((const __m256i *)(s))); \
        _mm256_stream_si256((__m256i *)((d) + 32), \
                            _mm256_loadu_si256((const __m256i *)((s) + 32))); \
    } while (0)
#elif defined(__SSE2__)
#define SK_STREAM_LINE(d, s) do { \
        for (int sk_q = 0; sk_q < 64; sk_q += 16) \
            _mm_stream_si128((__m128i *)((d) + sk_q), \
                             _mm_loadu_si128((const __m128i *)((s) + sk_q))); \
    } while (0)
#else
#define SK_STREAM_LINE(d, s) memcpy((d), (s), 64)
#endif
/* Whole 64-byte lines only (``dst`` on a line boundary, ``n`` a multiple of 64): a line
 * written partly by streaming stores and partly by plain ones leaves the write-combining
 * buffer early and costs a read-modify-write in memory (jacobi2d measured 1.4-1.8x slower
 * so), and the row's partial lines are the loop's own, with plain stores. One store per line
 * where the CPU has 64-byte vectors: a 16-byte ``movntdq`` per quarter line measured 1.07x
 * the plain loop on lap3d 256^3, a 64-byte one 1.13x (docs/performance.md). */
static inline void sk_stream_copy(void *restrict dst_, const void *restrict src_, int64_t n) {
    char *dst = (char *)dst_;
    const char *src = (const char *)src_;
    for (; n >= 64; n -= 64, dst += 64, src += 64)
        SK_STREAM_LINE(dst, src);
}
/* The first index at or after ``start`` (``p`` = its address) on a 64-byte line boundary of
 * the output, at most ``stop``. Item sizes divide 64 and items are aligned (the entry
 * refuses others). */
static inline int64_t sk_stream_first(const void *p, int64_t start, int64_t stop,
                                      int64_t size) {
    int64_t first = start + (int64_t)(((64 - ((uintptr_t)p & 63)) & 63) / (uintptr_t)size);
    return first < stop ? first : stop;
}
/* The end of the whole lines from ``first`` (on a boundary) towards ``stop``. */
static inline int64_t sk_stream_last(int64_t first, int64_t stop, int64_t size) {
    int64_t per_line = 64 / size;
    return first + (stop - first) / per_line * per_line;
}
/* The end of the chunk starting at ``start``: chunks hold whole lines (``chunk`` items are
 * a multiple of 64 bytes for every item size). */
static inline int64_t sk_stream_chunk_end(int64_t start, int64_t stop, int64_t chunk) {
    return stop - start <= chunk ? stop : start + chunk;
}
static inline void sk_store_fence(void) {
#ifdef __SSE2__
    _mm_sfence();  /* streaming stores are weakly ordered: before the thread's barrier */
#endif
}

#include <stdlib.h>
static inline void sk_free_local(void *p) { free(*(void **)p); }

static inline int64_t sk_max_int64(int64_t a, int64_t b) { return (b > a) ? b : a; }
static inline int64_t sk_min_int64(int64_t a, int64_t b) { return (b < a) ? b : a; }
/* computation 'tridiagonal'
 *
 * Calling convention (all strides in elements):
 *   a_               pointer to element [0, ...] of array 'a'
 *   a_stride_0_      stride of array 'a' in dimension 0
 *   a_stride_1_      stride of array 'a' in dimension 1
 *   b_               pointer to element [0, ...] of array 'b'
 *   b_stride_0_      stride of array 'b' in dimension 0
 *   b_stride_1_      stride of array 'b' in dimension 1
 *   c_               pointer to element [0, ...] of array 'c'
 *   c_stride_0_      stride of array 'c' in dimension 0
 *   c_stride_1_      stride of array 'c' in dimension 1
 *   d_               pointer to element [0, ...] of array 'd'
 *   d_stride_0_      stride of array 'd' in dimension 0
 *   d_stride_1_      stride of array 'd' in dimension 1
 *   a_origin_I_      origin of field 'a' along I
 *   a_origin_J_      origin of field 'a' along J
 *   a_origin_K_      origin of field 'a' along K
 *   b_origin_I_      origin of field 'b' along I
 *   b_origin_J_      origin of field 'b' along J
 *   b_origin_K_      origin of field 'b' along K
 *   c_origin_I_      origin of field 'c' along I
 *   c_origin_J_      origin of field 'c' along J
 *   c_origin_K_      origin of field 'c' along K
 *   d_origin_I_      origin of field 'd' along I
 *   d_origin_J_      origin of field 'd' along J
 *   d_origin_K_      origin of field 'd' along K
 *   ni               extent of the domain along I
 *   nj               extent of the domain along J
 *   nk               extent of the domain along K
 * Strides of the last dimension that are not parameters are 1.
 * Returns a status (3 only from the Python entry point):
 *   0: success
 *   1: a run-time relative index left the neighbourhood (clamped)
 *   2: an absolute index was out of range (the element read as 0)
 *   4: a range() step was 0 (the loop did not run)
 *   8: a local array too large for the stack could not be allocated (the work was skipped)
 *   3: the output overlaps an input (the CPython entry's, before running: the caller copies and calls again) */
int sk_tridiagonal_computation(double *restrict a_, int64_t a_stride_0_, int64_t a_stride_1_, double *restrict b_, int64_t b_stride_0_, int64_t b_stride_1_, double *restrict c_, int64_t c_stride_0_, int64_t c_stride_1_, double *restrict d_, int64_t d_stride_0_, int64_t d_stride_1_, int64_t a_origin_I_, int64_t a_origin_J_, int64_t a_origin_K_, int64_t b_origin_I_, int64_t b_origin_J_, int64_t b_origin_K_, int64_t c_origin_I_, int64_t c_origin_J_, int64_t c_origin_K_, int64_t d_origin_I_, int64_t d_origin_J_, int64_t d_origin_K_, int64_t ni, int64_t nj, int64_t nk)
{
    int sk_error = 0;
    /* --- multistage 0: FORWARD; multistage 1: BACKWARD, by columns --- */
    #pragma omp parallel for schedule(static) if(ni * nj * nk >= 16384) num_threads(sk_team_size())
    for (int64_t i = 0; i < ni; ++i) {
        for (int64_t jb = 0; jb < nj; jb += 8) {
            int64_t a_lo = 0;
            int64_t a_hi = nk;
            const int64_t sk_a_column__size = 8 * (a_hi - a_lo);
            double sk_a_column__stack[sk_a_column__size > 0 && sk_a_column__size <= 2048 ? sk_a_column__size : 1];
            double *sk_a_column__heap __attribute__((cleanup(sk_free_local))) = sk_a_column__size > 2048 ? (double *)malloc((size_t)sk_a_column__size * sizeof(double)) : NULL;
            double *a_column_ = sk_a_column__size > 2048 ? sk_a_column__heap : sk_a_column__stack;
            const int64_t sk_b_column__size = 8 * (a_hi - a_lo);
            double sk_b_column__stack[sk_b_column__size > 0 && sk_b_column__size <= 2048 ? sk_b_column__size : 1];
            double *sk_b_column__heap __attribute__((cleanup(sk_free_local))) = sk_b_column__size > 2048 ? (double *)malloc((size_t)sk_b_column__size * sizeof(double)) : NULL;
            double *b_column_ = sk_b_column__size > 2048 ? sk_b_column__heap : sk_b_column__stack;
            const int64_t sk_c_column__size = 8 * (a_hi - a_lo);
            double sk_c_column__stack[sk_c_column__size > 0 && sk_c_column__size <= 2048 ? sk_c_column__size : 1];
            double *sk_c_column__heap __attribute__((cleanup(sk_free_local))) = sk_c_column__size > 2048 ? (double *)malloc((size_t)sk_c_column__size * sizeof(double)) : NULL;
            double *c_column_ = sk_c_column__size > 2048 ? sk_c_column__heap : sk_c_column__stack;
            const int64_t sk_d_column__size = 8 * (a_hi - a_lo);
            double sk_d_column__stack[sk_d_column__size > 0 && sk_d_column__size <= 2048 ? sk_d_column__size : 1];
            double *sk_d_column__heap __attribute__((cleanup(sk_free_local))) = sk_d_column__size > 2048 ? (double *)malloc((size_t)sk_d_column__size * sizeof(double)) : NULL;
            double *d_column_ = sk_d_column__size > 2048 ? sk_d_column__heap : sk_d_column__stack;
            if (a_column_ != NULL && b_column_ != NULL && c_column_ != NULL && d_column_ != NULL) {
                for (int64_t j = jb; j < sk_min_int64(jb + 8, nj); ++j) {
                    int64_t a_row = (a_origin_I_ + i) * a_stride_0_ + (a_origin_J_ + j) * a_stride_1_ + a_origin_K_;
                    int64_t b_row = (b_origin_I_ + i) * b_stride_0_ + (b_origin_J_ + j) * b_stride_1_ + b_origin_K_;
                    int64_t c_row = (c_origin_I_ + i) * c_stride_0_ + (c_origin_J_ + j) * c_stride_1_ + c_origin_K_;
                    int64_t d_row = (d_origin_I_ + i) * d_stride_0_ + (d_origin_J_ + j) * d_stride_1_ + d_origin_K_;
                    for (int64_t k = a_lo; k < a_hi; ++k) {
                        a_column_[j - jb + (k - a_lo) * 8] = a_[a_row + k];
                        b_column_[j - jb + (k - a_lo) * 8] = b_[b_row + k];
                        c_column_[j - jb + (k - a_lo) * 8] = c_[c_row + k];
                        d_column_[j - jb + (k - a_lo) * 8] = d_[d_row + k];
                    }
                }
                for (int64_t k = 0; k < sk_max_int64(0, sk_min_int64(nk, 1)); ++k) {
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t j = jb; j < sk_min_int64(jb + 8, nj); ++j) {
                        /* corpus.py:47  c = c / b */
                        c_column_[j - jb + (k - a_lo) * 8] /= b_column_[j - jb + (k - a_lo) * 8];
                        /* corpus.py:48  d = d / b */
                        d_column_[j - jb + (k - a_lo) * 8] /= b_column_[j - jb + (k - a_lo) * 8];
                    }
                }
                for (int64_t k = sk_max_int64(0, sk_min_int64(nk, 1)); k < sk_max_int64(0, nk); ++k) {
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t j = jb; j < sk_min_int64(jb + 8, nj); ++j) {
                        /* corpus.py:50  m = 1.0 / (b - a * c[0, 0, -1]) */
                        double m_ = 1.0 / (b_column_[j - jb + (k - a_lo) * 8] - a_column_[j - jb + (k - a_lo) * 8] * c_column_[j - jb + (k - 1 - a_lo) * 8]);
                        /* corpus.py:51  c = c * m */
                        c_column_[j - jb + (k - a_lo) * 8] *= m_;
                        /* corpus.py:52  d = (d - a * d[0, 0, -1]) * m */
                        d_column_[j - jb + (k - a_lo) * 8] = (d_column_[j - jb + (k - a_lo) * 8] - a_column_[j - jb + (k - a_lo) * 8] * d_column_[j - jb + (k - 1 - a_lo) * 8]) * m_;
                    }
                }
                for (int64_t k = sk_max_int64(0, sk_min_int64(nk, nk - 1)) - 1; k > -1; k += -1) {
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t j = jb; j < sk_min_int64(jb + 8, nj); ++j) {
                        /* corpus.py:54  d = d - c * d[0, 0, 1]  # noqa: F841 */
                        d_column_[j - jb + (k - a_lo) * 8] -= c_column_[j - jb + (k - a_lo) * 8] * d_column_[j - jb + (k + 1 - a_lo) * 8];
                    }
                }
                for (int64_t j = jb; j < sk_min_int64(jb + 8, nj); ++j) {
                    int64_t c_row = (c_origin_I_ + i) * c_stride_0_ + (c_origin_J_ + j) * c_stride_1_ + c_origin_K_;
                    int64_t d_row = (d_origin_I_ + i) * d_stride_0_ + (d_origin_J_ + j) * d_stride_1_ + d_origin_K_;
                    for (int64_t k = a_lo; k < a_hi; ++k) {
                        c_[c_row + k] = c_column_[j - jb + (k - a_lo) * 8];
                        d_[d_row + k] = d_column_[j - jb + (k - a_lo) * 8];
                    }
                }
            } else {
                #pragma omp atomic write
                sk_error = 8;
            }
        }
    }
    return sk_error;
}
