#include "core/models/gemv_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NPW_GEMV_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace npw {

float halfBitsToFloat(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {  // infinity, NaN (payload kept)
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {  // normal: rebias 15 → 127
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else {  // zero or subnormal: mantissa · 2⁻²⁴, exact in float32
        const float magnitude = float(mantissa) * (1.0f / 16777216.0f);
        std::memcpy(&bits, &magnitude, sizeof bits);
        bits |= sign;
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

namespace {

// The weight formats the kernels read (GemvWeights): each is widened to float32 as it is loaded.
// The float32 instantiations are the kernels as they were before 16-bit weights: the same
// loads, FMAs and order.
struct F32W {
    using T = float;
    static float scalar(float w) { return w; }
};
struct Bf16W {
    using T = uint16_t;
    static float scalar(uint16_t w) {
        const uint32_t bits = uint32_t(w) << 16;
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
};
struct F16W {
    using T = uint16_t;
    static float scalar(uint16_t w) { return halfBitsToFloat(w); }
};

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

// Four weights of format Fmt, widened to float32.
template <class Fmt>
inline F4 loadW4(const typename Fmt::T* p);
template <>
inline F4 loadW4<F32W>(const float* p) {
    return load4(p);
}
template <>
inline F4 loadW4<Bf16W>(const uint16_t* p) {
    typedef uint16_t U16x4 __attribute__((vector_size(8)));
    typedef uint32_t U32x4 __attribute__((vector_size(16)));
    U16x4 h;
    std::memcpy(&h, p, sizeof h);
    const U32x4 bits = __builtin_convertvector(h, U32x4) << 16;
    F4 v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}
template <>
inline F4 loadW4<F16W>(const uint16_t* p) {
    return F4{halfBitsToFloat(p[0]), halfBitsToFloat(p[1]), halfBitsToFloat(p[2]), halfBitsToFloat(p[3])};
}

template <class Fmt, int R, int NV>
void blockPortable(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                   int64_t ldy, int64_t r) {
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
            const typename Fmt::T* w = W + (r + i) * ldw + k;
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) {
                const F4 wv = loadW4<Fmt>(w + 4 * u);
#pragma GCC unroll 4
                for (int v = 0; v < NV; ++v) acc[i][v][u] += wv * xs[v][u];
            }
        }
    }
    for (int i = 0; i < R; ++i) {
        const typename Fmt::T* w = W + (r + i) * ldw;
        for (int v = 0; v < NV; ++v) {
            float s = 0;
            for (int u = 0; u < U; ++u) s += sum4(acc[i][v][u]);
            for (int64_t c = k; c < cols; ++c) s += Fmt::scalar(w[c]) * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
    }
}
#else
template <class Fmt, int R, int NV>
void blockPortable(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                   int64_t ldy, int64_t r) {
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) {
            float s = 0;
            for (int64_t c = 0; c < cols; ++c) s += Fmt::scalar(W[(r + i) * ldw + c]) * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
}
#endif

// A few rows of x at once (LlamaGen's guided batches: 2·images rows per step): R weight rows
// against NV rows of x, one accumulator each (R·NV independent FMAs per column chunk, enough to
// hide their latency), every weight and x chunk loaded once per chunk and used NV resp. R times.
template <class Fmt, int R, int NV>
void tilePortable(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                  int64_t ldy, int64_t r) {
#if defined(__GNUC__) || defined(__clang__)
    F4 acc[R][NV];
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] = F4{0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 4 <= cols; k += 4) {
        F4 ws[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) ws[i] = loadW4<Fmt>(W + (r + i) * ldw + k);
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
            for (int64_t c = k; c < cols; ++c) s += Fmt::scalar(W[(r + i) * ldw + c]) * x[v * ldx + c];
            y[v * ldy + r + i] = s;
        }
#else
    blockPortable<Fmt, R, NV>(W, ldw, cols, x, ldx, y, ldy, r);
#endif
}

template <class Fmt, int NV>
void rowsPortable(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                  int64_t ldy, int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r < end; ++r) blockPortable<Fmt, 1, NV>(W, ldw, cols, x, ldx, y, ldy, r);
}

template <class Fmt>
using TileFn = void (*)(const typename Fmt::T*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t);
constexpr int kMaxTileRows = 2, kMaxTileVecs = 6;

// Rows [begin, end) of W against nvec rows of x, in tiles of R weight rows × up to V rows of x.
// The weight rows go in blocks of ~64 KiB (L2-resident): every group of rows of x (in L1 while
// the group sweeps the block) passes over the block, so W is read from memory once. While a block
// is computed the next one is prefetched, a few lines per tile, so that memory and FMAs overlap
// (measured, 390 MB, 6 rows of x in one group: 46 ms without, 28 ms with). The groups
// are balanced (32 rows: 6, 6, 5, 5, 5, 5 rather than five of 6 and a 2, whose tile has too few
// accumulators to keep the FMA units busy).
template <class Fmt>
void tiledRows(const TileFn<Fmt> (&tiles)[kMaxTileRows][kMaxTileVecs], int R, int V, const typename Fmt::T* W,
               int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y, int64_t ldy, int64_t begin,
               int64_t end) {
    constexpr int64_t kBlockBytes = 64 * 1024, kLine = 64;
    const int64_t rowBytes = std::max<int64_t>(1, cols * int64_t(sizeof(typename Fmt::T)));
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

// NOLINTBEGIN(bugprone-macro-parentheses): fn<F, r, v> names a template instance; (fn)<…> would not
#define NPW_TILES(fn, F)                                                                                       \
    {{fn<F, 1, 1>, fn<F, 1, 2>, fn<F, 1, 3>, fn<F, 1, 4>, fn<F, 1, 5>, fn<F, 1, 6>},                           \
     {fn<F, 2, 1>, fn<F, 2, 2>, fn<F, 2, 3>, fn<F, 2, 4>, fn<F, 2, 5>, fn<F, 2, 6>}}
// NOLINTEND(bugprone-macro-parentheses)

#ifdef NPW_GEMV_X86
// AVX2 + FMA (x86-64 since Haswell / Zen 1), chosen at run time; the rest of npw stays baseline
// x86-64, so the binary runs on any x86-64 machine. The kernels are compiled with F16C too
// (float16 weights' vcvtph2ps); only the float16 instantiations use it, and they run only where
// the CPU has it (haveF16c), the float32 and bfloat16 ones wherever AVX2 and FMA are.
#define NPW_AVX2 __attribute__((target("avx2,fma,f16c")))
// One scalar multiply-add, fused, for the column tails: every weight format then rounds alike
// whatever the compiler contracts (g++ 12 fused `s += w * x` in every tail; g++ 14 left the
// float16 ones unfused once halfBitsToFloat was inlined, so they were no longer the float32
// kernel's result on the widened weights: tst_bf16_runtime in a Debian 13 root).
NPW_AVX2 inline float fusedMultiplyAdd(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

NPW_AVX2 inline float sum8(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Eight weights of format Fmt, widened to float32.
template <class Fmt>
NPW_AVX2 inline __m256 loadW8(const typename Fmt::T* p);
template <>
NPW_AVX2 inline __m256 loadW8<F32W>(const float* p) {
    return _mm256_loadu_ps(p);
}
template <>
NPW_AVX2 inline __m256 loadW8<Bf16W>(const uint16_t* p) {
    // Zero-extended to 32 bits and shifted into the top half: bfloat16 is a float32's top half.
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
template <>
NPW_AVX2 inline __m256 loadW8<F16W>(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <class Fmt, int R, int NV>
NPW_AVX2 void blockAvx2(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                        int64_t ldy, int64_t r) {
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
            const typename Fmt::T* w = W + (r + i) * ldw + k;
#pragma GCC unroll 4
            for (int u = 0; u < U; ++u) {
                const __m256 wv = loadW8<Fmt>(w + 8 * u);
#pragma GCC unroll 4
                for (int v = 0; v < NV; ++v) acc[i][v][u] = _mm256_fmadd_ps(wv, xs[v][u], acc[i][v][u]);
            }
        }
    }
    for (int i = 0; i < R; ++i) {
        const typename Fmt::T* w = W + (r + i) * ldw;
        for (int v = 0; v < NV; ++v) {
            __m256 a = acc[i][v][0];
            for (int u = 1; u < U; ++u) a = _mm256_add_ps(a, acc[i][v][u]);
            float s = sum8(a);
            for (int64_t c = k; c < cols; ++c) s = fusedMultiplyAdd(Fmt::scalar(w[c]), x[v * ldx + c], s);
            y[v * ldy + r + i] = s;
        }
    }
}

template <class Fmt, int NV>
NPW_AVX2 void rowsAvx2(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                       int64_t ldy, int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r < end; ++r) blockAvx2<Fmt, 1, NV>(W, ldw, cols, x, ldx, y, ldy, r);
}

// See tilePortable. R = 2 weight rows × NV ≤ 6 rows of x: 12 accumulators, 2 weight chunks and
// one x chunk in flight fit the 16 ymm registers.
template <class Fmt, int R, int NV>
NPW_AVX2 void tileAvx2(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                       int64_t ldy, int64_t r) {
    __m256 acc[R][NV];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        __m256 ws[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) ws[i] = loadW8<Fmt>(W + (r + i) * ldw + k);
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
            for (int64_t c = k; c < cols; ++c)
                s = fusedMultiplyAdd(Fmt::scalar(W[(r + i) * ldw + c]), x[v * ldx + c], s);
            y[v * ldy + r + i] = s;
        }
}

NPW_AVX2 float streamSumAvx2(const float* p, int64_t n) {
    __m256 a[8];
#pragma GCC unroll 8
    for (__m256& ai : a) ai = _mm256_setzero_ps();
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

// Widening n weights, 16 at a time (the prefill's blocks, written to an L2-sized buffer).
template <class Fmt>
NPW_AVX2 void widenAvx2(const typename Fmt::T* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(dst + i, loadW8<Fmt>(src + i));
        _mm256_storeu_ps(dst + i + 8, loadW8<Fmt>(src + i + 8));
    }
    for (; i < n; ++i) dst[i] = Fmt::scalar(src[i]);
}

// AVX-512 (Skylake-SP and later, Zen 4 and later), chosen at run time before AVX2: the decode
// stream's one- and two-vector kernels only (the tiles keep AVX2). Four weight rows at a time, two
// 16-wide accumulators per row and vector: on a Xeon (Sapphire Rapids, one thread, 1.08 GB of
// bfloat16 weights, best of 15 alternating rounds on a loaded machine) four row streams read
// 11.2 GB/s — the rate of a plain read of the same bytes (11.3) — where one row at a time read
// 9.1 and the AVX2 kernel 8.1: more streams in flight keep more of the memory system busy.
// Every weight format uses the same loop, so a 16-bit model's result is still the float32
// kernel's on the widened weights, bit for bit (the reduction order is this kernel's, not AVX2's:
// the two agree to the float32 dot-product bound, not bit for bit).
#define NPW_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
// g++ 12 reports the `_mm512_undefined_*` placeholders inside its own AVX-512 intrinsics as maybe
// uninitialized when they are inlined (a false positive in the compiler's own headers, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

template <class Fmt>
NPW_AVX512 inline __m512 loadW16(const typename Fmt::T* p);
template <>
NPW_AVX512 inline __m512 loadW16<F32W>(const float* p) {
    return _mm512_loadu_ps(p);
}
template <>
NPW_AVX512 inline __m512 loadW16<Bf16W>(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
template <>
NPW_AVX512 inline __m512 loadW16<F16W>(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// R weight rows against NV ≤ 2 vectors, two accumulators per row and vector (32 columns a step).
template <class Fmt, int R, int NV>
NPW_AVX512 void blockAvx512(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                            int64_t ldy, int64_t r) {
    __m512 acc[R][NV][2];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[i][v][0] = acc[i][v][1] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= cols; k += 32) {
        __m512 xs[NV][2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) {
            xs[v][0] = _mm512_loadu_ps(x + v * ldx + k);
            xs[v][1] = _mm512_loadu_ps(x + v * ldx + k + 16);
        }
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
            const typename Fmt::T* w = W + (r + i) * ldw + k;
            const __m512 w0 = loadW16<Fmt>(w), w1 = loadW16<Fmt>(w + 16);
#pragma GCC unroll 2
            for (int v = 0; v < NV; ++v) {
                acc[i][v][0] = _mm512_fmadd_ps(w0, xs[v][0], acc[i][v][0]);
                acc[i][v][1] = _mm512_fmadd_ps(w1, xs[v][1], acc[i][v][1]);
            }
        }
    }
    for (int i = 0; i < R; ++i) {
        const typename Fmt::T* w = W + (r + i) * ldw;
        for (int v = 0; v < NV; ++v) {
            float s = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][v][0], acc[i][v][1]));
            for (int64_t c = k; c < cols; ++c) s = fusedMultiplyAdd(Fmt::scalar(w[c]), x[v * ldx + c], s);
            y[v * ldy + r + i] = s;
        }
    }
}

