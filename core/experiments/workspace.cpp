#include "core/experiments/workspace.h"

#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

namespace npw {

namespace {

constexpr int kFormatVersion = 1;

nlohmann::json prunedIndices(const std::vector<std::vector<bool>>& keep) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& layer : keep) {
        nlohmann::json pruned = nlohmann::json::array();
        for (size_t i = 0; i < layer.size(); ++i)
            if (!layer[i]) pruned.push_back(i);
        layers.push_back(pruned);
    }
    return layers;
}

std::vector<std::vector<bool>> keepFromIndices(const nlohmann::json& j, const std::vector<std::vector<bool>>& shape,
                                               const char* what) {
    if (!j.is_array() || j.size() != shape.size())
        throw Error(std::string("workspace mask '") + what + "': expected " + std::to_string(shape.size()) +
                         " layers, got " + (j.is_array() ? std::to_string(j.size()) : "no list"));
    std::vector<std::vector<bool>> keep = shape;
    for (size_t l = 0; l < shape.size(); ++l)
        for (const auto& index : j[l]) {
            const auto i = index.get<size_t>();
            if (i >= keep[l].size())
                throw Error(std::string("workspace mask '") + what + "': layer " + std::to_string(l) +
                                 " has no unit " + std::to_string(i));
            keep[l][i] = false;
        }
    return keep;
}

// The mask's shape before any model is open: two lists of per-layer lists of unit indices.
void checkMaskTypes(const nlohmann::json& mask) {
    if (!mask.is_object()) throw Error("field 'mask' must be an object");
    for (const char* field : {"pruned_units", "pruned_channels"}) {
        const auto it = mask.find(field);
        if (it == mask.end() || !it->is_array())
            throw Error(std::string("field 'mask.") + field + "' must be a list of per-layer lists");
        for (size_t l = 0; l < it->size(); ++l) {
            const nlohmann::json& layer = (*it)[l];
            if (!layer.is_array())
                throw Error(std::string("field 'mask.") + field + "[" + std::to_string(l) + "]' must be a list");
            for (const auto& index : layer)
                if (!index.is_number_unsigned())
                    throw Error(std::string("field 'mask.") + field + "[" + std::to_string(l) +
                                     "]' must hold unit indices (integers >= 0), got " +
                                     json_fields::preview(index));
        }
    }
}

} // namespace

std::string workspaceStatsPath(const std::string& workspacePath) {
    std::filesystem::path path(workspacePath);
    if (path.extension() == ".json") path.replace_extension();
    return path.string() + ".stats.safetensors";
}

nlohmann::json maskToJson(const Mask& mask) {
    return {{"pruned_units", prunedIndices(mask.keepHeads)}, {"pruned_channels", prunedIndices(mask.keepChannels)}};
}

Mask maskFromJson(const nlohmann::json& j, const Mask& shape) {
    Mask mask;
    mask.keepHeads = keepFromIndices(j.at("pruned_units"), shape.keepHeads, "pruned_units");
    mask.keepChannels = keepFromIndices(j.at("pruned_channels"), shape.keepChannels, "pruned_channels");
    return mask;
}

bool savedMaskMatches(const nlohmann::json& saved, const Mask& current) {
    // The saved units are read onto a keep-all mask of current's shape: read onto current itself,
    // a saved mask that prunes a subset of current's units would look the same.
    Mask shape = current;
    for (auto* keep : {&shape.keepHeads, &shape.keepChannels})
        for (auto& layer : *keep) layer.assign(layer.size(), true);
    const Mask mask = maskFromJson(saved, shape);
    return mask.keepHeads == current.keepHeads && mask.keepChannels == current.keepChannels;
}

void writeWorkspace(const std::string& path, const WorkspaceFile& w, const ModelStats* stats,
                    const std::vector<std::string>& sources) {
    if (!sources.empty()) {
        checkOutputPath(sources, path, "the workspace");
        checkOutputPath(sources, workspaceStatsPath(path), "the workspace's statistics");
    }
    nlohmann::json j = {{"format", "npw-workspace"},
                        {"version", kFormatVersion},
                        {"model", w.model},
                        {"device", w.device},
                        {"calibration", toJson(w.calibration)},
                        {"prune", toJson(w.prune)},
                        {"knobs", toJson(w.knobs)},
                        {"current_method", w.currentMethod},
                        {"scored", nlohmann::json::array()},
                        {"sweep_rows", nlohmann::json::array()}};
    for (const auto& s : w.scored) j["scored"].push_back(toJson(s));
    if (w.runBaseline) j["run_baseline"] = toJson(*w.runBaseline);
    for (const auto& r : w.sweepRows) j["sweep_rows"].push_back(sweepRowJson(r));
    if (!w.mask.is_null()) j["mask"] = w.mask;
    if (!w.images.is_null()) j["images"] = w.images;
    if (!w.text.is_null()) j["text"] = w.text;
    if (stats && w.statsCalibration) {
        const std::string statsPath = workspaceStatsPath(path);
        saveModelStats(*stats, statsPath, w.statsCalibration->toMetadata());
        j["stats_file"] = std::filesystem::path(statsPath).filename().string();
        j["stats_calibration"] = toJson(w.calibration);
    }
    writeTextAtomically(path, json_fields::dumpJson(j, 2, "workspace " + path) + "\n");
}

