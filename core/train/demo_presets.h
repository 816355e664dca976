#pragma once
// The architectures of the bundled demo language models and the exact recipe that made them.
#include "core/models/llama_config.h"
#include "core/train/c2i_trainer.h"
#include "core/train/lm_trainer.h"
#include "core/train/vq_trainer.h"

#include <string>
#include <vector>

namespace npw {

// "lm": multi-head; "lm-gqa": grouped-query (3 query heads per KV head). Both LLaMA
// architecture, 6 layers, hidden 192, head_dim 32, under 3M parameters with a 2048 vocab.
LlamaConfig demoLmConfig(const std::string& preset, int64_t vocabSize);
std::vector<std::string> demoLmPresets();

// The training recipe of the committed demo weights (steps, batch, learning rate...).
LmTrainOptions demoLmTrainOptions(const std::string& preset, int64_t vocabSize, uint64_t seed);

// demo:c2i, LlamaGen's design at Fashion-MNIST scale. The VQ tokenizer downsamples 28×28
// grey images by 4 to 7×7 codes from an L2-normalised codebook of 512 vectors of 8 (LlamaGen:
// 16384×8); levels 16/32/64 channels, GroupNorm with 8 groups. The GPT: 4 layers, dim 128,
// 4 heads of 32, LlamaGen's FFN rule (multiple of 32: 352), 10 classes + the null class.
VqConfig demoVqConfig();
VqTrainOptions demoVqTrainOptions(uint64_t seed);
LlamaGenConfig demoC2iConfig();
C2iTrainOptions demoC2iTrainOptions(uint64_t seed);

} // namespace npw
