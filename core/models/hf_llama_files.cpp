// No LibTorch here (hf_llama_files.h): npw-text compiles this file.
#include "core/models/hf_llama_files.h"

#include "core/io/shape_text.h"
#include "core/text/json_fields.h"

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace npw {

std::string hfLayerTensorName(int64_t layer, const std::string& suffix) {
    return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::string hfConfigPath(const std::string& dir) {
    const std::string configPath = (fs::path(dir) / "config.json").string();
    std::error_code ec;
    if (!fs::is_regular_file(configPath, ec))
        throw Error("'" + dir + "' is not a Hugging Face model directory: it has no config.json");
    return configPath;
}

LlamaConfig readHfDirectoryConfig(const std::string& configPath) {
    LlamaConfig config = readHfLlamaConfig(configPath);
    config.validate(configPath);
    return config;
}

std::vector<ZeroBias> zeroMlpBiases(const LlamaConfig& config, size_t layer) {
    const int64_t inter = config.intermediate_size[layer];
    return {{"mlp.gate_proj.bias", inter}, {"mlp.up_proj.bias", inter}};
}

HfSafetensorsListing::HfSafetensorsListing(const fs::path& dir, std::string configPath, const Open& open)
    : configPath_(std::move(configPath)) {
    const fs::path single = dir / "model.safetensors";
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(single)) {  // transformers prefers it over an index too
        std::shared_ptr<const SafeTensorsHeader> file = open(single.string());
        for (const std::string& name : file->names()) fileOf_[name] = file;
        listing_ = single.string();
    } else if (fs::exists(index)) {
        openShards(dir, index.string(), open);
        listing_ = index.string();
    } else {
        throw Error("'" + dir.string() + "' has no model.safetensors or model.safetensors.index.json (npw reads "
                    "Hugging Face weights in safetensors format only)");
    }
}

const SafeTensorsHeader& HfSafetensorsListing::take(const std::string& name, const HfShape& expected) {
    auto it = fileOf_.find(name);
    if (it == fileOf_.end())
        throw Error("missing tensor '" + name + "' in '" + listing_ + "' (config '" + configPath_ + "' implies shape " +
                    formatShape(expected) + ")");
    const SafeTensorsHeader& file = *it->second;
    const TensorInfo& info = file.info(name);
    if (info.dtype != "F32" && info.dtype != "F16" && info.dtype != "BF16")
        throw Error("tensor '" + name + "' in '" + file.path() + "' has dtype " + info.dtype +
                    "; npw loads F32, F16 or BF16 weights");
    if (info.shape != expected)
        throw Error("tensor '" + name + "' in '" + file.path() + "' has shape " + formatShape(info.shape) + " but config '" +
                    configPath_ + "' implies " + formatShape(expected));
    taken_[name] = &file;
    return file;
}

void HfSafetensorsListing::rejectUntaken() const {
    auto endsWith = [](const std::string& text, const std::string& suffix) {
        return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    for (const auto& [name, file] : fileOf_) {
        // Older transformers saved this RoPE buffer; it is recomputed from rope_theta.
        if (taken_.count(name) || endsWith(name, ".self_attn.rotary_emb.inv_freq")) continue;
        throw Error("unexpected tensor '" + name + "' in '" + file->path() + "': a LLaMA with config '" + configPath_ +
                    "' has no such tensor (npw refuses a checkpoint it does not fully understand)");
    }
}

// Opens each shard once; the index and the shards must agree tensor for tensor.
void HfSafetensorsListing::openShards(const fs::path& dir, const std::string& indexPath, const Open& open) {
    const nlohmann::json index = json_fields::readJsonFile(indexPath, "index '" + indexPath + "'");
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
        throw Error("index '" + indexPath + "' has no \"weight_map\" object");
    std::map<std::string, std::shared_ptr<const SafeTensorsHeader>> shards;
    for (const auto& entry : index.at("weight_map").items()) {
        const std::string& name = entry.key();
        if (!entry.value().is_string())
            throw Error("index '" + indexPath + "': the shard of tensor '" + name + "' must be a file name, got " +
                        json_fields::preview(entry.value()));
        const std::string shard = entry.value().get<std::string>();
        // Shards live beside the index; a path could reach any file on the machine.
        if (shard.empty() || shard == "." || shard == ".." || fs::path(shard).filename() != shard)
            throw Error("index '" + indexPath + "': the shard '" + shard + "' of tensor '" + name +
                        "' is not a plain file name in the same directory");
        auto& file = shards[shard];
        if (!file) file = open((dir / shard).string());
        if (!file->has(name))
            throw Error("index '" + indexPath + "' puts tensor '" + name + "' in '" + file->path() +
                        "', which does not contain it");
        fileOf_[name] = file;
    }
    for (const auto& [shard, file] : shards)
        for (const std::string& name : file->names()) {
            auto it = fileOf_.find(name);
            if (it == fileOf_.end() || it->second != file)
                throw Error("tensor '" + name + "' in '" + file->path() + "' is not assigned to that file by index '" +
                            indexPath + "'");
        }
}

} // namespace npw
