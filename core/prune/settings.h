#pragma once
// What a pruning run is asked to do (design.md's flow, step 0): the method, ρ, α and its
// reading, λ, compensation, scope and protection, split by the stage that reads them (score,
// select, apply); the names users type for them and their one parser each.
//
// The methods themselves (their names, native structure, compensation, the options they take)
// are the rows of core/prune/method_registry.h; PruneMethod below only numbers the per-unit ones.
// standardisedGlobal is the explicitly labelled option that standardises any method's channel
// metric per layer and site and ranks it globally like FLAP (flap already is that).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace npw {

enum class PruneMethod { Numerical, Flap, WandaSp, Magnitude, Random };
enum class AttentionUnitKind { KvGroup, QuerySlot };
// MethodDefault: Theorem 3 for numerical, FLAP's bias for flap, none for the other baselines.
enum class CompensationKind { MethodDefault, Theorem3, FlapBias, None };
// The two readings of α (core/prune/select.h): eq. 7 as written, or FLAP's parameter budget.
enum class AlphaMode { Paper, Budget };
enum class SelectionScope { AttentionAndMlp, AttentionOnly, MlpOnly };
// How the numerical score compares units of different layers (README, "Choosing λ" and the
// diagnosis there). Inside a layer all of them keep the paper's order (that of z, i.e. of −A⁻¹1).
//   Relaxed ("z"): the paper's exact form, eq. 7 on z itself. The cross-layer order then rests
//     on λ·c: for λc ≪ 1 on the relaxed per-channel cost 1/(A⁻¹1)_j (a layer's absolute output
//     error), for λc ≫ 1 on nothing (every layer's mean z is 1 − ρ).
//   CompensatedError ("lstar"): every layer removes the prefix of its z-order that minimises
//     L*(k) + μ·(parameters kept), L*(k) = Theorem 3's output error after compensation of the
//     first k units (the paper's remark), μ set by the budget: units are ranked by the slopes of
//     the lower convex hull of each layer's L* curve per parameter. λ plays no part.
//   RelativeCompensatedError ("lstar-rel"): the same with each site's L* divided by the energy
//     of the residual stream it is added to, E‖h‖² ≈ the embedding's mean ‖e‖² plus the output
//     energies tr(WᵀGW) of every block up to and including it: every later RMSNorm divides the
//     stream by its scale, so an error δ reaches the rest of the model as δ/‖h‖. Absolute errors
//     of early layers (small ‖h‖) count more, those of late layers (large ‖h‖) less.
//   MeasuredDamage ("lstar-kl"): lstar-rel's curves, each site's scaled so that at a reference
//     prefix (its first ⌈ρ_ref·n⌉ units in z-order, compensated) it equals the KL divergence the
//     model's output actually suffers when only that site is pruned so, measured on the
//     calibration windows (core/prune/site_damage.h). The diagnosis found no layer-local
//     statistic that follows the end-to-end damage of a site (stories260K: it falls 16× with
//     depth while every local error grows), so this one measures it: 2L forward passes more.
enum class CrossLayerRanking { Relaxed, CompensatedError, RelativeCompensatedError, MeasuredDamage };

// A per-unit method's name, its registry row's (method_registry.h).
std::string methodName(PruneMethod method);          // "numerical", "flap", "wanda-sp", ...
PruneMethod parsePruneMethod(const std::string& name);  // npw::Error listing the choices
std::string compensationName(CompensationKind kind);    // "theorem3", "flap-bias", "none"
std::string alphaModeName(AlphaMode mode);              // "paper", "budget"
std::string scopeName(SelectionScope scope);            // "attention+mlp", "attention", "mlp"
// The parsers: the CLI flags, the studio's settings JSON and the manifests read and write these
// names through the functions here; nothing else spells them. Errors speak of the setting.
// "paper" or "budget" (as alphaModeName writes them); npw::Error naming the choices.
AlphaMode parseAlphaMode(const std::string& name);
// "auto" (or "method-default"), "theorem3", "flap-bias" (also spelt "bias"), "none". Written as
// compensationSettingName: "flap-bias", never "bias".
CompensationKind parseCompensation(const std::string& name);
// A compensation as settings write it: "auto" for MethodDefault, else compensationName.
std::string compensationSettingName(CompensationKind kind);
// "kv-group" or "query-slot".
std::string attentionUnitName(AttentionUnitKind kind);
AttentionUnitKind parseAttentionUnit(const std::string& name);
// "z" (Relaxed, the paper's exact form), "lstar" (CompensatedError), "lstar-rel", "lstar-kl".
std::string crossLayerRankingName(CrossLayerRanking ranking);
CrossLayerRanking parseCrossLayerRanking(const std::string& name);

// λ of the numerical score when none is given, relative to the model's own scale: λ = λ_rel /
// median_l c_l over every scored layer (attention and MLP), c = 1ᵀA⁻¹1. With G normalised per
// token each layer's mean z is 1 − ρ·λc/(1 + λc): for λc ≫ 1 every layer is held to a mean of
// 1 − ρ (the absolute error scale ignored), for λc ≪ 1 only the absolute scale of A⁻¹1 ranks
// channels across layers. c scales like 1/(weight² · activation²), so an absolute λ means
// different things on different models (c spans 10³…2·10⁶ on the demo models, 4·10²…10⁴ on
// stories260K); λ_rel fixes the median layer's λc and is invariant to rescaling the model.
// λ_rel = 4: the absolute 10⁻⁴ tuned on the demo models is λ·median c = 2.5 on demo:lm and ≈ 4
// with their geometric-mean c (README, "Choosing λ"). With the default ranking (lstar-rel) λ no
// longer changes the mask; it does for --ranking z, the box and Algorithm 1. An absolute λ
// (--lambda) overrides it; manifests record both.
constexpr double kDefaultLambdaRel = 4.0;
// The absolute λ that was the default before issue 15 (the bench's solver timings use it).
constexpr double kDefaultLambda = 1e-4;
// How units of different layers compete by default (settings above; README "Choosing λ").
// lstar-rel: the only ranking that beat FLAP at ρ 0.3 and 0.5 on every model of the study
// (README, "Choosing λ"); λ then only changes the z shown.
constexpr CrossLayerRanking kDefaultCrossLayerRanking = CrossLayerRanking::RelativeCompensatedError;

