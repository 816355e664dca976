#include "core/train/demo_presets.h"
#include "core/util/error.h"

namespace npw {

std::vector<std::string> demoLmPresets() { return {"lm", "lm-gqa"}; }

LlamaConfig demoLmConfig(const std::string& preset, int64_t vocabSize) {
    LlamaConfig c;
    c.vocab_size = vocabSize;
    c.hidden_size = 192;
    c.num_layers = 6;
    c.head_dim = 32;
    c.max_position_embeddings = 512;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = true;
    c.rope_layout = RopeLayout::HalfSplit;
    c.bos_token_id = 1;
    c.eos_token_id = 2;
    if (preset == "lm") {
        c.num_heads.assign(c.num_layers, 6);
        c.num_kv_heads.assign(c.num_layers, 6);
        c.intermediate_size.assign(c.num_layers, 448);
    } else if (preset == "lm-gqa") {
        c.num_heads.assign(c.num_layers, 6);
        c.num_kv_heads.assign(c.num_layers, 2);
        c.intermediate_size.assign(c.num_layers, 512);
    } else {
        throw Error("unknown demo preset '" + preset + "' (expected lm or lm-gqa)");
    }
    return c;
}

LmTrainOptions demoLmTrainOptions(const std::string& preset, int64_t vocabSize, uint64_t seed) {
    LmTrainOptions o;
    o.config = demoLmConfig(preset, vocabSize);
    o.seqlen = 512;
    o.batchSize = 4;
    o.steps = 800;
    o.warmupSteps = 100;
    o.learningRate = 2e-3;
    o.seed = seed;
    return o;
}

} // namespace npw
