#pragma once
// LLaMA checkpoints saved with torch.save, read through npw's safe unpickler
// (core/io/torch_checkpoint.h: nothing in a checkpoint is ever called):
//
//  - Meta's original release: a directory with params.json and consolidated.00.pth …
//    consolidated.NN.pth, one file per model-parallel rank (meta-llama/llama `llama/model.py`
//    and its fairscale layers). Shards are joined exactly: column-parallel weights (wq, wk, wv,
//    w1, w3, output) along dim 0, row-parallel ones (wo, w2) along dim 1, norms replicated
//    (checked equal), tok_embeddings along dim 1 (LLaMA-1/2's ParallelEmbedding) or dim 0
//    (Llama-3's VocabParallelEmbedding), told apart by the shard's shape. vocab_size -1 means
//    the embedding's rows; the MLP width follows from dim, multiple_of and ffn_dim_multiplier
//    and is checked against w1. RoPE on adjacent pairs. `use_scaled_rope: true` (Llama 3.1+)
//    does not say its factor (8 for 3.1/3.3, 32 for 3.2 1B/3B): it is taken from
//    setMetaRopeScalingFactor (the CLI's --rope-scaling-factor) or NPW_ROPE_SCALING_FACTOR,
//    else the checkpoint is refused by name.
//  - llama2.c's training checkpoint ckpt.pt (train.py: {"model": state dict, "model_args":
//    dict, "optimizer", "iter_num", …}); keys may carry torch.compile's "_orig_mod." prefix;
//    the MLP width comes from the shapes; the optimizer's state is never read.
#include "core/models/llama_weights.h"
#include "core/models/model_files.h"

#include <optional>
#include <string>

namespace npw {

// The factor of Meta's use_scaled_rope; nullopt: not given (then NPW_ROPE_SCALING_FACTOR is used).
void setMetaRopeScalingFactor(std::optional<double> factor);
std::optional<double> metaRopeScalingFactor();

// isMetaCheckpointDirectory and metaTokenizerFile: model_files.h.
// headersOnly: shapes from the archives' headers, no storage read (the tensors are shape-only, on
// LibTorch's meta device, and origins names each one's file and stored dtype): what
// inspectLlamaCheckpoint needs. A tied classifier is still told by its values (embedding and
// output compared shard by shard, when they are cut alike).
// mapped: the weights in their stored dtype, without a float32 copy: with one shard (7B, and every
// Llama-3 8B) each tensor is a read-only view of the memory-mapped consolidated.00.pth, its values
// checked where first read (weight_values.h); with several, each tensor is joined once from the
// shards' views (one copy in the stored dtype, never both shards' copies) and checked as it is
// joined. weightsMapped is set, as for a Mapped safetensors load (copyWeightsIntoMemory applies).
LlamaCheckpoint loadMetaCheckpoint(const std::string& dir, bool headersOnly = false, bool mapped = false);

// A torch.save file holding a dict with "model_args" and "model" (llama2.c's train.py).
LlamaCheckpoint loadLlama2cTrainingCheckpoint(const std::string& path, bool headersOnly = false);

} // namespace npw
