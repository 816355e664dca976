#pragma once
// LlamaGen's class-conditional GPT (FoundationVision/LlamaGen autoregressive/models/gpt.py,
// reference.md §4): a LLaMA stack over VQ image tokens with a class embedding in front.
//
// The transformer part is held as npw's LlamaWeights (wqkv split into q/k/v at load, w1 → gate,
// w3 → up, w2 → down, tok_embeddings → embed, output → lm_head), so calibration taps, scores,
// selection, compensation and slicing of the pruning engine work on image models unchanged.
// What c2i adds: the class embedding (num_classes + 1 rows, the last is the null class of
// classifier-free guidance), the class token at position 0, and 2D rotary tables over the token
// grid that are all zero at the class-token position (its q and k are zeroed, as in LlamaGen).
//
// Sequence layout: position 0 holds the class embedding, position 1 + i the i-th image token
// (raster order over the grid); the logits at position p predict image token p. A full image
// is grid² tokens, so the model sees at most 1 + grid² − 1 positions when generating.
#include "core/models/llama.h"
#include "core/util/error.h"

#include <ATen/core/Tensor.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npw {

// LlamaGen's SwiGLU width: find_multiple(int(2·4·dim/3), multipleOf).
int64_t llamaGenFfnHidden(int64_t dim, int64_t multipleOf = 256);

struct LlamaGenConfig {
    // The LLaMA stack: vocab = codebook size, MHA (kv heads = heads), adjacent-pair rotary
    // layout, base 10000, RMSNorm eps 1e-5, untied, context = cls_token_num + grid².
    LlamaConfig transformer;
    std::string name = "custom";  // "GPT-B", "GPT-L", "GPT-XL", "GPT-XXL", "GPT-3B" or "custom"
    int64_t num_classes = 1000;
    int64_t cls_token_num = 1;    // LlamaGen's c2i models use one class token
    int64_t grid = 16;            // image tokens per side: image_size / downsample
    int64_t image_size = 256;     // pixels per side of the decoded image
    int64_t downsample = 16;      // pixels per token side (the VQ model's factor)

    int64_t blockSize() const { return grid * grid; }
    // Throws npw::Error (naming `source`) when sizes are inconsistent: head_dim not divisible by
    // 4 (the 2D rotary split), context ≠ cls + grid², kv heads ≠ heads, lists of wrong length.
    void validate(const std::string& source) const;
    std::string describe() const;  // "GPT-B (12 layers, dim 768, 12 heads, FFN 2048), 16×16 tokens, 1000 classes"
};

// The published sizes: name is B|L|XL|XXL|3B, with or without "GPT-" (case-insensitive).
// The grid is imageSize / downsample (256 → 16×16, 384 → 24×24 with VQ-16).
LlamaGenConfig llamaGenNamedConfig(const std::string& name, int64_t imageSize, int64_t vocabSize = 16384,
                                   int64_t numClasses = 1000, int64_t downsample = 16);
std::vector<std::string> llamaGenModelNames();  // {"B", "L", "XL", "XXL", "3B"}

// Explicit small sizes (tests, the demo). ffnHidden 0: LlamaGen's rule with multipleOf.
struct LlamaGenSizes {
    int64_t dim = 0, layers = 0, heads = 0, grid = 0, vocab = 0, classes = 0;
    int64_t ffnHidden = 0, multipleOf = 256;
    int64_t downsample = 16;
};
LlamaGenConfig llamaGenCustomConfig(const LlamaGenSizes& sizes);

struct LlamaGenCheckpoint {
    LlamaGenConfig config;
    LlamaWeights weights;        // the transformer (see the top of this file), CPU float32
    at::Tensor classEmbedding;   // [num_classes + 1, dim], CPU float32
    std::string source;

    // The transformer as a LLaMA checkpoint sharing the tensors: what the pruning engine takes.
    LlamaCheckpoint transformer() const;
    // The same model with another transformer (a pruned one); class embedding and grid kept.
    LlamaGenCheckpoint withTransformer(const LlamaCheckpoint& pruned) const;
};

struct LlamaGenLoadOptions {
    // The size of a PyTorch checkpoint, which does not say it. Unset: taken from the
    // checkpoint's own `args` (LlamaGen's training arguments: gpt_model, image_size,
    // downsample_size) when present, else LlamaGenSizeUnknown.
    std::optional<LlamaGenConfig> config;
};

