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

static inline int64_t sk_max_int64(int64_t a, int64_t b) { return (b > a) ? b : a; }
static inline int64_t sk_min_int64(int64_t a, int64_t b) { return (b < a) ? b : a; }
/* point kernel 'jacobi2d' (corpus.py:25), 2-D, border [(-1, 1), (-1, 1)]
 *
 * Calling convention (all strides in elements):
 *   a_               pointer to element [0, ...] of array 'a'
 *   a_shape_0_       extent of array 'a' in dimension 0
 *   a_shape_1_       extent of array 'a' in dimension 1
 *   a_stride_0_      stride of array 'a' in dimension 0
 *   out              pointer to element [0, ...] of array 'out'
 *   out_stride_0     stride of array 'out' in dimension 0
 *   fill_border      border-fill flag: write cval where the neighbourhood leaves the array
 *   cval             cval: the value outside the array
 * Strides of the last dimension that are not parameters are 1.
 * Returns a status (3 only from the Python entry point):
 *   0: success
 *   1: a run-time relative index left the neighbourhood (clamped)
 *   2: an absolute index was out of range (the element read as 0)
 *   4: a range() step was 0 (the loop did not run)
 *   8: a local array too large for the stack could not be allocated (the work was skipped)
 *   3: the output overlaps an input (the CPython entry's, before running: the caller copies and calls again) */
