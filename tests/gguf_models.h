#pragma once
// Checkpoints the GGUF suites export: the demo models, pruned through core (non-uniform layers),
// and a hand-cut demo model with every layer shape llama.cpp's deci graph treats specially.
#include "core/models/model_loader.h"
#include "core/models/language_model.h"
#include "core/models/runtime.h"
#include "core/prune/apply.h"
#include "core/prune/pruner.h"
#include "workbench_prune.h"
#include "core/util/paths.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <string>

namespace npw::test {

// demo:NAME pruned at ratio by method, calibrated on 16 windows of 128 tokens of the Old Testament.
inline LlamaCheckpoint prunedDemo(const std::string& demo, PruneMethod method, CompensationKind compensation,
                                  double ratio) {
    const LanguageModel lm = openLanguageModel(demo, chooseRuntime("cpu", "float32"));
    const std::vector<int32_t> stream =
        readCalibrationStream(resourcesDir() + "/demo/data/kjv-ot.txt", false, lm);
    const std::vector<int32_t> head(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(stream.size(), 40000)));
    const CalibrationSet set = drawCalibrationSet(head, 16, 128, 0, "kjv-ot.txt");
    PruneSettings settings;
    settings.method = method;
    settings.ratio = ratio;
    settings.compensation = compensation;
    return pruneOnWindows(lm, set, settings).pruned.checkpoint;
}

// demo:lm cut by hand so that its layers are every case the exporter must get right:
//   0: no head, 200 of 448 channels (llama.cpp takes the head size from layer 0)
//   1: all heads, no channel (n_ff = 0 trap)
//   2: no head but an o_proj bias (FLAP), MLP  3: nothing at all (an identity layer)
//   4: 2 heads + o_proj bias, no channel but a down_proj bias   5: dense, with both biases
inline LlamaCheckpoint extremeDemo() {
    LlamaCheckpoint c = loadLlamaCheckpoint("demo:lm");
    const int64_t hd = c.config.head_dim, D = c.config.hidden_size;
    at::manual_seed(11);
    auto bias = [&] { return at::randn({D}, at::kFloat) * 0.05; };
    auto cut = [&](int64_t l, int64_t heads, int64_t channels) {
        LlamaLayerWeights& L = c.weights.layers[l];
        L.wq = L.wq.narrow(0, 0, heads * hd).contiguous();
        L.wk = L.wk.narrow(0, 0, heads * hd).contiguous();
        L.wv = L.wv.narrow(0, 0, heads * hd).contiguous();
        L.wo = L.wo.narrow(1, 0, heads * hd).contiguous();
        L.w_gate = L.w_gate.narrow(0, 0, channels).contiguous();
        L.w_up = L.w_up.narrow(0, 0, channels).contiguous();
        L.w_down = L.w_down.narrow(1, 0, channels).contiguous();
        c.config.num_heads[l] = c.config.num_kv_heads[l] = heads;
        c.config.intermediate_size[l] = channels;
    };
    cut(0, 0, 200);
    cut(1, 6, 0);
    cut(2, 0, 448);
    c.weights.layers[2].wo_bias = bias();
    cut(3, 0, 0);
    cut(4, 2, 0);
    c.weights.layers[4].wo_bias = bias();
    c.weights.layers[4].w_down_bias = bias();
    c.weights.layers[5].wo_bias = bias();
    c.weights.layers[5].w_down_bias = bias();
    c.config.validate("extremeDemo");
    return c;
}

// A small random LLaMA in llama2.c's adjacent-pair rotary layout (what loadLlama2cCheckpoint
// gives), GQA, with the demo tokenizer: exported without any Q/K permutation.
inline LlamaCheckpoint adjacentPairsDemoVocab() {
    LlamaCheckpoint c = tinyLlama({4, 4}, {2, 2}, {24, 24}, 5, RopeLayout::AdjacentPairs);
    const LlamaCheckpoint demo = loadLlamaCheckpoint("demo:lm");
    c.tokenizerPath = demo.tokenizerPath;
    c.source = "tiny-llama2c-layout";
    c.config.vocab_size = demo.config.vocab_size;
    c.weights.embed = at::randn({c.config.vocab_size, c.config.hidden_size});
    c.weights.lm_head = at::randn({c.config.vocab_size, c.config.hidden_size}) * 0.5;
    return c;
}

