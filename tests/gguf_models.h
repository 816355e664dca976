#pragma once
// Checkpoints the GGUF suites export: the demo models, pruned through core (non-uniform layers),
// and a hand-cut demo model with every layer shape llama.cpp's deci graph treats specially.
#include "core/models/model_loader.h"
#include "core/models/language_model.h"
#include "core/models/runtime.h"
#include "core/prune/pruner.h"
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
    const std::vector<int32_t> head(stream.begin(), stream.begin() + std::min<size_t>(stream.size(), 40000));
    const CalibrationSet set = drawCalibrationSet(head, 16, 128, 0, "kjv-ot.txt");
    PruneSettings settings;
    settings.method = method;
    settings.ratio = ratio;
    settings.compensation = compensation;
    return pruneModel(*lm.model, set, settings).pruned.checkpoint;
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

} // namespace npw::test
