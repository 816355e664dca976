#pragma once
// The architectures of the bundled demo language models and the exact recipe that made them.
#include "core/models/llama_config.h"
#include "core/train/lm_trainer.h"

#include <string>
#include <vector>

namespace npw {

// "lm": multi-head; "lm-gqa": grouped-query (3 query heads per KV head). Both LLaMA
// architecture, 6 layers, hidden 192, head_dim 32, under 3M parameters with a 2048 vocab.
LlamaConfig demoLmConfig(const std::string& preset, int64_t vocabSize);
std::vector<std::string> demoLmPresets();

// The training recipe of the committed demo weights (steps, batch, learning rate...).
LmTrainOptions demoLmTrainOptions(const std::string& preset, int64_t vocabSize, uint64_t seed);

} // namespace npw
