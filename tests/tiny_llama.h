#pragma once
// Small random LLaMAs for the pruning suites: per-layer head counts and MLP widths, weights
// scaled like a trained model's (so activations stay O(1) and every layer matters).
#include "core/models/llama.h"
#include "core/prune/calibration.h"

#include <ATen/ATen.h>
#include <cmath>
#include <random>
#include <vector>

namespace npw::test {

inline LlamaCheckpoint tinyLlama(std::vector<int64_t> heads, std::vector<int64_t> kvHeads, std::vector<int64_t> inter,
                                 uint64_t seed = 7, RopeLayout layout = RopeLayout::HalfSplit) {
    at::manual_seed(seed);
    LlamaCheckpoint checkpoint;
    LlamaConfig& c = checkpoint.config;
    c.vocab_size = 40;
    c.hidden_size = 16;
    c.num_layers = static_cast<int64_t>(heads.size());
    c.head_dim = 4;
    c.num_heads = heads;
    c.num_kv_heads = kvHeads;
    c.intermediate_size = inter;
    c.max_position_embeddings = 64;
    c.rope_layout = layout;
    LlamaWeights& w = checkpoint.weights;
    const int64_t d = c.hidden_size;
    const double s = 1.0 / std::sqrt(double(d));
    w.embed = at::randn({c.vocab_size, d});
    w.final_norm = 1 + 0.1 * at::randn({d});
    w.lm_head = at::randn({c.vocab_size, d}) * s;
    for (size_t l = 0; l < heads.size(); ++l) {
        LlamaLayerWeights L;
        const int64_t q = heads[l] * c.head_dim, kv = kvHeads[l] * c.head_dim;
        L.attn_norm = 1 + 0.1 * at::randn({d});
        L.wq = at::randn({q, d}) * s;
        L.wk = at::randn({kv, d}) * s;
        L.wv = at::randn({kv, d}) * s;
        L.wo = at::randn({d, q}) * (q > 0 ? 1.0 / std::sqrt(double(q)) : 1.0);
        L.ffn_norm = 1 + 0.1 * at::randn({d});
        L.w_gate = at::randn({inter[l], d}) * s;
        L.w_up = at::randn({inter[l], d}) * s;
        L.w_down = at::randn({d, inter[l]}) * (inter[l] > 0 ? 1.0 / std::sqrt(double(inter[l])) : 1.0);
        w.layers.push_back(L);
    }
    return checkpoint;
}

inline std::vector<int32_t> randomIds(int64_t n, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    return ids;
}

inline at::Tensor idsTensor(const std::vector<std::vector<int32_t>>& windows) {
    at::Tensor t = at::empty({int64_t(windows.size()), int64_t(windows.front().size())}, at::kLong);
    for (size_t b = 0; b < windows.size(); ++b)
        for (size_t i = 0; i < windows[b].size(); ++i) t[int64_t(b)][int64_t(i)] = windows[b][i];
    return t;
}

// Every input of o_proj (site AttentionOutputInput) or down_proj of `layer` over the windows,
// one forward per window: [tokens, D] in float64.
inline at::Tensor tappedInputs(const LlamaModel& model, const CalibrationSet& set, int64_t layer, TapSite site) {
    std::vector<at::Tensor> rows;
    const ActivationTap tap = [&](int64_t l, TapSite s, const at::Tensor& x) {
        if (l == layer && s == site) rows.push_back(x.reshape({-1, x.size(-1)}).to(at::kDouble).clone());
    };
    for (const auto& window : set.windows) model.logits(idsTensor({window}), nullptr, false, tap);
    return at::cat(rows, 0);
}

} // namespace npw::test
