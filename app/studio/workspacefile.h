#pragma once
// The workspace file: an afternoon's exploration as JSON (model reference, settings, knobs,
// which methods were scored with which settings, the current mask, sweep rows, and the Images
// tab's model, requests and image sweep rows) beside the
// calibration statistics in safetensors (core's saveModelStats). Scores are not stored: they
// are recomputed from the statistics on reopen (deterministic, seconds; the baselines' from the
// calibration windows, drawn again from the saved calibration settings), and the stored mask
// checks that the reopened selection is the same. Both files are written atomically, the
// statistics first, so the JSON never names statistics that are not there.
#include "app/studio/runsettings.h"
#include "core/prune/calibration.h"
#include "core/prune/select.h"
#include "core/experiments/sweep.h"

#include <optional>
#include <string>
#include <vector>

namespace studio {

struct WorkspaceFile {
    std::string model;   // as opened ("demo:lm" or a path); empty when only an image model was open
    std::string device;  // "cpu", "cuda:0"
    CalibrationSettings calibration;
    npw::PruneSettings prune;
    SelectionKnobs knobs;
    // The Run settings' baseline (RunSettings::baseline, llmPrunerGlobal) when one is chosen.
    std::optional<npw::ScoreRequest> runBaseline;
    // One per score set, in the order computed; the baselines' too (their scores are recomputed
    // from the calibration windows on reopen, as the others are from the statistics).
    std::vector<npw::ScoreRequest> scored;
    std::string currentMethod;
    std::optional<npw::CalibrationSummary> statsCalibration;  // set when statistics were saved
    nlohmann::json mask;  // the current selection's (maskToJson), null when none
    std::vector<npw::SweepRow> sweepRows;
    nlohmann::json images;  // the Images tab (ImageSession::workspaceState); null when none
    nlohmann::json text;    // the Text tab's prompts and sampling (textRequestJson); null when none
};

// "x.npw.json" → "x.npw.stats.safetensors": where a workspace's statistics live.
std::string workspaceStatsPath(const std::string& workspacePath);

// stats may be null (nothing calibrated yet). Throws npw::Error naming the file.
void writeWorkspace(const std::string& path, const WorkspaceFile& workspace, const npw::ModelStats* stats);
// The JSON part; the statistics are read with npw::loadModelStats(workspaceStatsPath(path), …).
// Throws npw::Error naming the file and the field.
WorkspaceFile readWorkspace(const std::string& path);

nlohmann::json maskToJson(const npw::Mask& mask);  // pruned indices per layer
npw::Mask maskFromJson(const nlohmann::json& j, const npw::Mask& shape);  // shape: a keep-all mask

} // namespace studio
