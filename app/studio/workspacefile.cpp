#include "app/studio/workspacefile.h"

#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <cmath>
#include <filesystem>

namespace studio {

namespace {

constexpr int kFormatVersion = 1;

nlohmann::json finiteOrNull(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }
double numberOrNaN(const nlohmann::json& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

nlohmann::json rowToJson(const npw::SweepRow& r) {
    return {{"method", r.method},         {"ratio", r.ratio},
            {"calib_samples", r.calibSamples}, {"calib_seqlen", r.calibSeqlen},
            {"lambda", finiteOrNull(r.lambda)}, {"seed", r.seed},
            {"eval", r.evalSet},          {"achieved_ratio", r.achievedRatio},
            {"achieved_ratio_model", r.achievedRatioModel}, {"ppl", finiteOrNull(r.ppl)},
            {"nll", finiteOrNull(r.nll)}, {"bits_per_byte", finiteOrNull(r.bitsPerByte)},
            {"eval_tokens", r.evalTokens}, {"acc", finiteOrNull(r.acc)},
            {"acc_norm", finiteOrNull(r.accNorm)}, {"parameters", r.parameters},
            {"weights_mib", finiteOrNull(r.weightsMiB)}, {"kv_cache_mib", finiteOrNull(r.kvCacheMiB)},
            {"prefill_tokens_per_s", finiteOrNull(r.prefillTokensPerSecond)},
            {"decode_tokens_per_s", finiteOrNull(r.decodeTokensPerSecond)}};
}

// A field that older workspace files lack: NaN then.
double optionalNumber(const nlohmann::json& j, const char* name) {
    return j.contains(name) ? numberOrNaN(j.at(name)) : std::nan("");
}

npw::SweepRow rowFromJson(const nlohmann::json& j) {
    npw::SweepRow r;
    r.method = j.at("method").get<std::string>();
    r.ratio = j.at("ratio").get<double>();
    r.calibSamples = j.at("calib_samples").get<int64_t>();
    r.calibSeqlen = j.at("calib_seqlen").get<int64_t>();
    r.lambda = numberOrNaN(j.at("lambda"));
    r.seed = j.at("seed").get<int>();
    r.evalSet = j.at("eval").get<std::string>();
    r.achievedRatio = j.at("achieved_ratio").get<double>();
    r.achievedRatioModel = j.at("achieved_ratio_model").get<double>();
    r.ppl = numberOrNaN(j.at("ppl"));  // null: a zero-shot or speed row
    r.nll = numberOrNaN(j.at("nll"));
    r.bitsPerByte = numberOrNaN(j.at("bits_per_byte"));
    r.evalTokens = j.at("eval_tokens").get<int64_t>();
    r.acc = optionalNumber(j, "acc");
    r.accNorm = optionalNumber(j, "acc_norm");
    r.parameters = j.value("parameters", int64_t(0));
    r.weightsMiB = optionalNumber(j, "weights_mib");
    r.kvCacheMiB = optionalNumber(j, "kv_cache_mib");
    r.prefillTokensPerSecond = optionalNumber(j, "prefill_tokens_per_s");
    r.decodeTokensPerSecond = optionalNumber(j, "decode_tokens_per_s");
    return r;
}

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
        throw npw::Error(std::string("workspace mask '") + what + "': expected " + std::to_string(shape.size()) +
                         " layers, got " + (j.is_array() ? std::to_string(j.size()) : "no list"));
    std::vector<std::vector<bool>> keep = shape;
    for (size_t l = 0; l < shape.size(); ++l)
        for (const auto& index : j[l]) {
            const auto i = index.get<size_t>();
            if (i >= keep[l].size())
                throw npw::Error(std::string("workspace mask '") + what + "': layer " + std::to_string(l) +
                                 " has no unit " + std::to_string(i));
            keep[l][i] = false;
        }
    return keep;
}

} // namespace

std::string workspaceStatsPath(const std::string& workspacePath) {
    std::filesystem::path path(workspacePath);
    if (path.extension() == ".json") path.replace_extension();
    return path.string() + ".stats.safetensors";
}

nlohmann::json maskToJson(const npw::Mask& mask) {
    return {{"pruned_units", prunedIndices(mask.keepHeads)}, {"pruned_channels", prunedIndices(mask.keepChannels)}};
}

npw::Mask maskFromJson(const nlohmann::json& j, const npw::Mask& shape) {
    npw::Mask mask;
    mask.keepHeads = keepFromIndices(j.at("pruned_units"), shape.keepHeads, "pruned_units");
    mask.keepChannels = keepFromIndices(j.at("pruned_channels"), shape.keepChannels, "pruned_channels");
    return mask;
}

void writeWorkspace(const std::string& path, const WorkspaceFile& w, const npw::ModelStats* stats) {
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
    for (const auto& r : w.sweepRows) j["sweep_rows"].push_back(rowToJson(r));
    if (!w.mask.is_null()) j["mask"] = w.mask;
    if (!w.images.is_null()) j["images"] = w.images;
    if (stats && w.statsCalibration) {
        const std::string statsPath = workspaceStatsPath(path);
        npw::saveModelStats(*stats, statsPath, w.statsCalibration->toMetadata());
        j["stats_file"] = std::filesystem::path(statsPath).filename().string();
        j["stats_calibration"] = toJson(w.calibration);
    }
    npw::writeTextAtomically(path, j.dump(2) + "\n");
}

WorkspaceFile readWorkspace(const std::string& path) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(npw::readTextFile(path));
    } catch (const nlohmann::json::exception& e) {
        throw npw::Error("workspace " + path + " is not valid JSON: " + e.what());
    }
    if (j.value("format", "") != "npw-workspace")
        throw npw::Error("workspace " + path + ": not an npw workspace (field 'format' is not \"npw-workspace\")");
    if (j.value("version", 0) > kFormatVersion)
        throw npw::Error("workspace " + path + ": version " + std::to_string(j.value("version", 0)) +
                         " is newer than this npw-studio reads (" + std::to_string(kFormatVersion) + ")");
    try {
        WorkspaceFile w;
        w.model = j.at("model").get<std::string>();
        w.device = j.value("device", "cpu");
        w.calibration = calibrationFromJson(j.at("calibration"));
        w.prune = pruneSettingsFromJson(j.at("prune"));
        w.knobs = knobsFromJson(j.at("knobs"));
        w.currentMethod = j.value("current_method", "");
        for (const auto& s : j.at("scored")) w.scored.push_back(pruneSettingsFromJson(s));
        for (const auto& r : j.at("sweep_rows")) w.sweepRows.push_back(rowFromJson(r));
        if (j.contains("stats_file")) {
            npw::CalibrationSummary summary;
            const CalibrationSettings c = calibrationFromJson(j.at("stats_calibration"));
            summary.source = c.source;
            summary.sourceIsIds = c.sourceIsIds;
            summary.samples = c.samples;
            summary.seqlen = c.seqlen;
            summary.seed = c.seed;
            w.statsCalibration = summary;
            w.calibration = c;  // the statistics define what the scores were computed from
        }
        if (j.contains("mask")) w.mask = j["mask"];  // resolved against the model by maskFromJson
        if (j.contains("images")) w.images = j["images"];  // read by ImageSession::restoreWorkspaceState
        if (w.model.empty() && w.images.is_null())
            throw npw::Error("it names neither a language model nor an image model");
        return w;
    } catch (const npw::Error& e) {
        throw npw::Error("workspace " + path + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw npw::Error("workspace " + path + ": " + e.what());
    }
}

} // namespace studio
