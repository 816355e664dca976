#pragma once
// Copies of a checkpoint in another dtype, for the suites that need a bf16 / f16 source (the
// mapped runtime and the layer-wise road keep the source's dtype; the numpy oracle decodes bf16
// by its bits).
#include "core/io/safetensors.h"
#include "core/models/model_loader.h"

#include <string>
#include <utility>
#include <vector>

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

// The checkpoint saved as one model.safetensors with every tensor in `dtype` (as a bf16 / f16
// release ships): saved with npw's writer in float32 first, then converted tensor by tensor.
inline std::string saveAs(const LlamaCheckpoint& ck, const std::string& dir, at::ScalarType dtype) {
    saveHfLlamaDirectory(ck, dir);
    const std::string file = dir + "/model.safetensors";
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    {
        auto st = SafeTensorsFile::open(file);
        for (const std::string& name : st->names()) tensors.emplace_back(name, st->loadFloat(name).to(dtype));
    }
    writeSafeTensors(file, tensors, {{"format", "pt"}});
    return dir;
}

} // namespace npw::test
