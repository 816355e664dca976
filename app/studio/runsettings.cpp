#include "app/studio/runsettings.h"

#include "core/text/json_fields.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <cmath>
#include <limits>

namespace studio {

namespace {

namespace fields = npw::json_fields;
using fields::finiteOrNull;

constexpr const char* kSettings = "settings";

// A name field read with core's parser of that setting (npw::parseAlphaMode, ...).
template <class Parse>
auto namedField(const nlohmann::json& j, const char* name, const std::string& fallback, Parse parse) {
    const std::string value = fields::stringOr(j, name, fallback, kSettings);
    try {
        return parse(value);
    } catch (const npw::Error& e) {
        throw npw::Error(std::string("settings field '") + name + "': " + e.what());
    }
}

// A seed: a non-negative integer.
uint64_t seedOr(const nlohmann::json& j, const char* name, uint64_t fallback) {
    const int64_t seed = fields::intOr(j, name, static_cast<int64_t>(fallback), kSettings);
    if (seed < 0) throw npw::Error(std::string("settings field '") + name + "' must not be negative");
    return static_cast<uint64_t>(seed);
}

// α: null (written for NaN, the default α) reads as NaN.
double alphaOr(const nlohmann::json& j, const char* name, double fallback) {
    if (j.is_object() && j.contains(name) && j[name].is_null()) return std::numeric_limits<double>::quiet_NaN();
    return fields::numberOr(j, name, fallback, kSettings);
}

} // namespace

std::string defaultCalibrationSource() { return npw::resourcesDir() + "/demo/data/kjv-ot.txt"; }
std::string defaultEvaluationSource() { return npw::resourcesDir() + "/demo/data/kjv-nt.txt"; }
std::string defaultZeroShotTask() { return "mc:" + npw::resourcesDir() + "/demo/data/nt-verse-endings.jsonl"; }

bool SelectionKnobs::operator==(const SelectionKnobs& o) const {
    const bool sameAlpha = alpha == o.alpha || (std::isnan(alpha) && std::isnan(o.alpha));
    return rho == o.rho && sameAlpha && mode == o.mode && lambda == o.lambda;
}

nlohmann::json toJson(const CalibrationSettings& s) {
    return {{"source", s.source}, {"source_is_ids", s.sourceIsIds}, {"samples", s.samples},
            {"seqlen", s.seqlen}, {"seed", s.seed}};
}

nlohmann::json toJson(const npw::PruneSettings& s) {
    return {{"method", npw::methodName(s.method)},
            {"ratio", s.ratio},  // matters to Algorithm 1 (iters > 0) only
            {"lambda", finiteOrNull(s.lambda)},  // null: relative (λ_rel / median c)
            {"lambda_rel", s.lambdaRel},
            {"ranking", npw::crossLayerRankingName(s.crossLayer)},
            {"iters", s.iters},
            {"damp", s.damp},
            {"compensation", npw::compensationSettingName(s.compensation)},
            {"seed", s.seed},
            {"unit", npw::attentionUnitName(s.attentionUnit)},
            {"standardised_global", s.standardisedGlobal},
            {"box_constrained", s.boxConstrained}};
}

nlohmann::json toJson(const SelectionKnobs& k) {
    return {{"rho", k.rho}, {"alpha", finiteOrNull(k.alpha)}, {"alpha_mode", npw::alphaModeName(k.mode)},
            {"lambda_rel", k.lambda}};
}

CalibrationSettings calibrationFromJson(const nlohmann::json& j) {
    CalibrationSettings s;
    s.source = fields::stringOr(j, "source", s.source, kSettings);
    s.sourceIsIds = fields::boolOr(j, "source_is_ids", s.sourceIsIds, kSettings);
    s.samples = fields::intOr(j, "samples", s.samples, kSettings);
    s.seqlen = fields::intOr(j, "seqlen", s.seqlen, kSettings);
    s.seed = seedOr(j, "seed", s.seed);
    if (s.samples < 1 || s.seqlen < 2) throw npw::Error("calibration needs samples ≥ 1 and seqlen ≥ 2");
    return s;
}

npw::PruneSettings pruneSettingsFromJson(const nlohmann::json& j) {
    npw::PruneSettings s;
    s.method = npw::parsePruneMethod(fields::stringOr(j, "method", npw::methodName(s.method), kSettings));
    s.ratio = fields::numberOr(j, "ratio", s.ratio, kSettings);
    if (j.contains("lambda") && !j["lambda"].is_null()) s.lambda = fields::numberOr(j, "lambda", s.lambda, kSettings);
    s.lambdaRel = fields::numberOr(j, "lambda_rel", s.lambdaRel, kSettings);
    s.crossLayer = namedField(j, "ranking", npw::crossLayerRankingName(s.crossLayer), npw::parseCrossLayerRanking);
    s.iters = static_cast<int>(fields::intOr(j, "iters", s.iters, kSettings));
    s.damp = fields::numberOr(j, "damp", s.damp, kSettings);
    s.compensation = namedField(j, "compensation", npw::compensationSettingName(s.compensation), npw::parseCompensation);
    s.seed = seedOr(j, "seed", s.seed);
    s.attentionUnit = namedField(j, "unit", npw::attentionUnitName(s.attentionUnit), npw::parseAttentionUnit);
    s.standardisedGlobal = fields::boolOr(j, "standardised_global", s.standardisedGlobal, kSettings);
    s.boxConstrained = fields::boolOr(j, "box_constrained", s.boxConstrained, kSettings);
    s.validate();
    return s;
}

npw::ScoreRequest RunSettings::scoreRequest() const {
    npw::ScoreRequest r(prune);
    r.baseline = baseline;
    r.baselineOptions.llmPrunerGlobal = baseline == npw::BaselineMethod::LlmPruner && llmPrunerGlobal;
    return r;
}

nlohmann::json toJson(const npw::ScoreRequest& r) {
    if (!r.baseline) return toJson(r.settings);
    const npw::BaselineOptions& o = r.baselineOptions;
    nlohmann::json layers = nullptr;
    if (o.layerStart >= 0 || o.layerEnd >= 0) layers = {o.layerStart, o.layerEnd};
    return {{"method", npw::baselineMethodName(*r.baseline)},
            {"llm_pruner_global", o.llmPrunerGlobal},
            {"taylor", npw::taylorKindName(o.taylor)},
            {"llm_pruner_layers", layers},
            {"layer_ratio", finiteOrNull(o.layerRatio)}};
}

npw::ScoreRequest scoreRequestFromJson(const nlohmann::json& j) {
    const std::string method = fields::stringOr(j, "method", "numerical", kSettings);
    const std::optional<npw::BaselineMethod> baseline = npw::parseBaselineMethod(method);
    if (!baseline) return npw::ScoreRequest(pruneSettingsFromJson(j));
    npw::ScoreRequest r;
    r.baseline = baseline;
    npw::BaselineOptions& o = r.baselineOptions;
    o.llmPrunerGlobal = fields::boolOr(j, "llm_pruner_global", false, kSettings);
    o.taylor = namedField(j, "taylor", npw::taylorKindName(o.taylor), npw::parseTaylorKind);
    if (j.contains("llm_pruner_layers") && !j["llm_pruner_layers"].is_null()) {
        const nlohmann::json& l = j["llm_pruner_layers"];
        if (!l.is_array() || l.size() != 2 || !l[0].is_number_integer() || !l[1].is_number_integer())
            throw npw::Error("settings field 'llm_pruner_layers' must be null or [first, end] (integers)");
        o.layerStart = l[0].get<int64_t>();
        o.layerEnd = l[1].get<int64_t>();
    }
    if (j.contains("layer_ratio") && !j["layer_ratio"].is_null()) {
        o.layerRatio = fields::numberOr(j, "layer_ratio", o.layerRatio, kSettings);
        if (!(o.layerRatio >= 0 && o.layerRatio < 1)) throw npw::Error("settings field 'layer_ratio' is outside [0, 1)");
    }
    return r;
}

SelectionKnobs knobsFromJson(const nlohmann::json& j) {
    SelectionKnobs k;
    k.rho = fields::numberOr(j, "rho", k.rho, kSettings);
    k.alpha = alphaOr(j, "alpha", k.alpha);
    k.mode = namedField(j, "alpha_mode", npw::alphaModeName(k.mode), npw::parseAlphaMode);
    // λ_rel; an older workspace's absolute "lambda" has no meaning without its model's c: the default then.
    k.lambda = fields::numberOr(j, "lambda_rel", k.lambda, kSettings);
    if (!(k.rho >= 0 && k.rho < 1)) throw npw::Error("settings field 'rho' is outside [0, 1)");
    if (!(k.lambda > 0)) throw npw::Error("settings field 'lambda_rel' must be positive");
    return k;
}

} // namespace studio
