#pragma once
// The decode path's matrix-vector product on ATen tensors (one or two rows; LlamaGen's guided
// batches, up to gemvF32MaxRows()): npw's own kernel (gemv_kernel.h) for CPU float32 activations
// without autograd, the weight in float32, bfloat16 or float16 (a checkpoint's stored dtype,
// read from its mapping), rows of the weight split across LibTorch's intra-op threads.
#include <ATen/core/Tensor.h>

namespace npw {

// The most rows of x gemvF32 takes; from there on GEMM (at::linear) is faster (measured:
// gemv.cpp).
int64_t gemvF32MaxRows();

// Whether gemvF32 takes x [n, in] · wᵀ: w a CPU float32 matrix, x CPU float32 with 1 to
// gemvF32MaxRows() rows (at most 16 when w is narrower than 256 columns), neither needing
// gradients (training keeps LibTorch's differentiable ops).
bool gemvF32Applies(const at::Tensor& x, const at::Tensor& w);

// x [n, in] · w [out, in]ᵀ → [n, out], float32 on the CPU (n ≤ gemvF32MaxRows()). x and w are
// copied to contiguous rows first when they are not (the forward's are; a copy costs a pass over
// w). Throws npw::Error on other shapes, dtypes or devices.
at::Tensor gemvF32(const at::Tensor& x, const at::Tensor& w);

// gemvF32Applies with w in float32, bfloat16 or float16 (x float32 as there).
bool gemvApplies(const at::Tensor& x, const at::Tensor& w);
// x [n, in] · w [out, in]ᵀ → [n, out] float32 for w in float32, bfloat16 or float16: each weight
// widened to float32 as it is read, float32 products and sums (gemv_kernel.h); float32 weights
// give gemvF32's result. Throws npw::Error where gemvApplies does not hold.
at::Tensor gemv(const at::Tensor& x, const at::Tensor& w);

} // namespace npw
