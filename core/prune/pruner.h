#pragma once
// The pruning engine: statistics → scores → mask → pruned checkpoint (design.md's flow).
//
//     ModelStats ──computeScores──▶ ScoreSet ──MaskSelector::select(ρ, α, mode)──▶ Mask
//                                                                               │
//     LlamaCheckpoint + ModelStats + Mask ──applyMask (compensate, slice)──▶ PrunedModel
//
// computeScores does the expensive part once (per layer one Cholesky solve for the numerical
// score, or the baselines' metrics); a MaskSelector sorts once; select() for another ρ, α or α
// reading is a few binary searches (selection.h), so a GUI slider never re-scores.
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
//
// Attention units: a head for MHA layers. For GQA layers (g query heads per KV head) the default
// unit is a KV group (its g query heads and its KV head: k/v stay consistent); QuerySlot instead
// makes query slot s of every group one unit (g query heads out of g·kv go at once, KV heads
// stay until every slot is gone), which keeps the g-per-group structure LLaMA needs.
#include "core/models/llama_weights.h"
#include "core/prune/calibration.h"
#include "core/prune/numerical_score.h"
#include "core/prune/selection.h"
#include "core/util/progress.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace npw {

enum class PruneMethod { Numerical, Flap, WandaSp, Magnitude, Random };
enum class AttentionUnitKind { KvGroup, QuerySlot };
// MethodDefault: Theorem 3 for numerical, FLAP's bias for flap, none for the other baselines.
enum class CompensationKind { MethodDefault, Theorem3, FlapBias, None };

std::string methodName(PruneMethod method);          // "numerical", "flap", "wanda-sp", ...
PruneMethod parsePruneMethod(const std::string& name);  // npw::Error listing the choices
std::string compensationName(CompensationKind kind);    // "theorem3", "flap-bias", "none"
std::string alphaModeName(AlphaMode mode);              // "paper", "budget"

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

// Which query and key/value heads an attention unit of one layer covers.
struct AttentionUnits {
    AttentionUnitKind kind = AttentionUnitKind::KvGroup;
    int64_t heads = 0, kvHeads = 0, headDim = 0;

    AttentionUnits(const LlamaConfig& config, int64_t layer, AttentionUnitKind kind);
    bool isGrouped() const { return kvHeads > 0 && heads != kvHeads; }
    int64_t count() const;  // units in the layer (0 without heads)
    std::vector<bool> keptQueryHeads(const std::vector<bool>& keepUnits) const;
    std::vector<bool> keptKvHeads(const std::vector<bool>& keepUnits) const;
    // Per-unit mean (or sum) of the per-channel scores of the o_proj input channels [heads·D_h].
    std::vector<double> reduce(const at::Tensor& channelScores, bool sum) const;
};

// Parameters per unit and per MLP channel for every layer (QuerySlot units of GQA layers cost
// their q rows and o columns; KV heads are only counted when they actually go).
std::vector<LayerUnitCost> unitCosts(const LlamaConfig& config, AttentionUnitKind kind);
// The default α: a unit's parameters over a channel's; npw::Error when layers disagree.
double defaultAlphaFor(const LlamaConfig& config, AttentionUnitKind kind);

// Everything a selection needs, computed once from the statistics and the weights.
struct ScoreSet {
    PruneSettings settings;  // as computed: method, λ, unit kind, standardisation, scope, protection
    LlamaConfig config;
    // Per layer, per channel, float64 on the CPU; undefined where the layer has no heads/channels.
    // numerical: s = −w, so that z(ρ) = 1 + ρ·s (ρ-independent order; standardised when asked);
    // the baselines: their metric (standardised for flap and standardisedGlobal).
    std::vector<at::Tensor> attentionChannels, mlpChannels;
    std::vector<LayerScores> ranking;           // unit scores from the above; higher = keep
    std::vector<NumericalSolve> attentionSolves, mlpSolves;  // numerical only (D = 0: none)
    std::vector<LayerUnitCost> costs;
    double newtonMaxDeviation = -1;  // iters > 0: max |z_Algorithm1 − z_closed form| at settings.ratio
    double boxKktViolation = -1;     // boxConstrained: the largest relative KKT residual of the layers' solves
    int64_t boxAtZero = 0, boxAtOne = 0;  // boxConstrained: channels whose z sits on a bound

