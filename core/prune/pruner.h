#pragma once
// The pruning engine's steps on a loaded model (design.md): calibrate → score → select → apply →
// report, one file per step:
//   settings.h     what is asked: method, ρ, α, λ, compensation (and their names)
//   calibration.h  calibrate: activation statistics (Gram, means, norms) per site
//   score.h        score: ScoreSet per method, computed once
//   select.h       select: a mask for any ρ, α and reading (MaskSelector, no re-scoring)
//   apply.h        apply: compensate and slice (PrunedModel)
//   report.h       report: parameter counts and achieved ratios, in one place
//   export.h       export: manifest, pruned model directory, score files
// This file holds the two steps every road shares: scoreModel (the dispatch from settings to
// scores) and applySelectionAndReport. What runs them in order, with statistics in RAM, is one
// pipeline per kind of model, in core/experiments: LanguagePruningWorkbench (language_workbench.h:
// npw prune, sweep, bench, demo and the studio) and ImagePruningWorkbench (image_workbench.h).
// The bounded road with statistics on disk is pruneLayerwise (layerwise_prune.h).
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

// The one dispatch from settings to scores over statistics in RAM (or mapped): computeScores,
// then for ranking lstar-kl the measured damage per site on the calibration windows (npw::Error
// without them). Both workbenches (npw prune, sweep, bench, the studio) score through it; the
// layer-wise road (layerwise_prune.h) calls computeScoresByLayer.
ScoreSet scoreModel(const LlamaModel& model, const ModelStats& stats, const PruneSettings& settings,
                    const ProgressFn& progress = nullptr, const CalibrationSet* calibration = nullptr,
                    SiteDamage* siteDamage = nullptr);

// Compensates and slices a selection and reports it (applyMask + makePruneReport): the apply
// step of LanguagePruningWorkbench::applySelection and ImagePruningWorkbench::prune. `settings`: as
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

} // namespace npw
