#pragma once
// A LLaMA sliced by SliceGPT (Ashkboos et al. 2024; core/prune/slicegpt.h): RMSNorm scales folded
// into the following weights, the residual stream rotated by a PCA basis per residual location
// and cut to its leading directions, and a shortcut matrix on each residual connection. Block l
// of the sliced model, with x of width d_in:
//     x ← x · S_attn + o_proj(attention(RMSN(x)))     S_attn [d_in, d_mid], o_proj → d_mid
//     x ← x · S_mlp  + down(silu(gate(RMSN(x))) ∘ up(RMSN(x)))   S_mlp [d_mid, d_out]
// RMSN(x) = x / sqrt(Σx²/D + ε) with the ORIGINAL width D (the sliced-away directions carried
// little energy, so dividing by D keeps the normalisation of the dense model). The embedding is
// [vocab, d_0]; the classifier [vocab, d_L] (a tied embedding is untied).
//
// It is a different structure from a LLaMA: no other tool reads it. npw runs it as every other
// language model (CausalLm, llama.h: logits, a KV-cached prefill and decode for generation, the
// speed benchmark, zero-shot), saves it and reloads it in its own format, a directory with
//   npw-sliced.safetensors      embed, layers.{l}.{wq,wk,wv,wo,w_gate,w_up,w_down,attn_shortcut,
//                               mlp_shortcut[,wq_bias,wk_bias,wv_bias,wo_bias,w_down_bias,q_norm,
//                               k_norm]}, lm_head (float32)
//   npw-sliced-config.json      the dense model's config (Hugging Face layout; D, heads, RoPE)
//   npw-manifest.json           "format": "npw-sliced-llama", how it was sliced
//   the tokenizer file, copied
// GGUF export refuses it by name.
//
// The attention and MLP are the dense model's (llamaAttentionBranch and llamaMlpBranch of
// llama.h, with their KV cache, RoPE tables and decode kernels) at the sliced widths; only the
// residual path differs. At decode each shortcut is one more matrix-vector product per residual
// connection (d_in × d_mid weights), which the dense model does not have.
#include "core/models/llama.h"
#include "core/models/model_files.h"  // kSlicedModelFormat, the file names

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// A block's weights in the LLaMA layout at the sliced widths (attn_norm and ffn_norm undefined:
// folded into the readers), so the dense model's attention and MLP run them: wq [heads·hd, d_in],
// wo [d_mid, heads·hd], gate/up [inter, d_mid], down [d_out, inter], optional biases and q/k norms.
struct SlicedLayerWeights : LlamaLayerWeights {
    at::Tensor attn_shortcut, mlp_shortcut;  // [d_in, d_mid], [d_mid, d_out]
};

struct SlicedWeights {
    at::Tensor embed;    // [vocab, d_0]
    std::vector<SlicedLayerWeights> layers;
    at::Tensor lm_head;  // [vocab, d_L]
};

class SlicedLlama : public CausalLm {
public:
    // config: the dense model's (hidden_size = D of RMSN; heads and MLP widths per layer).
    SlicedLlama(LlamaConfig config, SlicedWeights weights, Runtime runtime, std::string tokenizerPath = "");

    const LlamaConfig& config() const override { return config_; }
    const SlicedWeights& weights() const { return cpuWeights_; }  // float32, CPU
    const Runtime& runtime() const override { return runtime_; }
    const std::string& tokenizerPath() const { return tokenizerPath_; }
    std::string structure() const override { return kSlicedModelFormat; }

    // Every tensor; attention + MLP weights with the shortcut matrices (what replaces the dense
    // model's prunable parameters).
    int64_t parameters() const override;
    int64_t prunableParameters() const;
    std::vector<int64_t> residualWidths() const;  // d_0, then d_mid and d_out of every layer

    // The files described above into `dir` (an existing, empty staging directory: saveSlicedModel
    // in core/prune/slicegpt.h makes the export atomic and writes the manifest).
    void writeFiles(const std::string& dir) const;
    static bool isSlicedDirectory(const std::string& dir);
    // npw::Error naming the file and tensor when something is missing or has the wrong shape.
    static SlicedLlama load(const std::string& dir, const Runtime& runtime);

protected:
    at::Tensor forward(const at::Tensor& ids, KvCache* cache, const ActivationTap& tap) const override;

private:
    LlamaConfig config_;
    // The runtime copy keeps the shortcut matrices column-major (S.t() contiguous), as the decode
    // kernel reads a linear layer's rows; a float32 CPU runtime shares them with cpuWeights_.
    SlicedWeights cpuWeights_, weights_;
    Runtime runtime_;
    std::string tokenizerPath_;
};

// The forward over any sliced weights (float32 or the runtime's dtype), without InferenceMode.
// With a cache, the ids continue its positions and extend it (SlicedLlama::logits runs this).
at::Tensor slicedForward(const LlamaConfig& config, const SlicedWeights& weights, const at::Tensor& ids,
                         KvCache* cache = nullptr, const ActivationTap& tap = nullptr);
// Its parts, for SliceGPT's sequential calibration (which runs a block with o_proj or down_proj
// not rotated yet): RMSN, the attention branch o_proj(attention(RMSN(x))) (+ its bias; zero
// when the layer has no heads) and the MLP branch down(silu(gate(RMSN(x))) ∘ up(RMSN(x))).
at::Tensor slicedRmsNorm(const at::Tensor& x, int64_t originalWidth, double eps);
at::Tensor slicedAttention(const LlamaConfig& config, const SlicedLayerWeights& L, int64_t layer, const at::Tensor& x,
                           const LlamaPositionTables& tables);
at::Tensor slicedMlp(const LlamaConfig& config, const SlicedLayerWeights& L, int64_t layer, const at::Tensor& x);

} // namespace npw