    bool rankingIsNumericalW() const;  // ranking holds s = −w (z = 1 + ρ·s): numerical, not standardised or boxed
    // The scores a user reads at ρ: numerical z (channels, and unit means), the baselines' metric.
    LayerScores unitScoresAt(size_t layer, double rho) const;
    at::Tensor attentionChannelScoresAt(size_t layer, double rho) const;
    at::Tensor mlpChannelScoresAt(size_t layer, double rho) const;
};

// Scores of every layer. checkpoint: CPU float32 weights (LlamaModel::checkpoint()); stats from
// calibrate() on that model. Throws npw::Error on invalid settings, NaN/Inf weights (naming the
// tensor), missing statistics, or Algorithm 1 with ρ = 0.
ScoreSet computeScores(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const PruneSettings& settings,
                       const ProgressFn& progress = nullptr);
// The numerical score at another λ from the stored solves (closed form, no solve). npw::Error for
// box-constrained scores, which need computeScores again.
ScoreSet rescoreNumerical(const ScoreSet& scores, double lambda);

// Selection for any ρ, α and reading, sorting once. Global methods use a SelectionIndex; for the
// numerical score eq. 7 is evaluated on s = −w with the heads shifted by (α − 1)/ρ, which is
// the same order as α·z_head ∪ z_channel at that ρ (divide by ρ, subtract 1/ρ), so no re-sort
// per ρ either. Uniform methods (wanda-sp, magnitude, random) ignore α and the reading.
class MaskSelector {
public:
    explicit MaskSelector(const ScoreSet& scores);
    // α NaN = the default; ρ ∈ [0, 1). threshold is in the units a user reads (z for numerical;
    // NaN for uniform selection).
    SelectionResult select(double rho, double alpha, AlphaMode mode) const;
    double defaultAlpha() const { return defaultAlpha_; }
    bool isGlobal() const { return index_.has_value(); }

private:
    std::optional<SelectionIndex> index_;
    std::vector<LayerScores> ranking_;  // uniform selection only
    std::vector<LayerUnitCost> costs_;
    SelectionOptions options_;
    bool numericalW_ = false;
    double defaultAlpha_ = 0;
};

// One-off: MaskSelector(scores).select(ratio, alpha, mode).
SelectionResult selectMask(const ScoreSet& scores, double ratio, double alpha, AlphaMode mode);

struct LayerPruneReport {
    int64_t headsBefore = 0, headsAfter = 0;
    int64_t kvHeadsBefore = 0, kvHeadsAfter = 0;
    int64_t channelsBefore = 0, channelsAfter = 0;
    // Output error of o_proj / down_proj per calibration token, ‖X·ΔWᵀ‖²/N: with the compensation
    // applied (Theorem 3: the paper's L* when γ = 0, else L* less its dampening term ½γ'‖δW‖²;
    // FLAP's bias: the variance part) and with the pruned channels merely zeroed. 0 where nothing
    // was pruned.
    double attentionLoss = 0, attentionLossUncompensated = 0;
    double mlpLoss = 0, mlpLossUncompensated = 0;
};

struct PrunedModel {
    LlamaCheckpoint checkpoint;  // sliced; config lists updated; source = the unpruned source
    std::vector<LayerPruneReport> layers;
    CompensationKind compensation = CompensationKind::None;
};

// Compensates (on the full weight, then) slices every layer: q rows and o columns of the kept
// query heads, k/v rows of the kept KV heads, gate/up rows and down columns of the kept channels.
// stats is needed for compensation (G/N for Theorem 3, the means for FLAP's bias); a layer may
// lose every head or channel. Throws npw::Error when the mask does not fit the model, or when
// Theorem 3 meets a singular G with γ = 0 (naming the layer).
PrunedModel applyMask(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const Mask& mask,
                      const PruneSettings& settings);

// Parameter counts of a checkpoint: all tensors (tied classifier once, biases included) and the
// prunable ones (q, k, v, o, gate, up, down weights).
int64_t checkpointParameters(const LlamaCheckpoint& checkpoint);
int64_t prunableParameters(const LlamaConfig& config);

