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
/* computation 'hdiff'
 *
 * Calling convention (all strides in elements):
 *   in_field_        pointer to element [0, ...] of array 'in_field'
 *   in_field_stride_0_ stride of array 'in_field' in dimension 0
 *   in_field_stride_1_ stride of array 'in_field' in dimension 1
 *   out_field_       pointer to element [0, ...] of array 'out_field'
 *   out_field_stride_0_ stride of array 'out_field' in dimension 0
 *   out_field_stride_1_ stride of array 'out_field' in dimension 1
 *   coeff_           pointer to element [0, ...] of array 'coeff'
 *   coeff_stride_0_  stride of array 'coeff' in dimension 0
 *   coeff_stride_1_  stride of array 'coeff' in dimension 1
 *   in_field_origin_I_ origin of field 'in_field' along I
 *   in_field_origin_J_ origin of field 'in_field' along J
 *   in_field_origin_K_ origin of field 'in_field' along K
 *   out_field_origin_I_ origin of field 'out_field' along I
 *   out_field_origin_J_ origin of field 'out_field' along J
 *   out_field_origin_K_ origin of field 'out_field' along K
 *   coeff_origin_I_  origin of field 'coeff' along I
 *   coeff_origin_J_  origin of field 'coeff' along J
 *   coeff_origin_K_  origin of field 'coeff' along K
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
int sk_hdiff_computation(double *restrict in_field_, int64_t in_field_stride_0_, int64_t in_field_stride_1_, double *restrict out_field_, int64_t out_field_stride_0_, int64_t out_field_stride_1_, double *restrict coeff_, int64_t coeff_stride_0_, int64_t coeff_stride_1_, int64_t in_field_origin_I_, int64_t in_field_origin_J_, int64_t in_field_origin_K_, int64_t out_field_origin_I_, int64_t out_field_origin_J_, int64_t out_field_origin_K_, int64_t coeff_origin_I_, int64_t coeff_origin_J_, int64_t coeff_origin_K_, int64_t ni, int64_t nj, int64_t nk)
{
    int sk_error = 0;
    /* --- multistage 0: PARALLEL, by parallel --- */
    #pragma omp parallel for schedule(static) if(ni * nj * nk >= 16384) num_threads(sk_team_size())
    for (int64_t i = 0; i < ni; ++i) {
        if (coeff_stride_1_ == nk && in_field_stride_1_ == nk && out_field_stride_1_ == nk) {
            int64_t in_field_row = (in_field_origin_I_ + i) * in_field_stride_0_ + in_field_origin_J_ * in_field_stride_1_ + in_field_origin_K_;
            int64_t coeff_row = (coeff_origin_I_ + i) * coeff_stride_0_ + coeff_origin_J_ * coeff_stride_1_ + coeff_origin_K_;
            int64_t out_field_row = (out_field_origin_I_ + i) * out_field_stride_0_ + out_field_origin_J_ * out_field_stride_1_ + out_field_origin_K_;
            #pragma GCC ivdep
            #pragma clang loop vectorize(assume_safety)
            for (int64_t t = 0; t < nj * nk; ++t) {
                /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                double lap_0_1_0_0_ = 4.0 * in_field_[in_field_row + in_field_stride_0_ + t] - (in_field_[in_field_row + 2 * in_field_stride_0_ + t] + in_field_[in_field_row + t] + in_field_[in_field_row + in_field_stride_0_ + in_field_stride_1_ + t] + in_field_[in_field_row + in_field_stride_0_ - in_field_stride_1_ + t]);
                /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                double lap_0_0_0_0_ = 4.0 * in_field_[in_field_row + t] - (in_field_[in_field_row + in_field_stride_0_ + t] + in_field_[in_field_row - in_field_stride_0_ + t] + in_field_[in_field_row + in_field_stride_1_ + t] + in_field_[in_field_row - in_field_stride_1_ + t]);
                /* corpus.py:37  res = lap[1, 0, 0] - lap */
                double res_0_0_0_0_ = lap_0_1_0_0_ - lap_0_0_0_0_;
                /* corpus.py:38  flx = 0.0 if res * (in_field[1, 0, 0] - in_field) > 0 else res */
                double flx_0_0_0_0_ = res_0_0_0_0_ * (in_field_[in_field_row + in_field_stride_0_ + t] - in_field_[in_field_row + t]) > 0.0 ? 0.0 : res_0_0_0_0_;
                /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                double lap_0__1_0_0_ = 4.0 * in_field_[in_field_row - in_field_stride_0_ + t] - (in_field_[in_field_row + t] + in_field_[in_field_row - 2 * in_field_stride_0_ + t] + in_field_[in_field_row - in_field_stride_0_ + in_field_stride_1_ + t] + in_field_[in_field_row - in_field_stride_0_ - in_field_stride_1_ + t]);
                /* corpus.py:37  res = lap[1, 0, 0] - lap */
                double res_0__1_0_0_ = lap_0_0_0_0_ - lap_0__1_0_0_;
                /* corpus.py:38  flx = 0.0 if res * (in_field[1, 0, 0] - in_field) > 0 else res */
                double flx_0__1_0_0_ = res_0__1_0_0_ * (in_field_[in_field_row + t] - in_field_[in_field_row - in_field_stride_0_ + t]) > 0.0 ? 0.0 : res_0__1_0_0_;
                /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                double lap_0_0_1_0_ = 4.0 * in_field_[in_field_row + in_field_stride_1_ + t] - (in_field_[in_field_row + in_field_stride_0_ + in_field_stride_1_ + t] + in_field_[in_field_row - in_field_stride_0_ + in_field_stride_1_ + t] + in_field_[in_field_row + 2 * in_field_stride_1_ + t] + in_field_[in_field_row + t]);
                /* corpus.py:39  res = lap[0, 1, 0] - lap */
                double res_1_0_0_0_ = lap_0_0_1_0_ - lap_0_0_0_0_;
                /* corpus.py:40  fly = 0.0 if res * (in_field[0, 1, 0] - in_field) > 0 else res */
                double fly_0_0_0_0_ = res_1_0_0_0_ * (in_field_[in_field_row + in_field_stride_1_ + t] - in_field_[in_field_row + t]) > 0.0 ? 0.0 : res_1_0_0_0_;
                /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                double lap_0_0__1_0_ = 4.0 * in_field_[in_field_row - in_field_stride_1_ + t] - (in_field_[in_field_row + in_field_stride_0_ - in_field_stride_1_ + t] + in_field_[in_field_row - in_field_stride_0_ - in_field_stride_1_ + t] + in_field_[in_field_row + t] + in_field_[in_field_row - 2 * in_field_stride_1_ + t]);
                /* corpus.py:39  res = lap[0, 1, 0] - lap */
                double res_1_0__1_0_ = lap_0_0_0_0_ - lap_0_0__1_0_;
                /* corpus.py:40  fly = 0.0 if res * (in_field[0, 1, 0] - in_field) > 0 else res */
                double fly_0_0__1_0_ = res_1_0__1_0_ * (in_field_[in_field_row + t] - in_field_[in_field_row - in_field_stride_1_ + t]) > 0.0 ? 0.0 : res_1_0__1_0_;
                /* corpus.py:41  out_field = in_field - coeff * (flx - flx[-1, 0, 0] + fly - fly[0, -1, 0])  # noqa: F841 */
                out_field_[out_field_row + t] = in_field_[in_field_row + t] - coeff_[coeff_row + t] * (flx_0_0_0_0_ - flx_0__1_0_0_ + fly_0_0_0_0_ - fly_0_0__1_0_);
            }
        } else {
            for (int64_t j = 0; j < nj; ++j) {
                int64_t in_field_row = (in_field_origin_I_ + i) * in_field_stride_0_ + (in_field_origin_J_ + j) * in_field_stride_1_ + in_field_origin_K_;
                int64_t coeff_row = (coeff_origin_I_ + i) * coeff_stride_0_ + (coeff_origin_J_ + j) * coeff_stride_1_ + coeff_origin_K_;
                int64_t out_field_row = (out_field_origin_I_ + i) * out_field_stride_0_ + (out_field_origin_J_ + j) * out_field_stride_1_ + out_field_origin_K_;
                #pragma GCC ivdep
                #pragma clang loop vectorize(assume_safety)
                for (int64_t k = 0; k < sk_max_int64(0, nk); ++k) {
                    /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                    double lap_0_1_0_0_ = 4.0 * in_field_[in_field_row + in_field_stride_0_ + k] - (in_field_[in_field_row + 2 * in_field_stride_0_ + k] + in_field_[in_field_row + k] + in_field_[in_field_row + in_field_stride_0_ + in_field_stride_1_ + k] + in_field_[in_field_row + in_field_stride_0_ - in_field_stride_1_ + k]);
                    /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                    double lap_0_0_0_0_ = 4.0 * in_field_[in_field_row + k] - (in_field_[in_field_row + in_field_stride_0_ + k] + in_field_[in_field_row - in_field_stride_0_ + k] + in_field_[in_field_row + in_field_stride_1_ + k] + in_field_[in_field_row - in_field_stride_1_ + k]);
                    /* corpus.py:37  res = lap[1, 0, 0] - lap */
                    double res_0_0_0_0_ = lap_0_1_0_0_ - lap_0_0_0_0_;
                    /* corpus.py:38  flx = 0.0 if res * (in_field[1, 0, 0] - in_field) > 0 else res */
                    double flx_0_0_0_0_ = res_0_0_0_0_ * (in_field_[in_field_row + in_field_stride_0_ + k] - in_field_[in_field_row + k]) > 0.0 ? 0.0 : res_0_0_0_0_;
                    /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                    double lap_0__1_0_0_ = 4.0 * in_field_[in_field_row - in_field_stride_0_ + k] - (in_field_[in_field_row + k] + in_field_[in_field_row - 2 * in_field_stride_0_ + k] + in_field_[in_field_row - in_field_stride_0_ + in_field_stride_1_ + k] + in_field_[in_field_row - in_field_stride_0_ - in_field_stride_1_ + k]);
                    /* corpus.py:37  res = lap[1, 0, 0] - lap */
                    double res_0__1_0_0_ = lap_0_0_0_0_ - lap_0__1_0_0_;
                    /* corpus.py:38  flx = 0.0 if res * (in_field[1, 0, 0] - in_field) > 0 else res */
                    double flx_0__1_0_0_ = res_0__1_0_0_ * (in_field_[in_field_row + k] - in_field_[in_field_row - in_field_stride_0_ + k]) > 0.0 ? 0.0 : res_0__1_0_0_;
                    /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                    double lap_0_0_1_0_ = 4.0 * in_field_[in_field_row + in_field_stride_1_ + k] - (in_field_[in_field_row + in_field_stride_0_ + in_field_stride_1_ + k] + in_field_[in_field_row - in_field_stride_0_ + in_field_stride_1_ + k] + in_field_[in_field_row + 2 * in_field_stride_1_ + k] + in_field_[in_field_row + k]);
                    /* corpus.py:39  res = lap[0, 1, 0] - lap */
                    double res_1_0_0_0_ = lap_0_0_1_0_ - lap_0_0_0_0_;
                    /* corpus.py:40  fly = 0.0 if res * (in_field[0, 1, 0] - in_field) > 0 else res */
                    double fly_0_0_0_0_ = res_1_0_0_0_ * (in_field_[in_field_row + in_field_stride_1_ + k] - in_field_[in_field_row + k]) > 0.0 ? 0.0 : res_1_0_0_0_;
                    /* corpus.py:35  lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0] */
                    double lap_0_0__1_0_ = 4.0 * in_field_[in_field_row - in_field_stride_1_ + k] - (in_field_[in_field_row + in_field_stride_0_ - in_field_stride_1_ + k] + in_field_[in_field_row - in_field_stride_0_ - in_field_stride_1_ + k] + in_field_[in_field_row + k] + in_field_[in_field_row - 2 * in_field_stride_1_ + k]);
                    /* corpus.py:39  res = lap[0, 1, 0] - lap */
                    double res_1_0__1_0_ = lap_0_0_0_0_ - lap_0_0__1_0_;
                    /* corpus.py:40  fly = 0.0 if res * (in_field[0, 1, 0] - in_field) > 0 else res */
                    double fly_0_0__1_0_ = res_1_0__1_0_ * (in_field_[in_field_row + k] - in_field_[in_field_row - in_field_stride_1_ + k]) > 0.0 ? 0.0 : res_1_0__1_0_;
                    /* corpus.py:41  out_field = in_field - coeff * (flx - flx[-1, 0, 0] + fly - fly[0, -1, 0])  # noqa: F841 */
                    out_field_[out_field_row + k] = in_field_[in_field_row + k] - coeff_[coeff_row + k] * (flx_0_0_0_0_ - flx_0__1_0_0_ + fly_0_0_0_0_ - fly_0_0__1_0_);
                }
            }
        }
    }
    return sk_error;
}
