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

VqConfig demoVqConfig() {
    VqConfig c;
    c.codebookSize = 512;
    c.embedDim = 8;
    c.l2Norm = true;
    c.zChannels = 64;
    c.inChannels = 1;
    c.outChannels = 1;
    c.encoderCh = 16;
    c.encoderChannels = {16, 32, 64};  // 28 → 14 → 7
    c.decoderChannels = {16, 32, 64};
    c.encoderResBlocks = 1;
    c.decoderResBlocks = 2;            // LlamaGen: one more than the encoder
    c.normGroups = 8;
    return c;
}

VqTrainOptions demoVqTrainOptions(uint64_t seed) {
    VqTrainOptions o;
    o.config = demoVqConfig();
    o.epochs = 1;  // 937 steps: ~20 min on 2 cores
    o.batchSize = 64;
    o.learningRate = 1e-3;
    o.seed = seed;
    return o;
}

LlamaGenConfig demoC2iConfig() {
    LlamaGenSizes s;
    s.dim = 128;
    s.layers = 4;
    s.heads = 4;
    s.grid = 7;
    s.vocab = demoVqConfig().codebookSize;
    s.classes = 10;
    s.multipleOf = 32;
    s.downsample = 4;
    LlamaGenConfig c = llamaGenCustomConfig(s);
    c.name = "demo-c2i";
    return c;
}

C2iTrainOptions demoC2iTrainOptions(uint64_t seed) {
    C2iTrainOptions o;
    o.config = demoC2iConfig();
    o.epochs = 3;  // 2811 steps: ~40 min on 2 cores
    o.batchSize = 64;
    o.learningRate = 2e-3;
    o.seed = seed;
    return o;
}

} // namespace npw
