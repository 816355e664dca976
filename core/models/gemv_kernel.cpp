#include "core/models/gemv_kernel.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NPW_GEMV_X86 1
#include <immintrin.h>
#endif

namespace npw {

namespace {

// Each version computes R rows against NV vectors; the column loop keeps R·NV·U accumulators
// so that consecutive FMAs do not wait on each other's latency, and every weight is loaded once
// per call whatever NV is. The rows are taken one at a time (R = 1, U = 4 / NV): a single
// front-to-back stream measured faster than four interleaved row streams (AMD EPYC, one thread,
// 393 MB of weights: 9–11 against 6–7.5 GB/s under the same load), the hardware prefetcher
// following one stream best — which is also how llama2.c's loop reads.

// Portable version: GCC/Clang vector extensions (SSE2 on baseline x86-64, NEON elsewhere);
// plain scalar code for other compilers.
#if defined(__GNUC__) || defined(__clang__)
typedef float F4 __attribute__((vector_size(16)));

inline F4 load4(const float* p) {
    F4 v;
    std::memcpy(&v, p, sizeof v);  // unaligned load
    return v;
}
inline float sum4(F4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

template <int R, int NV>
void blockPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                   int64_t r) {
    constexpr int U = (R == 1 ? 4 : 2) / NV;
    F4 acc[R][NV][U];
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v)
            for (int u = 0; u < U; ++u) acc[i][v][u] = F4{0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 4 * U <= cols; k += 4 * U) {
        F4 xs[NV][U];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) xs[v][u] = load4(x + v * ldx + k + 4 * u);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
            const float* w = W + (r + i) * ldw + k;
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) {
                const F4 wv = load4(w + 4 * u);
#pragma GCC unroll 4
                for (int v = 0; v < NV; ++v) acc[i][v][u] += wv * xs[v][u];
            }
        }
    }
    for (int i = 0; i < R; ++i) {
        const float* w = W + (r + i) * ldw;
        for (int v = 0; v < NV; ++v) {
            float s = 0;
            for (int u = 0; u < U; ++u) s += sum4(acc[i][v][u]);
            for (int64_t c = k; c < cols; ++c) s += w[c] * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
    }
}
#else
template <int R, int NV>
void blockPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                   int64_t r) {
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) {
            float s = 0;
            for (int64_t c = 0; c < cols; ++c) s += W[(r + i) * ldw + c] * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
}
#endif

template <int NV>
void rowsPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                  int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r < end; ++r) blockPortable<1, NV>(W, ldw, cols, x, ldx, y, ldy, r);
}

#ifdef NPW_GEMV_X86
// AVX2 + FMA (x86-64 since Haswell / Zen 1), chosen at run time; the rest of npw stays baseline
// x86-64, so the binary runs on any x86-64 machine.
__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <int R, int NV>
__attribute__((target("avx2,fma"))) void blockAvx2(const float* W, int64_t ldw, int64_t cols, const float* x,
                                                   int64_t ldx, float* y, int64_t ldy, int64_t r) {
    constexpr int U = (R == 1 ? 4 : 2) / NV;
    __m256 acc[R][NV][U];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) acc[i][v][u] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 * U <= cols; k += 8 * U) {
        __m256 xs[NV][U];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) xs[v][u] = _mm256_loadu_ps(x + v * ldx + k + 8 * u);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
            const float* w = W + (r + i) * ldw + k;
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) {
                const __m256 wv = _mm256_loadu_ps(w + 8 * u);
#pragma GCC unroll 4
                for (int v = 0; v < NV; ++v) acc[i][v][u] = _mm256_fmadd_ps(wv, xs[v][u], acc[i][v][u]);
            }
        }
    }
    for (int i = 0; i < R; ++i) {
        const float* w = W + (r + i) * ldw;
        for (int v = 0; v < NV; ++v) {
            __m256 a = acc[i][v][0];
            for (int u = 1; u < U; ++u) a = _mm256_add_ps(a, acc[i][v][u]);
            float s = sum8(a);
            for (int64_t c = k; c < cols; ++c) s += w[c] * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
    }
}

template <int NV>
__attribute__((target("avx2,fma"))) void rowsAvx2(const float* W, int64_t ldw, int64_t cols, const float* x,
                                                  int64_t ldx, float* y, int64_t ldy, int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r < end; ++r) blockAvx2<1, NV>(W, ldw, cols, x, ldx, y, ldy, r);
}

__attribute__((target("avx2,fma"))) float streamSumAvx2(const float* p, int64_t n) {
    __m256 a[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64)
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) a[i] = _mm256_add_ps(a[i], _mm256_loadu_ps(p + k + 8 * i));
#pragma GCC unroll 4
    for (int i = 1; i < 8; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
    float s = sum8(a[0]);
    for (; k < n; ++k) s += p[k];
    return s;
}

bool haveAvx2Fma() {
    static const bool have = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return have;
}
#endif

} // namespace

void gemvF32Rows(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                 int64_t ldy, int64_t rowBegin, int64_t rowEnd) {
#ifdef NPW_GEMV_X86
    if (haveAvx2Fma()) {
        if (nvec == 2)
            rowsAvx2<2>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
        else
            rowsAvx2<1>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
        return;
    }
#endif
    gemvF32RowsPortable(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd);
}

void gemvF32RowsPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                         int64_t ldy, int64_t rowBegin, int64_t rowEnd) {
    if (nvec == 2)
        rowsPortable<2>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
    else
        rowsPortable<1>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
}

float streamSumF32(const float* p, int64_t n) {
#ifdef NPW_GEMV_X86
    if (haveAvx2Fma()) return streamSumAvx2(p, n);
#endif
#if defined(__GNUC__) || defined(__clang__)
    F4 a[8] = {};
    int64_t k = 0;
    for (; k + 32 <= n; k += 32)
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) a[i] += load4(p + k + 4 * i);
    for (int i = 1; i < 8; ++i) a[0] += a[i];
    float s = sum4(a[0]);
#else
    float s = 0;
    int64_t k = 0;
#endif
    for (; k < n; ++k) s += p[k];
    return s;
}

const char* gemvF32Isa() {
#ifdef NPW_GEMV_X86
    if (haveAvx2Fma()) return "avx2+fma";
#endif
    return "portable";
}

} // namespace npw
