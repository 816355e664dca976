#pragma once
// A bfloat16 copy of a checkpoint in Hugging Face shards, for the suites that need a sharded bf16
// source (the layer-wise road keeps the source's dtype; the numpy oracle decodes bf16 by bits).
#include "core/models/model_loader.h"

#include <string>

namespace npw::test {

// Writes `dense` to `dir` in bfloat16, in shards of at most shardBytes (2 MiB: three or four
// shards for the demo models), with its tokenizer.
inline void saveBf16Shards(const LlamaCheckpoint& dense, const std::string& dir, int64_t shardBytes = 2 << 20) {
    HfStreamedModel m;
    m.config = dense.config;
    m.embed = dense.weights.embed;
    m.finalNorm = dense.weights.final_norm;
    m.lmHead = dense.weights.lm_head;
    m.oBias.assign(dense.weights.layers.size(), false);
    m.downBias.assign(dense.weights.layers.size(), false);
    m.tokenizerPath = dense.tokenizerPath;
    m.dtype = at::kBFloat16;
    m.shardBytes = shardBytes;
    saveHfLlamaDirectoryStreamed(m, dir, "", [&](size_t l) { return dense.weights.layers.at(l); });
}

} // namespace npw::test
