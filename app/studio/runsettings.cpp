#include "app/studio/runsettings.h"

#include "core/util/error.h"
#include "core/util/paths.h"

#include <cmath>

namespace studio {

namespace {

nlohmann::json finiteOrNull(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

template <class T>
T field(const nlohmann::json& j, const char* name, T fallback) {
    if (!j.contains(name) || j[name].is_null()) return fallback;
    try {
        return j[name].get<T>();
    } catch (const std::exception& e) {
        throw npw::Error(std::string("settings field '") + name + "': " + e.what());
    }
}

// A name field read with core's parser of that setting (npw::parseAlphaMode, ...).
template <class Parse>
auto namedField(const nlohmann::json& j, const char* name, const std::string& fallback, Parse parse) {
    const std::string value = field<std::string>(j, name, fallback);
    try {
        return parse(value);
    } catch (const npw::Error& e) {
        throw npw::Error(std::string("settings field '") + name + "': " + e.what());
    }
}

double doubleOrNaN(const nlohmann::json& j, const char* name, double fallback) {
    if (j.contains(name) && j[name].is_null()) return std::numeric_limits<double>::quiet_NaN();
    return field<double>(j, name, fallback);
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
            {"lambda", s.lambda},
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
            {"lambda", k.lambda}};
}

CalibrationSettings calibrationFromJson(const nlohmann::json& j) {
    CalibrationSettings s;
    s.source = field<std::string>(j, "source", s.source);
    s.sourceIsIds = field<bool>(j, "source_is_ids", s.sourceIsIds);
    s.samples = field<int64_t>(j, "samples", s.samples);
    s.seqlen = field<int64_t>(j, "seqlen", s.seqlen);
    s.seed = field<uint64_t>(j, "seed", s.seed);
    if (s.samples < 1 || s.seqlen < 2) throw npw::Error("calibration needs samples ≥ 1 and seqlen ≥ 2");
    return s;
}

npw::PruneSettings pruneSettingsFromJson(const nlohmann::json& j) {
    npw::PruneSettings s;
    s.method = npw::parsePruneMethod(field<std::string>(j, "method", npw::methodName(s.method)));
    s.ratio = field<double>(j, "ratio", s.ratio);
    s.lambda = field<double>(j, "lambda", s.lambda);
    s.iters = field<int>(j, "iters", s.iters);
    s.damp = field<double>(j, "damp", s.damp);
    s.compensation = namedField(j, "compensation", npw::compensationSettingName(s.compensation), npw::parseCompensation);
    s.seed = field<uint64_t>(j, "seed", s.seed);
    s.attentionUnit = namedField(j, "unit", npw::attentionUnitName(s.attentionUnit), npw::parseAttentionUnit);
    s.standardisedGlobal = field<bool>(j, "standardised_global", s.standardisedGlobal);
    s.boxConstrained = field<bool>(j, "box_constrained", s.boxConstrained);
    s.validate();
    return s;
}

SelectionKnobs knobsFromJson(const nlohmann::json& j) {
    SelectionKnobs k;
    k.rho = field<double>(j, "rho", k.rho);
    k.alpha = doubleOrNaN(j, "alpha", k.alpha);
    k.mode = namedField(j, "alpha_mode", npw::alphaModeName(k.mode), npw::parseAlphaMode);
    k.lambda = field<double>(j, "lambda", k.lambda);
    if (!(k.rho >= 0 && k.rho < 1)) throw npw::Error("settings field 'rho' is outside [0, 1)");
    if (!(k.lambda > 0)) throw npw::Error("settings field 'lambda' must be positive");
    return k;
}

} // namespace studio
