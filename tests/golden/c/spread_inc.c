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

/* --- kernel --- */
static inline int sk_spread_kernel(const double *restrict area_, double *restrict node_vals_)
{
    int sk_error = 0;
    int64_t i_;
    /* corpus.py:59  for i in range(3): */
    for (i_ = 0; i_ < 3; ++i_) {
        /* corpus.py:60  node_vals[i, 0] += area[0] / 3.0 */
        node_vals_[i_ * 2 + 0] += area_[0] / 3.0;
    }
    return sk_error;
}

/* --- loop --- */
/* ParLoop of kernel 'spread'.
 *
 * int sk_parloop_spread(nblocks, blocks, ...) runs, in parallel, the blocks of elements
 * [blocks[2b], blocks[2b + 1]) for b < nblocks, each block's elements in order
 * (blocks that write shared entries must not run together: call once per
 * colour). Returns 0, or 2 when the kernel indexed a local array out of range.
 * Arguments after the blocks, in order:
 *   a0: double[set size * 1], the Dat's values (READ)
 *   a1: double[target size * 2] (INC), m1: int32[set size * 3] the map; the kernel sees a gathered (3, 2) block
 */
int sk_parloop_spread(int64_t nblocks, const int64_t *restrict blocks, const double *restrict a0, double *restrict a1, const int32_t *restrict m1)
{
    int sk_error = 0;
    if (nblocks > 1) {
        #pragma omp parallel for schedule(static) num_threads(sk_team_size())
        for (int64_t b = 0; b < nblocks; ++b) {
            for (int64_t e = blocks[b * 2]; e < blocks[b * 2 + 1]; ++e) {
                const double *l0 = a0 + e;
                double l1[6];
                for (int64_t q = 0; q < 6; ++q) {
                    l1[q] = 0.0;
                }
                if (sk_spread_kernel(l0, l1) != 0) {
                    #pragma omp atomic write
                    sk_error = 2;
                }
                int64_t m1_row = e * 3;
                for (int64_t q = 0; q < 6; ++q) {
                    a1[(int64_t)m1[m1_row + q / 2] * 2 + q % 2] += l1[q];
                }
            }
        }
    } else {
        for (int64_t b = 0; b < nblocks; ++b) {
            for (int64_t e = blocks[b * 2]; e < blocks[b * 2 + 1]; ++e) {
                const double *l0 = a0 + e;
                double l1[6];
                for (int64_t q = 0; q < 6; ++q) {
                    l1[q] = 0.0;
                }
                if (sk_spread_kernel(l0, l1) != 0) {
                    #pragma omp atomic write
                    sk_error = 2;
                }
                int64_t m1_row = e * 3;
                for (int64_t q = 0; q < 6; ++q) {
                    a1[(int64_t)m1[m1_row + q / 2] * 2 + q % 2] += l1[q];
                }
            }
        }
    }
    return sk_error;
}
