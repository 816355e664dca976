// No LibTorch here (model_files.h): npw-text links this file, and it must stay torch-free.
#include "core/models/model_files.h"

#include "core/models/hf_llama_files.h"
#include "core/models/llama_config.h"
#include "core/text/json_fields.h"
#include "core/text/tokenizer_files.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/regular_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace npw {

bool isSlicedLlamaDirectory(const std::string& dir) {
    std::error_code ec;
    return fs::is_directory(dir, ec) && fs::exists(fs::path(dir) / kSlicedWeightsFile, ec) &&
           fs::exists(fs::path(dir) / kSlicedConfigFile, ec);
}

std::string slicedModelIsNoLlama(const std::string& model) {
    return "model '" + model + "' is a SliceGPT-sliced model (" + kSlicedModelFormat +
           "): its residual stream is rotated and sliced, with shortcut matrices no LLaMA loader, GGUF or llama.cpp "
           "has a place for; npw eval, generate, compare, zeroshot and bench run it, this command needs a LLaMA";
}

bool isLlamaGenDirectory(const std::string& path) {
    const fs::path config = fs::path(path) / "config.json";
    if (!fs::is_regular_file(config)) return false;
    try {
        const nlohmann::json j = json_fields::readJsonFile(config.string());
        return j.is_object() && j.contains("model_type") && j["model_type"] == "llamagen-c2i";
    } catch (const std::exception&) {
        return false;
    }
}

bool isMetaCheckpointDirectory(const std::string& dir) {
    return fs::is_regular_file(fs::path(dir) / "params.json") && fs::is_regular_file(fs::path(dir) / "consolidated.00.pth");
}

std::string metaTokenizerFile(const std::string& dirName) {
    const fs::path dir = fs::path(dirName).lexically_normal();
    const fs::path folder = dir.has_filename() ? dir : dir.parent_path();  // "original/" is "original"
    // Hugging Face repositories keep Meta's files in original/ and tokenizer.json above it;
    // Meta's own release has tokenizer.model (SentencePiece, or LLaMA-3's tiktoken) beside them.
    std::error_code ec;
    if (folder.filename() == "original") {
        const fs::path above = folder.parent_path() / "tokenizer.json";
        if (fs::is_regular_file(folder / "tokenizer.json", ec)) return (folder / "tokenizer.json").string();
        if (fs::is_regular_file(above, ec)) return above.string();
    }
    return findTokenizerFile(folder.string());
}

std::string llama2cTokenizerFile(const std::string& binPath) {
    // run.c reads "tokenizer.bin" (its default -z); a model trained with its own vocabulary comes
    // with llama2.c's tok{V}.model (SentencePiece, what train_vocab.sh writes) and tok{V}.bin
    // (what tokenizer.py exports), V the header's vocab_size (babyllama: tok105.model). npw looks
    // for them beside the checkpoint in that order, then the other tokenizer files it reads.
    const fs::path file(binPath);
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    std::vector<std::string> names = {"tokenizer.bin"};
    std::ifstream in;
    if (fileKindOf(binPath) == "a regular file") in.open(binPath, std::ios::binary);  // never wait on a FIFO
    if (in) {
        int32_t header[7] = {};
        if (in.read(reinterpret_cast<char*>(header), sizeof header)) {
            const int64_t vocab = std::abs(static_cast<int64_t>(header[5]));  // negative: unshared classifier
            if (vocab > 0 && vocab <= (int64_t(1) << 24)) {
                names.push_back("tok" + std::to_string(vocab) + ".bin");
                names.push_back("tok" + std::to_string(vocab) + ".model");
            }
        }
    }
    names.insert(names.end(), {"tokenizer.model", "tokenizer.json"});
    std::error_code ec;
    for (const std::string& name : names) {
        const fs::path candidate = dir / name;
        if (fs::is_regular_file(candidate, ec) && !fs::equivalent(candidate, file, ec)) return candidate.string();
    }
    return "";
}