template <class Fmt, int NV>
NPW_AVX512 void rowsAvx512(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, float* y,
                           int64_t ldy, int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r + 4 <= end; r += 4) blockAvx512<Fmt, 4, NV>(W, ldw, cols, x, ldx, y, ldy, r);
    for (; r < end; ++r) blockAvx512<Fmt, 1, NV>(W, ldw, cols, x, ldx, y, ldy, r);
}
#pragma GCC diagnostic pop

bool haveAvx2Fma() {
    static const bool have = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return have;
}

// F16C from CPUID leaf 1 (ECX bit 29) rather than __builtin_cpu_supports("f16c"), which clang 14
// (the fuzz build's compiler) does not know. Its instructions use the YMM state whose OS support
// the AVX2 check already established.
bool haveF16c() {
    static const bool have = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return haveAvx2Fma() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    }();
    return have;
}

// AVX-512F with the operating system saving the zmm state (XCR0 bits 5–7, with the ymm bits 1–2),
// which __builtin_cpu_supports does not check on every compiler (clang 14).
bool haveAvx512f() {
    static const bool have = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (!haveF16c() || __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || (ebx & bit_AVX512F) == 0)
            return false;
        if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return false;
        unsigned lo = 0, hi = 0;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        return (lo & 0xe6u) == 0xe6u;
    }();
    return have;
}
#endif

