#pragma once
// Parameter counts of a LLaMA checkpoint, as every report, sweep and plot counts them.
#include "core/models/llama_weights.h"

#include <cstdint>

namespace npw {

// All tensors of a checkpoint (a tied classifier once, biases included).
int64_t checkpointParameters(const LlamaCheckpoint& checkpoint);
// The prunable weights: q, k, v, o, gate, up and down of every layer (no biases).
int64_t prunableParameters(const LlamaConfig& config);
// The same of one layer.
int64_t prunableLayerParameters(const LlamaConfig& config, size_t layer);

} // namespace npw
