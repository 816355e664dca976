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

// The whole flow on a loaded model: calibrate, score, select, apply. Progress stages:
// "calibrate", "score", "apply".
PruneRun pruneModel(const LlamaModel& model, const CalibrationSet& calibration, const PruneSettings& settings,
                    const ProgressFn& progress = nullptr);
// The same from statistics computed earlier (loadModelStats): score, select, apply. The ranking
// lstar-kl also needs the calibration windows the statistics came from (npw::Error without).
PruneRun pruneModelWithStats(const LlamaModel& model, ModelStats stats, const PruneSettings& settings,
                             const ProgressFn& progress = nullptr, const CalibrationSet* calibration = nullptr);

} // namespace npw
