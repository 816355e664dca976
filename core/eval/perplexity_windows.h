#pragma once
// The parts of the perplexity protocol (perplexity.h) that the whole-model and the layer-wise
// evaluators share, so that both cut, check and score the same windows the same way.
#include "core/eval/perplexity.h"

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace npw {

// How many windows of options.seqlen are scored (floor(N/seqlen), capped by maxWindows), after
// checking the window against the model's context and attention span and every scored id
// against the vocabulary. npw::Error otherwise.
int64_t evaluationWindowCount(const LlamaConfig& config, const std::vector<int32_t>& ids, const PerplexityOptions& options);

// Windows first..first+count−1 as int64 ids [count, seqlen] on the CPU.
at::Tensor evaluationWindowIds(const std::vector<int32_t>& ids, int64_t seqlen, int64_t first, int64_t count);

// Where the forward of one window's ids [1, seqlen] first became non-finite
// (locateNonFinite, core/models/non_finite.h): "layer 3's MLP output became non-finite (inf)", or "".
using LocateNonFiniteFn = std::function<std::string(const at::Tensor& windowIds)>;

// Summed next-token NLL (nats) of windows first..first+B−1 of `windows`: position t of logits
// [B, T, vocab] predicts id t+1 of ids [B, T] (same device); log-softmax in float64. A window
// whose NLL is not finite is an error naming the window (1-based) and, with `locate`, where
// its forward first became non-finite.
double windowsNll(const at::Tensor& logits, const at::Tensor& ids, int64_t first, int64_t windows,
                  const LocateNonFiniteFn& locate = nullptr);

// UTF-8 bytes of the predicted tokens (1..seqlen−1) of windows first..first+count−1.
int64_t windowsScoredBytes(const DecodeFn& decode, const std::vector<int32_t>& ids, int64_t seqlen, int64_t first,
                           int64_t count);

// ppl, nll, bits per byte from totalNll, bytes, windows and seqlen (and kl from a summed KL).
void finishPerplexity(PerplexityResult& r, double totalKl);

} // namespace npw
