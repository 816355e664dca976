#pragma once
// Loading LLaMA-family checkpoints from disk, whatever their format.
#include "core/models/llama_weights.h"
#include "core/models/model_files.h"

#include <functional>
#include <string>

namespace npw {

// MODEL may be: a directory with config.json + model.safetensors (or a sharded
// model.safetensors.index.json) of a llama, mistral, qwen2 or qwen3 model; a directory of
// Meta's original release (params.json + consolidated.NN.pth, or one of those files); a
// llama2.c .bin file or llama2.c's training ckpt.pt (core/models/torch_llama.h); or a bundled
// demo name ("demo:lm").
// Checks every tensor's presence and shape; throws npw::Error naming the file, the tensor and
// what was expected. Copy also checks every value (finite) as it reads it; Mapped reads no value
// (bar the few small biases whose zeros decide the structure), and the values are checked where
// they are first read, a block at a time (weight_values.h), with the same message.
//
// How the weights are held:
//  - Copy: float32 tensors in the process's own (anonymous) memory, what every command uses and
//    what LlamaCheckpoint's comment promises.
//  - Mapped: where the format allows it, each tensor is a read-only view of the memory-mapped
//    file in its stored dtype (safetensors F32/F16/BF16 aligned as every writer aligns them; a
//    llama2.c .bin, float32): no copy, pages are read from the file when touched and the kernel
//    can drop them again, so a model larger than RAM can be run a block at a time (layer-wise
//    evaluation). The views keep the mapping alive. Other formats (Meta's .pth, llama2.c's
//    ckpt.pt) are copied as with Copy. Read-only: writing through a view faults, so only code
//    that never changes weights in place takes Mapped (copyWeightsIntoMemory makes them owned).
enum class WeightStorage { Copy, Mapped };
LlamaCheckpoint loadLlamaCheckpoint(const std::string& model, WeightStorage storage = WeightStorage::Copy);

LlamaCheckpoint loadHfLlamaDirectory(const std::string& dir, WeightStorage storage = WeightStorage::Copy);
LlamaCheckpoint loadLlama2cCheckpoint(const std::string& binPath, WeightStorage storage = WeightStorage::Copy);

// copyWeightsIntoMemory (llama_weights.h) turns a Mapped checkpoint into what Copy loads.

// tokenizerFileOfModel and llama2cTokenizerFile (the model's own tokenizer file, found without
// loading the weights) are in model_files.h, which needs no LibTorch.

// Writes config.json + model.safetensors (+ the tokenizer file, copied byte for byte under its
// kind's name: tokenizer.json, tokenizer.model or tokenizer.bin) into dir, each file atomically.
// Refuses to write into the checkpoint's own source.
void saveHfLlamaDirectory(const LlamaCheckpoint& ckpt, const std::string& dir,
                          const std::string& extraConfigJson = "");

// The same directory written as its layers arrive, never the whole model in memory: the layout
// (config.json, the tensors' names and shapes) is planned from `config` and which layers will
// carry o_proj / down_proj biases; layerAt(i) delivers layer i (the adjacent-pair rotary layout
// is converted as saveHfLlamaDirectory does), in order, and each is written before the next is
// asked for. Every tensor in `dtype`, in shards of at most shardBytes (whole layers; one file
// model.safetensors when all fit, else model-0000K-of-0000N.safetensors and
// model.safetensors.index.json as Hugging Face writes them). Each file appears atomically.
struct HfStreamedModel {
    LlamaConfig config;                // the written model's
    at::Tensor embed, finalNorm, lmHead;  // lmHead ignored when the config ties it
    std::vector<bool> oBias, downBias;    // per layer: the layer will carry that bias
    std::string tokenizerPath;            // copied as saveHfLlamaDirectory copies it; "" none
    std::string source;                   // never written into
    at::ScalarType dtype = at::kFloat;
    int64_t shardBytes = int64_t{2} << 30;
};
void saveHfLlamaDirectoryStreamed(const HfStreamedModel& model, const std::string& dir, const std::string& extraConfigJson,
                                  const std::function<LlamaLayerWeights(size_t layer)>& layerAt);

} // namespace npw
