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

// The Hugging Face model families npw runs: LLaMA's structure with a family's differences
// (transformers' modeling_{llama,mistral,qwen2,qwen3}.py are the definitions).
//   llama   — optionally biases on q/k/v/o (attention_bias) and gate/up/down (mlp_bias)
//   mistral — LLaMA's structure; sliding_window limits the attention span
//   qwen2   — biases on q, k and v (always); o_proj and the MLP have none
//   qwen3   — RMSNorm of each head's q and k (over head_dim) before RoPE; head_dim is free
enum class ModelFamily { Llama, Mistral, Qwen2, Qwen3 };
const char* familyName(ModelFamily family);  // "llama", "mistral", "qwen2", "qwen3"

// Scaling of RoPE's frequencies (transformers' modeling_rope_utils.py). Linear divides every
// inverse frequency by factor; llama3 (Llama 3.1+) divides the low frequencies (wavelength
// above original_max_position_embeddings / low_freq_factor) by factor, keeps the high ones
// (wavelength below original / high_freq_factor) and interpolates smoothly between.
struct RopeScaling {
    enum class Type { None, Linear, Llama3 };
    Type type = Type::None;
    double factor = 1.0;
    double low_freq_factor = 1.0;
    double high_freq_factor = 4.0;
    int64_t original_max_position_embeddings = 8192;
};
const char* ropeScalingName(RopeScaling::Type type);  // "default", "linear", "llama3"

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
    ModelFamily family = ModelFamily::Llama;
    RopeScaling rope_scaling;
    // The attention span when the model limits it (Mistral's sliding_window, Qwen's with
    // use_sliding_window), else 0. npw runs full causal attention, which equals sliding-window
    // attention only over at most this many positions: longer windows are refused by name.
    int64_t sliding_window = 0;
    int64_t max_window_layers = 0;  // Qwen: layers from this one on use the sliding window
    bool qkv_bias = false;          // q/k/v projections have biases (Qwen2 always; llama/qwen3 attention_bias)
    bool qk_norm = false;           // Qwen3: RMSNorm of q and k per head before RoPE

    // RoPE's inverse frequency of each pair j < head_dim/2: theta^(-2j/head_dim), scaled as
    // rope_scaling says.
    std::vector<double> ropeInverseFrequencies() const;
    // The longest sequence one forward may attend over: max_position_embeddings, or the
    // sliding window when it is shorter.
    int64_t attentionSpan() const;
    // Throws npw::Error when `positions` (an evaluated or calibration window, a prompt plus its
    // continuation) is longer than the sliding window, naming both; `what` says which.
    void checkAttentionSpan(int64_t positions, const std::string& what) const;

    // Parameter count of the weights this config describes (biases included when given).
    int64_t parameterCount(bool withAttnBias = false, bool withMlpBias = false) const;
    // Throws npw::Error when the lists have the wrong length or sizes are inconsistent.
    void validate(const std::string& source) const;
    bool isUniform() const;
};

// Reads a Hugging Face config.json of model_type llama, mistral, qwen2 or qwen3 (any other is
// refused by name). Scalars or per-layer lists are accepted for num_attention_heads,
// num_key_value_heads and intermediate_size. rope_scaling (or rope_parameters) of type
// default, linear or llama3 (key rope_type, or the older type); any other is refused by name.
// qkv_bias is set for qwen2 only: for the others the loader sets it from the tensors.
LlamaConfig readHfLlamaConfig(const std::string& configJsonPath);
// Which biases a saved directory has: flags of transformers' config for the family.
struct HfBiasFlags {
    bool attentionBias = false;  // llama/qwen3 attention_bias: q, k, v and o all have one
    bool mlpBias = false;        // llama mlp_bias: gate, up and down all have one
};
// Writes config.json in the family's own layout (model_type, architectures, its keys);
// uniform models get scalars (readable by transformers), non-uniform ones lists.
std::string hfLlamaConfigJson(const LlamaConfig& config, const HfBiasFlags& biases);

} // namespace npw
