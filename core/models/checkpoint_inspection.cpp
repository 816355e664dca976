#include "core/models/checkpoint_inspection.h"

#include "core/io/torch_checkpoint.h"
#include "core/models/model_loader.h"
#include "core/models/torch_llama.h"
#include "core/util/paths.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace npw {

namespace {

uint64_t elementBytes(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64") return 8;
    if (dtype == "F32" || dtype == "I32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
    return 1;
}

// Meta's shards and llama2.c's ckpt.pt are loaded whole to know the config (their tensors are
// pickled; the loader joins and compares them); their sizes and dtypes still come from the
// archives' headers, which list every storage without reading it.
void addTorchFileTensors(CheckpointInspection& out, const std::string& path, const std::string& stateDictPath) {
    TorchCheckpointOptions options;
    options.stateDictPath = stateDictPath;
    const std::shared_ptr<TorchCheckpoint> ck = TorchCheckpoint::open(path, options);
    out.files.push_back(path);
    for (const std::string& name : ck->names()) {
        const TorchTensorInfo& info = ck->info(name);
        int64_t numel = 1;
        for (int64_t d : info.shape) numel *= d;
        const uint64_t bytes = static_cast<uint64_t>(numel) * elementBytes(info.dtype);
        out.bytesByDtype[info.dtype] += bytes;
        out.weightBytes += bytes;
    }
}

} // namespace

CheckpointInspection inspectLlamaCheckpoint(const std::string& model) {
    CheckpointInspection out;
    // Mapped: safetensors and llama2.c .bin tensors are views of the files and nothing here
    // touches their pages; the loader checks names, shapes and dtypes from the headers.
    LlamaCheckpoint checkpoint = loadLlamaCheckpoint(model, WeightStorage::Mapped);
    out.source = checkpoint.source;
    out.config = checkpoint.config;
    out.tokenizerPath = checkpoint.tokenizerPath;
    if (!checkpoint.origins.empty()) {
        out.format = fs::is_directory(checkpoint.source) ? "safetensors" : "llama2.c";
        out.tensors = checkpoint.origins;
        std::set<std::string> seen;
        for (const auto& [name, origin] : out.tensors) {
            if (seen.insert(origin.file).second) out.files.push_back(origin.file);
            out.bytesByDtype[origin.dtype] += origin.bytes;
            out.weightBytes += origin.bytes;
        }
        return out;
    }
    out.headersOnly = false;
    const std::string path = resolveModelPath(model);
    const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
    if (isMetaCheckpointDirectory(dir.string()) &&
        (fs::is_directory(path) || fs::path(path).filename().string().rfind("consolidated.", 0) == 0)) {
        out.format = "meta-pth";
        const std::regex shard(R"(consolidated\.(\d+)\.pth)");
        std::vector<std::string> shards;
        for (const auto& entry : fs::directory_iterator(dir))
            if (std::regex_match(entry.path().filename().string(), shard)) shards.push_back(entry.path().string());
        std::sort(shards.begin(), shards.end());
        for (const std::string& file : shards) addTorchFileTensors(out, file, "");
    } else {
        out.format = "llama2.c-ckpt";
        addTorchFileTensors(out, path, "model");
    }
    return out;
}

} // namespace npw
