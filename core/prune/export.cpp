// Step "export": manifests, the pruned model directory and score files (export.h).
#include "core/models/model_loader.h"
#include "core/text/json_output.h"
#include "core/io/safetensors.h"
#include "core/prune/export.h"
#include "core/text/json_fields.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/output_guard.h"
#include "core/util/version.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace npw {

using nlohmann::json;

namespace {

constexpr const char* kManifestName = "npw-manifest.json";

constexpr uintmax_t kMaxManifestBytes = 64u << 20;  // npw's manifests are kilobytes
constexpr size_t kMaxExportEntries = 100000;

// Why `dir`, an existing non-empty folder, is not provably an export npw wrote (empty: it is).
// It is when its npw-manifest.json is npw's (JSON, "format" "npw-…", "files": every other file
// with its size in bytes) and the folder holds nothing else: every regular file listed with that
// size, every folder a listed file's, no link or other kind of entry. Files listed but missing
// are fine (deleting them lost nothing of the user's).
std::string whyNotProvablyNpwExport(const fs::path& dir) {
    std::error_code ec;
    const fs::path manifestPath = dir / kManifestName;
    const fs::file_status manifestStatus = fs::symlink_status(manifestPath, ec);
    if (!fs::exists(manifestStatus)) {
        std::string first;
        for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
            first = it->path().filename().string();
            break;
        }
        return "it holds '" + first + "' and no " + kManifestName;
    }
    if (!fs::is_regular_file(manifestStatus)) return std::string(kManifestName) + " is not a regular file";
    const uintmax_t manifestBytes = fs::file_size(manifestPath, ec);
    if (ec || manifestBytes > kMaxManifestBytes)
        return std::string(kManifestName) + " is " + std::to_string(manifestBytes) + " bytes, more than npw writes";
    json manifest;
    try {
        manifest = json_fields::parseJsonLimited(readTextFile(manifestPath.string()), kManifestName);
    } catch (const Error& e) {
        return e.what();  // "npw-manifest.json is not valid JSON at byte …"
    }
    if (!manifest.is_object()) return std::string(kManifestName) + " is not a JSON object";
    const auto format = manifest.find("format");
    if (format == manifest.end() || !format->is_string() || format->get<std::string>().rfind("npw-", 0) != 0)
        return std::string(kManifestName) + " field \"format\" is missing or not npw's (\"npw-...\")";
    const auto files = manifest.find("files");
    if (files == manifest.end())
        return std::string(kManifestName) + " has no field \"files\" listing what npw wrote (an export of an older " +
               "npw, which did not list its files, or not npw's)";
    if (!files->is_object()) return std::string(kManifestName) + " field \"files\" is not an object of path: size";
    std::map<std::string, uintmax_t> listed;
    std::set<std::string> folders;
    for (const auto& [name, size] : files->items()) {
        const fs::path rel(name);
        bool clean = !name.empty() && rel.is_relative() && name != kManifestName;
        for (const fs::path& part : rel)
            if (part.empty() || part == "." || part == "..") clean = false;
        if (!clean || !size.is_number_unsigned())
            return std::string(kManifestName) + " field \"files\": entry '" + name +
                   "' is not a relative path with a size in bytes";
        listed[rel.generic_string()] = size.get<uintmax_t>();
        for (fs::path up = rel.parent_path(); !up.empty(); up = up.parent_path()) folders.insert(up.generic_string());
    }
    size_t seen = 0;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (++seen > kMaxExportEntries) return "it holds more than " + std::to_string(kMaxExportEntries) + " entries";
        const std::string rel = it->path().lexically_relative(dir).generic_string();
        if (rel == kManifestName) continue;
        const fs::file_status status = it->symlink_status(ec);
        if (fs::is_directory(status)) {
            if (!folders.count(rel))
                return "it holds the folder '" + rel + "/', which " + kManifestName + " does not list (npw did not write it)";
            continue;
        }
        const auto entry = listed.find(rel);
        if (entry == listed.end())
            return "it holds '" + rel + "', which " + kManifestName + " does not list (npw did not write it)";
        if (!fs::is_regular_file(status)) return "'" + rel + "' is not a regular file (npw writes only files)";
        const uintmax_t size = it->file_size(ec);
        if (ec || size != entry->second)
            return "'" + rel + "' is " + std::to_string(size) + " bytes, but " + kManifestName + " says npw wrote " +
                   std::to_string(entry->second) + " (changed since)";
    }
    if (ec) return "it cannot be read (" + ec.message() + ")";
    return {};
}

// The "files" of an export's manifest: every regular file under `staging` (the manifest aside)
// with its size in bytes.
json listExportFiles(const fs::path& staging) {
    json files = json::object();
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(staging, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const fs::file_status status = it->symlink_status(ec);
        if (fs::is_directory(status)) continue;
        const std::string rel = it->path().lexically_relative(staging).generic_string();
        if (!fs::is_regular_file(status))
            throw Error("internal: the export staged '" + rel + "', which is not a regular file");
        if (rel == kManifestName) continue;
        files[rel] = static_cast<uint64_t>(it->file_size());
    }
    if (ec) throw Error("cannot list the staged export '" + staging.string() + "': " + ec.message());
    return files;
}

} // namespace

