// No LibTorch here (checkpoint_summary.h): npw-text compiles this file.
#include "core/models/checkpoint_summary.h"

#include "core/models/hf_llama_files.h"
#include "core/text/tokenizer_files.h"

#include <algorithm>

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

void addWeightTensor(CheckpointSummary& summary, const std::string& file, const std::string& dtype, uint64_t bytes) {
    if (std::find(summary.files.begin(), summary.files.end(), file) == summary.files.end()) summary.files.push_back(file);
    summary.bytesByDtype[dtype] += bytes;
    summary.weightBytes += bytes;
}

void sortWeightFiles(CheckpointSummary& summary) { std::sort(summary.files.begin(), summary.files.end()); }

namespace {

// The loader's store (model_loader.cpp) with header entries for tensors: takeHfLlamaTensors
// walks both alike.
class HfHeaderStore {
public:
    struct Tensor {
        const SafeTensorsHeader* file = nullptr;
        std::string name;
    };
    HfHeaderStore(const std::string& dir, const std::string& configPath)
        : listing_(dir, configPath, [](const std::string& path) { return SafeTensorsHeader::open(path); }) {}

    bool has(const std::string& name) const { return listing_.has(name); }
    Tensor take(const std::string& name, const HfShape& expected) { return {&listing_.take(name, expected), name}; }
    static bool defined(const Tensor& t) { return t.file != nullptr; }
    static bool nonZero(const Tensor& t) { return t.file->anyNonZero(t.name); }
    [[noreturn]] static bool equal(const Tensor&, const Tensor&) { throw NeedsTensorValues{}; }
    const std::string& fileOf(const std::string& name) const { return listing_.fileOf(name); }
    const std::string& configPath() const { return listing_.configPath(); }
    void rejectUntaken() const { listing_.rejectUntaken(); }
    const HfSafetensorsListing& listing() const { return listing_; }

private:
    HfSafetensorsListing listing_;
};

} // namespace

CheckpointSummary summarizeHfCheckpoint(const std::string& dir) {
    CheckpointSummary out;
    out.source = dir;
    out.format = "safetensors";
    const std::string configPath = hfConfigPath(dir);
    out.config = readHfDirectoryConfig(configPath);
    HfHeaderStore store(dir, configPath);
    HfTensorSlots<HfHeaderStore::Tensor> slots;
    takeHfLlamaTensors(out.config, store, slots);
    out.tokenizerPath = findTokenizerFile(dir);
    for (const auto& [name, file] : store.listing().taken()) {
        const TensorInfo& info = file->info(name);
        addWeightTensor(out, file->path(), info.dtype, info.end - info.begin);
    }
    sortWeightFiles(out);
    return out;
}

} // namespace npw
