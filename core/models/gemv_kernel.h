#pragma once
// npw's own float32 matrix-vector kernel for decoding (batch 1, and LlamaGen's pair of rows).
// Decoding one token reads every weight once and does two FLOPs per weight, so its speed is the
// rate at which one core streams the weights; Debian's OpenBLAS 0.3.21 single-thread sgemv_n
// reached about half of what llama2.c's plain -Ofast loop streams (issue 17), so this kernel is
// written for that stream: four rows at a time, eight independent FMA accumulators, each weight
// row read front to back once. No ATen here: plain pointers, so the one source can be compiled
// for several instruction sets (AVX2+FMA picked at run time, a portable version otherwise).
#include <cstdint>

namespace npw {

// y[v][r] = Σ_k W[r·ldw + k] · x[v][k] for rows r in [rowBegin, rowEnd), vectors v < nvec
// (1 or 2; x[v] = x + v·ldx, y[v] = y + v·ldy). W, x and y must not overlap. Single-threaded:
// the caller splits rows across threads.
void gemvF32Rows(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                 int64_t ldy, int64_t rowBegin, int64_t rowEnd);

// The portable version alone, whatever the machine supports (the tests compare both).
void gemvF32RowsPortable(const float* W, int64_t ldw, int64_t cols, const float* x, int64_t ldx, int nvec, float* y,
                         int64_t ldy, int64_t rowBegin, int64_t rowEnd);

// Σ p[i] over n floats read front to back with eight independent accumulators: the streaming
// read kernel whose rate (bytes / s over a buffer far larger than the caches) is the decode
// roofline's bandwidth (`npw bench --suite runtime`). Same instruction-set dispatch as the GEMV.
float streamSumF32(const float* p, int64_t n);

// Which version gemvF32Rows runs on this machine ("avx2+fma" or "portable"), for the benchmark.
const char* gemvF32Isa();

} // namespace npw