// Thrown when a PyTorch checkpoint does not say its size and no LlamaGenLoadOptions::config names
// it: the caller words how its users give the size (the CLI: --gpt-model and --image-size).
class LlamaGenSizeUnknown : public Error {
public:
    using Error::Error;
};

// MODEL is one of
//  - a PyTorch zip checkpoint (torch.save) of LlamaGen's GPT: DDP style with the state dict
//    under "model" (also "module"/"state_dict") beside optimizer/steps/args, or a raw (FSDP)
//    state dict; keys as LlamaGen names them (cls_embedding.embedding_table.weight,
//    tok_embeddings.weight, layers.{i}.attention.wqkv.weight, ...);
//  - a directory npw wrote (config.json with "model_type": "llamagen-c2i" and per-layer
//    lists, model.safetensors with the same keys), e.g. a pruned export;
//  - "demo:NAME" for a bundled one.
// Every tensor is checked for presence, shape (against the configuration) and finiteness;
// sizes that disagree with the named configuration are an npw::Error naming the file, the
// tensor, the expected and the actual shape.
LlamaGenCheckpoint loadLlamaGenCheckpoint(const std::string& model, const LlamaGenLoadOptions& options = {});

// True when MODEL names an npw llamagen-c2i directory (or demo) or a PyTorch checkpoint whose
// state dict has cls_embedding.embedding_table.weight. Cheap: reads config.json / data.pkl only.
bool isLlamaGenModel(const std::string& model);

// The config.json of an npw llamagen-c2i directory ("model_type", per-layer lists) for `config`,
// with extraConfigJson's keys (an object, may be empty) merged in.
std::string llamaGenConfigJson(const LlamaGenConfig& config, const std::string& extraConfigJson = "");

// Writes config.json ("model_type": "llamagen-c2i", per-layer lists) and model.safetensors with
// LlamaGen's keys (q/k/v fused back into wqkv) into dir, atomically per file. Refuses to
// overwrite the checkpoint's source. extraConfigJson: an object merged into config.json.
void saveLlamaGenDirectory(const LlamaGenCheckpoint& checkpoint, const std::string& dir,
                           const std::string& extraConfigJson = "");

// Rotary tables for positions start..start+length−1 of the c2i sequence: [length, head_dim/2]
// cos and sin; zero rows at the class-token positions, then the grid in raster order with the
// first half of the pairs rotated by the row and the second half by the column.
std::pair<at::Tensor, at::Tensor> llamaGenRopeTables(const LlamaGenConfig& config, int64_t start, int64_t length,
                                                     const at::TensorOptions& options);

// The c2i forward. classes: [B] int64 class ids (num_classes = the null class) or undefined;
// tokens: [B, T] int64 image tokens or undefined (at least one of them). With classes the
// sequence starts with the class token (cache, if any, must be empty). Returns logits
// [B, (classes ? 1 : 0) + T, vocab] in the weights' dtype; the cache is extended.
at::Tensor llamaGenForward(const LlamaGenConfig& config, const LlamaWeights& weights, const at::Tensor& classEmbedding,
                           const at::Tensor& classes, const at::Tensor& tokens, KvCache* cache = nullptr,
                           const ActivationTap& tap = nullptr);

// A loaded c2i model on a runtime, ready for inference.
class LlamaGenModel {
public:
    LlamaGenModel(LlamaGenCheckpoint checkpoint, Runtime runtime);

    const LlamaGenConfig& config() const { return checkpoint_.config; }
    const LlamaGenCheckpoint& checkpoint() const { return checkpoint_; }  // CPU float32
    const LlamaModel& transformer() const { return transformer_; }        // for the pruning engine
    const Runtime& runtime() const { return transformer_.runtime(); }

    // float32 logits (CPU unless keepOnDevice); see llamaGenForward.
    at::Tensor logits(const at::Tensor& classes, const at::Tensor& tokens, KvCache* cache = nullptr,
                      bool keepOnDevice = false, const ActivationTap& tap = nullptr) const;

private:
    LlamaGenCheckpoint checkpoint_;
    LlamaModel transformer_;
    at::Tensor classEmbedding_;  // on the runtime
};

} // namespace npw
