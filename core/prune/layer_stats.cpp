#include "core/prune/layer_stats.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include <string>

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
    const at::Tensor rows = x.reshape({-1, d}).to(gram.device(), at::kDouble);
    gram.addmm_(rows.t(), rows);
    sum.add_(rows.sum(0));
    sumSq.add_(rows.square().sum(0));
    tokens += rows.size(0);
}

at::Tensor LayerStats::gramPerToken() const {
    requireTokens(*this, "gramPerToken");
    return gram / static_cast<double>(tokens);
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
