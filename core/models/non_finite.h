#pragma once
// Where a forward pass becomes non-finite. A result (a perplexity, a log-likelihood, a KL
// divergence) that is NaN or ±∞ is an error (core/util/finite.h); its message says what became
// non-finite and where: "layer 3's MLP output became non-finite (inf) in window 2". The forward
// is run again step by step only once a result was found non-finite, so the normal path pays
// nothing.
#include "core/models/llama.h"

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// The non-finite values a tensor holds: "NaN", "inf", "-inf" or several joined with ", "; "" when
// every value is finite (or the tensor is undefined, empty or not floating-point).
std::string nonFiniteValues(const at::Tensor& t);

// Where the forward of `ids` [B, T] through `weights` first becomes non-finite, step by step (the
// token embedding, each layer's attention and MLP outputs and the residual stream after each,
// the final norm and lm_head): "layer 3's MLP output became non-finite (inf)"; "" when every step
// stays finite. Layers are numbered from 0, as in the weights' names (model.layers.3).
std::string llamaLocateNonFinite(const LlamaConfig& config, const LlamaWeights& weights, const at::Tensor& ids);

// The same for any CausalLm: a LlamaModel step by step (llamaLocateNonFinite), another structure
// (a SliceGPT-sliced model) through what its activation tap sees (o_proj's and down_proj's
// inputs) and its logits.
std::string locateNonFinite(const CausalLm& model, const at::Tensor& ids);

// Throws npw::Error when next-token logits hold NaN or ±∞ (sampling would pick garbage and a
// log-probability would be NaN): "<what> became non-finite (NaN) after 12 tokens: layer 3's MLP
// output became non-finite (inf)", where the forward of `context` (the tokens the logits follow)
// first became non-finite.
void requireFiniteLogits(const CausalLm& model, const at::Tensor& logits, const std::vector<int32_t>& context,
                         const std::string& what);

} // namespace npw