// The settings, split by the stage that reads them (design.md's flow). PruneSettings is the three
// together: what a run is asked, what the CLI, the JSON readers and the studio validate once at
// the edge (PruneSettings::validate), and what a score set and a manifest record. Each part's
// validate() checks its own fields only; rules that join two parts are PruneSettings::validate's.
// Some fields are read by a second stage too, named at the field.

// Read by scoring (computeScores, rescoreNumerical, scoreModel and the layer-wise road).
struct ScoreSettings {
    // Also read by selection (selectsGlobally: global or FLAP's uniform structure) and by apply
    // (the method's own compensation when compensation is MethodDefault).
    PruneMethod method = PruneMethod::Numerical;
    // The absolute λ; NaN (the default): λ = lambdaRel / median c, resolved by computeScores
    // (its ScoreSet's settings hold the λ it used).
    double lambda = std::numeric_limits<double>::quiet_NaN();
    double lambdaRel = kDefaultLambdaRel;
    CrossLayerRanking crossLayer = kDefaultCrossLayerRanking;  // numerical only
    int iters = 0;         // 0: closed form; T > 0: Algorithm 1 with T Newton steps (same z)
    // Numerical only: z ∈ [0, 1]^D (numericalScoreBoxed), solved at this ratio and λ. Another
    // ρ or λ needs a new solve: the set ranks its own z and rescoreNumerical refuses it.
    bool boxConstrained = false;
    double z0 = 1.0;       // Algorithm 1's starting point (every z_j = z0); the objective is
                           // quadratic, so the first Newton step lands on z* from any z0
    uint64_t seed = 0;     // the random method's scores (calibration has its own seed)
    // Also read by apply: which query heads and KV heads a removed unit takes with it.
    AttentionUnitKind attentionUnit = AttentionUnitKind::KvGroup;
    bool standardisedGlobal = false;

    bool lambdaIsRelative() const { return std::isnan(lambda); }
    // The scores are solved at one ρ (SelectionSettings::ratio, read at score time): the
    // box-constrained z and Algorithm 1's. The other scores rank every ρ alike.
    bool solvesAtRatio() const { return method == PruneMethod::Numerical && (boxConstrained || iters > 0); }
    // npw::Error naming the setting: λ ≤ 0 (or λ_rel ≤ 0), iters < 0, a box constraint on
    // another method or with iters.
    void validate() const;
};

// Read by selection (MaskSelector, selectGlobal, selectUniformPerLayer and the workbenches'
// select). The score set records scope and protection (MaskSelector reads them from it).
struct SelectionSettings {
    // ρ ∈ [0, 1): a fraction of parameters (budget) or of units (paper). Also read by scoring
    // where it solves at one ρ (ScoreSettings::solvesAtRatio).
    double ratio = 0.2;
    double alpha = std::numeric_limits<double>::quiet_NaN();  // NaN: unit params / channel params
                                                               // (4·D_h/3 MHA, (2g+2)·D_h/3 KV groups)
    // Budget by default: ρ is then the fraction of attention+MLP parameters removed (at least ρ,
    // at most one unit more), as the paper's tables compare methods; eq. 7 read literally with
    // α ≫ 1 hardly ever removes a head (measured: none on the demo models, README).
    AlphaMode alphaMode = AlphaMode::Budget;
    SelectionScope scope = SelectionScope::AttentionAndMlp;
    // Also read by scoring: a layer beyond the model is refused there, before any solve.
    std::vector<int64_t> protectedLayers;

    // npw::Error naming the setting: ρ outside [0, 1), α ≤ 0, a negative protected layer.
    void validate() const;
};

// Read by apply (applyMask: compensation, then slicing).
struct CompensationSettings {
    // Also read by scoring: the L* rankings (lstar, lstar-rel, lstar-kl) weigh each prefix by
    // Theorem 3's error after compensation with this dampening.
    double damp = 0.01;    // γ of Theorem 3, relative to mean(diag 2G)
    CompensationKind compensation = CompensationKind::MethodDefault;

    // npw::Error naming the setting: γ < 0 or not finite.
    void validate() const;
};

struct PruneSettings : ScoreSettings, SelectionSettings, CompensationSettings {
    // Every part's validate(), then what joins them: a box constraint or Algorithm 1 at ρ = 0
    // (their z at ρ = 0 ranks nothing). The edges call it once (the CLI's flags, the settings
    // JSON, the studio's Run and the sweeps' specifications); the stages below trust it.
    void validate() const;
    // The one check of the joined rule that scoring keeps (computeScores, computeScoresByLayer):
    // a solve at ρ = 0 would divide by it. npw::Error as validate() words it.
    void requireSolveRatio() const;
    CompensationKind effectiveCompensation() const;
    bool selectsGlobally() const;  // numerical, flap, or standardisedGlobal
};

// What a score set is called where several are kept side by side (the studio, sweeps):
// methodName, with "-" + crossLayerRankingName for a numerical score ranked across layers other
// than by default ("numerical-z": the paper's eq. 7) and "-box" for the box-constrained score.
std::string scoreSetName(const PruneSettings& settings);

} // namespace npw
