#include "core/prune/units.h"

#include "core/prune/unit_scores.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <string>

namespace npw {

std::vector<LayerUnitCost> unitCostsFromConfig(const LlamaConfig& config) {
    std::vector<LayerUnitCost> costs(static_cast<size_t>(config.num_layers));
    for (int64_t l = 0; l < config.num_layers; ++l) {
        const int64_t heads = config.num_heads.at(l), kv = config.num_kv_heads.at(l);
        const int64_t g = kv > 0 ? heads / kv : 0;
        costs[l].headParams = kv > 0 ? (2 * g + 2) * config.head_dim * config.hidden_size : 0;
        costs[l].channelParams = 3 * config.hidden_size;
    }
    return costs;
}

double defaultAlpha(const LlamaConfig& config) {
    double alpha = 0;
    for (int64_t l = 0; l < config.num_layers; ++l) {
        const int64_t kv = config.num_kv_heads.at(l);
        if (kv <= 0) continue;
        const int64_t group = config.num_heads.at(l) / kv;  // whole: validate() has kv divide the heads
        const double layerAlpha = (2.0 * static_cast<double>(group) + 2.0) * static_cast<double>(config.head_dim) / 3.0;
        if (alpha != 0 && layerAlpha != alpha)
            throw Error("defaultAlpha: layers differ in query heads per KV head (α " + std::to_string(alpha) + " vs " +
                        std::to_string(layerAlpha) + " in layer " + std::to_string(l) + "); give α explicitly");
        alpha = layerAlpha;
    }
    return alpha != 0 ? alpha : 4.0 * static_cast<double>(config.head_dim) / 3.0;
}

AttentionUnits::AttentionUnits(const LlamaConfig& config, int64_t layer, AttentionUnitKind k)
    : kind(k), heads(config.num_heads.at(static_cast<size_t>(layer))),
      kvHeads(config.num_kv_heads.at(static_cast<size_t>(layer))), headDim(config.head_dim) {}

int64_t AttentionUnits::count() const {
    if (heads == 0) return 0;
    if (!isGrouped()) return heads;
    return kind == AttentionUnitKind::KvGroup ? kvHeads : heads / kvHeads;
}

std::vector<bool> AttentionUnits::keptQueryHeads(const std::vector<bool>& keepUnits) const {
    if (static_cast<int64_t>(keepUnits.size()) != count())
        throw Error("attention mask has " + std::to_string(keepUnits.size()) + " units, the layer has " +
                    std::to_string(count()));
    const int64_t g = kvHeads > 0 ? heads / kvHeads : 1;
    std::vector<bool> keep(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) {
        // HF layout: query head h belongs to KV group h / g and is slot h % g of it.
        const int64_t unit = !isGrouped() ? h : kind == AttentionUnitKind::KvGroup ? h / g : h % g;
        keep[static_cast<size_t>(h)] = keepUnits[static_cast<size_t>(unit)];
    }
    return keep;
}

std::vector<bool> AttentionUnits::keptKvHeads(const std::vector<bool>& keepUnits) const {
    if (static_cast<int64_t>(keepUnits.size()) != count())
        throw Error("attention mask has " + std::to_string(keepUnits.size()) + " units, the layer has " +
                    std::to_string(count()));
    if (!isGrouped() || kind == AttentionUnitKind::KvGroup) return keepUnits;  // unit k ↔ KV head k
    // Query slots: every KV head still serves the remaining slots, until none remains.
    const bool any = std::find(keepUnits.begin(), keepUnits.end(), true) != keepUnits.end();
    return std::vector<bool>(static_cast<size_t>(kvHeads), any);
}

std::vector<double> AttentionUnits::reduce(const at::Tensor& channelScores, bool sum) const {
    if (channelScores.dim() != 1 || channelScores.size(0) != heads * headDim)
        throw Error("attention channel scores: expected " + std::to_string(heads * headDim) + " values, got " +
                    std::to_string(channelScores.numel()));
    if (heads == 0) return {};
    const at::Tensor s = channelScores.to(at::kCPU, at::kDouble);
    at::Tensor perUnit;
    if (!isGrouped() || kind == AttentionUnitKind::KvGroup) {
        const at::Tensor blocks = s.reshape({count(), -1});
        perUnit = sum ? blocks.sum(1) : blocks.mean(1);
    } else {
        const at::Tensor slots = s.reshape({kvHeads, heads / kvHeads, headDim});  // [group, slot, dim]
        perUnit = sum ? slots.sum(at::IntArrayRef{0, 2}) : slots.mean(at::IntArrayRef{0, 2});
    }
    return toDoubleVector(perUnit);
}

std::vector<LayerUnitCost> unitCosts(const LlamaConfig& config, AttentionUnitKind kind) {
    std::vector<LayerUnitCost> costs = unitCostsFromConfig(config);
    if (kind == AttentionUnitKind::QuerySlot)
        for (int64_t l = 0; l < config.num_layers; ++l) {
            const AttentionUnits units(config, l, kind);
            if (units.isGrouped()) costs[static_cast<size_t>(l)].headParams = 2 * units.kvHeads * config.head_dim * config.hidden_size;
        }
    return costs;
}

double defaultAlphaFor(const LlamaConfig& config, AttentionUnitKind kind) {
    const std::vector<LayerUnitCost> costs = unitCosts(config, kind);
    double alpha = 0;
    for (int64_t l = 0; l < config.num_layers; ++l) {
        if (AttentionUnits(config, l, kind).count() == 0) continue;
        const LayerUnitCost& c = costs[static_cast<size_t>(l)];
        const double layerAlpha = static_cast<double>(c.headParams) / static_cast<double>(c.channelParams);
        if (alpha != 0 && std::abs(layerAlpha - alpha) > 1e-12 * alpha)
            throw Error("the default α differs between layers (" + std::to_string(alpha) + " vs " +
                        std::to_string(layerAlpha) + " in layer " + std::to_string(l) +
                        ": their attention units have different sizes); give α explicitly");
        alpha = layerAlpha;
    }
    return alpha != 0 ? alpha : 4.0 * static_cast<double>(config.head_dim) / 3.0;
}

} // namespace npw
