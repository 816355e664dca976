#include "core/models/widened_linear.h"
#include "core/models/gemv_kernel.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace npw {

// A block of 8 MiB of float32: small enough that the widened block is written and read back
// from the caches' neighbourhood instead of a whole matrix's worth of memory, large enough that
// the GEMM's fixed costs (OpenBLAS repacks x for every call) stay small against its arithmetic.
// Measured (one thread, bf16, best of 5, on a machine at load average 19 — only coarse):
// [128 × 768] · [2048 × 768]ᵀ float32 at::linear 95 ms, blocks of 1 / 8 / 32 MiB / whole matrix
// 105 / 109 / 107 / 78 ms; [1024 × 2048] · [5632 × 2048]ᵀ 5.9 s, 5.8 / 4.8 / 6.4 / 6.3 s: the
// widening costs little against the GEMM and no block size stands out; 8 MiB never converts more
// than a block.
const int64_t kLinearWidenedBlockBytes = int64_t{8} << 20;

namespace {

GemvWeights formatOf(const at::Tensor& w) {
    return w.scalar_type() == at::kBFloat16 ? GemvWeights::BF16 : GemvWeights::F16;
}

} // namespace

bool linearWidenedApplies(const at::Tensor& x, const at::Tensor& w) {
    if (!x.defined() || !w.defined() || w.dim() != 2 || x.dim() < 1) return false;
    if (!x.device().is_cpu() || !w.device().is_cpu()) return false;
    if (x.scalar_type() != at::kFloat || (w.scalar_type() != at::kBFloat16 && w.scalar_type() != at::kHalf)) return false;
    if (x.requires_grad() || w.requires_grad()) return false;
    return x.size(-1) == w.size(1);
}

at::Tensor linearWidened(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, int64_t blockBytes) {
    if (!linearWidenedApplies(x, w))
        throw Error("linearWidened: expected x [..., in] CPU float32 and w [out, in] CPU bfloat16 or float16, "
                    "neither with gradients");
    const int64_t in = w.size(1), out = w.size(0);
    const int64_t rows = in > 0 ? x.numel() / in : 0;
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = out;
    at::Tensor y = at::empty({rows, out}, x.options());
    if (rows == 0 || out == 0) return y.view(shape);
    if (in == 0) return (bias.defined() ? y.copy_(bias.expand({rows, out})) : y.zero_()).view(shape);
    const at::Tensor x2 = x.reshape({rows, in}).contiguous();
    const at::Tensor wc = w.is_contiguous() ? w : w.contiguous();
    const GemvWeights format = formatOf(wc);
    const auto* src = static_cast<const uint16_t*>(wc.data_ptr());
    const int64_t bytes = blockBytes > 0 ? blockBytes : kLinearWidenedBlockBytes;
    const int64_t blockRows = std::clamp<int64_t>(bytes / (in * int64_t(sizeof(float))), 1, out);
    // The calling thread's buffer, kept between calls: a fresh one per product would fault its
    // pages in again every time (the allocator returns blocks this large to the system).
    thread_local at::Tensor buffer;
    if (!buffer.defined() || buffer.numel() < blockRows * in)
        buffer = at::empty({blockRows * in}, at::TensorOptions().dtype(at::kFloat));
    float* dst = buffer.data_ptr<float>();
    for (int64_t r0 = 0; r0 < out; r0 += blockRows) {
        const int64_t n = std::min(blockRows, out - r0);
        // Widened across LibTorch's threads (rows of the block), then one float32 GEMM writes
        // columns r0..r0+n of y in place (a row-major view with stride `out`, which BLAS takes
        // as its leading dimension).
        at::parallel_for(0, n, std::max<int64_t>(1, (int64_t{1} << 15) / in), [&](int64_t a, int64_t b) {
            widenToF32(format, src + (r0 + a) * in, dst + a * in, (b - a) * in);
        });
        const at::Tensor block = at::from_blob(dst, {n, in}, at::TensorOptions().dtype(at::kFloat));
        at::Tensor columns = y.narrow(1, r0, n);
        at::mm_out(columns, x2, block.t());
    }
    if (bias.defined()) y.add_(bias.to(at::kFloat));
    return y.view(shape);
}

} // namespace npw
