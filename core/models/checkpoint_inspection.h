#pragma once
// What a LLaMA checkpoint is, read from its config and tensor headers only: no weight value is
// read, so it takes seconds and little memory at any size (npw info, npw tokenize). The same
// validation of presence and shapes as loading: it goes through the loaders, with
// WeightStorage::Mapped (safetensors, llama2.c .bin: views of the files that nothing touches) or
// headers only (Meta's .pth, llama2.c's ckpt.pt: shapes from the archives). The values read
// anyway are few and small: biases whose zeros decide the structure, and, where a format
// stores a classifier that may be the embedding (Meta, ckpt.pt), those two tensors.
#include "core/models/checkpoint_summary.h"
#include "core/models/llama_weights.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace npw {

// The summary (checkpoint_summary.h: what npw info prints) and every tensor's origin.
struct CheckpointInspection : CheckpointSummary {
    // Every weight tensor by Hugging Face name: file, name there, stored dtype, shape, bytes.
    std::map<std::string, TensorOrigin> tensors;
};

// MODEL as loadLlamaCheckpoint takes it. Throws npw::Error as loading would for a missing or
// misshapen tensor or a bad config; a NaN in the weights is not seen (no value is read).
CheckpointInspection inspectLlamaCheckpoint(const std::string& model);

} // namespace npw
