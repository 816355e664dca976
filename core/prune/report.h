#pragma once
// The one prune report: what a run removed, counted in one place. Every parameter count and
// achieved ratio that npw prints, saves or plots (CLI, sweeps, image workbench, studio) comes
// from countPrunedParameters or makePruneReport.
#include "core/models/llama_weights.h"
#include "core/prune/apply.h"
#include "core/prune/score.h"
#include "core/prune/select.h"
#include "core/prune/settings.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace npw {

// Parameters before and after pruning and the achieved ratios.
struct PruneCounts {
    int64_t paramsBefore = 0, paramsAfter = 0;      // every tensor (FLAP's biases count after)
    int64_t prunableBefore = 0, prunableAfter = 0;  // attention + MLP weights
    double achievedRatio = 0;       // (prunableBefore − prunableAfter) / prunableBefore
    double achievedRatioModel = 0;  // (prunableBefore − prunableAfter) / paramsBefore
};
// extraParameters: tensors outside the LlamaCheckpoint that count in the whole model (a LlamaGen
// class embedding), the same before and after.
PruneCounts countPrunedParameters(const LlamaCheckpoint& dense, const LlamaCheckpoint& pruned, int64_t extraParameters = 0);

struct PruneTimings {
    double calibrateSeconds = 0, scoreSeconds = 0, selectSeconds = 0, applySeconds = 0;
};


struct PruneReport {
    std::string method;
    double ratio = 0, alpha = 0, lambda = 0;  // numerical: the λ used (resolved from λ_rel when relative)
    // Numerical: λ_rel = λ·median c (what a relative default fixes), whether λ was given as
    // relative ("relative") or absolute ("absolute"), median c, and the cross-layer ranking.
    double lambdaRel = std::numeric_limits<double>::quiet_NaN(), medianC = std::numeric_limits<double>::quiet_NaN();
    std::string lambdaGiven, crossLayer;
    AlphaMode alphaMode = AlphaMode::Budget;
    CompensationKind compensation = CompensationKind::None;
    int64_t paramsBefore = 0, paramsAfter = 0;        // every tensor (FLAP's biases count after)
    int64_t prunableBefore = 0, prunableAfter = 0;    // attention + MLP weights
    double achievedRatio = 0;       // (prunableBefore − prunableAfter) / prunableBefore
    double achievedRatioModel = 0;  // (prunableBefore − prunableAfter) / paramsBefore
    int64_t removedUnits = 0, removedChannels = 0;
    double threshold = 0;           // of the selection (z units for numerical; NaN when uniform)
    double newtonMaxDeviation = -1;
    double boxKktViolation = -1;  // box-constrained numerical score only
    std::vector<LayerPruneReport> layers;
    PruneTimings timings;
};


// The report of one selection applied: settings, counts, what was removed, thresholds, per-layer
// losses. defaultAlpha replaces a NaN settings.alpha (MaskSelector::defaultAlpha).
// Copies the counts and achieved ratios into a report (every method's report has them).
void setPruneCounts(PruneReport& report, const PruneCounts& counts);

PruneReport makePruneReport(const PruneSettings& settings, double defaultAlpha, const ScoreSet& scores,
                            const SelectionResult& selection, const LlamaCheckpoint& dense, const PrunedModel& pruned);

// The report as JSON (what `npw prune --json` prints): params_before/after, achieved_ratio,
// achieved_ratio_model, per-layer kept counts and losses (L*), timings.
nlohmann::json pruneReportJson(const PruneReport& report);

} // namespace npw
