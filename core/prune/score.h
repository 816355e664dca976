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

} // namespace npw
