#pragma once
// Random LLaMA checkpoints of the paper's sizes in Hugging Face layout (`npw bench
// --write-synthetic SIZE --out DIR`): config.json, bf16 safetensors shards and
// model.safetensors.index.json, written tensor by tensor so that a 7B or 8B model never has to
// fit in memory (one tensor at a time, in bf16). For measuring what opening, running and
// exporting a model of that size costs; the weights mean nothing.
#include "core/models/llama_config.h"
#include "core/models/llamagen.h"
#include "core/util/progress.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// "7b": Llama-2-7B's shape (32 layers, hidden 4096, 32 heads × 128, MHA, MLP 11008, vocabulary
// 32000, context 4096, rope_theta 10000). "8b": Llama-3-8B's (32 layers, hidden 4096, 32 heads
// over 8 KV heads, MLP 14336, vocabulary 128256, context 8192, rope_theta 500000, BOS 128000).
// Any other name: syntheticLlamaConfig's sizes (110m, 1b, tiny) in HF layout.
LlamaConfig syntheticCheckpointConfig(const std::string& size);

struct SyntheticCheckpointOptions {
    uint64_t seed = 0;
    int64_t shardBytes = int64_t(2) << 30;  // a shard is closed once it holds at least this much
    std::string tokenizerFile;              // copied in as tokenizer.json / tokenizer.model when given
};

struct SyntheticCheckpointReport {
    std::string dir;
    LlamaConfig config;
    std::vector<std::string> shards;  // file names, in order
    int64_t tensors = 0;
    int64_t parameters = 0;
    uint64_t bytes = 0;  // of the shards
};

// Writes the checkpoint into `dir`, which must not exist (a folder npw did not write is never
// replaced). The files are made in DIR.npw-partial, renamed to DIR when complete: a killed run
// leaves no DIR, and the next run reuses (clears) that one partial folder. Weights: N(0, 0.02²),
// o_proj and down_proj 0.02/sqrt(2·layers) (as initLlamaWeights), norms 1; each tensor from its
// own seeded generator, generated in row blocks and stored in bf16, so the forward stays finite
// and a tensor never exists in float32 whole.
SyntheticCheckpointReport writeSyntheticHfCheckpoint(const LlamaConfig& config, const std::string& dir,
                                                     const SyntheticCheckpointOptions& options = {},
                                                     const ProgressFn& progress = nullptr);

// Random LlamaGen class-conditional GPTs (`npw bench --write-synthetic-image SIZE --out DIR`):
// an npw image-model folder (config.json with "model_type": "llamagen-c2i", one bf16
// model.safetensors in LlamaGen's key names), written the same way (tensor by tensor, in
// DIR.npw-partial, renamed when complete). No VQ tokenizer is written: npw prune and npw info
// need none (calibration is the GPT's own generated tokens); generating pixels needs --vq.
//
// SIZE: B, L, XL, XXL or 3B (LlamaGen's published c2i shapes at 256 px: 16×16 tokens, codebook
// 16384; with or without "GPT-", any case), or "tiny" (2 layers, dim 64, 4 heads, 8×8 tokens,
// codebook 512: for tests). numClasses: rows of the class table less the null class (LlamaGen's
// ImageNet models: 1000); a calibration generates --per-class samples of every class, so fewer
// classes make a cheaper calibration of the same transformer.
LlamaGenConfig syntheticLlamaGenConfig(const std::string& size, int64_t numClasses = 1000);
std::vector<std::string> syntheticLlamaGenSizes();  // {"B", "L", "XL", "XXL", "3B", "tiny"}

// Weights as writeSyntheticHfCheckpoint's (N(0, 0.02²); wo and w2 0.02/sqrt(2·layers); norms 1;
// the class table N(0, 0.02²)); report.shards is {"model.safetensors"} (the image loader reads
// one file), report.config the transformer.
SyntheticCheckpointReport writeSyntheticLlamaGenDirectory(const LlamaGenConfig& config, const std::string& dir,
                                                          const SyntheticCheckpointOptions& options = {},
                                                          const ProgressFn& progress = nullptr);

} // namespace npw
