#include "core/prune/baseline_metrics.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include <cmath>
#include <string>

namespace npw {

namespace {

// weight as float64 [out, D] after checking that `perChannel` has D entries.
at::Tensor checkedWeight(const char* what, const at::Tensor& weight, const at::Tensor& perChannel) {
    if (weight.dim() != 2) throw Error(std::string(what) + ": weight must be [out, D] (torch layout)");
    if (perChannel.defined() && (perChannel.dim() != 1 || perChannel.size(0) != weight.size(1)))
        throw Error(std::string(what) + ": expected " + std::to_string(weight.size(1)) +
                    " per-channel input statistics, got " + std::to_string(perChannel.numel()));
    return weight.to(at::kDouble);
}

} // namespace

at::Tensor flapChannelMetric(const at::Tensor& weight, const at::Tensor& inputVariance) {
    const at::Tensor w = checkedWeight("flapChannelMetric", weight, inputVariance);
    return inputVariance.to(w.device(), at::kDouble) * w.square().sum(0);
}

at::Tensor flapAttentionChannelMetric(const at::Tensor& weight, const at::Tensor& inputVariance) {
    return flapChannelMetric(weight, inputVariance).square();
}

at::Tensor wandaSpChannelMetric(const at::Tensor& weight, const at::Tensor& inputNorm) {
    const at::Tensor w = checkedWeight("wandaSpChannelMetric", weight, inputNorm);
    return w.abs().mean(0) * inputNorm.to(w.device(), at::kDouble);
}

at::Tensor magnitudeChannelMetric(const at::Tensor& weight) {
    return checkedWeight("magnitudeChannelMetric", weight, at::Tensor()).square().sum(0).sqrt();
}

at::Tensor standardisePerLayer(const at::Tensor& metric) {
    if (metric.dim() != 1 || metric.numel() < 2)
        throw Error("standardisePerLayer: expected a vector of at least 2 values, got " + std::to_string(metric.numel()));
    const at::Tensor m = metric.to(at::kDouble);
    const at::Tensor centred = m - m.mean();
    // Bessel-corrected, as torch.std's default (written out: the std overloads differ between LibTorch versions).
    const double sd = std::sqrt(centred.square().sum().item<double>() / static_cast<double>(m.numel() - 1));
    return sd > 0 ? centred / sd : at::zeros_like(m);
}

LayerScores flapLayerScores(const at::Tensor& oProjWeight, const at::Tensor& attentionInputVariance,
                            const at::Tensor& downProjWeight, const at::Tensor& mlpInputVariance, int64_t unitWidth) {
    LayerScores s;
    if (oProjWeight.defined() && oProjWeight.numel() > 0)
        s.heads = blockMeanScores(standardisePerLayer(flapAttentionChannelMetric(oProjWeight, attentionInputVariance)),
                                  unitWidth);
    if (downProjWeight.defined() && downProjWeight.numel() > 0)
        s.channels = toDoubleVector(standardisePerLayer(flapChannelMetric(downProjWeight, mlpInputVariance)));
    return s;
}

} // namespace npw
