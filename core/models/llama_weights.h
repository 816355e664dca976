#pragma once
// The tensors of a LLaMA model, in torch nn.Linear layout ([out, in]) and Hugging Face
// naming, float32 on the CPU when loaded (moved/cast by the runtime).
#include "core/models/llama_config.h"

#include <ATen/core/Tensor.h>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace npw {

struct LlamaLayerWeights {
    at::Tensor attn_norm;   // [hidden]
    at::Tensor wq;          // [heads*head_dim, hidden]
    at::Tensor wk;          // [kv_heads*head_dim, hidden]
    at::Tensor wv;          // [kv_heads*head_dim, hidden]
    at::Tensor wq_bias;     // [heads*head_dim] or undefined (Qwen2; LLaMA's attention_bias)
    at::Tensor wk_bias;     // [kv_heads*head_dim] or undefined
    at::Tensor wv_bias;     // [kv_heads*head_dim] or undefined
    at::Tensor q_norm;      // [head_dim] or undefined (Qwen3: RMSNorm of each query head)
    at::Tensor k_norm;      // [head_dim] or undefined (Qwen3: RMSNorm of each key head)
    at::Tensor wo;          // [hidden, heads*head_dim]
    at::Tensor wo_bias;     // [hidden] or undefined (FLAP's bias compensation adds it)
    at::Tensor ffn_norm;    // [hidden]
    at::Tensor w_gate;      // [inter, hidden]
    at::Tensor w_up;        // [inter, hidden]
    at::Tensor w_down;      // [hidden, inter]
    at::Tensor w_down_bias; // [hidden] or undefined
};

struct LlamaWeights {
    at::Tensor embed;       // [vocab, hidden]
    std::vector<LlamaLayerWeights> layers;
    at::Tensor final_norm;  // [hidden]
    at::Tensor lm_head;     // [vocab, hidden]; the same tensor as embed when tied
};

// Where a loaded tensor's values lie in the checkpoint's files: the file, the tensor's name
// there, and the flat index in that tensor of this one's first element (a llama2.c .bin stores
// each layer's matrix inside one block per kind: "wq" holds every layer's query weights).
struct TensorOrigin {
    std::string file;
    std::string tensor;
    int64_t firstIndex = 0;
    std::string dtype;            // as stored: "F32", "F16", "BF16"
    std::vector<int64_t> shape;   // of this tensor (the part of the stored tensor it views)
    uint64_t bytes = 0;           // its bytes in the file
};

struct LlamaCheckpoint {
    LlamaConfig config;
    LlamaWeights weights;
    std::string source;         // path it came from
    std::string tokenizerPath;  // tokenizer.json beside it, or empty
    // Loaded with WeightStorage::Mapped from a format that maps (model_loader.h): the tensors are
    // read-only views of the file, in its stored dtype, until copyWeightsIntoMemory.
    bool weightsMapped = false;
    // By Hugging Face name (namedTensors), where each tensor came from. valuesChecked false: the
    // values have not been read yet (a Mapped load reads headers only), so whoever first reads a
    // block checks it (checkWeightValues, core/models/weight_values.h) and a NaN is still named
    // by file, tensor and index.
    std::map<std::string, TensorOrigin> origins;
    bool valuesChecked = true;
};

// A Mapped checkpoint (weightsMapped; model_loader.h) becomes what WeightStorage::Copy would have
// loaded: every tensor replaced by an owned, contiguous float32 copy (a tied classifier stays the
// embedding), each tensor's values checked as it is converted (checkWeightValues). Any other
// checkpoint is left as it is.
void copyWeightsIntoMemory(LlamaCheckpoint& checkpoint);

// Every tensor with its Hugging Face name, in a fixed order (embedding, layers, norm, head).
// A tied classifier is left out unless includeTiedHead (it is the embedding).
std::vector<std::pair<std::string, at::Tensor*>> namedTensors(LlamaWeights& weights, bool includeTiedHead = false);

} // namespace npw
