#pragma once
// Perplexity of a model larger than memory (issue 17): the protocol of perplexity.h, run one
// decoder block at a time, as layer-wise calibration does (core/prune/calibration.h).
//
// The weights stay where the loader put them: with WeightStorage::Mapped (model_loader.h), views
// of the memory-mapped safetensors / llama2.c file. Every window is embedded (rows gathered from
// the mapped table), then each block is brought onto the runtime (llamaLayerOnRuntime: no copy
// for float32, bfloat16 or float16 weights on the CPU — 16-bit matrices are widened a block of
// rows at a time as the GEMMs read them — a converted copy of that one block on another device)
// and runs over the hidden states of every window before the next block is touched; last, final
// norm and lm_head per batch of windows. Anonymous memory is therefore the hidden states of all
// windows (windows · seqlen · hidden · element size) plus one block's activations (and one
// converted block, and the classifier, when the device differs from the runtime's);
// the file's pages are read once per block, in order, and the kernel may drop them again.
//
// Windows are batched exactly as evaluatePerplexity batches them and every block is the same
// function (llamaBlockForward), so each block sees the same float32 inputs: the result equals
// whole-model evaluation (to float32 rounding of the BLAS; the tests hold it to 1e-6 relative).
#include "core/eval/perplexity.h"
#include "core/models/llama_weights.h"
#include "core/models/runtime.h"

#include <cstdint>
#include <vector>

namespace npw {

// Scores `ids` as evaluatePerplexity does (no reference model: that would need a second model
// in memory). Progress "perplexity (layer-wise)": block · windows + windows done, of
// (layers + 1) · windows (the last unit is the classifier).
PerplexityResult evaluatePerplexityLayerwise(const LlamaCheckpoint& checkpoint, const Runtime& runtime,
                                             const std::vector<int32_t>& ids, const PerplexityOptions& options,
                                             const DecodeFn& decode = nullptr, const ProgressFn& progress = nullptr);

// Bytes of the weights once on `runtime` (parameters · element size): what whole-model
// evaluation holds in memory.
int64_t modelRuntimeBytes(const LlamaConfig& config, const Runtime& runtime);
// Models bigger than this fraction of physical RAM are evaluated layer-wise (as npw prune's
// statistics: kStatsRamFraction).
constexpr double kModelRamFraction = 0.5;
// On a GPU, whole-model evaluation holds the model there: more than this fraction of the GPU's
// memory (deviceMemoryBytes) is evaluated layer-wise, one block on the GPU at a time (the rest
// is the batch's activations and logits, and the allocator's slack).
constexpr double kModelGpuFraction = 0.75;
// modelRuntimeBytes > kModelRamFraction · physicalBytes (never when physicalBytes is 0).
bool evaluationBelongsLayerwise(const LlamaConfig& config, const Runtime& runtime, int64_t physicalBytes);
// The same for a loaded checkpoint: every tensor as the runtime holds it (llamaTensorOnRuntime:
// a bfloat16 / float16 matrix stays 2 bytes an element on the CPU, a mapped file's pages), the
// rest at the runtime's element size.
int64_t modelRuntimeBytes(const LlamaCheckpoint& checkpoint, const Runtime& runtime);
bool evaluationBelongsLayerwise(const LlamaCheckpoint& checkpoint, const Runtime& runtime, int64_t physicalBytes);
// The hidden states layer-wise evaluation keeps: windows · seqlen · hidden · element size.
int64_t layerwiseEvalHiddenBytes(const LlamaConfig& config, const Runtime& runtime, int64_t windows, int64_t seqlen);

} // namespace npw
