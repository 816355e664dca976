#pragma once
// The shape of a LLaMA-family model. Per-layer lists from the start: pruned models have
// different head counts and MLP widths in each layer.
#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// How rotary embeddings pair the dimensions of a head.
enum class RopeLayout {
    HalfSplit,     // Hugging Face: (i, i + head_dim/2)
    AdjacentPairs  // llama2.c / Meta original / LlamaGen: (2i, 2i+1)
};

struct LlamaConfig {
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int64_t num_layers = 0;
    int64_t head_dim = 0;
    std::vector<int64_t> num_heads;          // query heads, per layer (may be 0)
    std::vector<int64_t> num_kv_heads;       // key/value heads, per layer (divides num_heads)
    std::vector<int64_t> intermediate_size;  // MLP width, per layer (may be 0)
    int64_t max_position_embeddings = 2048;
    double rope_theta = 10000.0;
    double rms_norm_eps = 1e-5;
    bool tie_word_embeddings = false;
    RopeLayout rope_layout = RopeLayout::HalfSplit;
    int64_t bos_token_id = 1;
    int64_t eos_token_id = 2;

    // Parameter count of the weights this config describes (biases included when given).
    int64_t parameterCount(bool withAttnBias = false, bool withMlpBias = false) const;
    // Throws npw::Error when the lists have the wrong length or sizes are inconsistent.
    void validate(const std::string& source) const;
    bool isUniform() const;
};

// Reads a Hugging Face config.json (LLaMA family). Scalars or per-layer lists are accepted
// for num_attention_heads, num_key_value_heads and intermediate_size.
LlamaConfig readHfLlamaConfig(const std::string& configJsonPath);
// Writes config.json; uniform models get scalars (readable by transformers), non-uniform ones lists.
std::string hfLlamaConfigJson(const LlamaConfig& config, bool attentionBias, bool mlpBias);

} // namespace npw
