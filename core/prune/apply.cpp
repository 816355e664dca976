// Step "apply": compensation and slicing of every layer (apply.h).
#include "core/prune/compensation.h"
#include "core/prune/apply.h"
#include "core/models/non_finite.h"
#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <algorithm>

namespace npw {

namespace {

at::Tensor indicesOf(const std::vector<bool>& flags, bool value) {
    std::vector<int64_t> idx;
    for (size_t i = 0; i < flags.size(); ++i)
        if (flags[i] == value) idx.push_back(static_cast<int64_t>(i));
    return at::tensor(idx, at::kLong);
}

int64_t countTrue(const std::vector<bool>& flags) { return std::count(flags.begin(), flags.end(), true); }

// The rows (dim 0) or columns (dim 1) of `t` whose flag is set, as a new contiguous tensor.
at::Tensor keepAlong(const at::Tensor& t, int64_t dim, const std::vector<bool>& keep) {
    return t.index_select(dim, indicesOf(keep, true).to(t.device())).contiguous();
}

struct ProjectionResult {
    at::Tensor weight;  // [out, kept], torch layout
    at::Tensor bias;    // undefined when the layer had none and none was added
    double loss = 0, lossUncompensated = 0;
};

// One output projection (o_proj or down_proj) whose input channels `keep` survive: compensated
// on the full weight, then sliced. Losses are per calibration token (G/N).
ProjectionResult pruneProjection(const at::Tensor& weight, const at::Tensor& bias, const LayerStats& stats,
                                 const std::vector<bool>& keep, CompensationKind kind, double damp,
                                 const std::string& where) {
    ProjectionResult out;
    out.bias = bias;
    if (countTrue(keep) == static_cast<int64_t>(keep.size())) {
        out.weight = weight;
        return out;
    }
    const bool haveStats = stats.channels() == weight.size(1) && stats.tokens > 0;
    if (!haveStats && kind != CompensationKind::None)
        throw Error(where + ": no calibration statistics for " + compensationName(kind) + " compensation");
    at::Tensor full = weight;
    if (haveStats && kind == CompensationKind::Theorem3) {
        try {
            // One factorisation gives the compensated weight, L* and the uncompensated error.
            CompensationResult r = compensatePrunedChannelsScaled(weight, stats.gram, 1.0 / static_cast<double>(stats.tokens),
                                                                  keep, damp);
            full = r.weight;
            out.lossUncompensated = r.uncompensatedLoss;
            // L* is the optimum of the dampened objective ‖XδW‖²/N + ½γ'‖δW‖²; the error the
            // layer actually makes is that minus the dampening term (= L* when γ = 0).
            out.loss = r.optimalLoss - 0.5 * r.dampening * r.deltaSquaredNorm;
        } catch (const Error& e) {
            throw Error(where + ": " + e.what() + " (a larger dampening γ helps)");
        }
    } else if (haveStats) {
        // Only G's pruned rows and columns (k×k), never a D×D copy of it: 1.6 GB per MLP site at 8B,
        // and the layer-by-layer road holds one such site already.
        const at::Tensor pruned = indicesOf(keep, false).to(stats.gram.device());  // ascending
        at::Tensor gpp = stats.gram.index_select(0, pruned).index_select(1, pruned);
        // A triangle-only G (LayerStats::accumulate) holds G in its row-major upper triangle; with the
        // indices ascending, so does the block.
        if (stats.gramIsTriangle()) gpp = at::triu(gpp) + at::triu(gpp, 1).t();
        gpp = gpp.to(at::kDouble) / static_cast<double>(stats.tokens);
        const at::Tensor wp = weight.index_select(1, pruned.to(weight.device())).to(gpp.device(), at::kDouble);  // [out, k]
        // ‖X_p W_pᵀ‖²/N = tr(W_p G_pp W_pᵀ)/N: the error of merely zeroing the channels.
        auto errorWith = [&](const at::Tensor& g) { return (at::matmul(wp, g) * wp).sum().item<double>(); };
        out.lossUncompensated = errorWith(gpp);
        out.loss = out.lossUncompensated;
        try {
            if (kind == CompensationKind::FlapBias) {
                const at::Tensor mean = stats.mean();
                const at::Tensor added = flapBiasCompensation(weight, mean, keep);
                out.bias = bias.defined() ? bias + added.to(bias.scalar_type()) : added;
                // What the bias cannot remove: the pruned inputs' covariance, E[(x−μ)(x−μ)ᵀ].
                const at::Tensor meanP = mean.index_select(0, pruned.to(mean.device())).to(gpp.device());
                out.loss = errorWith(gpp - at::outer(meanP, meanP));
            }
        } catch (const Error& e) {
            throw Error(where + ": " + e.what());
        }
    }
    // A compensation that overflowed would be written into the pruned model: refused by name.
    if (const std::string values = nonFiniteValues(full); !values.empty())
        throw Error(where + ": the compensated weight became non-finite (" + values + ")" + kNonFiniteHint);
    if (const std::string values = nonFiniteValues(out.bias); !values.empty())
        throw Error(where + ": the compensated bias became non-finite (" + values + ")" + kNonFiniteHint);
    requireFinite(out.loss, where + ": the layer's pruning error", kNonFiniteHint);
    requireFinite(out.lossUncompensated, where + ": the layer's uncompensated pruning error", kNonFiniteHint);
    out.weight = keepAlong(full, 1, keep);
    return out;
}

} // namespace

LlamaLayerWeights applyMaskToLayer(const LlamaConfig& config, size_t l, const LlamaLayerWeights& src,
                                   const LayerStats& attnStats, const LayerStats& mlpStats, const Mask& mask,
                                   const PruneSettings& settings, LlamaConfig& newConfig, LayerPruneReport& report) {
    const CompensationKind compensation = settings.effectiveCompensation();
    LlamaLayerWeights dst = src;  // shares the unchanged tensors; changed ones are replaced, never written
    const AttentionUnits units(config, static_cast<int64_t>(l), settings.attentionUnit);
    report.headsBefore = report.headsAfter = units.heads;
    report.kvHeadsBefore = report.kvHeadsAfter = units.kvHeads;
    report.channelsBefore = report.channelsAfter = config.intermediate_size[l];
    const std::string layerName = "layer " + std::to_string(l);

    if (units.count() > 0) {
        const std::vector<bool> keepQ = units.keptQueryHeads(mask.keepHeads[l]);
        const std::vector<bool> keepKv = units.keptKvHeads(mask.keepHeads[l]);
        const std::vector<bool> qChannels = expandUnitMask(keepQ, config.head_dim);
        const std::vector<bool> kvChannels = expandUnitMask(keepKv, config.head_dim);
        ProjectionResult o = pruneProjection(src.wo, src.wo_bias, attnStats, qChannels, compensation, settings.damp,
                                             layerName + " o_proj");
        dst.wo = o.weight;
        dst.wo_bias = o.bias;
        dst.wq = keepAlong(src.wq, 0, qChannels);
        dst.wk = keepAlong(src.wk, 0, kvChannels);
        dst.wv = keepAlong(src.wv, 0, kvChannels);
        // Biases of q, k and v (Qwen2) go with their heads; Qwen3's q/k norms act within a
        // head (over head_dim) and stay as they are.
        if (src.wq_bias.defined()) dst.wq_bias = keepAlong(src.wq_bias, 0, qChannels);
        if (src.wk_bias.defined()) dst.wk_bias = keepAlong(src.wk_bias, 0, kvChannels);
        if (src.wv_bias.defined()) dst.wv_bias = keepAlong(src.wv_bias, 0, kvChannels);
        newConfig.num_heads[l] = report.headsAfter = countTrue(keepQ);
        newConfig.num_kv_heads[l] = report.kvHeadsAfter = countTrue(keepKv);
        report.attentionLoss = o.loss;
        report.attentionLossUncompensated = o.lossUncompensated;
    } else if (!mask.keepHeads[l].empty()) {
        throw Error("applyMask: " + layerName + " has no attention heads but the mask has " +
                    std::to_string(mask.keepHeads[l].size()) + " units");
    }

    if (config.intermediate_size[l] > 0) {
        const std::vector<bool>& keep = mask.keepChannels[l];
        if (static_cast<int64_t>(keep.size()) != config.intermediate_size[l])
            throw Error("applyMask: " + layerName + " has " + std::to_string(config.intermediate_size[l]) +
                        " MLP channels but the mask has " + std::to_string(keep.size()));
        ProjectionResult d = pruneProjection(src.w_down, src.w_down_bias, mlpStats, keep, compensation, settings.damp,
                                             layerName + " down_proj");
        dst.w_down = d.weight;
        dst.w_down_bias = d.bias;
        dst.w_gate = keepAlong(src.w_gate, 0, keep);
        dst.w_up = keepAlong(src.w_up, 0, keep);
        newConfig.intermediate_size[l] = report.channelsAfter = countTrue(keep);
        report.mlpLoss = d.loss;
        report.mlpLossUncompensated = d.lossUncompensated;
    } else if (!mask.keepChannels[l].empty()) {
        throw Error("applyMask: " + layerName + " has no MLP channels but the mask has " +
                    std::to_string(mask.keepChannels[l].size()));
    }
    return dst;
}

void checkMaskLayers(const LlamaConfig& config, const Mask& mask) {
    const auto layers = static_cast<size_t>(config.num_layers);
    if (mask.keepHeads.size() != layers || mask.keepChannels.size() != layers)
        throw Error("applyMask: the mask has " + std::to_string(mask.keepHeads.size()) + "/" +
                    std::to_string(mask.keepChannels.size()) + " layers, the model " + std::to_string(layers));
}

PrunedModel applyMask(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const Mask& mask,
                      const PruneSettings& settings) {
    const LlamaConfig& config = checkpoint.config;
    checkMaskLayers(config, mask);
    const auto layers = static_cast<size_t>(config.num_layers);
    PrunedModel out;
    out.compensation = settings.effectiveCompensation();
    out.checkpoint = checkpoint;  // shares the unchanged tensors; changed ones are replaced, never written
    out.layers.resize(layers);
    // A model opened memory-mapped keeps a bfloat16/float16 file's weights as stored (read-only
    // views). The pruned model is float32, as it was when every command worked on an owned
    // float32 copy: the compensated projections are float32, and the rest is widened (exactly)
    // here, one tensor at a time, so that one export holds one dtype. A float32 file's views are
    // shared as they are (never written: every changed tensor is a new one).
    auto float32 = [](const at::Tensor& t) { return t.defined() && t.scalar_type() != at::kFloat ? t.to(at::kFloat) : t; };
    auto layerInFloat32 = [&float32](const LlamaLayerWeights& w) {
        LlamaLayerWeights f = w;
        for (at::Tensor* t : {&f.attn_norm, &f.wq, &f.wk, &f.wv, &f.wq_bias, &f.wk_bias, &f.wv_bias, &f.q_norm, &f.k_norm,
                              &f.wo, &f.wo_bias, &f.ffn_norm, &f.w_gate, &f.w_up, &f.w_down, &f.w_down_bias})
            *t = float32(*t);
        return f;
    };
    {
        LlamaWeights& w = out.checkpoint.weights;
        const bool tied = w.lm_head.defined() && w.lm_head.is_same(w.embed);
        w.embed = float32(w.embed);
        w.final_norm = float32(w.final_norm);
        w.lm_head = tied ? w.embed : float32(w.lm_head);
    }
    const LayerStats noStats;
    auto statsAt = [&](const std::vector<LayerStats>& sites, size_t l) -> const LayerStats& {
        return l < sites.size() ? sites[l] : noStats;
    };
    for (size_t l = 0; l < layers; ++l)
        out.checkpoint.weights.layers[l] =
            applyMaskToLayer(config, l, layerInFloat32(checkpoint.weights.layers.at(l)), statsAt(stats.attn, l), statsAt(stats.mlp, l),
                             mask, settings, out.checkpoint.config, out.layers[l]);
    out.checkpoint.config.validate(checkpoint.source);
    return out;
}

} // namespace npw
