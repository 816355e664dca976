#include "core/prune/settings.h"

#include "core/prune/method_registry.h"
#include "core/util/error.h"
#include "core/util/number_text.h"

#include <cmath>

namespace npw {

namespace {

bool isFiniteNumber(double x) { return std::isfinite(x); }

} // namespace

std::string scoreSetName(const PruneSettings& settings) {
    // As the sweep names them: numerical (the default ranking), numerical-z, numerical-lstar, ...
    const bool other = settings.method == PruneMethod::Numerical && settings.crossLayer != kDefaultCrossLayerRanking;
    return methodName(settings.method) + (other ? "-" + crossLayerRankingName(settings.crossLayer) : "") +
           (settings.boxConstrained ? "-box" : "");
}

std::string methodName(PruneMethod method) { return methodInfo(method).name; }

PruneMethod parsePruneMethod(const std::string& name) {
    std::string choices;
    for (const MethodInfo* m : methodsWhere([](const MethodInfo& row) { return row.kind == MethodKind::PerUnit; })) {
        if (name == m->name) return m->method;
        choices += (choices.empty() ? "" : ", ") + std::string(m->name);
    }
    throw Error("unknown pruning method '" + name + "' (choose one of " + choices + ")");
}

std::string compensationName(CompensationKind kind) {
    switch (kind) {
    case CompensationKind::MethodDefault: return "method-default";
    case CompensationKind::Theorem3: return "theorem3";
    case CompensationKind::FlapBias: return "flap-bias";
    case CompensationKind::None: return "none";
    }
    return "?";
}

std::string alphaModeName(AlphaMode mode) { return mode == AlphaMode::Paper ? "paper" : "budget"; }

std::string scopeName(SelectionScope scope) {
    switch (scope) {
    case SelectionScope::AttentionAndMlp: return "attention+mlp";
    case SelectionScope::AttentionOnly: return "attention";
    case SelectionScope::MlpOnly: return "mlp";
    }
    return "?";
}

void ScoreSettings::validate() const {
    if (!lambdaIsRelative() && !(lambda > 0 && isFiniteNumber(lambda)))
        throw Error("λ must be a positive number, got " + shortNumber(lambda));
    if (lambdaIsRelative() && !(lambdaRel > 0 && isFiniteNumber(lambdaRel)))
        throw Error("the relative λ (λ_rel, λ = λ_rel / median c) must be a positive number, got " + shortNumber(lambdaRel));
    if (iters < 0) throw Error("the Newton iterations T must be ≥ 0, got " + std::to_string(iters));
    if (boxConstrained && method != PruneMethod::Numerical)
        throw Error("the box constraint applies to the numerical score only, not " + methodName(method));
    if (boxConstrained && iters > 0)
        throw Error("the box constraint and Algorithm 1 (iterations T > 0) are alternatives: the box-constrained z comes from its own active-set solve");
}

void SelectionSettings::validate() const {
    if (!(ratio >= 0 && ratio < 1))
        throw Error("the pruning ratio ρ must lie in [0, 1), got " + shortNumber(ratio));
    if (!std::isnan(alpha) && !(alpha > 0 && isFiniteNumber(alpha)))
        throw Error("α must be a positive number, got " + shortNumber(alpha));
    for (int64_t layer : protectedLayers)
        if (layer < 0) throw Error("protected layer " + std::to_string(layer) + " is negative");
}

void CompensationSettings::validate() const {
    if (!(damp >= 0 && isFiniteNumber(damp)))
        throw Error("the dampening γ must be ≥ 0, got " + shortNumber(damp));
}

void PruneSettings::validate() const {
    SelectionSettings::validate();
    ScoreSettings::validate();
    CompensationSettings::validate();
    requireSolveRatio();
}

void PruneSettings::requireSolveRatio() const {
    if (!solvesAtRatio() || ratio > 0) return;  // a NaN ρ is refused too
    if (boxConstrained)
        throw Error("the box-constrained score needs ρ > 0: at ρ = 0 every z is 1 and ranks nothing");
    throw Error("Algorithm 1 (iterations T > 0) needs ρ > 0: its z at ρ = 0 is all ones and ranks nothing");
}

CompensationKind PruneSettings::effectiveCompensation() const {
    return compensation != CompensationKind::MethodDefault ? compensation : methodInfo(method).compensation;
}

bool PruneSettings::selectsGlobally() const {
    return methodInfo(method).selectsGlobally || standardisedGlobal;
}

AlphaMode parseAlphaMode(const std::string& name) {
    for (AlphaMode mode : {AlphaMode::Paper, AlphaMode::Budget})
        if (name == alphaModeName(mode)) return mode;
    throw Error("unknown α mode '" + name + "' (expected paper or budget)");
}

CompensationKind parseCompensation(const std::string& name) {
    if (name == "auto" || name == "method-default") return CompensationKind::MethodDefault;
    if (name == "theorem3") return CompensationKind::Theorem3;
    if (name == "flap-bias" || name == "bias") return CompensationKind::FlapBias;
    if (name == "none") return CompensationKind::None;
    throw Error("unknown compensation '" + name + "' (expected auto, theorem3, flap-bias or none)");
}

std::string compensationSettingName(CompensationKind kind) {
    return kind == CompensationKind::MethodDefault ? "auto" : compensationName(kind);
}

std::string attentionUnitName(AttentionUnitKind kind) {
    return kind == AttentionUnitKind::QuerySlot ? "query-slot" : "kv-group";
}

AttentionUnitKind parseAttentionUnit(const std::string& name) {
    for (AttentionUnitKind kind : {AttentionUnitKind::KvGroup, AttentionUnitKind::QuerySlot})
        if (name == attentionUnitName(kind)) return kind;
    throw Error("unknown attention unit '" + name + "' (expected kv-group or query-slot)");
}

std::string crossLayerRankingName(CrossLayerRanking ranking) {
    switch (ranking) {
    case CrossLayerRanking::Relaxed: return "z";
    case CrossLayerRanking::CompensatedError: return "lstar";
    case CrossLayerRanking::RelativeCompensatedError: return "lstar-rel";
    case CrossLayerRanking::MeasuredDamage: return "lstar-kl";
    }
    return "?";
}

CrossLayerRanking parseCrossLayerRanking(const std::string& name) {
    for (CrossLayerRanking r :
         {CrossLayerRanking::Relaxed, CrossLayerRanking::CompensatedError, CrossLayerRanking::RelativeCompensatedError,
          CrossLayerRanking::MeasuredDamage})
        if (name == crossLayerRankingName(r)) return r;
    throw Error("unknown cross-layer ranking '" + name +
                "' (expected lstar: by the compensated error L*; lstar-rel: L* relative to the residual stream; lstar-kl: "
                "L* scaled to each site's measured KL; or z: "
                "the paper's relaxed score)");
}

} // namespace npw
