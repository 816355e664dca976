#pragma once
// The paper's other baselines and depth pruning, each in its own structure (README, "Baselines"):
//   llm-pruner       LLM-Pruner without recovery (Ma et al. 2023): coupled groups (a KV group with
//                    its query heads, an MLP channel), first-order Taylor importance through
//                    autograd, uniform per layer over a layer range (core/prune/llm_pruner.h).
//   slicegpt         SliceGPT (Ashkboos et al. 2024): RMSNorm folded, PCA rotation of the residual
//                    stream, trailing directions deleted, shortcut matrices (core/prune/slicegpt.h;
//                    the result is a SlicedLlama, core/models/sliced_llama.h).
//   block-influence  ShortGPT's depth pruning: whole decoder blocks with the lowest Block Influence
//                    removed (core/prune/block_influence.h).
// They are not PruneMethods (settings.h): nothing of the score → select → apply flow applies to
// them. Each is one function (model, calibration set, ρ, options) → BaselineRun. ρ means what it
// means everywhere: the target fraction of attention + MLP parameters removed; every run reports
// its achieved ratio and its native knob (blocks removed, per-layer ratio, slicing fraction).
#include "core/models/llama.h"
#include "core/prune/calibration.h"
#include "core/prune/method_registry.h"
#include "core/prune/report.h"

#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace npw {

class SlicedLlama;

// BaselineMethod and each baseline's row: method_registry.h.
const char* baselineMethodName(BaselineMethod method);  // "llm-pruner", "slicegpt", "block-influence"
// nullopt for any other name (then it is a PruneMethod or a typo).
std::optional<BaselineMethod> parseBaselineMethod(const std::string& name);

// LLM-Pruner's importance (its `--taylor` choices; hf_prune.py's TaylorImportance):
//   param_first  Σ over the group's weights of |w · ∂L/∂w|            (the paper's Element¹)
//   param_mix    Σ |w·∂L/∂w − ½ w² · F|, F = mean over samples of (∂L_i/∂w)²   (Element¹ + Element²)
//   vectorize    Σ over the group's rows/columns of |Σ_row w · ∂L/∂w|    (the paper's Vector-wise)
enum class TaylorKind { ParamFirst, ParamMix, Vectorize };
const char* taylorKindName(TaylorKind kind);
TaylorKind parseTaylorKind(const std::string& name);  // npw::Error naming the choices

struct BaselineOptions {
    double ratio = 0.2;  // target fraction of attention + MLP parameters removed
    // llm-pruner
    TaylorKind taylor = TaylorKind::ParamFirst;
    // Layers pruned: [first, last) ; −1 = LLM-Pruner's default, first ⌈L/8⌉ and last ⌈L/16⌉ skipped.
    int64_t layerStart = -1, layerEnd = -1;
    // LLM-Pruner's --global_pruning: every unit of the range ranked by its raw importance across
    // layers and kinds (torch-pruning's prune_global), the lowest removed; else uniform per layer.
    bool llmPrunerGlobal = false;
    // The per-layer ratio r as given (LLM-Pruner's own knob) instead of the r that reaches ρ; NaN: solve.
    double layerRatio = std::numeric_limits<double>::quiet_NaN();
    // slicegpt: dimensions kept are rounded down to a multiple of this (SliceGPT's round interval 8;
    // smaller models: the hidden size's own granularity is used when smaller).
    int64_t roundInterval = 8;
};

struct BaselineRun {
    std::string method;
    LlamaCheckpoint pruned;               // llm-pruner, block-influence: a LLaMA of today's structure
    std::shared_ptr<SlicedLlama> sliced;  // slicegpt: the sliced model (pruned left empty)
    PruneReport report;                   // method, ratio, counts, achieved ratios, per-layer sizes
    nlohmann::json native;                // the method's own knob and scores (manifest "native")
};

// Runs `method` on `model` calibrated on `set`. Progress stages name the method's steps.
BaselineRun runBaseline(BaselineMethod method, const LlamaModel& model, const CalibrationSet& set,
                        const BaselineOptions& options, const ProgressFn& progress = nullptr);

// The report's counts for a LLaMA-structured result (prunable = attention + MLP weights).
PruneReport baselineReport(const std::string& method, double ratio, const LlamaCheckpoint& dense,
                           const LlamaCheckpoint& pruned);

// npw-manifest.json of a baseline's export: the report, the native knob, the calibration.
std::string baselineManifestJson(const BaselineRun& run, const CalibrationSummary& calibration,
                                 const std::string& sourceModel);

} // namespace npw