nlohmann::json calibrationManifestJson(const CalibrationSummary& calibration) {
    return {{"source", calibration.source},
            {"kind", calibration.sourceIsIds ? "token ids" : "text, tokenized once with BOS"},
            {"samples", calibration.samples},
            {"seqlen", calibration.seqlen},
            {"seed", calibration.seed},
            {"stream_tokens", calibration.streamTokens},
            {"tokens", calibration.tokens},
            {"distinct_tokens", calibration.distinctTokens},
            {"source_hash", calibration.sourceHash}};
}

std::string pruneManifestJson(const PruneReport& report, const PruneSettings& s, const CalibrationSummary& calibration,
                              const std::string& sourceModel) {
    json j = pruneReportJson(report);
    j.erase("timings");
    j["format"] = "npw-pruned-model";
    j["npw_version"] = npwVersion();
    j["source_model"] = sourceModel;
    j["iters"] = s.iters;
    j["z0"] = s.z0;
    j["box_constrained"] = s.boxConstrained;
    j["score"] = s.method == PruneMethod::Numerical
                     ? s.boxConstrained ? std::string("box-constrained z in [0,1]^D at rho and lambda (active-set QP solve)")
                     : (s.iters > 0 ? "Algorithm 1, " + std::to_string(s.iters) + " Newton steps from z0 = " + std::to_string(s.z0)
                                    : std::string("closed form z = 1 - rho*lambda*D*A^-1 1/(1 + lambda*c)"))
                     : methodName(s.method);
    if (s.method == PruneMethod::Numerical)
        j["cross_layer_meaning"] = s.crossLayer == CrossLayerRanking::Relaxed
                                       ? "z: the paper's eq. 7 on z itself"
                                       : "each layer's units in z-order; across layers by the convex-hull slope of Theorem "
                                         "3's L* per parameter (lstar-rel: L* over the residual stream's energy; lstar-kl: each site's "
                                         "L* curve scaled to the KL(dense || site pruned) measured at its reference prefix)";
    j["damp"] = s.damp;
    j["damp_meaning"] = "gamma relative to mean(diag 2G): 2G + gamma*mean(diag 2G)*I";
    j["attention_unit"] = attentionUnitName(s.attentionUnit);
    j["standardised_global"] = s.standardisedGlobal;
    j["selection"] = s.selectsGlobally() ? "global" : "uniform per layer";
    j["scope"] = scopeName(s.scope);
    j["protected_layers"] = s.protectedLayers;
    j["seed"] = s.seed;
    j["normalisation"] = "G = X^T X / N over all N calibration tokens (per-token Gram), float64; "
                         "FLAP mean/variance and Wanda-sp norms from the same raw sums";
    j["calibration"] = calibrationManifestJson(calibration);
    if (!calibration.statsFile.empty()) j["calibration"]["statistics_file"] = calibration.statsFile;
    return json_fields::dumpJson(j, 2, "the export manifest") + "\n";
}

void checkExportTarget(const std::string& sourceModel, const std::string& dir) {
    if (dir.empty()) throw Error("no output directory given");
    const fs::path target = normalisedPath(dir);
    if (!sourceModel.empty()) {
        ensureNotOverwritingSource(sourceModel, dir);
        // Compared again on normalised paths: "model/" and "model/sub" are the source too.
        const fs::path source = normalisedPath(sourceModel);
        const fs::path sourceDir = fs::is_directory(source) ? source : source.parent_path();
        if (target == source || target == sourceDir)
            throw Error("refusing to write '" + dir + "': it is the source model '" + sourceModel +
                        "' or its directory (a source checkpoint is never overwritten; choose another output directory)");
        if (fs::is_directory(source) && isWithin(target, source))
            throw Error("refusing to write '" + dir + "': it is inside the source model '" + sourceModel +
                        "' (a source checkpoint is never modified; choose another output directory)");
    }
    runOutputGuard().check(dir, "the export");  // the run's other inputs (--calib, --stats, ...)
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(target, ec);
    if (!fs::exists(status)) return;
    if (!fs::is_directory(status))
        throw Error("refusing to write '" + dir + "': it exists and is not a directory");
    if (fs::is_empty(target, ec)) return;
    const std::string why = whyNotProvablyNpwExport(target);
    if (!why.empty())
        throw Error("refusing to write '" + dir + "': it is not an npw export that npw can replace: " + why +
                    ". npw replaces a folder only when its " + kManifestName +
                    " lists every file in it with its size; move your files out, delete the folder or choose another "
                    "output directory");
}

void writeExportDirectory(const std::string& sourceModel, const std::string& dir, const std::string& manifestJson,
                          const std::function<void(const std::string& staging)>& write) {
    json_fields::parseJsonLimited(manifestJson, "the export's manifest");  // refused before anything is written
    writeExportDirectory(sourceModel, dir, std::function<std::string()>([&manifestJson] { return manifestJson; }), write);
}

