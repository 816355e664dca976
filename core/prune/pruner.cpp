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

PruneRun pruneModelWithStats(const LlamaModel& model, ModelStats stats, const PruneSettings& settings,
                             const ProgressFn& progress, const CalibrationSet* calibration) {
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); };
    settings.validate();
    PruneRun run;
    PruneReport& report = run.report;
    run.stats = std::move(stats);

    auto t = Clock::now();
    run.scores = computeScores(model.checkpoint(), run.stats, settings, progress);
    if (settings.method == PruneMethod::Numerical && settings.crossLayer == CrossLayerRanking::MeasuredDamage) {
        if (!calibration)
            throw Error("ranking lstar-kl measures each site's damage on the calibration windows; statistics read "
                        "from a file carry none: calibrate (--calib) instead of --stats");
        run.siteDamage = rankBySiteDamage(run.scores, model, run.stats, *calibration);
    }
    const double scoreSeconds = seconds(t);

    t = Clock::now();
    const MaskSelector selector(run.scores);
    run.selection = selector.select(settings.ratio, settings.alpha, settings.alphaMode);
    const double selectSeconds = seconds(t);

    t = Clock::now();
    reportProgress(progress, "apply", 0, 1);
    run.pruned = applyMask(model.checkpoint(), run.stats, run.selection.mask, settings);
    reportProgress(progress, "apply", 1, 1);

    report = makePruneReport(settings, selector.defaultAlpha(), run.scores, run.selection, model.checkpoint(), run.pruned);
    report.timings.scoreSeconds = scoreSeconds;
    report.timings.selectSeconds = selectSeconds;
    report.timings.applySeconds = seconds(t);
    return run;
}

} // namespace npw
