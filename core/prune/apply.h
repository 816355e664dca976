#pragma once
// Step "apply" of the flow: a mask and the statistics turn the dense checkpoint into a pruned one
// (compensation, then slicing).
//
//     LlamaCheckpoint + ModelStats + Mask ──applyMask (compensate, slice)──▶ PrunedModel
#include "core/models/llama_weights.h"
#include "core/prune/calibration.h"
#include "core/prune/select.h"
#include "core/prune/settings.h"

#include <cstdint>
#include <vector>

namespace npw {

struct LayerPruneReport {
    int64_t headsBefore = 0, headsAfter = 0;
    int64_t kvHeadsBefore = 0, kvHeadsAfter = 0;
    int64_t channelsBefore = 0, channelsAfter = 0;
    // Output error of o_proj / down_proj per calibration token, ‖X·ΔWᵀ‖²/N: with the compensation
    // applied (Theorem 3: the paper's L* when γ = 0, else L* less its dampening term ½γ'‖δW‖²;
    // FLAP's bias: the variance part) and with the pruned channels merely zeroed. 0 where nothing
    // was pruned.
    double attentionLoss = 0, attentionLossUncompensated = 0;
    double mlpLoss = 0, mlpLossUncompensated = 0;
};

struct PrunedModel {
    LlamaCheckpoint checkpoint;  // sliced; config lists updated; source = the unpruned source
    std::vector<LayerPruneReport> layers;
    CompensationKind compensation = CompensationKind::None;
};

// Compensates (on the full weight, then) slices every layer: q rows and o columns of the kept
// query heads, k/v rows of the kept KV heads, gate/up rows and down columns of the kept channels.
// stats is needed for compensation (G/N for Theorem 3, the means for FLAP's bias); a layer may
// lose every head or channel. Throws npw::Error when the mask does not fit the model, or when
// Theorem 3 meets a singular G with γ = 0 (naming the layer).
PrunedModel applyMask(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const Mask& mask,
                      const PruneSettings& settings);

// One layer of applyMask: layer `l` of a model with `config` (the dense one), its weights `src`
// (any float dtype; compensation runs in float64 and returns the weight's dtype) and its sites'
// statistics; writes the layer's new sizes into `newConfig` and its losses into `report`.
// applyMask is this for every layer; the bounded prune (layerwise_prune.h) calls it as each
// layer is read and writes the result before the next. Throws as applyMask.
LlamaLayerWeights applyMaskToLayer(const LlamaConfig& config, size_t layer, const LlamaLayerWeights& src,
                                   const LayerStats& attnStats, const LayerStats& mlpStats, const Mask& mask,
                                   const PruneSettings& settings, LlamaConfig& newConfig, LayerPruneReport& report);
// npw::Error unless the mask has one entry per layer of `config`.
void checkMaskLayers(const LlamaConfig& config, const Mask& mask);

} // namespace npw
