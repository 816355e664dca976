#include "core/experiments/run_settings.h"

#include "core/text/json_fields.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

namespace npw {

namespace {

namespace fields = json_fields;
using fields::finiteOrNull;

constexpr const char* kSettings = "settings";

// A name field read with core's parser of that setting (parseAlphaMode, ...).
template <class Parse>
auto namedField(const nlohmann::json& j, const char* name, const std::string& fallback, Parse parse) {
    const std::string value = fields::stringOr(j, name, fallback, kSettings);
    try {
        return parse(value);
    } catch (const Error& e) {
        throw Error(std::string("settings field '") + name + "': " + e.what());
    }
}

// A seed: a non-negative integer.
uint64_t seedOr(const nlohmann::json& j, const char* name, uint64_t fallback) {
    const int64_t seed = fields::intOr(j, name, static_cast<int64_t>(fallback), kSettings);
    if (seed < 0) throw Error(std::string("settings field '") + name + "' must not be negative");
    return static_cast<uint64_t>(seed);
}

// α: null (written for NaN, the default α) reads as NaN.
double alphaOr(const nlohmann::json& j, const char* name, double fallback) {
    if (j.is_object() && j.contains(name) && j[name].is_null()) return std::numeric_limits<double>::quiet_NaN();
    return fields::numberOr(j, name, fallback, kSettings);
}

// A number as the studio's messages print it: %g with `digits` significant digits.
std::string num(double x, int digits = 6) {
    std::ostringstream out;
    out.precision(digits);
    out << x;
    return out.str();
}

// "128 windows × 64 tokens (seed 0) of kjv-ot.txt": what a calibration reads.
std::string describeCalibration(const CalibrationSettings& c, const char* separator) {
    const std::string length = c.seqlen > 0 ? std::to_string(c.seqlen) : std::string("the model's context of");
    return std::to_string(c.samples) + separator + length + " tokens (seed " +
           std::to_string(c.seed) + ")" +
           (c.source.empty() ? std::string() : " of " + std::filesystem::path(c.source).filename().string());
}

} // namespace

std::string defaultCalibrationSource() { return resourcesDir() + "/demo/data/kjv-ot.txt"; }
std::string defaultEvaluationSource() { return resourcesDir() + "/demo/data/kjv-nt.txt"; }
std::string defaultZeroShotTask() { return "mc:" + resourcesDir() + "/demo/data/nt-verse-endings.jsonl"; }

bool isDemoModel(const std::string& reference) {
    if (reference.rfind("demo:", 0) == 0) return true;
    // A demo's folder opened by its path.
    std::error_code error;
    const auto demoDir = std::filesystem::weakly_canonical(std::filesystem::path(resourcesDir()) / "demo", error);
    if (error) return false;
    const auto path = std::filesystem::weakly_canonical(reference, error);
    if (error) return false;
    return path.parent_path() == demoDir;
}

ModelDefaults modelDefaults(const std::string& reference) {
    ModelDefaults d;
    if (!isDemoModel(reference)) return d;
    d.demo = true;
    d.calibrationSource = defaultCalibrationSource();
    d.evaluationSource = defaultEvaluationSource();
    d.zeroShotTask = defaultZeroShotTask();
    d.prompt = "And Jesus said unto them";
    return d;
}

bool SelectionKnobs::operator==(const SelectionKnobs& o) const {
    const bool sameAlpha = alpha == o.alpha || (std::isnan(alpha) && std::isnan(o.alpha));
    return rho == o.rho && sameAlpha && mode == o.mode && lambda == o.lambda;
}

nlohmann::json toJson(const CalibrationSettings& s) {
    return {{"source", s.source}, {"source_is_ids", s.sourceIsIds}, {"samples", s.samples},
            {"seqlen", s.seqlen}, {"seed", s.seed}};
}

nlohmann::json toJson(const PruneSettings& s) {
    return {{"method", methodName(s.method)},
            {"ratio", s.ratio},  // matters to Algorithm 1 (iters > 0) only
            {"lambda", finiteOrNull(s.lambda)},  // null: relative (λ_rel / median c)
            {"lambda_rel", s.lambdaRel},
            {"ranking", crossLayerRankingName(s.crossLayer)},
            {"iters", s.iters},
            {"damp", s.damp},
            {"compensation", compensationSettingName(s.compensation)},
            {"seed", s.seed},
            {"unit", attentionUnitName(s.attentionUnit)},
            {"standardised_global", s.standardisedGlobal},
            {"box_constrained", s.boxConstrained}};
}

nlohmann::json toJson(const RunSettings& s) {
    return {{"calibration", toJson(s.calibration)}, {"prune", toJson(s.prune)}};
}

nlohmann::json toJson(const SelectionKnobs& k) {
    return {{"rho", k.rho}, {"alpha", finiteOrNull(k.alpha)}, {"alpha_mode", alphaModeName(k.mode)},
            {"lambda_rel", k.lambda}};
}

CalibrationSettings calibrationFromJson(const nlohmann::json& j) {
    CalibrationSettings s;
    s.source = fields::stringOr(j, "source", s.source, kSettings);
    s.sourceIsIds = fields::boolOr(j, "source_is_ids", s.sourceIsIds, kSettings);
    s.samples = fields::intOr(j, "samples", s.samples, kSettings);
    s.seqlen = fields::intOr(j, "seqlen", s.seqlen, kSettings);
    s.seed = seedOr(j, "seed", s.seed);
    if (s.samples < 1 || (s.seqlen != 0 && s.seqlen < 2))
        throw Error("calibration needs samples ≥ 1 and seqlen 0 (the model's context, at most 2048) or ≥ 2");
    return s;
}

PruneSettings pruneSettingsFromJson(const nlohmann::json& j) {
    PruneSettings s;
    s.method = parsePruneMethod(fields::stringOr(j, "method", methodName(s.method), kSettings));
    s.ratio = fields::numberOr(j, "ratio", s.ratio, kSettings);
    if (j.contains("lambda") && !j["lambda"].is_null()) s.lambda = fields::numberOr(j, "lambda", s.lambda, kSettings);
    s.lambdaRel = fields::numberOr(j, "lambda_rel", s.lambdaRel, kSettings);
    s.crossLayer = namedField(j, "ranking", crossLayerRankingName(s.crossLayer), parseCrossLayerRanking);
    s.iters = static_cast<int>(fields::intOr(j, "iters", s.iters, kSettings));
    s.damp = fields::numberOr(j, "damp", s.damp, kSettings);
    s.compensation = namedField(j, "compensation", compensationSettingName(s.compensation), parseCompensation);
    s.seed = seedOr(j, "seed", s.seed);
    s.attentionUnit = namedField(j, "unit", attentionUnitName(s.attentionUnit), parseAttentionUnit);
    s.standardisedGlobal = fields::boolOr(j, "standardised_global", s.standardisedGlobal, kSettings);
    s.boxConstrained = fields::boolOr(j, "box_constrained", s.boxConstrained, kSettings);
    s.validate();
    return s;
}

RunSettings runSettingsFromJson(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("calibration") || !j.contains("prune"))
        throw Error("run settings: expected an object with fields 'calibration' and 'prune'");
    RunSettings s;
    s.calibration = calibrationFromJson(j.at("calibration"));
    s.prune = pruneSettingsFromJson(j.at("prune"));
    return s;
}

