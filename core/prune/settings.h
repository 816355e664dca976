#pragma once
// What a pruning run is asked to do (design.md's flow, step 0): the method, ρ, α and its
// reading, λ, compensation, scope and protection; the names users type for them and their one
// parser each. Everything below (score, select, apply, report, export) takes these settings.
//
// Methods and their native structure (reference.md §1-2):
//   numerical  the paper: z = 1 − ρ·w per channel (closed form, or Algorithm 1 with iters > 0),
//              unit = mean of its channels' z, one global ranking (eq. 7 or the budget reading),
//              Theorem 3 compensation of o_proj/down_proj.
//   flap       FLAP's AL-AM: WIFV (attention squared), standardised per layer, unit = mean,
//              global ranking, bias compensation.
//   wanda-sp   mean|W|·‖X_j‖, unit = sum, uniform per layer (int(ρH) units, int(ρ·D_inter) channels).
//   magnitude  ‖W[:, j]‖₂, unit = sum, uniform per layer.
//   random     seeded uniform random scores, uniform per layer.
// standardisedGlobal is the explicitly labelled option that standardises any method's channel
// metric per layer and site and ranks it globally like FLAP (flap already is that).
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

// λ of the numerical score when none is given. With G normalised per token (G/N), each layer's
// mean z is 1 − ρ·λc/(1 + λc), c = 1ᵀA⁻¹1: for λc ≫ 1 every layer is held to a mean of 1 − ρ
// (the absolute error scale is ignored), for λc ≪ 1 only the absolute scale of A⁻¹1 ranks
// channels across layers (layers with tiny errors get emptied). Measured (README, "Choosing
// λ"): c spans 10³…2·10⁶ on the demo models, and λ = 10⁻⁴ (typical λc ≈ 1…10) gave the lowest
// KL after pruning 30% of them, 3-7× lower than the saturated λc ≫ 1 end; stories260K (c 4·10²
// …10⁴) preferred the saturated end. Exposed as --lambda and recorded in every manifest.
constexpr double kDefaultLambda = 1e-4;

struct PruneSettings {
    PruneMethod method = PruneMethod::Numerical;
    double ratio = 0.2;  // ρ ∈ [0, 1): a fraction of parameters (budget) or of units (paper)
    double alpha = std::numeric_limits<double>::quiet_NaN();  // NaN: unit params / channel params
                                                               // (4·D_h/3 MHA, (2g+2)·D_h/3 KV groups)
    // Budget by default: ρ is then the fraction of attention+MLP parameters removed (at least ρ,
    // at most one unit more), as the paper's tables compare methods; eq. 7 read literally with
    // α ≫ 1 hardly ever removes a head (measured: none on the demo models, README).
    AlphaMode alphaMode = AlphaMode::Budget;
    double lambda = kDefaultLambda;
    int iters = 0;         // 0: closed form; T > 0: Algorithm 1 with T Newton steps (same z)
    // Numerical only: z ∈ [0, 1]^D (numericalScoreBoxed), solved at this ratio and λ. Another
    // ρ or λ needs a new solve: the set ranks its own z and rescoreNumerical refuses it.
    bool boxConstrained = false;
    double z0 = 1.0;       // Algorithm 1's starting point (every z_j = z0); the objective is
                           // quadratic, so the first Newton step lands on z* from any z0
    double damp = 0.01;    // γ of Theorem 3, relative to mean(diag 2G)
    CompensationKind compensation = CompensationKind::MethodDefault;
    SelectionScope scope = SelectionScope::AttentionAndMlp;
    std::vector<int64_t> protectedLayers;
    uint64_t seed = 0;     // the random method's scores (calibration has its own seed)
    AttentionUnitKind attentionUnit = AttentionUnitKind::KvGroup;
    bool standardisedGlobal = false;

    // npw::Error naming the setting: ρ outside [0, 1), λ ≤ 0, γ < 0, α ≤ 0, iters < 0, a box
    // constraint on another method, with iters, or at ρ = 0.
    void validate() const;
    CompensationKind effectiveCompensation() const;
    bool selectsGlobally() const;  // numerical, flap, or standardisedGlobal
};

// What a score set is called where several are kept side by side (the studio, sweeps):
// methodName, with "-box" for the box-constrained numerical score.
std::string scoreSetName(const PruneSettings& settings);

} // namespace npw