int sk_jacobi2d_point(const double *restrict a_, int64_t a_shape_0_, int64_t a_shape_1_, int64_t a_stride_0_, double *restrict out, int64_t out_stride_0, bool fill_border, double cval)
{
    int sk_error = 0;
    int64_t sk_work = a_shape_0_ * a_shape_1_;
    /* --- border: cval where the neighbourhood leaves the array --- */
    if (fill_border) {
        if (sk_work >= 16384) {
            #pragma omp parallel for schedule(static) num_threads(sk_team_size())
            for (int64_t b0 = 0; b0 < a_shape_0_; ++b0) {
                if (b0 >= 1 && b0 < a_shape_0_ - 1) {
                    int64_t out_row = b0 * out_stride_0;
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t b1 = 0; b1 < sk_min_int64(1, a_shape_1_); ++b1) {
                        out[out_row + b1] = cval;
                    }
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t b1 = sk_max_int64(sk_min_int64(1, a_shape_1_), a_shape_1_ - 1); b1 < a_shape_1_; ++b1) {
                        out[out_row + b1] = cval;
                    }
                } else {
                    int64_t out_row = b0 * out_stride_0;
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t b1 = 0; b1 < a_shape_1_; ++b1) {
                        out[out_row + b1] = cval;
                    }
                }
            }
        } else {
            for (int64_t b0 = 0; b0 < a_shape_0_; ++b0) {
                if (b0 >= 1 && b0 < a_shape_0_ - 1) {
                    int64_t out_row = b0 * out_stride_0;
                    #pragma omp simd simdlen(4)
                    for (int64_t b1 = 0; b1 < sk_min_int64(1, a_shape_1_); ++b1) {
                        out[out_row + b1] = cval;
                    }
                    #pragma omp simd simdlen(4)
                    for (int64_t b1 = sk_max_int64(sk_min_int64(1, a_shape_1_), a_shape_1_ - 1); b1 < a_shape_1_; ++b1) {
                        out[out_row + b1] = cval;
                    }
                } else {
                    int64_t out_row = b0 * out_stride_0;
                    #pragma omp simd simdlen(4)
                    for (int64_t b1 = 0; b1 < a_shape_1_; ++b1) {
                        out[out_row + b1] = cval;
                    }
                }
            }
        }
    }
    /* --- interior --- */
    if (sk_work >= 16384) {
        #pragma omp parallel num_threads(sk_team_size())
        {
            #pragma omp for schedule(static) nowait
            for (int64_t i0 = 1; i0 < a_shape_0_ - 1; ++i0) {
                int64_t a_row = i0 * a_stride_0_;
                int64_t out_row = i0 * out_stride_0;
                if (sk_work >= 2097152) {
                    int64_t sk_lines = sk_stream_first(out + out_row + 1, 1, a_shape_1_ - 1, 8);
                    int64_t sk_lines_end = sk_stream_last(sk_lines, a_shape_1_ - 1, 8);
                    for (int64_t sk_edge = 0; sk_edge < 2; ++sk_edge) {
                        int64_t sk_lo = sk_edge == 0 ? 1 : sk_lines_end;
                        int64_t sk_hi = sk_edge == 0 ? sk_lines : a_shape_1_ - 1;
                        #pragma GCC ivdep
                        #pragma clang loop vectorize(assume_safety)
                        for (int64_t i1 = sk_lo; i1 < sk_hi; ++i1) {
                            /* corpus.py:26  return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1]) */
                            double sk_result = 0.25 * (a_[a_row - a_stride_0_ + i1] + a_[a_row + a_stride_0_ + i1] + a_[a_row + i1 - 1] + a_[a_row + i1 + 1]);
                            out[out_row + i1] = sk_result;
                        }
                    }
                    _Alignas(64) double sk_row[448];
                    int64_t sk_chunk = sk_lines;
                    while (sk_chunk < sk_lines_end) {
                        int64_t sk_chunk_end = sk_stream_chunk_end(sk_chunk, sk_lines_end, 448);
                        #pragma GCC ivdep
                        #pragma clang loop vectorize(assume_safety)
                        for (int64_t i1 = sk_chunk; i1 < sk_chunk_end; ++i1) {
                            /* corpus.py:26  return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1]) */
                            double sk_result = 0.25 * (a_[a_row - a_stride_0_ + i1] + a_[a_row + a_stride_0_ + i1] + a_[a_row + i1 - 1] + a_[a_row + i1 + 1]);
                            sk_row[i1 - sk_chunk] = sk_result;
                        }
                        sk_stream_copy(out + out_row + sk_chunk, sk_row, (sk_chunk_end - sk_chunk) * 8);
                        sk_chunk = sk_chunk_end;
                    }
                } else {
                    #pragma GCC ivdep
                    #pragma clang loop vectorize(assume_safety)
                    for (int64_t i1 = 1; i1 < a_shape_1_ - 1; ++i1) {
                        /* corpus.py:26  return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1]) */
                        double sk_result = 0.25 * (a_[a_row - a_stride_0_ + i1] + a_[a_row + a_stride_0_ + i1] + a_[a_row + i1 - 1] + a_[a_row + i1 + 1]);
                        out[out_row + i1] = sk_result;
                    }
                }
            }
            sk_store_fence();
        }
    } else {
        for (int64_t i0 = 1; i0 < a_shape_0_ - 1; ++i0) {
            int64_t a_row = i0 * a_stride_0_;
            int64_t out_row = i0 * out_stride_0;
            if (a_shape_1_ - 1 >= 9) {
                for (int64_t sk_vec = 1; sk_vec < a_shape_1_ - 1; sk_vec += 8) {
                    int64_t sk_first = sk_vec + 8 <= a_shape_1_ - 1 ? sk_vec : a_shape_1_ - 1 - 8;
                    #pragma omp simd simdlen(8)
                    for (int64_t sk_lane = 0; sk_lane < 8; ++sk_lane) {
                        int64_t i1 = sk_first + sk_lane;
                        /* corpus.py:26  return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1]) */
                        double sk_result = 0.25 * (a_[a_row - a_stride_0_ + i1] + a_[a_row + a_stride_0_ + i1] + a_[a_row + i1 - 1] + a_[a_row + i1 + 1]);
                        out[out_row + i1] = sk_result;
                    }
                }
            } else {
                #pragma omp simd simdlen(4)
                for (int64_t i1 = 1; i1 < a_shape_1_ - 1; ++i1) {
                    /* corpus.py:26  return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1]) */
                    double sk_result = 0.25 * (a_[a_row - a_stride_0_ + i1] + a_[a_row + a_stride_0_ + i1] + a_[a_row + i1 - 1] + a_[a_row + i1 + 1]);
                    out[out_row + i1] = sk_result;
                }
            }
        }
        sk_store_fence();
    }
    return sk_error;
}
