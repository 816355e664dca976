#pragma once
// What a model's files are, told from their names, configs and headers alone: no tensor, and no
// LibTorch in this file or its .cpp. The loaders use it, and so does npw-text (app/text), the
// program that answers `npw tokenize` without loading LibTorch (app/launcher says why).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npw {

// A SliceGPT export (core/models/sliced_llama.h): its two files, and the structure it declares.
inline constexpr const char* kSlicedModelFormat = "npw-sliced-llama";
inline constexpr const char* kSlicedWeightsFile = "npw-sliced.safetensors";
inline constexpr const char* kSlicedConfigFile = "npw-sliced-config.json";
bool isSlicedLlamaDirectory(const std::string& dir);
// The refusal of a command that needs a LLaMA, given a SliceGPT export.
std::string slicedModelIsNoLlama(const std::string& model);

// Which layout a model path holds: the one decision every reader of a LLaMA checkpoint takes
// (loadLlamaCheckpoint, inspectLlamaCheckpoint, tokenizerFileOfModel, vocabularyFromConfig),
// from names and which files exist; no file is read.
enum class CheckpointLayout {
    Missing,          // no file or folder there
    SlicedDirectory,  // a SliceGPT export (sliced_llama.h): no LLaMA; refused by name
    MetaRelease,      // Meta's release: a folder with params.json + consolidated.00.pth and no
                      // config.json, or a consolidated.NN.pt/.pth/.ckpt file in such a folder
    HfDirectory,      // any other folder: read as config.json + safetensors (its loader names what is missing)
    Llama2cBin,       // a .bin file: llama2.c's checkpoint
    Llama2cCkpt,      // another .pt, .pth or .ckpt file: llama2.c's training ckpt.pt
    UnknownFile,      // a regular file of none of these kinds
    NotAFileOrFolder, // a FIFO, a socket, a device: never opened
};
struct CheckpointLocation {
    CheckpointLayout layout = CheckpointLayout::Missing;
    std::string path;  // the model resolved (demo names); for MetaRelease the release's folder
};
// npw::Error only where MODEL names a demo that does not exist (resolveModelPath).
CheckpointLocation locateCheckpoint(const std::string& model);
// The refusals of a location no LLaMA can be read from: Missing ("not found") and the rest
// ("is none of" the layouts, listed).
std::string modelNotFound(const std::string& model, const CheckpointLocation& at);
std::string modelIsNoneOfTheLayouts(const std::string& model, const CheckpointLocation& at);

// True for a folder npw wrote a LlamaGen image model into (config.json's model_type
// "llamagen-c2i"; llamagen.h): npw info and generate take it as an image model.
bool isLlamaGenDirectory(const std::string& path);

// True for a directory with params.json and consolidated.00.pth (Meta's release).
bool isMetaCheckpointDirectory(const std::string& dir);
// The tokenizer of a Meta release folder: in a Hugging Face repository's "original/" folder the
// tokenizer.json there or above it; else tokenizer.json, tokenizer.model or tokenizer.bin
// beside the weights (findTokenizerFile); "" when none.
std::string metaTokenizerFile(const std::string& dir);

// The tokenizer file loadLlamaCheckpoint(model) takes as the model's own, found without loading
// the weights ("" when there is none; npw::Error when the model does not exist). One lookup for
// the CLI, the studio and the loaders:
//  - a model folder (Hugging Face): tokenizer.json, else tokenizer.model (SentencePiece, or
//    LLaMA-3's tiktoken), else tokenizer.bin;
//  - Meta's release: the same beside the weights; in an "original/" folder, tokenizer.json there
//    or in the folder above first (metaTokenizerFile);
//  - a llama2.c .bin: tokenizer.bin beside it, as run.c uses, else llama2.c's tok{V}.bin /
//    tok{V}.model for its vocabulary V, else tokenizer.model / tokenizer.json (llama2cTokenizerFile).
std::string tokenizerFileOfModel(const std::string& model);
std::string llama2cTokenizerFile(const std::string& binPath);

// A llama2.c .bin checkpoint (run.c's legacy format) as its 28-byte header describes it, checked
// against the file's size: sizes that describe a LLaMA, and exactly the bytes they imply. What
// loadLlama2cCheckpoint reads before any weight. npw::Error "llama2.c checkpoint 'FILE': ..." otherwise.
struct Llama2cLayout {
    static constexpr uint64_t kHeaderBytes = 7 * sizeof(int32_t);
    int64_t dim = 0, hidden = 0, layers = 0, heads = 0, kvHeads = 0, seqLen = 0;
    int64_t vocab = 0;  // the header's vocab_size without its sign
    bool tied = true;   // a positive vocab_size: the classifier is the embedding (else wcls follows)
    struct Block {
        std::string name;            // llama2.c's name (token_embedding_table, wq, ...)
        std::vector<int64_t> shape;  // [n_layers, ...] for the per-layer blocks
    };
    std::vector<Block> blocks;  // in file order, from byte kHeaderBytes on
    int64_t totalFloats = 0;    // of all blocks
    uint64_t fileBytes = 0;
};
Llama2cLayout readLlama2cLayout(const std::string& binPath);

// The model's vocabulary size as its config or header says it, reading no tensor: a Hugging Face
// folder's config.json (read and checked as loading does), a llama2.c .bin's header (checked
// against the file's size). nullopt where only the tensors' shapes say it (Meta's release, whose
// params.json may say -1; llama2.c's ckpt.pt, a pickle): then inspectLlamaCheckpoint does.
// npw::Error for a model that does not exist or is none of those.
std::optional<int64_t> vocabularyFromConfig(const std::string& model);

} // namespace npw
