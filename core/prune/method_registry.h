#pragma once
// Every pruning method npw knows, in one table (method_registry.cpp): its name as the command
// line spells it, what kind of method it is, where it is offered, what its scores are like, what
// "auto" compensation means for it, which options apply to it, and one line on what it does.
// Everything that lists, names or describes methods reads it: methodName / parsePruneMethod
// (settings.h), baselineMethodName / parseBaselineMethod (baselines.h), the sweep's method
// names (core/experiments/sweep_method.h), `npw prune --method` and `npw sweep --methods` (their
// choices and help), the studio's method lists and which of its knobs a method takes.
//
// A new per-unit method is: its PruneMethod value (settings.h), its row here, its channel
// metric (score.cpp's scoreChannels).
#include "core/prune/settings.h"

#include <functional>
#include <string>
#include <vector>

namespace npw {

// The baselines in their own structure (baselines.h): no score → select → apply steps.
enum class BaselineMethod { LlmPruner, SliceGpt, BlockInfluence };

enum class MethodKind {
    PerUnit,   // a PruneMethod: per-unit scores (a ScoreSet), then select, then apply
    Variant,   // a PruneMethod with one setting fixed by its name (the sweeps' numerical-z, -nocomp, ...)
    Baseline,  // a BaselineMethod, in its own structure
};

// The options (flags, studio knobs) that mean something for a method.
struct MethodOptions {
    bool lambda = false;        // λ and λ_rel (--lambda, --lambda-rel; the studio's λ_rel)
    bool ranking = false;       // the cross-layer ranking (--ranking)
    bool iterations = false;    // Algorithm 1 (--iters, --z0)
    bool box = false;           // the box constraint (--box)
    bool compensation = false;  // --compensation, --damp, --no-compensation (the studio's damping and its box)
};

struct MethodInfo {
    const char* name;  // as `npw prune --method` / `npw sweep --methods` spell it
    MethodKind kind;
    PruneMethod method = PruneMethod::Numerical;           // PerUnit, Variant: the scores' method
    BaselineMethod baseline = BaselineMethod::LlmPruner;   // Baseline only
    bool language = true;  // offered for language models
    bool image = true;     // offered for image models (LlamaGen): not the baselines, not lstar-kl
    // A Variant whose settings are another row's (numerical-lstar-rel is numerical): accepted,
    // listed where names are, left out of lists a user chooses one entry from.
    const char* sameAs = nullptr;
    // Scores per unit that the select step ranks (a ScoreSet); the baselines have their own.
    bool perUnitScores = true;
    // Needs the whole model in memory (not the layer-by-layer road): the baselines, lstar-kl.
    bool wholeModel = false;
    // What "auto" compensation (CompensationKind::MethodDefault) means for it.
    CompensationKind compensation = CompensationKind::None;
    MethodOptions options;
    // How its scores are ranked (PerUnit, Variant): one ranking across layers (else uniform per
    // layer), standardised per layer and site (FLAP), a unit's score the sum of its channels'
    // (else their mean), and whether it needs calibration statistics at all.
    bool selectsGlobally = false;
    bool standardises = false;
    bool unitsSumChannels = false;
    bool needsStatistics = true;
    // A Variant's one fixed setting (PerUnit rows: the defaults).
    CompensationKind fixedCompensation = CompensationKind::MethodDefault;
    bool fixedBox = false;
    CrossLayerRanking fixedRanking = kDefaultCrossLayerRanking;
    const char* description = "";  // one line
};

// Every row, in the order lists show them: the per-unit methods, numerical's variants, the baselines.
const std::vector<MethodInfo>& methodRegistry();
// The row of a name (any kind); nullptr for an unknown name.
const MethodInfo* findMethod(const std::string& name);
// The PerUnit row of a PruneMethod, the row of a BaselineMethod.
const MethodInfo& methodInfo(PruneMethod method);
const MethodInfo& methodInfo(BaselineMethod method);
// The rows `keep` accepts, in table order, and their names.
std::vector<const MethodInfo*> methodsWhere(const std::function<bool(const MethodInfo&)>& keep);
std::vector<std::string> methodNamesWhere(const std::function<bool(const MethodInfo&)>& keep);
// The names of one kind, in table order.
std::vector<std::string> methodNames(MethodKind kind);

} // namespace npw