ScoreRequest RunSettings::scoreRequest() const {
    ScoreRequest r(prune);
    r.baseline = baseline;
    r.baselineOptions.llmPrunerGlobal = baseline == BaselineMethod::LlmPruner && llmPrunerGlobal;
    return r;
}

nlohmann::json toJson(const ScoreRequest& r) {
    if (!r.baseline) return toJson(r.settings);
    const BaselineOptions& o = r.baselineOptions;
    nlohmann::json layers = nullptr;
    if (o.layerStart >= 0 || o.layerEnd >= 0) layers = {o.layerStart, o.layerEnd};
    return {{"method", baselineMethodName(*r.baseline)},
            {"llm_pruner_global", o.llmPrunerGlobal},
            {"taylor", taylorKindName(o.taylor)},
            {"llm_pruner_layers", layers},
            {"layer_ratio", finiteOrNull(o.layerRatio)}};
}

ScoreRequest scoreRequestFromJson(const nlohmann::json& j) {
    const std::string method = fields::stringOr(j, "method", "numerical", kSettings);
    const std::optional<BaselineMethod> baseline = parseBaselineMethod(method);
    if (!baseline) return ScoreRequest(pruneSettingsFromJson(j));
    ScoreRequest r;
    r.baseline = baseline;
    BaselineOptions& o = r.baselineOptions;
    o.llmPrunerGlobal = fields::boolOr(j, "llm_pruner_global", false, kSettings);
    o.taylor = namedField(j, "taylor", taylorKindName(o.taylor), parseTaylorKind);
    if (j.contains("llm_pruner_layers") && !j["llm_pruner_layers"].is_null()) {
        const nlohmann::json& l = j["llm_pruner_layers"];
        if (!l.is_array() || l.size() != 2 || !l[0].is_number_integer() || !l[1].is_number_integer())
            throw Error("settings field 'llm_pruner_layers' must be null or [first, end] (integers)");
        o.layerStart = l[0].get<int64_t>();
        o.layerEnd = l[1].get<int64_t>();
    }
    if (j.contains("layer_ratio") && !j["layer_ratio"].is_null()) {
        o.layerRatio = fields::numberOr(j, "layer_ratio", o.layerRatio, kSettings);
        if (!(o.layerRatio >= 0 && o.layerRatio < 1)) throw Error("settings field 'layer_ratio' is outside [0, 1)");
    }
    return r;
}

