#pragma once
// The tensors of a LLaMA model, in torch nn.Linear layout ([out, in]) and Hugging Face
// naming, float32 on the CPU when loaded (moved/cast by the runtime).
#include "core/models/llama_config.h"

#include <ATen/core/Tensor.h>
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

struct LlamaCheckpoint {
    LlamaConfig config;
    LlamaWeights weights;
    std::string source;         // path it came from
    std::string tokenizerPath;  // tokenizer.json beside it, or empty
    // Loaded with WeightStorage::Mapped from a format that maps (model_loader.h): the tensors are
    // read-only views of the file, in its stored dtype, until copyWeightsIntoMemory.
    bool weightsMapped = false;
};

// A Mapped checkpoint (weightsMapped; model_loader.h) becomes what WeightStorage::Copy would have
// loaded: every tensor replaced by an owned, contiguous float32 copy (a tied classifier stays the
// embedding). Any other checkpoint is left as it is.
void copyWeightsIntoMemory(LlamaCheckpoint& checkpoint);

// Every tensor with its Hugging Face name, in a fixed order (embedding, layers, norm, head).
// A tied classifier is left out unless includeTiedHead (it is the embedding).
std::vector<std::pair<std::string, at::Tensor*>> namedTensors(LlamaWeights& weights, bool includeTiedHead = false);

} // namespace npw
