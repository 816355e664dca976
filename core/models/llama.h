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
#include <string>
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
// On the CPU's float32 runtime a bfloat16 / float16 matrix (a checkpoint's stored dtype, a view
// of its mapped file) stays as it is: the forward widens it as it reads it (llamaLinear), so no
// float32 copy of the model is made; vectors (norms, biases) become float32.
LlamaLayerWeights llamaLayerOnRuntime(const LlamaLayerWeights& weights, const Runtime& runtime);
// One tensor as llamaLayerOnRuntime brings it onto the runtime (embedding, classifier, norms too).
at::Tensor llamaTensorOnRuntime(const at::Tensor& tensor, const Runtime& runtime);
// Whether llamaTensorOnRuntime keeps the tensor in its stored 16-bit dtype.
bool llamaKeepsStoredDtype(const at::Tensor& tensor, const Runtime& runtime);

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

// The parts of llamaBlockForward, for structures built from the same attention and MLP with
// another residual path (SliceGPT's sliced model, sliced_llama.h). Both take the block's
// normalised input h [B, T, width] and return the branch's output before the residual add.
// Attention: o_proj(attention(h)) (+ its bias), cache and tap as llamaBlockForward; the layer
// needs at least one head. MLP: down(silu(gate(h)) ∘ up(h)) (+ its bias); at least one channel.
at::Tensor llamaAttentionBranch(const LlamaConfig& config, const LlamaLayerWeights& weights, int64_t layer,
                                const at::Tensor& h, const LlamaPositionTables& tables, KvCache* cache = nullptr,
                                const ActivationTap& tap = nullptr);
at::Tensor llamaMlpBranch(const LlamaConfig& config, const LlamaLayerWeights& weights, int64_t layer,
                          const at::Tensor& h, const ActivationTap& tap = nullptr);
// RMSNorm as the forward computes it (float32 whatever the dtype; one fused pass for the one or
// two rows of a decode step): x / sqrt(Σx²/width + eps) · weight. width 0 means x's own width;
// an undefined weight means none (SliceGPT's RMSN divides by the dense width D, unscaled).
at::Tensor llamaRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, int64_t width = 0);
// x [..., in] · wᵀ (+ bias) as the forward's linear layers run it: one or two rows through the
// GEMV kernel (gemv.h; w's rows must be contiguous for it), more through GEMM. w may be a CPU
// bfloat16 / float16 matrix with float32 x (widened as it is read; float32 result).
at::Tensor llamaLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = {});
// The position tables of `length` new positions after cache.length, the rotary part sliced from
// the cache's own tables (grown by doubling; llamaForward's decode path).
LlamaPositionTables llamaCachedPositionTables(const LlamaConfig& config, KvCache& cache, int64_t length,
                                              const at::TensorOptions& options);

// What runs text, whatever its structure: the LLaMA runtime (LlamaModel below) and a
// SliceGPT-sliced model (SlicedLlama, sliced_llama.h). Generation, `npw compare`, zero-shot,
// perplexity and the speed benchmark take one of these, so a command need not know which.
class CausalLm {
public:
    virtual ~CausalLm() = default;
    // The dense model's config: vocabulary, context, attention span, heads (the KV cache's shape).
    virtual const LlamaConfig& config() const = 0;
    virtual const Runtime& runtime() const = 0;
    // Every tensor of the model (a tied classifier once).
    virtual int64_t parameters() const = 0;
    // "llama", or "npw-sliced-llama" (kSlicedModelFormat).
    virtual std::string structure() const = 0;

    // ids: [B, T] int64 (any device). Returns float32 logits [B, T, vocab] on the CPU... or on
    // the device when keepOnDevice. With a cache the ids continue its positions and extend it
    // (a prompt's prefill, then one token at a time). tap: the inputs of o_proj and down_proj.
    at::Tensor logits(const at::Tensor& ids, KvCache* cache = nullptr, bool keepOnDevice = false,
                      const ActivationTap& tap = nullptr) const;

protected:
    // ids on the runtime's device; logits in the runtime's dtype (under InferenceMode).
    virtual at::Tensor forward(const at::Tensor& ids, KvCache* cache, const ActivationTap& tap) const = 0;
};

// A loaded model on a runtime (device + dtype), ready for inference (no autograd).
class LlamaModel : public CausalLm {
public:
    LlamaModel(LlamaCheckpoint checkpoint, Runtime runtime);

    const LlamaConfig& config() const override { return checkpoint_.config; }
    // The weights as loaded: CPU float32, or (WeightStorage::Mapped) views of the file in its dtype.
    const LlamaCheckpoint& checkpoint() const { return checkpoint_; }
    const Runtime& runtime() const override { return runtime_; }
    const LlamaWeights& deviceWeights() const { return weights_; }
    int64_t parameters() const override { return checkpoint_.config.parameterCount(); }
    std::string structure() const override { return "llama"; }

protected:
    at::Tensor forward(const at::Tensor& ids, KvCache* cache, const ActivationTap& tap) const override;

private:
    LlamaCheckpoint checkpoint_;
    Runtime runtime_;
    LlamaWeights weights_;  // on runtime_.device in runtime_.dtype (16-bit CPU matrices as stored)
};

} // namespace npw
