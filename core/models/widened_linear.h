#pragma once
// The GEMM side of 16-bit weights (prefill, evaluation windows, calibration's forwards): a
// checkpoint's bfloat16 / float16 matrices are used where they lie (the mapped file), never
// converted whole. OpenBLAS has no bfloat16 or float16 GEMM, so each product widens one block of
// the weight's rows at a time into a buffer the calling thread reuses and hands that block to
// LibTorch's float32 GEMM, writing its columns of the output in place. The result is the float32
// GEMM's on the widened weights (the widening is exact); only the block is ever float32.
#include <ATen/core/Tensor.h>

namespace npw {

// Whether linearWidened takes x · wᵀ: w a CPU bfloat16 or float16 matrix, x CPU float32 with
// w's width as its last dimension, neither needing gradients.
bool linearWidenedApplies(const at::Tensor& x, const at::Tensor& w);

// x [..., in] · w [out, in]ᵀ (+ bias [out], float32) → [..., out] float32, w widened a block of
// rows at a time (blockBytes of float32, at least one row; 0: kLinearWidenedBlockBytes). Throws
// npw::Error where linearWidenedApplies does not hold.
at::Tensor linearWidened(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = {}, int64_t blockBytes = 0);

// The float32 block's size. Measured: widened_linear.cpp.
extern const int64_t kLinearWidenedBlockBytes;

} // namespace npw
