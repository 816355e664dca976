// npw info's report of a LLaMA checkpoint (info_command.h). No LibTorch here: npw-text runs it.
#include "app/npw/info_command.h"
#include "app/npw/terminal_output.h"
#include "core/io/gguf.h"
#include "core/text/tokenizer_files.h"
#include "core/util/number_text.h"

#include <iostream>
#include <sstream>

namespace npw::cli {

std::string joinList(const std::vector<int64_t>& v) {
    std::ostringstream out;
    for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
    return out.str();
}

bool infoNeedsRuntime(const Args& args) { return args.flag("json") || args.has("device") || args.has("dtype"); }

bool isGgufPath(const std::string& path) {
    return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

int runGgufInfo(const Args& args, const std::string& path) {
    const GgufFile f = readGgufFile(path);
    nlohmann::json metadata = nlohmann::json::object();
    for (const auto& [key, value] : f.metadata) metadata[key] = value.describe(16);
    nlohmann::json tensors = nlohmann::json::array();
    for (const GgufTensorInfo& t : f.tensors)
        tensors.push_back({{"name", t.name}, {"ne", t.ne}, {"type", ggmlTypeName(t.type)}, {"offset", t.offset}});
    const nlohmann::json j = {{"file", path}, {"format", "gguf"}, {"version", f.version}, {"alignment", f.alignment},
                              {"bytes", f.fileSize}, {"metadata", metadata}, {"tensors", tensors}};
    printResult(args, j, [&] {
        std::cout << "file        " << path << " (GGUF v" << f.version << ", " << f.fileSize << " bytes, "
                  << f.tensors.size() << " tensors)\n";
        for (const auto& [key, value] : f.metadata) std::cout << "  " << key << " = " << value.describe(8) << "\n";
    });
    return 0;
}

int runLlamaInfo(const Args& args, const std::string& model, const CheckpointSummary& inspection,
                 const RuntimeDescription& runtime) {
    std::string tokenizerPath = inspection.tokenizerPath;
    if (args.has("tokenizer")) {
        requireGivenTokenizerFile(args.get("tokenizer"));
        tokenizerPath = args.get("tokenizer");
    }
    const std::shared_ptr<Tokenizer> tokenizer =
        tokenizerPath.empty() ? nullptr
                              : openModelTokenizer(tokenizerPath, inspection.config.vocab_size, args.flag("allow-small-vocab"));
    // The runtime after the tokenizer, as before: a refused tokenizer is the error either way.
    const std::string device = infoNeedsRuntime(args) ? runtime() : std::string();
    const LlamaConfig& c = inspection.config;
    std::string dtypes;
    nlohmann::json bytesByDtype = nlohmann::json::object();
    for (const auto& [dtype, bytes] : inspection.bytesByDtype) {
        dtypes += (dtypes.empty() ? "" : ", ") + dtype;
        bytesByDtype[dtype] = bytes;
    }
    nlohmann::json j = {{"model", model},
                        {"source", inspection.source},
                        {"format", inspection.format},
                        {"files", inspection.files},
                        {"file_dtypes", bytesByDtype},
                        {"weight_bytes", inspection.weightBytes},
                        {"layers", c.num_layers},
                        {"hidden", c.hidden_size},
                        {"heads", c.num_heads},
                        {"kv_heads", c.num_kv_heads},
                        {"head_dim", c.head_dim},
                        {"intermediate", c.intermediate_size},
                        {"vocab", c.vocab_size},
                        {"context", c.max_position_embeddings},
                        {"rope_theta", c.rope_theta},
                        {"rope_layout", c.rope_layout == RopeLayout::HalfSplit ? "half-split" : "adjacent-pairs"},
                        {"tied_embeddings", c.tie_word_embeddings},
                        {"family", familyName(c.family)},
                        {"rope_scaling", ropeScalingName(c.rope_scaling.type)},
                        {"rope_scaling_factor", c.rope_scaling.factor},
                        {"sliding_window", c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr)},
                        {"qkv_bias", c.qkv_bias},
                        {"qk_norm", c.qk_norm},
                        {"params", c.parameterCount()},
                        {"tokenizer", tokenizerPath},
                        {"tokenizer_kind", tokenizer ? nlohmann::json(tokenizerKindName(tokenizer->kind())) : nlohmann::json(nullptr)},
                        {"device", device}};
    printResult(args, j, [&] {
        std::cout << "model          " << model << " (" << familyName(c.family) << ")\n"
                  << "source         " << inspection.source << "\n"
                  << "weights        " << dtypes << ", " << inspection.weightBytes << " bytes ("
                  << byteSizeText(static_cast<int64_t>(inspection.weightBytes)) << ") in " << inspection.files.size()
                  << " file" << (inspection.files.size() == 1 ? "" : "s") << "\n"
                  << "layers         " << c.num_layers << "\n"
                  << "hidden         " << c.hidden_size << "\n"
                  << "heads          " << joinList(c.num_heads) << "\n"
                  << "kv heads       " << joinList(c.num_kv_heads) << "\n"
                  << "head dim       " << c.head_dim << "\n"
                  << "intermediate   " << joinList(c.intermediate_size) << "\n"
                  << "vocab          " << c.vocab_size << "\n"
                  << "context        " << c.max_position_embeddings << "\n"
                  << "rope           " << j["rope_layout"].get<std::string>() << ", theta " << c.rope_theta
                  << (c.rope_scaling.type == RopeScaling::Type::None
                          ? std::string()
                          : std::string(", ") + ropeScalingName(c.rope_scaling.type) + " scaling ×" +
                                nlohmann::json(c.rope_scaling.factor).dump())
                  << "\n"
                  << "sliding window " << (c.sliding_window > 0 ? std::to_string(c.sliding_window) : "none") << "\n"
                  << "tied embedding " << (c.tie_word_embeddings ? "yes" : "no") << "\n"
                  << "parameters     " << j["params"] << "\n"
                  << "tokenizer      " << (tokenizerPath.empty() ? "(none)" : tokenizerPath) << "\n";
    });
    return 0;
}

} // namespace npw::cli