// Whether the AVX2 kernels run for format Fmt on this machine.
template <class Fmt>
bool avx2For() {
#ifdef NPW_GEMV_X86
    return std::is_same_v<Fmt, F16W> ? haveF16c() : haveAvx2Fma();
#else
    return false;
#endif
}

std::atomic<int> isaLimit{int(GemvIsaLimit::Best)};

GemvIsaLimit currentIsaLimit() { return GemvIsaLimit(isaLimit.load(std::memory_order_relaxed)); }

template <class Fmt>
void rowsTiledAs(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                 int64_t ldy, int64_t rowBegin, int64_t rowEnd, int tileRows, int tileVecs, bool portable) {
    const int R = std::clamp(tileRows, 1, kMaxTileRows), V = std::clamp(tileVecs, 1, kMaxTileVecs);
    portable = portable || currentIsaLimit() == GemvIsaLimit::Portable;
#ifdef NPW_GEMV_X86
    if (!portable && avx2For<Fmt>()) {
        static const TileFn<Fmt> tiles[kMaxTileRows][kMaxTileVecs] = NPW_TILES(tileAvx2, Fmt);
        tiledRows<Fmt>(tiles, R, V, W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd);
        return;
    }
#endif
    static const TileFn<Fmt> tiles[kMaxTileRows][kMaxTileVecs] = NPW_TILES(tilePortable, Fmt);
    tiledRows<Fmt>(tiles, R, V, W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd);
}

