// Step "export": manifests, the pruned model directory and score files (export.h).
#include "core/models/model_loader.h"
#include "core/text/json_output.h"
#include "core/io/safetensors.h"
#include "core/prune/export.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/version.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

namespace fs = std::filesystem;

namespace npw {

using nlohmann::json;

namespace {

constexpr const char* kManifestName = "npw-manifest.json";

fs::path normalised(const std::string& path) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
    if (ec) p = fs::absolute(path).lexically_normal();
    if (!p.has_filename() && p.has_parent_path()) p = p.parent_path();  // "dir/" → "dir"
    return p;
}

bool isInside(const fs::path& inner, const fs::path& outer) {
    const fs::path rel = inner.lexically_relative(outer);
    return !rel.empty() && *rel.begin() != "..";
}

std::string randomSuffix() {
    std::random_device rd;
    return std::to_string(rd() % 1000000000u);
}

} // namespace

nlohmann::json calibrationManifestJson(const CalibrationSummary& calibration) {
    return {{"source", calibration.source},
            {"kind", calibration.sourceIsIds ? "token ids" : "text, tokenized once with BOS"},
            {"samples", calibration.samples},
            {"seqlen", calibration.seqlen},
            {"seed", calibration.seed},
            {"stream_tokens", calibration.streamTokens},
            {"tokens", calibration.tokens}};
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
    const fs::path target = normalised(dir);
    if (!sourceModel.empty()) {
        ensureNotOverwritingSource(sourceModel, dir);
        // Compared again on normalised paths: "model/" and "model/sub" are the source too.
        const fs::path source = normalised(sourceModel);
        const fs::path sourceDir = fs::is_directory(source) ? source : source.parent_path();
        if (target == source || target == sourceDir)
            throw Error("refusing to write '" + dir + "': it is the source model '" + sourceModel +
                        "' or its directory (a source checkpoint is never overwritten; choose another output directory)");
        if (fs::is_directory(source) && isInside(target, source))
            throw Error("refusing to write '" + dir + "': it is inside the source model '" + sourceModel +
                        "' (a source checkpoint is never modified; choose another output directory)");
    }
    std::error_code ec;
    if (!fs::exists(target, ec)) return;
    if (!fs::is_directory(target))
        throw Error("refusing to write '" + dir + "': it exists and is not a directory");
    if (fs::is_empty(target, ec) || fs::is_regular_file(target / kManifestName)) return;
    throw Error("refusing to write '" + dir + "': it is a non-empty directory that is not an npw export (no " +
                kManifestName + "); choose a new output directory");
}

void writeExportDirectory(const std::string& sourceModel, const std::string& dir,
                          const std::function<void(const std::string& staging)>& write) {
    checkExportTarget(sourceModel, dir);
    const fs::path target = normalised(dir);
    const fs::path parent = target.parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw Error("cannot create '" + parent.string() + "': " + ec.message());
    const std::string name = target.filename().string();
    const fs::path staging = parent / ("." + name + ".npw-staging-" + randomSuffix());
    const fs::path previous = parent / ("." + name + ".npw-previous-" + randomSuffix());
    try {
        write(staging.string());
        // An earlier export (or an empty directory) is moved aside, the new one renamed into its
        // place, and only then the old one deleted: at every moment `dir` is whole or absent.
        const bool replacing = fs::exists(target, ec);
        if (replacing) fs::rename(target, previous);
        fs::rename(staging, target);
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
    writeExportDirectory(pruned.source, dir, [&](const std::string& staging) {
        const json extra = {{"npw_pruned", {{"manifest", kManifestName}}}};
        saveHfLlamaDirectory(pruned, staging, json_fields::dumpJson(extra));
        writeTextAtomically((fs::path(staging) / kManifestName).string(), manifestJson);
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
        for (const auto& [site, solve] : {std::make_pair("attn", &scores.attentionSolves[l]),
                                          std::make_pair("mlp", &scores.mlpSolves[l])}) {
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
