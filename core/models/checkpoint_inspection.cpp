#include "core/models/checkpoint_inspection.h"

#include "core/models/model_loader.h"
#include "core/models/torch_llama.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace npw {

CheckpointInspection inspectLlamaCheckpoint(const std::string& model) {
    CheckpointInspection out;
    const CheckpointLocation at = locateCheckpoint(model);
    const bool meta = at.layout == CheckpointLayout::MetaRelease;
    // Safetensors and llama2.c .bin: a Mapped load, whose tensors are views of the files that
    // nothing here touches. Meta's .pth and ckpt.pt: shapes from the archives' headers (the
    // tensors are shape-only). Either way the loader checks names, shapes and dtypes.
    const LlamaCheckpoint checkpoint = meta ? loadMetaCheckpoint(at.path, true)
                                       : at.layout == CheckpointLayout::Llama2cCkpt
                                           ? loadLlama2cTrainingCheckpoint(at.path, true)
                                           : loadLlamaCheckpoint(model, WeightStorage::Mapped);
    out.source = checkpoint.source;
    out.config = checkpoint.config;
    out.tokenizerPath = checkpoint.tokenizerPath;
    out.tensors = checkpoint.origins;
    out.format = meta                                         ? "meta-pth"
                 : at.layout == CheckpointLayout::Llama2cCkpt ? "llama2.c-ckpt"
                 : at.layout == CheckpointLayout::HfDirectory ? "safetensors"
                                                              : "llama2.c";
    for (const auto& [name, origin] : out.tensors) addWeightTensor(out, origin.file, origin.dtype, origin.bytes);
    sortWeightFiles(out);
    if (meta) {  // every shard holds a piece of every tensor
        out.files.clear();
        const std::regex shard(R"(consolidated\.(\d+)\.pth)");
        for (const auto& entry : fs::directory_iterator(at.path))
            if (std::regex_match(entry.path().filename().string(), shard)) out.files.push_back(entry.path().string());
        std::sort(out.files.begin(), out.files.end());
    }
    return out;
}

} // namespace npw