SelectionKnobs knobsFromJson(const nlohmann::json& j) {
    SelectionKnobs k;
    k.rho = fields::numberOr(j, "rho", k.rho, kSettings);
    k.alpha = alphaOr(j, "alpha", k.alpha);
    k.mode = namedField(j, "alpha_mode", alphaModeName(k.mode), parseAlphaMode);
    // λ_rel; an older workspace's absolute "lambda" has no meaning without its model's c: the default then.
    k.lambda = fields::numberOr(j, "lambda_rel", k.lambda, kSettings);
    if (!(k.rho >= 0 && k.rho < 1)) throw Error("settings field 'rho' is outside [0, 1)");
    if (!(k.lambda > 0)) throw Error("settings field 'lambda_rel' must be positive");
    return k;
}

CalibrationRequest calibrationRequest(const CalibrationSettings& settings) {
    CalibrationRequest request;
    request.source = settings.source.empty() ? defaultCalibrationSource() : settings.source;
    request.sourceIsIds = settings.sourceIsIds;
    request.samples = settings.samples;
    request.seqlen = settings.seqlen;
    request.seed = settings.seed;
    return request;
}

PruneSettings scoredAtKnobs(PruneSettings settings, const SelectionKnobs& knobs) {
    settings.ratio = knobs.rho;  // read by scoring only where it solves at ρ (the score set records it)
    settings.lambda = std::numeric_limits<double>::quiet_NaN();  // relative: the knob is λ_rel
    settings.lambdaRel = knobs.lambda;
    return settings;
}

ScoreRequest scoredAtKnobs(ScoreRequest request, const SelectionKnobs& knobs) {
    request.settings = scoredAtKnobs(std::move(request.settings), knobs);
    return request;
}

ScoringResult calibrateAndScore(const LanguageModel& lm, LanguagePruningWorkbench::Calibration calibration,
                                const CalibrationSettings& settings, const std::vector<ScoreRequest>& list,
                                const ProgressFn& progress, const CalibrationOptions& options) {
    ScoringResult r;
    r.calibration = std::move(calibration);
    if (!r.calibration.stats) {
        r.calibration = LanguagePruningWorkbench::calibrate(lm, calibrationRequest(settings), progress, options);
        r.recalibrated = true;
    }
    for (const ScoreRequest& request : list) {
        if (request.baseline && !r.calibration.windows)  // statistics from a workspace: no windows kept
            r.calibration.windows =
                std::make_shared<const CalibrationSet>(buildCalibrationSet(lm, calibrationRequest(settings)));
        r.scores.push_back(LanguagePruningWorkbench::score(lm, r.calibration, request, progress));
    }
    return r;
}

std::string recomputeReason(const LanguagePruningWorkbench& workbench, const std::string& current,
                            const std::optional<CalibrationSettings>& statsFrom, const CalibrationSettings& asked,
                            const SelectionKnobs& knobs) {
    if (!workbench.hasModel() || workbench.scoreSetNames().empty()) return {};
    if (workbench.isCalibrated() && statsFrom && *statsFrom != asked)
        return "The scores shown come from " + describeCalibration(*statsFrom, " windows × ") +
               "; the Run settings now ask for " + describeCalibration(asked, " × ") +
               ". A new calibration and new solves are needed.";
    const auto computed = workbench.computedScores(current);
    if (computed && computed->settings.boxConstrained) {
        const PruneSettings& s = computed->settings;
        // The set's λ is absolute (λ_rel / its median c): compare it on that scale.
        const bool sameLambda = std::isfinite(computed->medianC) && computed->medianC > 0
                                    ? s.lambda == knobs.lambda / computed->medianC
                                    : true;
        if (s.ratio != knobs.rho || !sameLambda)
            return "The box-constrained z was solved at ρ = " + num(s.ratio) +
                   ", λ_rel = " + num(s.lambda * computed->medianC, 3) + "; the mask re-ranks that z at ρ = " +
                   num(knobs.rho) + ", λ_rel = " + num(knobs.lambda, 3) +
                   ". The bounded optimum there needs a new solve.";
    }
    return {};
}

std::string calibrationLine(const CalibrationSummary& summary, const std::string& note) {
    return "Calibrated on " + std::to_string(summary.samples) + " windows of " + std::to_string(summary.seqlen) +
           " tokens of " + std::filesystem::path(summary.source).filename().string() +
           (note.empty() ? std::string() : " (" + note + ")") + ".";
}

std::string boxSolveLine(const ScoreSet& s) {
    return "Box-constrained z solved at ρ = " + num(s.settings.ratio) + ", λ = " + num(s.settings.lambda, 3) +
           " (λ_rel / median c): " + std::to_string(s.boxAtZero) + " channels at 0, " + std::to_string(s.boxAtOne) +
           " at 1, KKT residual " + num(s.boxKktViolation, 2) + ".";
}

std::string attentionUnitLabel(const LlamaConfig& config, AttentionUnitKind kind) {
    for (int64_t l = 0; l < config.num_layers; ++l)
        if (config.num_kv_heads[l] > 0 && config.num_kv_heads[l] != config.num_heads[l])
            return kind == AttentionUnitKind::KvGroup ? "KV group" : "query slot";
    return "head";
}

} // namespace npw
