#pragma once
// What can be removed and what it costs: attention units (a head for MHA layers; a KV group or
// a query slot for GQA layers) and MLP channels, with their parameter counts and the default α.
//
// Attention units: a head for MHA layers. For GQA layers (g query heads per KV head) the default
// unit is a KV group (its g query heads and its KV head: k/v stay consistent); QuerySlot instead
// makes query slot s of every group one unit (g query heads out of g·kv go at once, KV heads
// stay until every slot is gone), which keeps the g-per-group structure LLaMA needs.
#include "core/models/llama_config.h"
#include "core/prune/settings.h"

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <vector>

namespace npw {

// Parameters that go with one unit of each kind in one layer (weights only, no biases).
struct LayerUnitCost {
    int64_t headParams = 0;     // (2g + 2)·D_h·hidden: g query heads' q rows and o columns plus
                                // one k and one v head; 4·D_h·hidden for MHA (g = 1)
    int64_t channelParams = 0;  // 3·hidden: a gate row, an up row and a down column
};

std::vector<LayerUnitCost> unitCostsFromConfig(const LlamaConfig& config);
// α = cost of a unit / cost of a channel = (2g + 2)·D_h / 3: 4·D_h/3 for MHA. Layers without
// heads are ignored; throws npw::Error when the remaining layers disagree (different g).
double defaultAlpha(const LlamaConfig& config);

// Which query and key/value heads an attention unit of one layer covers.
struct AttentionUnits {
    AttentionUnitKind kind = AttentionUnitKind::KvGroup;
    int64_t heads = 0, kvHeads = 0, headDim = 0;

    AttentionUnits(const LlamaConfig& config, int64_t layer, AttentionUnitKind kind);
    bool isGrouped() const { return kvHeads > 0 && heads != kvHeads; }
    int64_t count() const;  // units in the layer (0 without heads)
    std::vector<bool> keptQueryHeads(const std::vector<bool>& keepUnits) const;
    std::vector<bool> keptKvHeads(const std::vector<bool>& keepUnits) const;
    // Per-unit mean (or sum) of the per-channel scores of the o_proj input channels [heads·D_h].
    std::vector<double> reduce(const at::Tensor& channelScores, bool sum) const;
};

// Parameters per unit and per MLP channel for every layer (QuerySlot units of GQA layers cost
// their q rows and o columns; KV heads are only counted when they actually go).
std::vector<LayerUnitCost> unitCosts(const LlamaConfig& config, AttentionUnitKind kind);
// The default α: a unit's parameters over a channel's; npw::Error when layers disagree.
double defaultAlphaFor(const LlamaConfig& config, AttentionUnitKind kind);

} // namespace npw