// demo:lm's trained weights given a family's features (the rest of its structure is LLaMA's):
// Qwen2 random q/k/v biases, Mistral as it is, Llama 3.1 llama3 RoPE scaling with an original
// context of 64 (so that the scaling matters within the test's length), llama linear scaling.
inline LlamaCheckpoint demoAsFamily(ModelFamily family, RopeScaling::Type scaling = RopeScaling::Type::None,
                                    const std::string& demo = "demo:lm") {
    LlamaCheckpoint c = loadLlamaCheckpoint(demo);
    c.source = std::string("demo-as-") + familyName(family);
    c.config.family = family;
    at::manual_seed(21);
    if (family == ModelFamily::Qwen2) {
        c.config.qkv_bias = true;
        for (LlamaLayerWeights& L : c.weights.layers) {
            L.wq_bias = at::randn({L.wq.size(0)}) * 0.3;
            L.wk_bias = at::randn({L.wk.size(0)}) * 0.3;
            L.wv_bias = at::randn({L.wv.size(0)}) * 0.1;
        }
    }
    if (scaling == RopeScaling::Type::Llama3) {
        c.config.rope_scaling = {RopeScaling::Type::Llama3, 8.0, 1.0, 4.0, 64};
    } else if (scaling == RopeScaling::Type::Linear) {
        c.config.rope_scaling.type = RopeScaling::Type::Linear;
        c.config.rope_scaling.factor = 2.0;
    }
    if (family == ModelFamily::Mistral) c.config.sliding_window = 256;
    c.config.validate(c.source);
    return c;
}

// A small random Qwen3 (q/k norms, head_dim 24 ≠ hidden 64 / 4 heads, GQA 4/2, untied) with the
// demo tokenizer.
inline LlamaCheckpoint qwen3DemoVocab() {
    const LlamaCheckpoint demo = loadLlamaCheckpoint("demo:lm");
    at::manual_seed(23);
    LlamaCheckpoint c;
    LlamaConfig& k = c.config;
    k.family = ModelFamily::Qwen3;
    k.qk_norm = true;
    k.vocab_size = demo.config.vocab_size;
    k.hidden_size = 64;
    k.num_layers = 2;
    k.head_dim = 24;
    k.num_heads = {4, 4};
    k.num_kv_heads = {2, 2};
    k.intermediate_size = {96, 96};
    k.max_position_embeddings = 256;
    k.rope_theta = 1000000.0;
    k.rms_norm_eps = 1e-6;
    const double s = 1.0 / std::sqrt(64.0);
    LlamaWeights& w = c.weights;
    w.embed = at::randn({k.vocab_size, 64});
    w.final_norm = 1 + 0.1 * at::randn({64});
    w.lm_head = at::randn({k.vocab_size, 64}) * s * 2;
    for (int l = 0; l < 2; ++l) {
        LlamaLayerWeights L;
        L.attn_norm = 1 + 0.1 * at::randn({64});
        L.wq = at::randn({96, 64}) * s * 1.5;
        L.wk = at::randn({48, 64}) * s * 1.5;
        L.wv = at::randn({48, 64}) * s;
        L.q_norm = 1 + 0.3 * at::randn({24});
        L.k_norm = 1 + 0.3 * at::randn({24});
        L.wo = at::randn({64, 96}) * 0.7 / std::sqrt(96.0);
        L.ffn_norm = 1 + 0.1 * at::randn({64});
        L.w_gate = at::randn({96, 64}) * s;
        L.w_up = at::randn({96, 64}) * s;
        L.w_down = at::randn({64, 96}) * 0.7 / std::sqrt(96.0);
        w.layers.push_back(L);
    }
    c.tokenizerPath = demo.tokenizerPath;
    c.source = "tiny-qwen3";
    k.validate(c.source);
    return c;
}

// A checkpoint pruned the same way in every layer: `keepGroups` KV groups (the first ones) and
// every other MLP channel when `mlp`. No compensation.
inline LlamaCheckpoint prunedUniformly(const LlamaCheckpoint& c, int64_t keepGroups, bool mlp) {
    Mask mask;
    for (int64_t l = 0; l < c.config.num_layers; ++l) {
        std::vector<bool> heads(static_cast<size_t>(c.config.num_kv_heads[l]), false);
        for (int64_t g = 0; g < keepGroups; ++g) heads[static_cast<size_t>(g)] = true;
        std::vector<bool> channels(static_cast<size_t>(c.config.intermediate_size[l]), true);
        if (mlp)
            for (size_t i = 1; i < channels.size(); i += 2) channels[i] = false;
        mask.keepHeads.push_back(heads);
        mask.keepChannels.push_back(channels);
    }
    PruneSettings settings;
    settings.compensation = CompensationKind::None;
    return applyMask(c, ModelStats{}, mask, settings).checkpoint;
}

} // namespace npw::test
