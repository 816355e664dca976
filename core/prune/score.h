#pragma once
// Step "score" of the flow: statistics + weights → one ScoreSet per method, computed once.
//
//     ModelStats ──computeScores──▶ ScoreSet ──MaskSelector::select(ρ, α, mode)──▶ Mask (select.h)
//
// computeScores does the expensive part once (per layer one Cholesky solve for the numerical
// score, or the baselines' metrics); selecting for another ρ, α or α reading is a few binary
// searches (select.h), so a GUI slider never re-scores.
#include "core/models/llama_weights.h"
#include "core/prune/calibration.h"
#include "core/prune/numerical_score.h"
#include "core/prune/settings.h"
#include "core/prune/unit_scores.h"
#include "core/prune/units.h"
#include "core/util/progress.h"

#include <functional>
#include <limits>
#include <vector>

namespace npw {

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
    // Ranked by L* (lstar, lstar-rel, lstar-kl): what each site's L* was divided by (1, or the
    // residual stream's energy), per layer; empty otherwise.
    std::vector<double> attentionLossScale, mlpLossScale;
    // lstar-kl: true once scaleRankingBySite (site_damage.h) has scaled the ranking; until then
    // MaskSelector refuses the set (unscaled it would silently rank as lstar-rel).
    bool siteDamageApplied = false;
    // Numerical: the median of c = 1ᵀA⁻¹1 over every scored layer, from which a relative λ was
    // resolved (settings.lambda then holds λ_rel / medianC); NaN for the other methods.
    double medianC = std::numeric_limits<double>::quiet_NaN();
    double newtonMaxDeviation = -1;  // iters > 0: max |z_Algorithm1 − z_closed form| at settings.ratio
    double boxKktViolation = -1;     // boxConstrained: the largest relative KKT residual of the layers' solves
    int64_t boxAtZero = 0, boxAtOne = 0;  // boxConstrained: channels whose z sits on a bound

    // The channel tensors hold s = −w (z = 1 + ρ·s): numerical, not standardised or boxed.
    bool channelsAreNumericalW() const;
    // The ranking holds unit means of s as well (the paper's relaxed cross-layer order).
    bool rankingIsNumericalW() const;
    // The ranking holds L*-per-parameter slopes (CrossLayerRanking::CompensatedError).
    bool rankingIsCompensatedError() const;
    // The scores a user reads at ρ: numerical z (channels, and unit means), the baselines' metric.
    LayerScores unitScoresAt(size_t layer, double rho) const;
    at::Tensor attentionChannelScoresAt(size_t layer, double rho) const;
    at::Tensor mlpChannelScoresAt(size_t layer, double rho) const;
};

// Scores of every layer. checkpoint: CPU float32 weights (LlamaModel::checkpoint()); stats from
// calibrate() on that model; settings as validated where they were built (PruneSettings::validate:
// the CLI, the settings JSON, the studio's Run, a sweep's specification). Throws npw::Error on
// NaN/Inf weights (naming the tensor), missing statistics, a protected layer beyond the model, or
// a solve at ρ = 0 (the box-constrained z, Algorithm 1).
ScoreSet computeScores(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const PruneSettings& settings,
                       const ProgressFn& progress = nullptr);
// One layer's share of what scoring reads: the scored projections' weights (torch layout, any
// float dtype; the in-RAM road's float32) and their inputs' statistics (empty where the layer has
// no heads / channels). withGram false: the caller may leave LayerStats::gram undefined (the pass
// needs only the sums: FLAP, Wanda-sp, a numerical layer already solved).
struct ScoredLayer {
    at::Tensor wo, wDown;
    LayerStats attn, mlp;
};
using ScoredLayerSource = std::function<ScoredLayer(size_t layer, bool withGram)>;
// computeScores with the layers read one at a time, as often as the method needs them (a
// relative λ and the L* ranking pass over them twice): what the bounded prune calls with
// statistics on disk and mapped weights (layerwise_prune.h); computeScores is this over a
// checkpoint and statistics in RAM. `embed`: the embedding table (the L*-relative ranking's
// first residual energy). The weights' values must have been checked finite by the caller.
ScoreSet computeScoresByLayer(const LlamaConfig& config, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                              const PruneSettings& settings, const ProgressFn& progress = nullptr);

// The slopes of the greatest convex minorant of a cumulative cost curve, step by step: step i
// adds increments[i] of cost and weights[i] > 0 of weight, in this order; the result is, per
// step, the slope of the lower convex hull over it (pooling adjacent violators), nondecreasing.
// A threshold on these slopes takes a prefix of the steps, and the prefix that minimises
// cost − μ·weight for every μ (the Lagrangian of a budget over several such curves).
std::vector<double> convexMinorantSlopes(const std::vector<double>& increments, const std::vector<double>& weights);

// The median of c over every numerical solve with D > 0 (attention and MLP): what a relative
// λ is measured against. npw::Error when there is none.
double medianNumericalC(const std::vector<NumericalSolve>& attention, const std::vector<NumericalSolve>& mlp);

// The numerical score at another λ from the stored solves (closed form, no solve). npw::Error for
// box-constrained scores, which need computeScores again.
ScoreSet rescoreNumerical(const ScoreSet& scores, double lambda);

} // namespace npw
