#include "core/prune/layer_stats.h"

#include "core/prune/dense_kernels.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <string>
#include <vector>

namespace npw {

namespace {

void requireTokens(const LayerStats& s, const char* what) {
    if (s.tokens <= 0)
        throw Error(std::string("LayerStats::") + what + ": no calibration tokens accumulated");
}

} // namespace

LayerStats::LayerStats(int64_t channels, c10::Device device) {
    if (channels <= 0) throw Error("LayerStats: channel count must be positive, got " + std::to_string(channels));
    const auto options = at::TensorOptions().dtype(at::kDouble).device(device);
    gram = at::zeros({channels, channels}, options);
    sum = at::zeros({channels}, options);
    sumSq = at::zeros({channels}, options);
}

void LayerStats::accumulate(const at::Tensor& x) {
    if (!gram.defined()) throw Error("LayerStats::accumulate: statistics were not sized (construct with the channel count)");
    const int64_t d = channels();
    if (x.dim() < 1 || x.size(-1) != d)
        throw Error("LayerStats::accumulate: expected input [..., " + std::to_string(d) + "], got last dimension " +
                    (x.dim() < 1 ? std::string("(scalar)") : std::to_string(x.size(-1))));
    const dense::StageTimer timer(dense::WorkStage::GramAccumulation);
    const at::Tensor flat = x.reshape({-1, d});
    const int64_t n = flat.size(0);
    if (gram.device().is_cpu() && gram.is_contiguous() && sum.is_contiguous() && sumSq.is_contiguous()) {
        // Widened to float64 one chunk of rows at a time, into a buffer this thread keeps: a
        // float64 copy of the whole input (and of its square, for Σx²) would be fresh memory on
        // every call — 92 MB each for one 1.1B MLP site at 4 × 512 tokens, which the allocator
        // maps and the kernel zeroes each time (17 % of the in-RAM calibration in perf). A
        // chunk of ≥ 128 rows keeps dsyrk at its rate (the rank-k update's k).
        constexpr int64_t kChunkBytes = int64_t(16) << 20;
        const int64_t chunk = std::min(n, std::max<int64_t>(128, kChunkBytes / (8 * d)));
        thread_local std::vector<double> buffer;
        if (static_cast<int64_t>(buffer.size()) < chunk * d) buffer.assign(static_cast<size_t>(chunk * d), 0.0);
        double* g = gram.data_ptr<double>();
        double* s = sum.data_ptr<double>();
        double* q = sumSq.data_ptr<double>();
        for (int64_t first = 0; first < n; first += chunk) {
            const int64_t m = std::min(chunk, n - first);
            at::from_blob(buffer.data(), {m, d}, at::kDouble).copy_(flat.narrow(0, first, m));
            // Rows [m, D] row-major are the column-major D×m matrix Xᵀ; dsyrk's lower triangle
            // of Xᵀ X (column-major) is the row-major upper triangle of G.
            dense::syrkLower(d, m, 1.0, buffer.data(), d, 1.0, g, d);
            for (int64_t r = 0; r < m; ++r) {
                const double* row = buffer.data() + r * d;
                for (int64_t j = 0; j < d; ++j) {
                    s[j] += row[j];
                    q[j] += row[j] * row[j];
                }
            }
        }
        if (n > 0) gramTriangle_ = true;
        dense::StageWork work;
        work.gemmFlops = static_cast<double>(d) * static_cast<double>(d + 1) * static_cast<double>(n);
        dense::addWork(dense::WorkStage::GramAccumulation, work);
    } else {
        const at::Tensor rows = flat.to(gram.device(), at::kDouble).contiguous();
        if (gramTriangle_) symmetriseGram();
        gram.addmm_(rows.t(), rows);
        sum.add_(rows.sum(0));
        sumSq.add_(rows.square().sum(0));
    }
    tokens += n;
}

void LayerStats::symmetriseGram() {
    if (!gramTriangle_) return;
    const int64_t d = channels();
    double* g = gram.data_ptr<double>();
    // Blocked, so that both the rows read and the columns written stay in cache.
    constexpr int64_t kBlock = 64;
    for (int64_t i0 = 0; i0 < d; i0 += kBlock)
        for (int64_t j0 = 0; j0 <= i0; j0 += kBlock)
            for (int64_t i = i0; i < std::min(i0 + kBlock, d); ++i)
                for (int64_t j = j0; j < std::min({j0 + kBlock, d, i}); ++j) g[i * d + j] = g[j * d + i];
    gramTriangle_ = false;
}

at::Tensor LayerStats::gramPerToken() const {
    requireTokens(*this, "gramPerToken");
    if (!gramTriangle_) return gram / static_cast<double>(tokens);
    LayerStats copy = *this;
    copy.gram = gram.clone();
    copy.symmetriseGram();
    return copy.gram.div_(static_cast<double>(tokens));
}

at::Tensor LayerStats::mean() const {
    requireTokens(*this, "mean");
    return sum / static_cast<double>(tokens);
}

at::Tensor LayerStats::variance() const {
    requireTokens(*this, "variance");
    const at::Tensor m = mean();
    return (sumSq / static_cast<double>(tokens) - m.square()).clamp_min(0.0);
}

at::Tensor LayerStats::channelNorm() const {
    requireTokens(*this, "channelNorm");
    return sumSq.sqrt();
}

} // namespace npw
