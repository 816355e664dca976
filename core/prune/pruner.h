#pragma once
// The pruning engine's whole flow on a loaded model (design.md): calibrate → score → select →
// apply → report, one file per step:
//   settings.h     what is asked: method, ρ, α, λ, compensation (and their names)
//   calibration.h  calibrate: activation statistics (Gram, means, norms) per site
//   score.h        score: ScoreSet per method, computed once
//   select.h       select: a mask for any ρ, α and reading (MaskSelector, no re-scoring)
//   apply.h        apply: compensate and slice (PrunedModel)
//   report.h       report: parameter counts and achieved ratios, in one place
//   export.h       export: manifest, pruned model directory, score files
#include "core/models/language_model.h"
#include "core/prune/apply.h"
#include "core/prune/calibration.h"
#include "core/prune/export.h"
#include "core/prune/report.h"
#include "core/prune/score.h"
#include "core/prune/select.h"
#include "core/prune/settings.h"
#include "core/prune/site_damage.h"
#include "core/util/progress.h"

namespace npw {

struct PruneRun {
    ModelStats stats;
    ScoreSet scores;
    SelectionResult selection;
    PrunedModel pruned;
    PruneReport report;
    SiteDamage siteDamage;  // lstar-kl only: the measured damage and factors per site
};

// The one dispatch from settings to scores over statistics in RAM (or mapped): computeScores,
// then for ranking lstar-kl the measured damage per site on the calibration windows (npw::Error
// without them). pruneModelWithStats, the workbench (npw prune, sweep, the studio) and the bench
// all score through it; the layer-wise road (layerwise_prune.h) calls computeScoresByLayer.
ScoreSet scoreModel(const LlamaModel& model, const ModelStats& stats, const PruneSettings& settings,
                    const ProgressFn& progress = nullptr, const CalibrationSet* calibration = nullptr,
                    SiteDamage* siteDamage = nullptr);

// Compensates and slices a selection and reports it (applyMask + makePruneReport): the apply
// step of pruneModelWithStats and of LanguagePruningWorkbench::applySelection. `settings`: as
// applied (the selection's ρ, α, λ and the compensation); defaultAlpha: the α the report names
// when settings.alpha is NaN. Progress "apply"; report.timings.applySeconds set.
struct AppliedSelection {
    PrunedModel pruned;
    PruneReport report;
};
AppliedSelection applySelectionAndReport(const LlamaCheckpoint& checkpoint, const ModelStats& stats,
                                         const ScoreSet& scores, const SelectionResult& selection,
                                         const PruneSettings& settings, double defaultAlpha,
                                         const ProgressFn& progress = nullptr);

// The whole flow on a loaded model: calibrate, score, select, apply. Progress stages:
// "calibrate", "score", "apply".
PruneRun pruneModel(const LlamaModel& model, const CalibrationSet& calibration, const PruneSettings& settings,
                    const ProgressFn& progress = nullptr);
// The same from statistics computed earlier (loadModelStats): score, select, apply. The ranking
// lstar-kl also needs the calibration windows the statistics came from (npw::Error without).
PruneRun pruneModelWithStats(const LlamaModel& model, ModelStats stats, const PruneSettings& settings,
                             const ProgressFn& progress = nullptr, const CalibrationSet* calibration = nullptr);

} // namespace npw
