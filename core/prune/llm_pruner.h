#pragma once
// LLM-Pruner without recovery (Ma et al. 2023; its hf_prune.py and TaylorImportance), on npw's
// LLaMA runtime:
//  - Groups as LLM-Pruner couples them in LLaMA: an attention unit is a KV group (its KV head's
//    k/v rows, its g query heads' q rows and the o_proj columns they feed; MHA: one head), an MLP
//    unit is a channel (gate and up row, down_proj column).
//  - Importance: first-order Taylor terms of the LM loss (mean next-token cross-entropy over the
//    calibration windows) through autograd, aggregated by sum over the group's weights
//    (TaylorKind in baselines.h). param_mix adds the second-order term with the Fisher diagonal
//    F = mean over windows of (∂L_i/∂w)², as hf_prune.py accumulates it.
//  - Layers [start, end) pruned, by default LLM-Pruner's LLaMA-7B range 4…30 of 32 generalised:
//    the first ⌈L/8⌉ and the last ⌈L/16⌉ layers are skipped; every pruned layer removes the same
//    fraction r of its units (llmPrunerRemoved's rounding; the least important removed). r is LLM-Pruner's
//    native knob; by default it is scaled up (the smallest r whose removal reaches ρ of all
//    attention + MLP parameters), or given as is (layerRatio).
//  - No recovery (LoRA) and no compensation: heads and channels are removed as they are.
// Memory: the gradient needs a backward pass through every block above the first pruned layer.
// One window at a time; its block inputs are kept (L · T · D floats), and the backward recomputes
// one block at a time from its input (activation checkpointing), so autograd holds one block's
// activations. The gradients of the pruned layers' weights are accumulated (one float32 copy of
// those weights; param_mix: two).
#include "core/prune/baselines.h"
#include "core/prune/select.h"

#include <functional>

#include <vector>

namespace npw {

struct TaylorGradients {
    // Per layer (empty tensors outside [first, layers)): ∂L/∂w of the mean loss over all windows,
    // and for param_mix F = mean_i (∂L_i/∂w)² (L_i: window i's mean loss).
    std::vector<LlamaLayerWeights> grad, fisher;
    int64_t first = 0;
    int64_t windows = 0;
    double loss = 0;  // mean next-token NLL over the windows
};
// Progress "taylor gradients", windows done / windows.
TaylorGradients taylorGradients(const LlamaModel& model, const CalibrationSet& set, int64_t firstLayer, bool fisher,
                                const ProgressFn& progress = nullptr);

// Per layer the importance of every attention unit (KV group) and MLP channel; empty vectors for
// layers outside [start, end).
struct GroupImportance {
    std::vector<std::vector<double>> heads, channels;
};
GroupImportance llmPrunerImportance(const LlamaWeights& weights, const LlamaConfig& config, const TaylorGradients& g,
                                    TaylorKind kind, int64_t start, int64_t end);

// LLM-Pruner's default layer range for L layers: [⌈L/8⌉, L − ⌈L/16⌉).
std::pair<int64_t, int64_t> llmPrunerDefaultLayers(int64_t layers);

// Units removed per layer at per-layer ratio r, rounded as torch-pruning rounds a root layer of
// units·width channels: (C − ⌊(1 − r)·C⌋) // width with C = units·width (MLP channels: width 1;
// heads: the unit's q rows); never every unit of a layer.
int64_t llmPrunerRemoved(int64_t units, double r, int64_t width = 1);

// The importances of a run (gradients once per calibration set; any ρ re-selects from them).
struct LlmPrunerScores {
    int64_t start = 0, end = 0;  // the layer range scored
    TaylorKind taylor = TaylorKind::ParamFirst;
    GroupImportance importance;
    double loss = 0;  // mean next-token NLL on the calibration windows
};
// The layer range of `options` (default or given), checked against the model.
std::pair<int64_t, int64_t> llmPrunerLayers(const LlamaConfig& config, const BaselineOptions& options);
LlmPrunerScores llmPrunerScores(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                                const ProgressFn& progress = nullptr);

// Which units LLM-Pruner removes at options.ratio (or options.layerRatio) from its importances:
// uniform per layer in the range, r solved for ρ (llmPrunerRemoved's rounding, the least
// important first), or global (options.llmPrunerGlobal). Quick: no gradients. `importances` is
// asked only when some unit goes (ρ = 0 and an empty range need none).
struct LlmPrunerSelection {
    Mask mask;                 // [layer][KV group], [layer][MLP channel]; true = kept
    double knob = 0;           // per-layer ratio r (global: the fraction of the range's units removed)
    bool reached = true;       // false when ρ cannot be reached in the range
    bool scored = false;       // the importances were asked for
    int64_t start = 0, end = 0;  // the layer range
};
LlmPrunerSelection llmPrunerSelect(const LlamaConfig& config, const BaselineOptions& options,
                                   const std::function<const LlmPrunerScores&()>& importances);

// scores: from llmPrunerScores with the same options (nullptr: computed here when ρ > 0).
BaselineRun pruneLlmPruner(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                           const ProgressFn& progress = nullptr, const LlmPrunerScores* scores = nullptr);

} // namespace npw
