// The whole flow on a loaded model (pruner.h): score, select, apply, report.
#include "core/prune/pruner.h"

#include "core/util/error.h"

#include <chrono>
#include <cmath>

namespace npw {

PruneRun pruneModel(const LlamaModel& model, const CalibrationSet& calibration, const PruneSettings& settings,
                    const ProgressFn& progress) {
    settings.validate();  // before the expensive calibration
    const auto start = std::chrono::steady_clock::now();
    ModelStats stats = calibrate(model, calibration, progress);
    const double calibrateSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    PruneRun run = pruneModelWithStats(model, std::move(stats), settings, progress, &calibration);
    run.report.timings.calibrateSeconds = calibrateSeconds;
    return run;
}

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

PruneRun pruneModelWithStats(const LlamaModel& model, ModelStats stats, const PruneSettings& settings,
                             const ProgressFn& progress, const CalibrationSet* calibration) {
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); };
    settings.validate();
    PruneRun run;
    run.stats = std::move(stats);

    auto t = Clock::now();
    run.scores = scoreModel(model, run.stats, settings, progress, calibration, &run.siteDamage);
    const double scoreSeconds = seconds(t);

    t = Clock::now();
    const MaskSelector selector(run.scores);
    run.selection = selector.select(settings.ratio, settings.alpha, settings.alphaMode);
    const double selectSeconds = seconds(t);

    AppliedSelection applied =
        applySelectionAndReport(model.checkpoint(), run.stats, run.scores, run.selection, settings, selector.defaultAlpha(), progress);
    run.pruned = std::move(applied.pruned);
    run.report = std::move(applied.report);
    run.report.timings.scoreSeconds = scoreSeconds;
    run.report.timings.selectSeconds = selectSeconds;
    return run;
}

} // namespace npw
