#include "core/models/gemv.h"
#include "core/models/gemv_kernel.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <string>

namespace npw {

// Up to 32 rows (LlamaGen's 16 guided images) the tiled kernel was measured faster than OpenBLAS's
// sgemm over GPT-B's weights (32 rows: 91 against 101 ms, gemv_kernel.h); beyond, not measured,
// GEMM's blocking is left to win (prefill and evaluation windows are hundreds of rows).
int64_t gemvF32MaxRows() { return 32; }

namespace {

bool gemvWeightDtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

GemvWeights gemvFormat(at::ScalarType t) {
    return t == at::kBFloat16 ? GemvWeights::BF16 : t == at::kHalf ? GemvWeights::F16 : GemvWeights::F32;
}

} // namespace

bool gemvF32Applies(const at::Tensor& x, const at::Tensor& w) {
    return w.defined() && w.scalar_type() == at::kFloat && gemvApplies(x, w);
}

bool gemvApplies(const at::Tensor& x, const at::Tensor& w) {
    if (!x.defined() || !w.defined() || w.dim() != 2 || x.dim() != 2) return false;
    if (!x.device().is_cpu() || !w.device().is_cpu()) return false;
    if (x.scalar_type() != at::kFloat || !gemvWeightDtype(w.scalar_type())) return false;
    if (x.requires_grad() || w.requires_grad()) return false;
    // Narrow matrices (demo:c2i's 128-wide projections) stay in the caches, where GEMM packs them
    // cheaply and computes faster from 17 rows on (measured over demo:c2i's weights, one thread:
    // 24 rows 566 against 615 µs, 32 rows 722 against 839; at width 256 the kernel still wins at
    // 32 rows, 3.4 against 3.9 ms).
    const int64_t rows = x.size(0);
    if (rows > 16 && w.size(1) < 256) return false;
    return rows >= 1 && rows <= gemvF32MaxRows() && x.size(1) == w.size(1);
}

at::Tensor gemvF32(const at::Tensor& x, const at::Tensor& w) {
    if (!gemvF32Applies(x, w))
        throw Error("gemvF32: expected x [rows, in] (1 to " + std::to_string(gemvF32MaxRows()) +
                    " rows) and w [out, in], both CPU float32 without gradients");
    return gemv(x, w);
}

at::Tensor gemv(const at::Tensor& x, const at::Tensor& w) {
    if (!gemvApplies(x, w))
        throw Error("gemv: expected x [rows, in] (1 to " + std::to_string(gemvF32MaxRows()) +
                    " rows, CPU float32) and w [out, in] (CPU float32, bfloat16 or float16), neither with gradients");
    const at::Tensor xc = x.contiguous();
    // Rows of w must be contiguous; a row stride larger than the width (a row slice) is fine.
    const at::Tensor wc = (w.stride(1) == 1 && w.stride(0) >= w.size(1)) ? w : w.contiguous();
    const int64_t rows = wc.size(0), cols = wc.size(1), nvec = xc.size(0);
    at::Tensor y = at::empty({nvec, rows}, xc.options());
    const GemvWeights format = gemvFormat(wc.scalar_type());
    const void* W = wc.data_ptr();
    const float* X = xc.data_ptr<float>();
    float* Y = y.data_ptr<float>();
    const int64_t ldw = wc.stride(0);
    // Blocks of 16 rows (the kernel works four at a time); at least ~256 KiB of weights per task
    // (float32; 128 KiB of 16-bit weights, the same count of FMAs) so that a thread's start-up is
    // small against its share of the stream.
    constexpr int64_t kBlock = 16;
    const int64_t blocks = (rows + kBlock - 1) / kBlock;
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, cols * kBlock));
    at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
        gemvRows(format, W, ldw, cols, X, cols, static_cast<int>(nvec), Y, rows, b0 * kBlock,
                 std::min(rows, b1 * kBlock));
    });
    return y;
}

} // namespace npw
