#include "core/models/checkpoint_inspection.h"

#include "core/models/model_loader.h"
#include "core/models/torch_llama.h"
#include "core/util/paths.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace npw {

namespace {

// Meta's release folder and llama2.c's ckpt.pt, as loadLlamaCheckpoint tells them apart.
enum class PickledFormat { None, Meta, Llama2cCkpt };

PickledFormat pickledFormatOf(const std::string& path, std::string& metaDir) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        if (!fs::is_regular_file(fs::path(path) / "config.json", ec) && isMetaCheckpointDirectory(path)) {
            metaDir = path;
            return PickledFormat::Meta;
        }
        return PickledFormat::None;
    }
    if (!fs::is_regular_file(path, ec)) return PickledFormat::None;
    const fs::path file(path);
    const std::string ext = file.extension().string();
    if (ext != ".pt" && ext != ".pth" && ext != ".ckpt") return PickledFormat::None;
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (file.filename().string().rfind("consolidated.", 0) == 0 && isMetaCheckpointDirectory(dir.string())) {
        metaDir = dir.string();
        return PickledFormat::Meta;
    }
    return PickledFormat::Llama2cCkpt;
}

} // namespace

CheckpointInspection inspectLlamaCheckpoint(const std::string& model) {
    CheckpointInspection out;
    const std::string path = resolveModelPath(model);
    std::string metaDir;
    const PickledFormat pickled = pickledFormatOf(path, metaDir);
    // Safetensors and llama2.c .bin: a Mapped load, whose tensors are views of the files that
    // nothing here touches. Meta's .pth and ckpt.pt: shapes from the archives' headers (the
    // tensors are shape-only). Either way the loader checks names, shapes and dtypes.
    const LlamaCheckpoint checkpoint = pickled == PickledFormat::Meta          ? loadMetaCheckpoint(metaDir, true)
                                       : pickled == PickledFormat::Llama2cCkpt ? loadLlama2cTrainingCheckpoint(path, true)
                                                                              : loadLlamaCheckpoint(model, WeightStorage::Mapped);
    out.source = checkpoint.source;
    out.config = checkpoint.config;
    out.tokenizerPath = checkpoint.tokenizerPath;
    out.tensors = checkpoint.origins;
    out.format = pickled == PickledFormat::Meta          ? "meta-pth"
                 : pickled == PickledFormat::Llama2cCkpt ? "llama2.c-ckpt"
                 : fs::is_directory(checkpoint.source)   ? "safetensors"
                                                         : "llama2.c";
    std::set<std::string> seen;
    for (const auto& [name, origin] : out.tensors) {
        if (seen.insert(origin.file).second) out.files.push_back(origin.file);
        out.bytesByDtype[origin.dtype] += origin.bytes;
        out.weightBytes += origin.bytes;
    }
    std::sort(out.files.begin(), out.files.end());  // shard order (model-00001-of-…, consolidated.00, …)
    if (pickled == PickledFormat::Meta) {  // every shard holds a piece of every tensor
        out.files.clear();
        const std::regex shard(R"(consolidated\.(\d+)\.pth)");
        for (const auto& entry : fs::directory_iterator(metaDir))
            if (std::regex_match(entry.path().filename().string(), shard)) out.files.push_back(entry.path().string());
        std::sort(out.files.begin(), out.files.end());
    }
    return out;
}

} // namespace npw
