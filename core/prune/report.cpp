// The one prune report (report.h): counts, ratios and the JSON of a pruning run.
#include "core/prune/report.h"

#include "core/models/parameter_count.h"
#include "core/text/json_fields.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace npw {

using nlohmann::json;

PruneCounts countPrunedParameters(const LlamaCheckpoint& dense, const LlamaCheckpoint& pruned, int64_t extraParameters) {
    PruneCounts c;
    c.paramsBefore = checkpointParameters(dense) + extraParameters;
    c.paramsAfter = checkpointParameters(pruned) + extraParameters;
    c.prunableBefore = prunableParameters(dense.config);
    c.prunableAfter = prunableParameters(pruned.config);
    const auto removed = static_cast<double>(c.prunableBefore - c.prunableAfter);
    c.achievedRatio = c.prunableBefore > 0 ? removed / static_cast<double>(c.prunableBefore) : 0.0;
    c.achievedRatioModel = c.paramsBefore > 0 ? removed / static_cast<double>(c.paramsBefore) : 0.0;
    return c;
}

void setPruneCounts(PruneReport& report, const PruneCounts& counts) {
    report.paramsBefore = counts.paramsBefore;
    report.paramsAfter = counts.paramsAfter;
    report.prunableBefore = counts.prunableBefore;
    report.prunableAfter = counts.prunableAfter;
    report.achievedRatio = counts.achievedRatio;
    report.achievedRatioModel = counts.achievedRatioModel;
}

PruneReport makePruneReport(const PruneSettings& settings, double defaultAlpha, const ScoreSet& scores,
                            const SelectionResult& selection, const LlamaCheckpoint& dense, const PrunedModel& pruned) {
    PruneReport report;
    report.method = methodName(settings.method);
    report.ratio = settings.ratio;
    report.alpha = std::isnan(settings.alpha) ? defaultAlpha : settings.alpha;
    report.alphaMode = settings.alphaMode;
    report.lambda = settings.method == PruneMethod::Numerical ? scores.settings.lambda : settings.lambda;
    if (settings.method == PruneMethod::Numerical) {
        report.medianC = scores.medianC;
        report.lambdaRel = scores.settings.lambda * scores.medianC;
        report.lambdaGiven = settings.lambdaIsRelative() ? "relative" : "absolute";
        report.crossLayer = crossLayerRankingName(settings.crossLayer);
    }
    report.compensation = pruned.compensation;
    setPruneCounts(report, countPrunedParameters(dense, pruned.checkpoint));
    report.removedUnits = selection.removedHeads;
    report.removedChannels = selection.removedChannels;
    report.threshold = selection.threshold;
    report.newtonMaxDeviation = scores.newtonMaxDeviation;
    report.boxKktViolation = scores.boxKktViolation;
    report.layers = pruned.layers;
    return report;
}

json pruneReportJson(const PruneReport& r) {
    json layers = json::array();
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const LayerPruneReport& p = r.layers[l];
        layers.push_back({{"layer", l},
                          {"heads", p.headsAfter},
                          {"heads_before", p.headsBefore},
                          {"kv_heads", p.kvHeadsAfter},
                          {"kv_heads_before", p.kvHeadsBefore},
                          {"channels", p.channelsAfter},
                          {"channels_before", p.channelsBefore},
                          {"attn_loss", p.attentionLoss},
                          {"attn_loss_uncompensated", p.attentionLossUncompensated},
                          {"mlp_loss", p.mlpLoss},
                          {"mlp_loss_uncompensated", p.mlpLossUncompensated}});
    }
    json j = {{"method", r.method},
              {"ratio", r.ratio},
              {"alpha", json_fields::finiteOrNull(r.alpha)},  // NaN: a method that has no α (the baselines)
              {"alpha_mode", alphaModeName(r.alphaMode)},
              {"lambda", json_fields::finiteOrNull(r.lambda)},
              {"compensation", compensationName(r.compensation)},
              {"params_before", r.paramsBefore},
              {"params_after", r.paramsAfter},
              {"prunable_params_before", r.prunableBefore},
              {"prunable_params_after", r.prunableAfter},
              {"achieved_ratio", r.achievedRatio},
              {"achieved_ratio_model", r.achievedRatioModel},
              {"removed_attention_units", r.removedUnits},
              {"removed_mlp_channels", r.removedChannels},
              {"threshold", json_fields::finiteOrNull(r.threshold)},
              {"loss_unit", "output error of o_proj/down_proj per calibration token, ||X dW^T||^2 / N"},
              {"layers", layers},
              {"timings", {{"calibrate_s", r.timings.calibrateSeconds},
                           {"score_s", r.timings.scoreSeconds},
                           {"select_s", r.timings.selectSeconds},
                           {"apply_s", r.timings.applySeconds}}}};
    if (!r.crossLayer.empty()) {
        j["lambda_rel"] = json_fields::finiteOrNull(r.lambdaRel);
        j["lambda_given"] = r.lambdaGiven;
        j["median_c"] = json_fields::finiteOrNull(r.medianC);
        j["cross_layer_ranking"] = r.crossLayer;
    }
    if (r.newtonMaxDeviation >= 0) j["newton_max_deviation"] = r.newtonMaxDeviation;
    if (r.boxKktViolation >= 0) j["box_kkt_violation"] = r.boxKktViolation;
    return j;
}

} // namespace npw
