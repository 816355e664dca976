#pragma once
// The LLaMA forward pass: RMSNorm, rotary embeddings (both layouts; default, linear or llama3
// frequencies), multi-head and grouped-query causal attention, SwiGLU MLP, optional q/k/v
// biases (Qwen2) and output biases, Qwen3's per-head q/k RMSNorm, tied or untied classifier, KV
// cache. The families of llama_config.h are this one function with their parts switched on. Per-layer head counts and MLP widths may differ; a layer with no
// heads (or no channels) contributes nothing from that block.
#include "core/models/llama_weights.h"
#include "core/models/runtime.h"

#include <ATen/core/Tensor.h>
#include <functional>
#include <vector>

namespace npw {

// Where calibration taps the activations: the inputs of the scored linear layers.
enum class TapSite { AttentionOutputInput, MlpDownInput };
// Called with the input of o_proj / down_proj, [B, T, width] (float32 on the model's device).
using ActivationTap = std::function<void(int64_t layer, TapSite site, const at::Tensor& input)>;

struct KvCache {
    // Per layer [B, kv_heads, capacity, head_dim]; positions 0..length−1 are filled. The capacity
    // grows by doubling (llama.cpp), so a decode step writes one row instead of copying the cache.
    std::vector<at::Tensor> k, v;
    int64_t length = 0;  // positions already cached
    // Rotary cos/sin [capacity, head_dim/2] of positions 0.. (llamaForward's 1D tables), grown by
    // doubling like the cache, so that a decoded token slices them instead of rebuilding them
    // in float64 (six ops and three allocations per token).
    at::Tensor ropeCos, ropeSin;
    void clear() { k.clear(); v.clear(); length = 0; ropeCos = ropeSin = at::Tensor(); }
};

// What every block of one forward shares: rotary cos/sin [T, head_dim/2] for positions
// start..start+T−1 and the causal mask [T, start+T] (undefined for a single new position).
struct LlamaPositionTables {
    at::Tensor cos, sin, mask;
};
LlamaPositionTables llamaPositionTables(const LlamaConfig& config, int64_t start, int64_t length,
                                        const at::TensorOptions& options);

// One decoder block (layer `layer`): x [B, T, hidden] → x + attention → + MLP. llamaForward is
// embedding, this for every layer, final norm and classifier; layer-wise calibration runs it on
// its own. The cache, when given, must already hold num_layers slots.
at::Tensor llamaBlockForward(const LlamaConfig& config, const LlamaLayerWeights& weights, int64_t layer, at::Tensor x,
                             const LlamaPositionTables& tables, KvCache* cache = nullptr,
                             const ActivationTap& tap = nullptr);

// The classifier on the last block's output: final RMSNorm, then lm_head (logits [B, T, vocab]
// in the weights' dtype). llamaForward ends with it; layer-wise evaluation calls it on its own.
at::Tensor llamaOutputLogits(const LlamaConfig& config, const at::Tensor& finalNorm, const at::Tensor& lmHead,
                             const at::Tensor& x);

// One layer's weights as the forward runs them on `runtime` (device, dtype, contiguous): what
// LlamaModel does to every layer up front, and layer-wise evaluation to one block at a time. A
// tensor already there (float32 CPU weights, or a float32 view of a mapped file) is not copied.
LlamaLayerWeights llamaLayerOnRuntime(const LlamaLayerWeights& weights, const Runtime& runtime);

// Functional forward over any weights (also used by the trainer with autograd on).
// ids: [B, T] int64 on the weights' device. Returns logits [B, T, vocab] in the weights'
// dtype. With a cache, positions start at cache->length and the cache is extended.
at::Tensor llamaForward(const LlamaConfig& config, const LlamaWeights& weights, const at::Tensor& ids,
                        KvCache* cache = nullptr, const ActivationTap& tap = nullptr);

// The same stack on given input embeddings [B, T, hidden] (weights' dtype and device) with
// the rotary tables of the T new positions, cos/sin [T, head_dim/2] in config.rope_layout's
// pairing. LlamaGen uses it with a class embedding in front of the token embeddings and 2D
// grid tables that are zero at the class-token position; llamaForward is this with
// at::embedding(embed, ids) and the 1D tables of positions cache->length.. .
at::Tensor llamaForwardEmbeddings(const LlamaConfig& config, const LlamaWeights& weights, const at::Tensor& embeddings,
                                  const at::Tensor& cos, const at::Tensor& sin, KvCache* cache = nullptr,
                                  const ActivationTap& tap = nullptr);

// A loaded model on a runtime (device + dtype), ready for inference (no autograd).
class LlamaModel {
public:
    LlamaModel(LlamaCheckpoint checkpoint, Runtime runtime);

    const LlamaConfig& config() const { return checkpoint_.config; }
    const LlamaCheckpoint& checkpoint() const { return checkpoint_; }  // CPU float32 weights
    const Runtime& runtime() const { return runtime_; }
    const LlamaWeights& deviceWeights() const { return weights_; }

    // ids: [B, T] int64 (any device). Returns float32 logits [B, T, vocab] on the CPU... or
    // on the device when keepOnDevice.
    at::Tensor logits(const at::Tensor& ids, KvCache* cache = nullptr, bool keepOnDevice = false,
                      const ActivationTap& tap = nullptr) const;

private:
    LlamaCheckpoint checkpoint_;
    Runtime runtime_;
    LlamaWeights weights_;  // on runtime_.device in runtime_.dtype
};

} // namespace npw
