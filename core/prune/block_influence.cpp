// ShortGPT's Block Influence and block removal (block_influence.h).
#include "core/prune/block_influence.h"

#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <c10/core/InferenceMode.h>
#include <numeric>
#include <set>

namespace npw {

namespace {

int64_t blockParameters(const LlamaConfig& c, size_t l) {
    return c.hidden_size *
           (2 * c.num_heads[l] * c.head_dim + 2 * c.num_kv_heads[l] * c.head_dim + 3 * c.intermediate_size[l]);
}

} // namespace

BlockInfluence blockInfluence(const LlamaModel& model, const CalibrationSet& set, const ProgressFn& progress) {
    c10::InferenceMode guard;
    const LlamaConfig& cfg = model.config();
    const LlamaWeights& w = model.deviceWeights();
    if (set.windows.empty()) throw Error("block influence: the calibration set has no windows");
    BlockInfluence out;
    out.influence.assign(static_cast<size_t>(cfg.num_layers), 0.0);
    std::vector<double> cosSum(static_cast<size_t>(cfg.num_layers), 0.0);
    // A batch of windows up to ~8k tokens, as calibration batches them.
    const int64_t perBatch = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, set.seqlen));
    const int64_t n = static_cast<int64_t>(set.windows.size());
    for (int64_t first = 0; first < n; first += perBatch) {
        const int64_t count = std::min(perBatch, n - first);
        at::Tensor ids = at::empty({count, set.seqlen}, at::kLong);
        auto acc = ids.accessor<int64_t, 2>();
        for (int64_t b = 0; b < count; ++b)
            for (int64_t t = 0; t < set.seqlen; ++t) {
                const int32_t id = set.windows[static_cast<size_t>(first + b)][static_cast<size_t>(t)];
                if (id < 0 || id >= cfg.vocab_size)
                    throw Error("block influence: token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(cfg.vocab_size));
                acc[b][t] = id;
            }
        at::Tensor x = at::embedding(w.embed, ids.to(w.embed.device()));
        const LlamaPositionTables tables = llamaPositionTables(cfg, 0, set.seqlen, x.options());
        for (int64_t l = 0; l < cfg.num_layers; ++l) {
            at::Tensor y = llamaBlockForward(cfg, w.layers[static_cast<size_t>(l)], l, x, tables);
            // float64: the mean of 1 − cos over many tokens is a small difference of numbers near 1.
            const at::Tensor a = x.to(at::kDouble), b = y.to(at::kDouble);
            const at::Tensor cos = (a * b).sum(-1) / (a.norm(2, -1) * b.norm(2, -1)).clamp_min(1e-300);
            cosSum[static_cast<size_t>(l)] += cos.sum().item<double>();
            x = y;
        }
        reportProgress(progress, "block influence", static_cast<double>(first + count), static_cast<double>(n));
    }
    out.tokens = n * set.seqlen;
    for (size_t l = 0; l < cosSum.size(); ++l) {
        out.influence[l] = 1.0 - cosSum[l] / static_cast<double>(out.tokens);
        requireFinite(out.influence[l], "block influence: layer " + std::to_string(l) + "'s influence", kNonFiniteHint);
    }
    return out;
}

std::vector<int64_t> blocksToRemove(const LlamaConfig& config, const std::vector<double>& influence, double ratio) {
    if (!(ratio >= 0 && ratio < 1)) throw Error("block influence: ratio " + std::to_string(ratio) + " is outside [0, 1)");
    if (static_cast<int64_t>(influence.size()) != config.num_layers)
        throw Error("block influence: " + std::to_string(influence.size()) + " scores for " +
                    std::to_string(config.num_layers) + " blocks");
    std::vector<size_t> order(influence.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (influence[a] != influence[b]) return influence[a] < influence[b];
        return a > b;  // ties: the later block (ShortGPT found late blocks the most redundant)
    });
    int64_t total = 0;
    for (size_t l = 0; l < influence.size(); ++l) total += blockParameters(config, l);
    const double target = ratio * static_cast<double>(total);
    std::vector<int64_t> removed;
    int64_t removedParams = 0;
    for (size_t l : order) {
        if (static_cast<double>(removedParams) >= target) break;
        removed.push_back(static_cast<int64_t>(l));
        removedParams += blockParameters(config, l);
    }
    if (static_cast<int64_t>(removed.size()) >= config.num_layers && config.num_layers > 0)
        throw Error("block influence: reaching ratio " + std::to_string(ratio) + " would remove every block");
    std::sort(removed.begin(), removed.end());
    return removed;
}

LlamaCheckpoint removeBlocks(const LlamaCheckpoint& checkpoint, const std::vector<int64_t>& blocks) {
    const std::set<int64_t> drop(blocks.begin(), blocks.end());
    for (int64_t b : drop)
        if (b < 0 || b >= checkpoint.config.num_layers)
            throw Error("remove blocks: block " + std::to_string(b) + " does not exist (the model has " +
                        std::to_string(checkpoint.config.num_layers) + ")");
    LlamaCheckpoint out = checkpoint;
    LlamaConfig& c = out.config;
    c.num_heads.clear();
    c.num_kv_heads.clear();
    c.intermediate_size.clear();
    out.weights.layers.clear();
    for (int64_t l = 0; l < checkpoint.config.num_layers; ++l) {
        if (drop.count(l)) continue;
        const auto i = static_cast<size_t>(l);
        c.num_heads.push_back(checkpoint.config.num_heads[i]);
        c.num_kv_heads.push_back(checkpoint.config.num_kv_heads[i]);
        c.intermediate_size.push_back(checkpoint.config.intermediate_size[i]);
        out.weights.layers.push_back(checkpoint.weights.layers[i]);
    }
    c.num_layers = static_cast<int64_t>(out.weights.layers.size());
    // Qwen's max_window_layers counts layers from the bottom: keep it pointing at the same blocks.
    if (c.max_window_layers > 0) {
        int64_t below = 0;
        for (int64_t b : drop) below += b < checkpoint.config.max_window_layers ? 1 : 0;
        c.max_window_layers -= below;
    }
    return out;
}

} // namespace npw
