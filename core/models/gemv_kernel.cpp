#include "core/models/gemv_kernel.h"

#include <algorithm>
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

// A few rows of x at once (LlamaGen's guided batches: 2·images rows per step): R weight rows
// against NV rows of x, one accumulator each (R·NV independent FMAs per column chunk, enough to
// hide their latency), every weight and x chunk loaded once per chunk and used NV resp. R times.
template <int R, int NV>
void tilePortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                  int64_t r) {
#if defined(__GNUC__) || defined(__clang__)
    F4 acc[R][NV];
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] = F4{0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 4 <= cols; k += 4) {
        F4 ws[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) ws[i] = load4(W + (r + i) * ldw + k);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            const F4 xv = load4(x + v * ldx + k);
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) acc[i][v] += ws[i] * xv;
        }
    }
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) {
            float s = sum4(acc[i][v]);
            for (int64_t c = k; c < cols; ++c) s += W[(r + i) * ldw + c] * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
#else
    blockPortable<R, NV>(W, ldw, cols, x, ldx, y, ldy, r);
#endif
}

template <int NV>
void rowsPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                  int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r < end; ++r) blockPortable<1, NV>(W, ldw, cols, x, ldx, y, ldy, r);
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t);
constexpr int kMaxTileRows = 2, kMaxTileVecs = 6;

// Rows [begin, end) of W against nvec rows of x, in tiles of R weight rows × up to V rows of x.
// The weight rows go in blocks of ~64 KiB (L2-resident): every group of rows of x (in L1 while
// the group sweeps the block) passes over the block, so W is read from memory once. While a block
// is computed the next one is prefetched, a few lines per tile, so that memory and FMAs overlap
// (measured, 390 MB, 6 rows of x in one group: 46 ms without, 28 ms with). The groups
// are balanced (32 rows: 6, 6, 5, 5, 5, 5 rather than five of 6 and a 2, whose tile has too few
// accumulators to keep the FMA units busy).
void tiledRows(const TileFn (&tiles)[kMaxTileRows][kMaxTileVecs], int R, int V, const float* W, int64_t ldw,
               int64_t cols, const float* x, int64_t ldx, int nvec, float* y, int64_t ldy, int64_t begin,
               int64_t end) {
    constexpr int64_t kBlockBytes = 64 * 1024, kLine = 64;
    const int64_t rowBytes = std::max<int64_t>(1, cols * int64_t(sizeof(float)));
    const int64_t blockRows = std::max<int64_t>(R, (kBlockBytes / rowBytes) / R * R);
    const int groups = (nvec + V - 1) / V, small = nvec / groups, large = nvec % groups;  // `large` groups of small + 1
    for (int64_t rb = begin; rb < end; rb += blockRows) {
        const int64_t re = std::min(end, rb + blockRows);
        // The next block's lines (row pr, byte pc), spread over this block's tiles.
        const int64_t nextEnd = std::min(end, re + blockRows);
        const int64_t nextLines = (nextEnd - re) * ((rowBytes + kLine - 1) / kLine);
        const int64_t tilesInBlock = int64_t(groups) * ((re - rb + R - 1) / R);
        const int64_t perTile = (nextLines + tilesInBlock - 1) / tilesInBlock;
        int64_t pr = re, pc = 0;
        for (int g = 0, v = 0; g < groups; ++g) {
            const int nv = small + (g < large ? 1 : 0);
            for (int64_t r = rb; r < re; r += R) {
                tiles[std::min<int64_t>(R, re - r) - 1][nv - 1](W, ldw, cols, x + v * ldx, ldx, y + v * ldy, ldy, r);
#if defined(__GNUC__) || defined(__clang__)
                for (int64_t i = 0; i < perTile && pr < nextEnd; ++i) {
                    __builtin_prefetch(reinterpret_cast<const char*>(W + pr * ldw) + pc, 0, 2);
                    if ((pc += kLine) >= rowBytes) pc = 0, ++pr;
                }
#endif
            }
            v += nv;
        }
    }
}

#define NPW_TILES(fn)                                                                                          \
    {{fn<1, 1>, fn<1, 2>, fn<1, 3>, fn<1, 4>, fn<1, 5>, fn<1, 6>}, {fn<2, 1>, fn<2, 2>, fn<2, 3>, fn<2, 4>, fn<2, 5>, fn<2, 6>}}

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

// See tilePortable. R = 2 weight rows × NV ≤ 6 rows of x: 12 accumulators, 2 weight chunks and
// one x chunk in flight fit the 16 ymm registers.
template <int R, int NV>
__attribute__((target("avx2,fma"))) void tileAvx2(const float* W, int64_t ldw, int64_t cols, const float* x,
                                                  int64_t ldx, float* y, int64_t ldy, int64_t r) {
    __m256 acc[R][NV];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        __m256 ws[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) ws[i] = _mm256_loadu_ps(W + (r + i) * ldw + k);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            const __m256 xv = _mm256_loadu_ps(x + v * ldx + k);
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) acc[i][v] = _mm256_fmadd_ps(ws[i], xv, acc[i][v]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) {
            float s = sum8(acc[i][v]);
            for (int64_t c = k; c < cols; ++c) s += W[(r + i) * ldw + c] * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
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

void gemvF32RowsTiled(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                      int64_t ldy, int64_t rowBegin, int64_t rowEnd, int tileRows, int tileVecs, bool portable) {
    const int R = std::clamp(tileRows, 1, kMaxTileRows), V = std::clamp(tileVecs, 1, kMaxTileVecs);
#ifdef NPW_GEMV_X86
    if (!portable && haveAvx2Fma()) {
        static const TileFn tiles[kMaxTileRows][kMaxTileVecs] = NPW_TILES(tileAvx2);
        tiledRows(tiles, R, V, W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd);
        return;
    }
#endif
    (void)portable;
    static const TileFn tiles[kMaxTileRows][kMaxTileVecs] = NPW_TILES(tilePortable);
    tiledRows(tiles, R, V, W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd);
}

void gemvF32Rows(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                 int64_t ldy, int64_t rowBegin, int64_t rowEnd) {
    if (nvec > 2) {
        gemvF32RowsTiled(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, kGemvTileRows, kGemvTileVecs, false);
        return;
    }
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
    if (nvec > 2)
        gemvF32RowsTiled(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, kGemvTileRows, kGemvTileVecs, true);
    else if (nvec == 2)
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
