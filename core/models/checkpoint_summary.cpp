#include "core/models/checkpoint_summary.h"

namespace npw {

LlamaConfig llama2cConfig(const Llama2cLayout& layout) {
    LlamaConfig config;
    config.vocab_size = layout.vocab;
    config.hidden_size = layout.dim;
    config.num_layers = layout.layers;
    config.head_dim = layout.dim / layout.heads;
    config.num_heads.assign(static_cast<size_t>(layout.layers), layout.heads);
    config.num_kv_heads.assign(static_cast<size_t>(layout.layers), layout.kvHeads);
    config.intermediate_size.assign(static_cast<size_t>(layout.layers), layout.hidden);
    config.max_position_embeddings = layout.seqLen;
    config.rope_theta = 10000.0;
    config.rms_norm_eps = 1e-5;
    config.tie_word_embeddings = layout.tied;
    config.rope_layout = RopeLayout::AdjacentPairs;
    config.bos_token_id = 1;
    config.eos_token_id = 2;
    return config;
}

CheckpointSummary summarizeLlama2cCheckpoint(const std::string& binPath) {
    const Llama2cLayout layout = readLlama2cLayout(binPath);
    CheckpointSummary out;
    out.source = binPath;
    out.format = "llama2.c";
    out.config = llama2cConfig(layout);
    out.tokenizerPath = llama2cTokenizerFile(binPath);
    out.files = {binPath};
    for (const Llama2cLayout::Block& block : layout.blocks) {
        if (block.name.rfind("freq_cis_", 0) == 0) continue;  // RoPE's tables: npw computes them
        uint64_t count = 1;
        for (int64_t n : block.shape) count *= static_cast<uint64_t>(n);  // readLlama2cLayout checked the products
        out.weightBytes += count * sizeof(float);
    }
    out.bytesByDtype["F32"] = out.weightBytes;
    return out;
}

} // namespace npw