CheckpointLocation locateCheckpoint(const std::string& model) {
    CheckpointLocation at;
    at.path = resolveModelPath(model);
    std::error_code ec;
    const fs::file_status status = fs::status(at.path, ec);
    if (fs::is_directory(status)) {
        // SliceGPT's structure is no LLaMA (sliced_llama.h): it runs through SlicedLlama.
        if (isSlicedLlamaDirectory(at.path))
            at.layout = CheckpointLayout::SlicedDirectory;
        else if (!fs::is_regular_file(fs::path(at.path) / "config.json", ec) && isMetaCheckpointDirectory(at.path))
            at.layout = CheckpointLayout::MetaRelease;
        else
            at.layout = CheckpointLayout::HfDirectory;
        return at;
    }
    if (!fs::exists(status)) {
        at.layout = CheckpointLayout::Missing;
        return at;
    }
    if (!fs::is_regular_file(status)) {
        at.layout = CheckpointLayout::NotAFileOrFolder;
        return at;
    }
    const fs::path file(at.path);
    const std::string ext = file.extension().string();
    if (ext == ".bin") {
        at.layout = CheckpointLayout::Llama2cBin;
    } else if (ext == ".pt" || ext == ".pth" || ext == ".ckpt") {
        // consolidated.NN.pth of Meta's release: the whole folder is the model.
        const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
        if (file.filename().string().rfind("consolidated.", 0) == 0 && isMetaCheckpointDirectory(dir.string())) {
            at.layout = CheckpointLayout::MetaRelease;
            at.path = dir.string();
        } else {
            at.layout = CheckpointLayout::Llama2cCkpt;
        }
    } else {
        at.layout = CheckpointLayout::UnknownFile;
    }
    return at;
}

std::string modelNotFound(const std::string& model, const CheckpointLocation& at) {
    return "model '" + model + "' not found: there is no file or directory '" + at.path + "'";
}

std::string modelIsNoneOfTheLayouts(const std::string& model, const CheckpointLocation& at) {
    return "model '" + model + "': '" + at.path +
           "' is none of: a directory with config.json and safetensors weights, a directory of Meta's release "
           "(params.json + consolidated.NN.pth), a llama2.c .bin checkpoint, llama2.c's training ckpt.pt";
}

std::string tokenizerFileOfModel(const std::string& model) {
    const CheckpointLocation at = locateCheckpoint(model);
    switch (at.layout) {
    case CheckpointLayout::Missing: throw Error(modelNotFound(model, at));
    case CheckpointLayout::SlicedDirectory: throw Error(slicedModelIsNoLlama(model));
    case CheckpointLayout::MetaRelease: return metaTokenizerFile(at.path);
    case CheckpointLayout::HfDirectory: return findTokenizerFile(at.path);
    case CheckpointLayout::Llama2cBin: return llama2cTokenizerFile(at.path);
    case CheckpointLayout::Llama2cCkpt:   // llama2.c's ckpt.pt: no tokenizer beside it by convention
    case CheckpointLayout::UnknownFile: return "";  // the loader says what the file is not
    case CheckpointLayout::NotAFileOrFolder: throw Error(modelIsNoneOfTheLayouts(model, at));
    }
    return "";
}