// Whether the AVX-512 decode kernels run on this machine under the current limit.
bool avx512Allowed() {
#ifdef NPW_GEMV_X86
    return currentIsaLimit() == GemvIsaLimit::Best && haveAvx512f();
#else
    return false;
#endif
}

template <class Fmt>
void rowsAs(const typename Fmt::T* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
            int64_t ldy, int64_t rowBegin, int64_t rowEnd, bool portable) {
    portable = portable || currentIsaLimit() == GemvIsaLimit::Portable;
    if (nvec > 2) {
        rowsTiledAs<Fmt>(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, kGemvTileRows, kGemvTileVecs, portable);
        return;
    }
#ifdef NPW_GEMV_X86
    if (!portable && avx512Allowed()) {
        if (nvec == 2)
            rowsAvx512<Fmt, 2>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
        else
            rowsAvx512<Fmt, 1>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
        return;
    }
    if (!portable && avx2For<Fmt>()) {
        if (nvec == 2)
            rowsAvx2<Fmt, 2>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
        else
            rowsAvx2<Fmt, 1>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
        return;
    }
#endif
    if (nvec == 2)
        rowsPortable<Fmt, 2>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
    else
        rowsPortable<Fmt, 1>(W, ldw, cols, x, ldx, y, ldy, rowBegin, rowEnd);
}

