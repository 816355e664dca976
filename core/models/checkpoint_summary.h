#pragma once
// What `npw info` says of a LLaMA checkpoint: its config, files and weight bytes by stored dtype.
// No LibTorch here or in the .cpp, so that npw-text (app/text) answers `npw info` on a llama2.c
// .bin or a Hugging Face folder without loading it (the launcher says why: app/launcher/main.cpp).
// inspectLlamaCheckpoint (checkpoint_inspection.h) fills the same fields for every format,
// through the loaders.
#include "core/models/llama_config.h"
#include "core/models/model_files.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace npw {

struct CheckpointSummary {
    std::string source;         // the path the model resolved to
    std::string format;         // "safetensors", "llama2.c", "meta-pth", "llama2.c-ckpt"
    LlamaConfig config;
    std::string tokenizerPath;  // "" when none
    std::vector<std::string> files;                // the weight files, in order
    std::map<std::string, uint64_t> bytesByDtype;  // of the weights, by stored dtype ("F32", "BF16", ...)
    uint64_t weightBytes = 0;                      // all of them
};

// The LlamaConfig a llama2.c .bin's header describes (run.c's conventions: RoPE on adjacent
// pairs, theta 10000, BOS 1, EOS 2); loadLlama2cCheckpoint takes it too.
LlamaConfig llama2cConfig(const Llama2cLayout& layout);

// A llama2.c .bin (CheckpointLayout::Llama2cBin) from its header, checked against the file's size
// as loading checks it (readLlama2cLayout): the weights are every block but RoPE's stored
// freq_cis tables, which npw computes, as loadLlama2cCheckpoint's TensorOrigins count them.
CheckpointSummary summarizeLlama2cCheckpoint(const std::string& binPath);

// A Hugging Face folder (CheckpointLayout::HfDirectory) from its config.json and safetensors
// headers, checked as loadHfLlamaDirectory checks them, in the same order and words
// (hf_llama_files.h: one walk for both); the only values read are the few small biases whose
// zeros decide the structure, as the loader reads them. Throws NeedsTensorValues
// (hf_llama_files.h) for a tied checkpoint that stores its classifier anyway (is it the
// embedding? only the values say).
CheckpointSummary summarizeHfCheckpoint(const std::string& dir);

// A weight tensor of `bytes` bytes stored as `dtype` in `file`, counted into the summary's files,
// bytes and bytes by dtype; then sortWeightFiles puts the files in shard order
// (model-00001-of-…, consolidated.00, …).
void addWeightTensor(CheckpointSummary& summary, const std::string& file, const std::string& dtype, uint64_t bytes);
void sortWeightFiles(CheckpointSummary& summary);

} // namespace npw
