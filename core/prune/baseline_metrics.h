#pragma once
// The baselines' importance metrics per input channel of o_proj / down_proj, as FLAP's code
// (CASIA-IVA-Lab/FLAP, lib/prune.py) computes them. weight is in torch layout [out, D], so
// input channel j is the column weight[:, j]. All results are float64 [D]; higher = keep.
//
// Structures (reference.md §2): FLAP standardises each layer's metric, averages it per head
// and ranks everything globally (select.h, AlphaMode::Budget, α = 4·D_h/3); Wanda-sp and
// magnitude prune every layer uniformly (selectUniformPerLayer) with head = sum of its
// channels (blockSumScores). Their raw metrics have layer-dependent scales, so putting them
// into one global ranking is only fair after standardisePerLayer, and only as a labelled option.
#include "core/prune/unit_scores.h"

#include <ATen/core/Tensor.h>
#include <cstdint>

namespace npw {

// FLAP's WIFV (weighted input feature variance): var_j · Σ_i weight[i, j]².
// inputVariance: LayerStats::variance().
at::Tensor flapChannelMetric(const at::Tensor& weight, const at::Tensor& inputVariance);
// FLAP's attention metric: its code squares the o_proj WIFV (`metrics[...](...) ** 2`).
// Squaring a non-negative metric keeps each layer's channel order, but it changes the
// standardised values and so the head means and the global head-versus-channel balance; it
// is kept so that the baseline is FLAP as published.
at::Tensor flapAttentionChannelMetric(const at::Tensor& weight, const at::Tensor& inputVariance);
// Wanda-sp: mean_i |weight[i, j]| · ‖X_j‖₂ (inputNorm: LayerStats::channelNorm()). FLAP's
// code uses √(mean over samples of ‖X_j‖²), a constant multiple: no change inside a layer.
at::Tensor wandaSpChannelMetric(const at::Tensor& weight, const at::Tensor& inputNorm);
// Magnitude: ‖weight[:, j]‖₂, the L2 norm of the column that channel j feeds (FLAP's
// torch.norm(W, dim=0)).
at::Tensor magnitudeChannelMetric(const at::Tensor& weight);

// (x − mean(x)) / std(x) over one layer's metric, std with Bessel's correction as torch.std
// (FLAP's `standarlization`). A constant metric (std = 0) gives all zeros, not NaN.
at::Tensor standardisePerLayer(const at::Tensor& metric);

// FLAP's AL-AM scores of one layer: attention = standardised squared WIFV of o_proj,
// averaged per unit (unitWidth = D_h, or g·D_h for KV groups, which FLAP itself lacks);
// MLP = standardised WIFV of down_proj. Either weight may be undefined (no heads/channels).
LayerScores flapLayerScores(const at::Tensor& oProjWeight, const at::Tensor& attentionInputVariance,
                            const at::Tensor& downProjWeight, const at::Tensor& mlpInputVariance, int64_t unitWidth);

} // namespace npw