WorkspaceFile readWorkspace(const std::string& path) {
    const nlohmann::json j = json_fields::readJsonFile(path, "workspace " + path);
    if (!j.is_object() || !j.contains("format") || j["format"] != "npw-workspace")
        throw Error("workspace " + path + ": not an npw workspace (field 'format' is not \"npw-workspace\")");
    const int64_t version = j.contains("version") && j["version"].is_number_integer() ? j["version"].get<int64_t>() : 0;
    if (version > kFormatVersion)
        throw Error("workspace " + path + ": version " + std::to_string(version) +
                         " is newer than this npw-studio reads (" + std::to_string(kFormatVersion) + ")");
    try {
        WorkspaceFile w;
        w.model = j.at("model").get<std::string>();
        w.device = j.value("device", "cpu");
        w.calibration = calibrationFromJson(j.at("calibration"));
        w.prune = pruneSettingsFromJson(j.at("prune"));
        w.knobs = knobsFromJson(j.at("knobs"));
        w.currentMethod = j.value("current_method", "");
        for (const auto& s : j.at("scored")) w.scored.push_back(scoreRequestFromJson(s));
        if (j.contains("run_baseline") && !j["run_baseline"].is_null()) {
            w.runBaseline = scoreRequestFromJson(j["run_baseline"]);
            if (!w.runBaseline->baseline) throw Error("field 'run_baseline' does not name a baseline");
        }
        for (const auto& r : j.at("sweep_rows")) w.sweepRows.push_back(sweepRowFromJson(r));
        if (j.contains("stats_file")) {
            CalibrationSummary summary;
            const CalibrationSettings c = calibrationFromJson(j.at("stats_calibration"));
            summary.source = c.source;
            summary.sourceIsIds = c.sourceIsIds;
            summary.samples = c.samples;
            summary.seqlen = c.seqlen;
            summary.seed = c.seed;
            w.statsCalibration = summary;
            w.calibration = c;  // the statistics define what the scores were computed from
        }
        if (j.contains("mask")) {  // resolved against the model by maskFromJson; its types checked here
            w.mask = j["mask"];
            checkMaskTypes(w.mask);
        }
        if (j.contains("images")) w.images = j["images"];  // read by ImageSession::restoreWorkspaceState
        if (j.contains("text")) w.text = j["text"];      // read by textRequestFromJson
        if (w.model.empty() && w.images.is_null())
            throw Error("it names neither a language model nor an image model");
        return w;
    } catch (const Error& e) {
        throw Error("workspace " + path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw Error("workspace " + path + ": " + e.what());
    }
}

LoadedWorkspace loadWorkspace(const std::string& path, const ProgressFn& progress) {
    LoadedWorkspace r;
    r.file = readWorkspace(path);
    if (r.file.model.empty()) return r;  // only the Images tab's part
    r.model = openLanguageModel(r.file.model, chooseRuntime(r.file.device));
    if (r.file.statsCalibration) {
        std::map<std::string, std::string> metadata;
        r.calibration.stats = std::make_shared<const ModelStats>(
            loadModelStats(workspaceStatsPath(path), r.model.model->config().num_layers, &metadata));
        r.calibration.summary = *r.file.statsCalibration;
        // The scores are recomputed from the statistics (deterministic), not stored; the
        // baselines' from the windows, drawn again from the same calibration settings — as Run
        // scores (the statistics are there, so nothing is calibrated again).
        ScoringResult scored =
            calibrateAndScore(r.model, std::move(r.calibration), r.file.calibration, r.file.scored, progress);
        r.calibration = std::move(scored.calibration);
        r.scoreSets = std::move(scored.scores);
    }
    return r;
}

} // namespace npw