struct PruneTimings {
    double calibrateSeconds = 0, scoreSeconds = 0, selectSeconds = 0, applySeconds = 0;
};

struct PruneReport {
    std::string method;
    double ratio = 0, alpha = 0, lambda = 0;
    AlphaMode alphaMode = AlphaMode::Budget;
    CompensationKind compensation = CompensationKind::None;
    int64_t paramsBefore = 0, paramsAfter = 0;        // every tensor (FLAP's biases count after)
    int64_t prunableBefore = 0, prunableAfter = 0;    // attention + MLP weights
    double achievedRatio = 0;       // (prunableBefore − prunableAfter) / prunableBefore
    double achievedRatioModel = 0;  // (prunableBefore − prunableAfter) / paramsBefore
    int64_t removedUnits = 0, removedChannels = 0;
    double threshold = 0;           // of the selection (z units for numerical; NaN when uniform)
    double newtonMaxDeviation = -1;
    double boxKktViolation = -1;  // box-constrained numerical score only
    std::vector<LayerPruneReport> layers;
    PruneTimings timings;
};

struct PruneRun {
    ModelStats stats;
    ScoreSet scores;
    SelectionResult selection;
    PrunedModel pruned;
    PruneReport report;
};

// The whole flow on a loaded model: calibrate, score, select, apply. Progress stages:
// "calibrate", "score", "apply".
PruneRun pruneModel(const LlamaModel& model, const CalibrationSet& calibration, const PruneSettings& settings,
                    const ProgressFn& progress = nullptr);
// The same from statistics computed earlier (loadModelStats): score, select, apply.
PruneRun pruneModelWithStats(const LlamaModel& model, ModelStats stats, const PruneSettings& settings,
                             const ProgressFn& progress = nullptr);

// The report as JSON (what `npw prune --json` prints): params_before/after, achieved_ratio,
// achieved_ratio_model, per-layer kept counts and losses (L*), timings.
nlohmann::json pruneReportJson(const PruneReport& report);

// Refuses (npw::Error) an export target that is the source model, its directory, a directory
// inside a source directory, an existing file, or a non-empty directory that is not an earlier
// npw export. Cheap: the CLI checks before calibrating.
void checkExportTarget(const std::string& sourceModel, const std::string& dir);

// npw-manifest.json of an export: settings, calibration, normalisation, achieved ratios, per-layer
// sizes and losses, npw version.
std::string pruneManifestJson(const PruneReport& report, const PruneSettings& settings,
                              const CalibrationSummary& calibration, const std::string& sourceModel);

// Writes the pruned model as a Hugging Face directory (config.json with per-layer lists,
// model.safetensors with FLAP's biases where added, tokenizer.json when the source had one) plus
// npw-manifest.json. The directory appears whole or not at all: everything is written into a
// sibling staging directory that is then renamed into place. `dir` may be new, empty, or a
// previous npw export (replaced); anything else, the source model, or a directory inside the
// source's is refused.
void savePrunedModel(const LlamaCheckpoint& pruned, const std::string& dir, const std::string& manifestJson);

// The atomic directory write under savePrunedModel (and the image models' export): checks the
// target as checkExportTarget does, lets `write` fill a sibling staging directory, then renames
// it into place (replacing an earlier export). The staging directory is removed on any error.
void writeExportDirectory(const std::string& sourceModel, const std::string& dir,
                          const std::function<void(const std::string& staging)>& write);

// --save-scores: per layer the channel scores (at ρ) and unit scores as float64 tensors
// "layers.{l}.{attn|mlp}.{channel_scores|unit_scores}" (+ "…attn.ainv1"/"…mlp.ainv1" and
// "…c" for numerical), metadata = method, ρ, λ. Atomic.
void saveScoreSet(const ScoreSet& scores, double rho, const std::string& path);

} // namespace npw

// ---- Setting names and their one parser each (issue 12) ------------------------------------
// The CLI flags, the studio's settings JSON and the manifests read and write these names through
// the functions below; nothing else spells them. Errors speak of the setting, not of a flag.
namespace npw {

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

} // namespace npw
// ---- end of the setting names block ----------------------------------------------------------
