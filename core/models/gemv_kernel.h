#pragma once
// npw's own float32 matrix-vector kernel for decoding (batch 1, and LlamaGen's pair of rows).
// Decoding one token reads every weight once and does two FLOPs per weight, so its speed is the
// rate at which one core streams the weights; Debian's OpenBLAS 0.3.21 single-thread sgemv_n
// reached about half of what llama2.c's plain -Ofast loop streams (issue 17), so this kernel is
// written for that stream: four rows at a time, eight independent FMA accumulators, each weight
// row read front to back once. No ATen here: plain pointers, so the one source can be compiled
// for several instruction sets (AVX-512 or AVX2+FMA picked at run time, a portable version
// otherwise).
#include <cstdint>

namespace npw {

// y[v][r] = Σ_k W[r·ldw + k] · x[v][k] for rows r in [rowBegin, rowEnd), vectors v < nvec
// (x[v] = x + v·ldx, y[v] = y + v·ldy). W, x and y must not overlap. Single-threaded: the caller
// splits rows across threads. One or two vectors (decoding): one weight row at a time, the
// stream tuned for bandwidth. Three or more (LlamaGen's guided batches): tiles of
// kGemvTileRows weight rows × kGemvTileVecs vectors (gemvF32RowsTiled).
void gemvF32Rows(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                 int64_t ldy, int64_t rowBegin, int64_t rowEnd);

// The tile gemvF32Rows uses for three or more vectors: 2 weight rows × 6 vectors (12
// accumulators, 2 + 6 loads per 12 FMAs in 15 of the 16 ymm registers), the next 64 KiB block of
// weights prefetched while one is computed. Measured over GPT-B's weights (390 MB, one thread,
// CPU time, AMD EPYC, loaded machine): 3 vectors 24 ms (1 weight row per tile: 27 ms; OpenBLAS
// sgemm: 54 ms), 8 vectors 35 ms (sgemm 59), 16 vectors 53 ms (sgemm 73), 32 vectors 91 ms
// (sgemm 101); 1 and 2 vectors keep the decode kernel (19 and 23 ms; tiled 22 and 23 ms).
constexpr int kGemvTileRows = 2, kGemvTileVecs = 6;

// Any nvec ≥ 1 in tiles of tileRows (1–2) weight rows × tileVecs (1–6) vectors: each tile's
// weight rows are loaded once per column chunk and used against every vector of the group, the
// groups pass over the same rows while they are in L1, so W is read from memory once. For
// measurements and tests; `portable` forces the portable version.
void gemvF32RowsTiled(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                      int64_t ldy, int64_t rowBegin, int64_t rowEnd, int tileRows, int tileVecs, bool portable = false);

// The portable version alone, whatever the machine supports (the tests compare both).
void gemvF32RowsPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                         int64_t ldy, int64_t rowBegin, int64_t rowEnd);

// Σ p[i] over n floats read front to back with eight independent accumulators: the streaming
// read kernel whose rate (bytes / s over a buffer far larger than the caches) is the decode
// roofline's bandwidth (`npw bench --suite runtime`). Same instruction-set dispatch as the GEMV.
float streamSumF32(const float* p, int64_t n);

// Which version gemvF32Rows runs on this machine ("avx512f", "avx2+fma" or "portable"), for the
// benchmark.
const char* gemvF32Isa();

// 16-bit weights, as checkpoints store them (safetensors BF16 / F16, read in place from the
// mapped file): the same kernels, each weight widened to float32 as it is loaded (bfloat16: a
// 16-bit shift; float16: F16C's vcvtph2ps, checked at run time like AVX2, or bit arithmetic),
// x, y and the accumulation float32. Decoding reads half the bytes of float32, and the decode
// step is the rate at which the weights stream in. The result is the float32 kernel's on the
// widened weights: the same products summed in the same order.
// Measured (Xeon, Sapphire Rapids, one thread, 1.5–6 MB of weights in L2/L3, best of 100): float32
// 7.0, bfloat16 12.5, float16 13.6 G weights/s. Tried and dropped for bfloat16: reading 16
// weights as even/odd lanes (shift and mask, x de-interleaved; no vpmovzxwd) 11.8 — the shift
// competes with the FMAs for the same two ports — and eight accumulators instead of four, which
// spill (4.7).
enum class GemvWeights { F32, BF16, F16 };

// gemvF32Rows on W of format `format` (W points at float for F32, at the 16-bit patterns for
// BF16 / F16; ldw in elements). `portable` forces the portable version (tests compare both).
void gemvRows(GemvWeights format, const void* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec,
              float* y, int64_t ldy, int64_t rowBegin, int64_t rowEnd, bool portable = false);

// gemvF32RowsTiled on W of format `format`.
void gemvRowsTiled(GemvWeights format, const void* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec,
                   float* y, int64_t ldy, int64_t rowBegin, int64_t rowEnd, int tileRows, int tileVecs,
                   bool portable = false);

// dst[i] = src[i] widened to float32, n elements (exact: every bfloat16 and float16 value,
// infinities and NaN included, is a float32). Prefill's GEMMs widen one block of a 16-bit matrix
// at a time with it. F32 copies.
void widenToF32(GemvWeights format, const void* src, float* dst, int64_t n, bool portable = false);

// One float16 bit pattern as float32 (subnormals, infinities and NaN kept), without F16C.
float halfBitsToFloat(uint16_t h);

// Which version gemvRows runs for one or two vectors (decoding) and `format` on this machine:
// "avx512f" (every format; the tiles of three or more vectors stay AVX2), "avx2+fma",
// "avx2+fma+f16c" (F16) or "portable".
const char* gemvIsa(GemvWeights format);

// The widest instruction set the kernels may use, process-wide (default Best: what the CPU has).
// For benchmarks that time the versions side by side in one run, and for tests; Avx2 keeps the
// kernels as they were before the AVX-512 ones, Portable the plain version.
enum class GemvIsaLimit { Best, Avx2, Portable };
void setGemvIsaLimit(GemvIsaLimit limit);
GemvIsaLimit gemvIsaLimit();

} // namespace npw