void writeExportDirectory(const std::string& sourceModel, const std::string& dir,
                          const std::function<std::string()>& manifestAfterWrite,
                          const std::function<void(const std::string& staging)>& write) {
    const fs::path target = normalisedPath(dir);
    // What a killed export to `dir` left (its earlier export moved back, if it was aside): first,
    // so that the target is checked as it is.
    removeStaleTemporaries(target.string());
    checkExportTarget(sourceModel, dir);
    const fs::path parent = target.parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw Error("cannot create '" + parent.string() + "': " + ec.message());
    const fs::path staging = temporaryPathBeside(target.string(), "staging");
    const fs::path previous = temporaryPathBeside(target.string(), "previous");
    try {
        write(staging.string());
        fs::create_directories(staging);
        json manifest = json_fields::parseJsonLimited(manifestAfterWrite(), "the export's manifest");
        if (!manifest.is_object() || !manifest.contains("format") || !manifest["format"].is_string() ||
            manifest["format"].get<std::string>().rfind("npw-", 0) != 0)
            throw Error("internal: an export's manifest needs \"format\": \"npw-...\"");
        // The manifest lists every file written, with its size: what later proves the folder
        // npw's own, so that a later export may replace it (checkExportTarget).
        manifest["files"] = listExportFiles(staging);
        writeTextAtomically((staging / kManifestName).string(), json_fields::dumpJson(manifest, 2, "the export manifest") + "\n");
        testStallPoint("export-staged");
        // Checked again: the folder may have changed while the model was written.
        checkExportTarget(sourceModel, dir);
        // An earlier export (or an empty directory) is moved aside, the new one renamed into its
        // place, and only then the old one deleted: at every moment `dir` is whole or absent, and
        // a run killed in between leaves the earlier one aside, which the next run moves back.
        const bool replacing = fs::exists(fs::symlink_status(target, ec));
        if (replacing) fs::rename(target, previous);
        testStallPoint("export-moved-aside");
        try {
            fs::rename(staging, target);
        } catch (...) {
            if (replacing) fs::rename(previous, target, ec);
            throw;
        }
        if (replacing) fs::remove_all(previous, ec);
    } catch (const fs::filesystem_error& e) {
        fs::remove_all(staging, ec);
        throw Error("cannot write the pruned model to '" + dir + "': " + e.what());
    } catch (...) {
        fs::remove_all(staging, ec);
        throw;
    }
}

void savePrunedModel(const LlamaCheckpoint& pruned, const std::string& dir, const std::string& manifestJson) {
    writeExportDirectory(pruned.source, dir, manifestJson, [&](const std::string& staging) {
        const json extra = {{"npw_pruned", {{"manifest", kManifestName}}}};
        saveHfLlamaDirectory(pruned, staging, json_fields::dumpJson(extra));
    });
}

void saveScoreSet(const ScoreSet& scores, double rho, const std::string& path) {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    auto name = [](size_t l, const char* site, const char* field) {
        return "layers." + std::to_string(l) + "." + site + "." + field;
    };
    for (size_t l = 0; l < scores.ranking.size(); ++l) {
        const LayerScores units = scores.unitScoresAt(l, rho);
        if (scores.attentionChannels[l].defined()) {
            tensors.emplace_back(name(l, "attn", "channel_scores"), scores.attentionChannelScoresAt(l, rho));
            tensors.emplace_back(name(l, "attn", "unit_scores"), at::tensor(units.heads, at::kDouble));
        }
        if (scores.mlpChannels[l].defined()) {
            tensors.emplace_back(name(l, "mlp", "channel_scores"), scores.mlpChannelScoresAt(l, rho));
            tensors.emplace_back(name(l, "mlp", "unit_scores"), at::tensor(units.channels, at::kDouble));
        }
        // A named array, not a braced list of make_pair temporaries (gcc 14: -Wdangling-reference).
        const std::pair<const char*, decltype(&scores.attentionSolves[l])> sites[] = {{"attn", &scores.attentionSolves[l]},
                                                                                      {"mlp", &scores.mlpSolves[l]}};
        for (const auto& [site, solve] : sites) {
            if (solve->D == 0) continue;
            tensors.emplace_back(name(l, site, "ainv1"), solve->Ainv1.cpu());
            tensors.emplace_back(name(l, site, "c"), at::full({1}, solve->c, at::kDouble));
        }
    }
    const PruneSettings& s = scores.settings;
    writeSafeTensors(path, tensors,
                     {{"format", "npw-scores"},
                      {"method", methodName(s.method)},
                      {"ratio", std::to_string(rho)},
                      {"lambda", std::to_string(s.lambda)},
                      {"standardised_global", s.standardisedGlobal ? "true" : "false"},
                      {"attention_unit", attentionUnitName(s.attentionUnit)},
                      {"meaning", s.method == PruneMethod::Numerical && !s.standardisedGlobal
                                      ? "numerical score z at ratio (higher = keep); unit = mean of its channels; "
                                        "ainv1 = A^-1 1, c = 1^T A^-1 1 with A = (W W^T) o G/N"
                                      : "the method's metric (higher = keep); unit = mean (global) or sum (uniform)"}});
}

} // namespace npw
