#pragma once
// The workspace file: an afternoon's exploration as JSON (model reference, settings, knobs,
// which methods were scored with which settings, the current mask, sweep rows, and the Images
// tab's model, requests and image sweep rows) beside the
// calibration statistics in safetensors (core's saveModelStats). Scores are not stored: they
// are recomputed from the statistics on reopen (deterministic, seconds; the baselines' from the
// calibration windows, drawn again from the saved calibration settings), and the stored mask
// checks that the reopened selection is the same. Both files are written atomically, the
// statistics first, so the JSON never names statistics that are not there. Reopening
// (loadWorkspace) opens the model, reads the statistics and recomputes the score sets; the
// studio's session adopts the result on its GUI thread. No Qt.
#include "core/experiments/run_settings.h"
#include "core/prune/calibration.h"
#include "core/prune/select.h"
#include "core/experiments/language_workbench.h"
#include "core/experiments/sweep.h"

#include <optional>
#include <string>
#include <vector>

namespace npw {

struct WorkspaceFile {
    std::string model;   // as opened ("demo:lm" or a path); empty when only an image model was open
    std::string device;  // "cpu", "cuda:0"
    CalibrationSettings calibration;
    PruneSettings prune;
    SelectionKnobs knobs;
    // The Run settings' baseline (RunSettings::baseline, llmPrunerGlobal) when one is chosen.
    std::optional<ScoreRequest> runBaseline;
    // One per score set, in the order computed; the baselines' too (their scores are recomputed
    // from the calibration windows on reopen, as the others are from the statistics).
    std::vector<ScoreRequest> scored;
    std::string currentMethod;
    std::optional<CalibrationSummary> statsCalibration;  // set when statistics were saved
    nlohmann::json mask;  // the current selection's (maskToJson), null when none
    std::vector<SweepRow> sweepRows;
    nlohmann::json images;  // the Images tab (ImageSession::workspaceState); null when none
    nlohmann::json text;    // the Text tab's prompts and sampling (textRequestJson); null when none
};

// "x.npw.json" → "x.npw.stats.safetensors": where a workspace's statistics live.
std::string workspaceStatsPath(const std::string& workspacePath);

// stats may be null (nothing calibrated yet). Both paths (the JSON and its statistics) are checked
// against `sources` (the open models' checkpoints, never written over) before either is written,
// so a refused path leaves nothing behind. Throws npw::Error naming the file.
void writeWorkspace(const std::string& path, const WorkspaceFile& workspace, const ModelStats* stats,
                    const std::vector<std::string>& sources = {});
// The JSON part; the statistics are read with loadModelStats(workspaceStatsPath(path), …).
// Throws npw::Error naming the file and the field.
WorkspaceFile readWorkspace(const std::string& path);

nlohmann::json maskToJson(const Mask& mask);  // pruned indices per layer
Mask maskFromJson(const nlohmann::json& j, const Mask& shape);  // shape: a keep-all mask
// Whether a saved mask (maskToJson) selects the same units as `current`; npw::Error naming the
// field when it does not fit current's model (an edited file, another checkpoint at that path).
bool savedMaskMatches(const nlohmann::json& saved, const Mask& current);

// A workspace reopened: its file, and when it names a language model, that model, the saved
// statistics (when there were any) and the score sets recomputed from them in the order saved.
struct LoadedWorkspace {
    WorkspaceFile file;
    LanguageModel model;  // null when the workspace holds only the Images tab's part
    LanguagePruningWorkbench::Calibration calibration;
    std::vector<ComputedScores> scoreSets;
};
// Slow (opens the model, scores): the studio runs it on its worker. npw::Error naming the file.
LoadedWorkspace loadWorkspace(const std::string& path, const ProgressFn& progress = nullptr);

} // namespace npw
