#pragma once
// The in-RAM road of `npw prune` for tests that draw their own calibration windows (random ids,
// a fixture's text, a model's own samples): LanguagePruningWorkbench's statistics of the windows,
// then its prune — score, select at the settings' ρ, α and reading, apply, report — as the CLI,
// the studio and the bench take it. Tests of one step (score, select, apply) call core's steps.
#include "core/experiments/language_workbench.h"

#include <memory>

namespace npw::test {

// stats (when given): the statistics the workbench calibrated.
inline WorkbenchPrune pruneOnWindows(const LanguageModel& lm, const CalibrationSet& windows, const PruneSettings& settings,
                                     std::shared_ptr<const ModelStats>* stats = nullptr) {
    LanguagePruningWorkbench workbench(lm);
    workbench.setCalibration(LanguagePruningWorkbench::calibrate(lm, windows));
    if (stats) *stats = workbench.calibration().stats;
    return workbench.prune(settings);
}

// The same for a bare LLaMA (no tokenizer: the windows are ids already). The copy shares the
// model's tensors.
inline WorkbenchPrune pruneOnWindows(const LlamaModel& model, const CalibrationSet& windows, const PruneSettings& settings,
                                     std::shared_ptr<const ModelStats>* stats = nullptr) {
    LanguageModel lm;
    lm.model = std::make_shared<LlamaModel>(model);
    lm.name = model.checkpoint().source;
    return pruneOnWindows(lm, windows, settings, stats);
}

} // namespace npw::test