template <class Fmt>
void widenAs(const typename Fmt::T* src, float* dst, int64_t n, bool portable) {
#ifdef NPW_GEMV_X86
    if (!portable && avx2For<Fmt>()) {
        widenAvx2<Fmt>(src, dst, n);
        return;
    }
#endif
    (void)portable;
    for (int64_t i = 0; i < n; ++i) dst[i] = Fmt::scalar(src[i]);
}

} // namespace

void gemvF32RowsTiled(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                      int64_t ldy, int64_t rowBegin, int64_t rowEnd, int tileRows, int tileVecs, bool portable) {
    rowsTiledAs<F32W>(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, tileRows, tileVecs, portable);
}

void gemvF32Rows(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                 int64_t ldy, int64_t rowBegin, int64_t rowEnd) {
    rowsAs<F32W>(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, false);
}

void gemvF32RowsPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                         int64_t ldy, int64_t rowBegin, int64_t rowEnd) {
    rowsAs<F32W>(W, ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, true);
}

void gemvRows(GemvWeights format, const void* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec,
              float* y, int64_t ldy, int64_t rowBegin, int64_t rowEnd, bool portable) {
    switch (format) {
    case GemvWeights::F32:
        return rowsAs<F32W>(static_cast<const float*>(W), ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd, portable);
    case GemvWeights::BF16:
        return rowsAs<Bf16W>(static_cast<const uint16_t*>(W), ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd,
                             portable);
    case GemvWeights::F16:
        return rowsAs<F16W>(static_cast<const uint16_t*>(W), ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd,
                            portable);
    }
}

void gemvRowsTiled(GemvWeights format, const void* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec,
                   float* y, int64_t ldy, int64_t rowBegin, int64_t rowEnd, int tileRows, int tileVecs, bool portable) {
    switch (format) {
    case GemvWeights::F32:
        return rowsTiledAs<F32W>(static_cast<const float*>(W), ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd,
                                 tileRows, tileVecs, portable);
    case GemvWeights::BF16:
        return rowsTiledAs<Bf16W>(static_cast<const uint16_t*>(W), ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd,
                                  tileRows, tileVecs, portable);
    case GemvWeights::F16:
        return rowsTiledAs<F16W>(static_cast<const uint16_t*>(W), ldw, cols, x, ldx, nvec, y, ldy, rowBegin, rowEnd,
                                 tileRows, tileVecs, portable);
    }
}

void widenToF32(GemvWeights format, const void* src, float* dst, int64_t n, bool portable) {
    switch (format) {
    case GemvWeights::F32:
        std::memcpy(dst, src, static_cast<size_t>(std::max<int64_t>(0, n)) * sizeof(float));
        return;
    case GemvWeights::BF16:
        return widenAs<Bf16W>(static_cast<const uint16_t*>(src), dst, n, portable);
    case GemvWeights::F16:
        return widenAs<F16W>(static_cast<const uint16_t*>(src), dst, n, portable);
    }
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

const char* gemvF32Isa() { return gemvIsa(GemvWeights::F32); }

const char* gemvIsa(GemvWeights format) {
    if (currentIsaLimit() == GemvIsaLimit::Portable) return "portable";
    if (avx512Allowed()) return "avx512f";
    if (format == GemvWeights::F16) return avx2For<F16W>() ? "avx2+fma+f16c" : "portable";
    return avx2For<F32W>() ? "avx2+fma" : "portable";
}

void setGemvIsaLimit(GemvIsaLimit limit) { isaLimit.store(int(limit), std::memory_order_relaxed); }

GemvIsaLimit gemvIsaLimit() { return currentIsaLimit(); }

} // namespace npw
