#pragma once
// Fresh LLaMA weights for training and for synthetic models of a named shape (benchmarks).
#include "core/models/llama_weights.h"

#include <cstdint>

namespace npw {

// normal(0, 0.02), residual output projections (o_proj, down_proj) scaled by 1/sqrt(2·layers),
// norms at 1, lm_head tied to the embedding when the config says so. Seeded: the same seed
// gives the same weights on every machine (LibTorch's CPU generator).
LlamaWeights initLlamaWeights(const LlamaConfig& config, uint64_t seed);

} // namespace npw
