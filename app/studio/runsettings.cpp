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

npw::CompensationKind parseCompensation(const std::string& name) {
    if (name == "auto" || name == "method-default") return npw::CompensationKind::MethodDefault;
    if (name == "theorem3") return npw::CompensationKind::Theorem3;
    if (name == "flap-bias") return npw::CompensationKind::FlapBias;
    if (name == "none") return npw::CompensationKind::None;
    throw npw::Error("unknown compensation '" + name + "' (expected auto, theorem3, flap-bias or none)");
}

nlohmann::json toJson(const CalibrationSettings& s) {
    return {{"source", s.source}, {"source_is_ids", s.sourceIsIds}, {"samples", s.samples},
            {"seqlen", s.seqlen}, {"seed", s.seed}};
}

nlohmann::json toJson(const npw::PruneSettings& s) {
    const std::string compensation =
        s.compensation == npw::CompensationKind::MethodDefault ? "auto" : npw::compensationName(s.compensation);
    return {{"method", npw::methodName(s.method)},
            {"ratio", s.ratio},  // matters to Algorithm 1 (iters > 0) only
            {"lambda", s.lambda},
            {"iters", s.iters},
            {"damp", s.damp},
            {"compensation", compensation},
            {"seed", s.seed},
            {"unit", s.attentionUnit == npw::AttentionUnitKind::KvGroup ? "kv-group" : "query-slot"},
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
    s.compensation = parseCompensation(field<std::string>(j, "compensation", "auto"));
    s.seed = field<uint64_t>(j, "seed", s.seed);
    const std::string unit = field<std::string>(j, "unit", "kv-group");
    if (unit != "kv-group" && unit != "query-slot") throw npw::Error("settings field 'unit': '" + unit + "'");
    s.attentionUnit = unit == "kv-group" ? npw::AttentionUnitKind::KvGroup : npw::AttentionUnitKind::QuerySlot;
    s.standardisedGlobal = field<bool>(j, "standardised_global", s.standardisedGlobal);
    s.boxConstrained = field<bool>(j, "box_constrained", s.boxConstrained);
    s.validate();
    return s;
}

SelectionKnobs knobsFromJson(const nlohmann::json& j) {
    SelectionKnobs k;
    k.rho = field<double>(j, "rho", k.rho);
    k.alpha = doubleOrNaN(j, "alpha", k.alpha);
    const std::string mode = field<std::string>(j, "alpha_mode", "budget");
    if (mode != "paper" && mode != "budget") throw npw::Error("settings field 'alpha_mode': '" + mode + "'");
    k.mode = mode == "paper" ? npw::AlphaMode::Paper : npw::AlphaMode::Budget;
    k.lambda = field<double>(j, "lambda", k.lambda);
    if (!(k.rho >= 0 && k.rho < 1)) throw npw::Error("settings field 'rho' is outside [0, 1)");
    if (!(k.lambda > 0)) throw npw::Error("settings field 'lambda' must be positive");
    return k;
}

} // namespace studio
