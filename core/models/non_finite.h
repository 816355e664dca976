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

// Whether every value of `t` is finite (true for an undefined, empty or non-floating-point
// tensor). One pass over the values' bits for contiguous CPU float32/64, bfloat16 and float16
// (NaN and ±inf are the values whose exponent bits are all ones), stopping at the first block
// that has one; nothing the size of the tensor is allocated. at::isfinite(t).all() writes a bool
// tensor of t's size first: on a float64 Gram matrix of 2 048² that cost more than the update it
// checked (a fifth of the 110M calibration's time), and on a 4 GB mapped tensor it left 1.4 GB
// of heap behind. Any other tensor goes through float32 chunks of 4 M elements (aminmax).
bool allFinite(const at::Tensor& t);

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
