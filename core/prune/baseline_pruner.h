#pragma once
// The baselines for many ratios on one calibration set (sweeps): what a method scores once —
// ShortGPT's block influence, LLM-Pruner's Taylor importances — is computed on the first ratio
// that needs it and reused; SliceGPT slices afresh for every width (its rotation depends on the
// slicing below). prune(ρ) equals runBaseline(method, model, set, options with ρ).
#include "core/prune/baselines.h"
#include "core/prune/block_influence.h"
#include "core/prune/llm_pruner.h"

#include <optional>

namespace npw {

class BaselinePruner {
public:
    // model and set must outlive the pruner.
    BaselinePruner(BaselineMethod method, const LlamaModel& model, const CalibrationSet& set, BaselineOptions options,
                   ProgressFn progress = nullptr);
    BaselineRun prune(double ratio);

private:
    BaselineMethod method_;
    const LlamaModel& model_;
    const CalibrationSet& set_;
    BaselineOptions options_;
    ProgressFn progress_;
    std::optional<BlockInfluence> blocks_;
    std::optional<LlmPrunerScores> groups_;
};

} // namespace npw
