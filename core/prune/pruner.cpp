// The steps every pruning road shares (pruner.h): the scoring dispatch, apply and report.
#include "core/prune/pruner.h"

#include "core/util/error.h"

#include <chrono>
#include <cmath>

namespace npw {

ScoreSet scoreModel(const LlamaModel& model, const ModelStats& stats, const PruneSettings& settings,
                    const ProgressFn& progress, const CalibrationSet* calibration, SiteDamage* siteDamage) {
    ScoreSet scores = computeScores(model.checkpoint(), stats, settings, progress);
    if (settings.method == PruneMethod::Numerical && settings.crossLayer == CrossLayerRanking::MeasuredDamage) {
        if (!calibration)
            throw Error("ranking lstar-kl measures each site's damage on the calibration windows; statistics read "
                        "from a file carry none: calibrate (--calib) instead of --stats");
        SiteDamage damage = rankBySiteDamage(scores, model, stats, *calibration);
        if (siteDamage) *siteDamage = std::move(damage);
    }
    return scores;
}

AppliedSelection applySelectionAndReport(const LlamaCheckpoint& checkpoint, const ModelStats& stats,
                                         const ScoreSet& scores, const SelectionResult& selection,
                                         const PruneSettings& settings, double defaultAlpha,
                                         const ProgressFn& progress) {
    const auto start = std::chrono::steady_clock::now();
    AppliedSelection out;
    reportProgress(progress, "apply", 0, 1);
    out.pruned = applyMask(checkpoint, stats, selection.mask, settings);
    reportProgress(progress, "apply", 1, 1);
    out.report = makePruneReport(settings, defaultAlpha, scores, selection, checkpoint, out.pruned);
    out.report.timings.applySeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

} // namespace npw
