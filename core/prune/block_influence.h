#pragma once
// Depth pruning by ShortGPT's Block Influence (Men et al. 2024): a decoder block whose output
// hidden state points where its input did changes the residual stream least. Per block
//   BI_l = 1 − mean over calibration tokens of cos(x_l, x_{l+1})
// (x_l: the hidden state entering block l, x_{l+1}: leaving it; every position of every window).
// The blocks with the lowest BI are removed, as few as reach the target ratio ρ of attention +
// MLP parameters; the result is a LLaMA with fewer layers (it saves, reloads and exports to GGUF
// like any pruned model).
#include "core/models/llama.h"
#include "core/prune/baselines.h"
#include "core/prune/calibration.h"
#include "core/util/progress.h"

#include <cstdint>
#include <vector>

namespace npw {

struct BlockInfluence {
    std::vector<double> influence;  // per block, 1 − mean cosine
    int64_t tokens = 0;             // positions averaged over
};

// Runs the model over the windows (one batch of windows at a time, no autograd) and averages
// the cosine in float64. Progress "block influence", windows done / windows.
BlockInfluence blockInfluence(const LlamaModel& model, const CalibrationSet& set, const ProgressFn& progress = nullptr);

// The fewest blocks, lowest influence first (ties: the later block), whose attention + MLP
// parameters reach ρ of the model's; sorted ascending. ρ = 0 removes none. npw::Error when ρ is
// outside [0, 1) or reaching it would remove every block.
std::vector<int64_t> blocksToRemove(const LlamaConfig& config, const std::vector<double>& influence, double ratio);

// The checkpoint without those blocks (config lists and num_layers updated; tensors shared).
LlamaCheckpoint removeBlocks(const LlamaCheckpoint& checkpoint, const std::vector<int64_t>& blocks);

// The whole run: scores, the blocks for ρ, the checkpoint without them, report and native knob.
// scores: blockInfluence(model, set) computed earlier (nullptr: computed here).
BaselineRun pruneBlockInfluence(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                                const ProgressFn& progress = nullptr, const BlockInfluence* scores = nullptr);

} // namespace npw