Llama2cLayout readLlama2cLayout(const std::string& binPath) {
    auto fail = [&](const std::string& problem) { throw Error("llama2.c checkpoint '" + binPath + "': " + problem); };
    requireRegularFile(binPath, "llama2.c checkpoint");  // a FIFO is refused, never waited on
    std::ifstream in(binPath, std::ios::binary);
    if (!in) fail(std::string("cannot open: ") + std::strerror(errno));
    std::error_code ec;
    Llama2cLayout layout;
    layout.fileBytes = fs::file_size(binPath, ec);
    if (ec) fail("cannot read its size: " + ec.message());
    constexpr uint64_t kHeaderBytes = Llama2cLayout::kHeaderBytes;
    if (layout.fileBytes < kHeaderBytes)
        fail("the file has " + std::to_string(layout.fileBytes) + " bytes, fewer than the " + std::to_string(kHeaderBytes) +
             " of the header");
    int32_t header[7];
    in.read(reinterpret_cast<char*>(header), sizeof(header));
    if (header[0] == 0x616b3432)
        fail("this is a versioned llama2.c export (magic \"ak42\"); npw reads the legacy format that run.c reads");
    if (header[0] == 0x04034b50) fail("this is a zip (PyTorch) file, not a llama2.c checkpoint");

    const int64_t dim = header[0], hidden = header[1], numLayers = header[2], heads = header[3], kvHeads = header[4];
    const int64_t signedVocab = header[5], seqLen = header[6];
    const std::string sizes = "dim=" + std::to_string(dim) + ", hidden_dim=" + std::to_string(hidden) +
                              ", n_layers=" + std::to_string(numLayers) + ", n_heads=" + std::to_string(heads) +
                              ", n_kv_heads=" + std::to_string(kvHeads) + ", vocab_size=" + std::to_string(signedVocab) +
                              ", seq_len=" + std::to_string(seqLen);
    if (dim <= 0 || hidden <= 0 || numLayers <= 0 || heads <= 0 || kvHeads <= 0 || seqLen <= 0 || signedVocab == 0 ||
        heads % kvHeads != 0 || dim % heads != 0 || (dim / heads) % 2 != 0)
        fail("the header (" + sizes + ") does not describe a LLaMA model");

    // A positive vocab_size means the classifier is the embedding; a negative one that wcls follows.
    const bool tied = signedVocab > 0;
    const int64_t vocab = tied ? signedVocab : -signedVocab;
    const int64_t headDim = dim / heads, kvDim = kvHeads * headDim;
    layout.dim = dim;
    layout.hidden = hidden;
    layout.layers = numLayers;
    layout.heads = heads;
    layout.kvHeads = kvHeads;
    layout.seqLen = seqLen;
    layout.vocab = vocab;
    layout.tied = tied;

    // The blocks in file order. Each is [n_layers, ...] for the per-layer tensors.
    layout.blocks = {
        {"token_embedding_table", {vocab, dim}}, {"rms_att_weight", {numLayers, dim}},
        {"wq", {numLayers, dim, dim}},           {"wk", {numLayers, kvDim, dim}},
        {"wv", {numLayers, kvDim, dim}},         {"wo", {numLayers, dim, dim}},
        {"rms_ffn_weight", {numLayers, dim}},    {"w1", {numLayers, hidden, dim}},
        {"w2", {numLayers, dim, hidden}},        {"w3", {numLayers, hidden, dim}},
        {"rms_final_weight", {dim}},             {"freq_cis_real", {seqLen, headDim / 2}},
        {"freq_cis_imag", {seqLen, headDim / 2}},
    };
    if (!tied) layout.blocks.push_back({"wcls", {vocab, dim}});
    // Sizes come from an untrusted header: products are overflow-checked.
    auto product = [&](const std::vector<int64_t>& factors) {
        int64_t p = 1;
        for (int64_t factor : factors)
            if (__builtin_mul_overflow(p, factor, &p)) fail("the header's sizes overflow");
        return p;
    };
    int64_t totalFloats = 0;
    for (const Llama2cLayout::Block& block : layout.blocks)
        if (__builtin_add_overflow(totalFloats, product(block.shape), &totalFloats)) fail("the header's sizes overflow");
    const uint64_t expectedBytes = kHeaderBytes + static_cast<uint64_t>(product({totalFloats, 4}));
    if (layout.fileBytes != expectedBytes)
        fail("the header (" + sizes + ") implies " + std::to_string(expectedBytes) + " bytes but the file has " +
             std::to_string(layout.fileBytes) + (layout.fileBytes < expectedBytes ? " (truncated)" : " (trailing data)"));
    layout.totalFloats = totalFloats;
    return layout;
}

std::optional<int64_t> vocabularyFromConfig(const std::string& model) {
    const CheckpointLocation at = locateCheckpoint(model);
    switch (at.layout) {
    case CheckpointLayout::Missing: throw Error(modelNotFound(model, at));
    case CheckpointLayout::SlicedDirectory: throw Error(slicedModelIsNoLlama(model));
    case CheckpointLayout::HfDirectory: return readHfDirectoryConfig(hfConfigPath(at.path)).vocab_size;
    case CheckpointLayout::Llama2cBin: return readLlama2cLayout(at.path).vocab;
    case CheckpointLayout::MetaRelease:  // params.json may say -1: the tensors say it
    case CheckpointLayout::Llama2cCkpt: return std::nullopt;  // a pickle: its tensors say it
    case CheckpointLayout::UnknownFile:
    case CheckpointLayout::NotAFileOrFolder: break;
    }
    throw Error(modelIsNoneOfTheLayouts(model, at));
}

} // namespace npw
