// The table of pruning methods (method_registry.h). Read it as a list: one block per method.
#include "core/prune/method_registry.h"

#include "core/util/error.h"

namespace npw {

namespace {

MethodInfo perUnit(const char* name, PruneMethod method, const char* description) {
    MethodInfo m;
    m.name = name;
    m.kind = MethodKind::PerUnit;
    m.method = method;
    m.options.compensation = true;  // --compensation theorem3 compensates any per-unit method's mask
    m.description = description;
    return m;
}

// A method ranked uniformly per layer whose unit score is the sum of its channels' (as FLAP's code
// has Wanda-sp, magnitude and random).
MethodInfo uniformSum(const char* name, PruneMethod method, bool needsStatistics, const char* description) {
    MethodInfo m = perUnit(name, method, description);
    m.unitsSumChannels = true;
    m.needsStatistics = needsStatistics;
    return m;
}

// numerical with one setting fixed by the name.
MethodInfo variant(const MethodInfo& numerical, const char* name, const char* description) {
    MethodInfo m = numerical;
    m.name = name;
    m.kind = MethodKind::Variant;
    m.description = description;
    return m;
}

// numerical ranked across layers another way.
MethodInfo ranked(const MethodInfo& numerical, const char* name, CrossLayerRanking ranking, const char* description) {
    MethodInfo m = variant(numerical, name, description);
    m.fixedRanking = ranking;
    return m;
}

MethodInfo baseline(const char* name, BaselineMethod method, const char* description) {
    MethodInfo m;
    m.name = name;
    m.kind = MethodKind::Baseline;
    m.baseline = method;
    m.image = false;  // they prune a language model's structure (SliceGPT: into its own model)
    m.perUnitScores = false;
    m.wholeModel = true;
    m.description = description;
    return m;
}

std::vector<MethodInfo> buildRegistry() {
    std::vector<MethodInfo> t;

    // ---- Per-unit methods: scores → select → apply (settings.h, score.cpp) -----------------------
    MethodInfo numerical = perUnit("numerical", PruneMethod::Numerical,
                                   "the paper's score z = 1 − ρ·w per channel (closed form, or Algorithm 1), unit = "
                                   "mean of its channels, ranked across layers by L*, Theorem 3 compensation");
    numerical.compensation = CompensationKind::Theorem3;
    numerical.options.lambda = numerical.options.ranking = numerical.options.iterations = numerical.options.box = true;
    numerical.selectsGlobally = true;
    t.push_back(numerical);

    MethodInfo flap = perUnit("flap", PruneMethod::Flap,
                              "FLAP's fluctuation metric (WIFV), standardised per layer, unit = mean, ranked across "
                              "layers, bias compensation");
    flap.compensation = CompensationKind::FlapBias;
    flap.selectsGlobally = true;
    flap.standardises = true;
    t.push_back(flap);

    t.push_back(uniformSum("wanda-sp", PruneMethod::WandaSp, /*needsStatistics=*/true,
                           "mean |W| · ‖X_j‖ per channel, unit = sum, uniform per layer, no compensation"));
    t.push_back(uniformSum("magnitude", PruneMethod::Magnitude, /*needsStatistics=*/false,
                           "‖W[:, j]‖₂ per channel, unit = sum, uniform per layer, no compensation (no calibration needed)"));
    t.push_back(uniformSum("random", PruneMethod::Random, /*needsStatistics=*/false,
                           "seeded uniform random scores, uniform per layer, no compensation (no calibration needed)"));

    // ---- numerical's variants: the sweeps' names for one fixed setting (sweep_method.h) ----------
    t.push_back(ranked(numerical, "numerical-z", CrossLayerRanking::Relaxed,
                       "numerical ranked across layers by z itself (the paper's eq. 7)"));
    t.push_back(ranked(numerical, "numerical-lstar", CrossLayerRanking::CompensatedError,
                       "numerical ranked across layers by Theorem 3's compensated error L*"));
    MethodInfo lstarRel = ranked(numerical, "numerical-lstar-rel", CrossLayerRanking::RelativeCompensatedError,
                                 "numerical ranked by L* relative to the residual stream (the default ranking: numerical)");
    lstarRel.sameAs = "numerical";
    t.push_back(lstarRel);
    MethodInfo lstarKl = ranked(numerical, "numerical-lstar-kl", CrossLayerRanking::MeasuredDamage,
                                "numerical ranked by lstar-rel's curves scaled to each site's measured KL (2L + 1 "
                                "whole-model forward passes; language models)");
    lstarKl.image = false;
    lstarKl.wholeModel = true;
    t.push_back(lstarKl);

    MethodInfo nocomp = variant(numerical, "numerical-nocomp", "numerical without compensation");
    nocomp.fixedCompensation = CompensationKind::None;
    t.push_back(nocomp);

    MethodInfo box = variant(numerical, "numerical-box", "numerical with z constrained to [0, 1], solved again for every ratio");
    box.fixedBox = true;
    t.push_back(box);

    // ---- The baselines in their own structure (baselines.h) --------------------------------------
    t.push_back(baseline("llm-pruner", BaselineMethod::LlmPruner,
                         "LLM-Pruner without recovery: first-order Taylor importance per KV group and MLP channel, "
                         "uniform per layer over a layer range"));
    t.push_back(baseline("slicegpt", BaselineMethod::SliceGpt,
                         "SliceGPT: the residual stream rotated by PCA, its least significant directions deleted "
                         "(no per-unit scores)"));
    t.push_back(baseline("block-influence", BaselineMethod::BlockInfluence,
                         "ShortGPT's depth pruning: the whole blocks of lowest Block Influence removed"));
    return t;
}

} // namespace

const std::vector<MethodInfo>& methodRegistry() {
    static const std::vector<MethodInfo> registry = buildRegistry();
    return registry;
}

const MethodInfo* findMethod(const std::string& name) {
    for (const MethodInfo& m : methodRegistry())
        if (name == m.name) return &m;
    return nullptr;
}

const MethodInfo& methodInfo(PruneMethod method) {
    for (const MethodInfo& m : methodRegistry())
        if (m.kind == MethodKind::PerUnit && m.method == method) return m;
    throw Error("pruning method " + std::to_string(int(method)) + " has no row in the method registry");
}

const MethodInfo& methodInfo(BaselineMethod method) {
    for (const MethodInfo& m : methodRegistry())
        if (m.kind == MethodKind::Baseline && m.baseline == method) return m;
    throw Error("baseline " + std::to_string(int(method)) + " has no row in the method registry");
}

std::vector<const MethodInfo*> methodsWhere(const std::function<bool(const MethodInfo&)>& keep) {
    std::vector<const MethodInfo*> out;
    for (const MethodInfo& m : methodRegistry())
        if (keep(m)) out.push_back(&m);
    return out;
}

std::vector<std::string> methodNamesWhere(const std::function<bool(const MethodInfo&)>& keep) {
    std::vector<std::string> out;
    for (const MethodInfo* m : methodsWhere(keep)) out.emplace_back(m->name);
    return out;
}

std::vector<std::string> methodNames(MethodKind kind) {
    return methodNamesWhere([kind](const MethodInfo& m) { return m.kind == kind; });
}

} // namespace npw
