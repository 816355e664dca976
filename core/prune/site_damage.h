#pragma once
// The lstar-kl cross-layer ranking (settings.h, CrossLayerRanking::MeasuredDamage): each site's
// compensated-error curve calibrated by the damage its pruning does to the model's output.
//
// Why: the issue-15 diagnosis (README, "Choosing λ, and how layers compete") found that on
// stories260K the held-out damage of pruning one site falls 16× from the first layer to the last
// while every layer-local error measure (L*, L* over the residual stream, uncompensated error)
// grows with depth: no local statistic orders sites as the model's output does. So this measures
// it, once per site, on the calibration windows (never the held-out text):
//   KL_s = mean over calibration tokens of KL(p_dense ‖ p_s), p_s = the model with site s alone
//          pruned to its reference prefix (its first max(1, round(ρ_ref·n)) units in z-order) and
//          compensated as the run compensates (Theorem 3),
//   f_s  = KL_s / (L*_s(prefix) / scale_s)   (lstar-rel's relative L* at that prefix),
// and ranks every unit by f_s × its lstar-rel slope: the slopes of the curve f_s·L*_s(k)/scale_s,
// which passes through the measured KL at the reference point (scale_s cancels: the curve is
// KL_s·L*_s(k)/L*_s(prefix)). Inside a site the z-order is kept; across sites the budget goes
// where the measured damage per parameter is least, as lstar-rel's Lagrangian does.
// Cost: 2L + 1 forward passes over at most maxWindows calibration windows.
#include "core/models/llama.h"
#include "core/prune/calibration.h"
#include "core/prune/score.h"

#include <cstdint>
#include <vector>

namespace npw {

struct SiteDamageOptions {
    double referenceRatio = 0.3;  // ρ_ref: the share of a site's units in its reference prefix
    int64_t maxWindows = 16;      // calibration windows the KL is measured on (the first ones)
    int64_t windowsPerPass = 4;   // windows per forward pass (logits are [B, T, vocab])
};

// Per layer; NaN where the layer has no such site.
struct SiteDamage {
    std::vector<double> attentionKl, mlpKl;              // nats per token
    std::vector<double> attentionRelLoss, mlpRelLoss;    // L*(prefix)/scale, lstar-rel's units
    std::vector<double> attentionFactor, mlpFactor;      // f = KL / relative L*
    std::vector<int64_t> attentionPrefix, mlpPrefix;     // units in the reference prefix
    int64_t windows = 0, tokens = 0;
};

// The units a site's reference prefix removes: its `ranking` (higher = keep) ascending, the first
// max(1, round(ratio·n)); keep[i] false = removed. Ties keep index order.
std::vector<bool> referencePrefixKeep(const std::vector<double>& ranking, double ratio);

// Mean over every position of every window of KL(softmax(dense) ‖ softmax(pruned)), float64.
double meanKlDivergence(const LlamaModel& dense, const LlamaModel& pruned, const std::vector<std::vector<int32_t>>& windows,
                        int64_t windowsPerPass = 4);

// Measures KL and the factor of every site of a score set ranked by lstar-kl (or lstar-rel / lstar:
// rankingIsCompensatedError). A factor that cannot be formed (KL or L* zero or not finite: a site
// that changes nothing) is the median of the others, so such a site is neither free nor locked.
// npw::Error when the set is not ranked by L*, or the calibration holds no windows.
SiteDamage measureSiteDamage(const LlamaModel& model, const ModelStats& stats, const ScoreSet& scores,
                             const CalibrationSet& calibration, const SiteDamageOptions& options = {});

// Multiplies every unit score of site s by its factor (> 0, finite; npw::Error otherwise). Equal
// factors leave every selection as it was.
void scaleRankingBySite(ScoreSet& scores, const std::vector<double>& attentionFactor,
                        const std::vector<double>& mlpFactor);

// measureSiteDamage, then scaleRankingBySite with its factors: what lstar-kl does after
// computeScores. Returns the measurement (for the manifest).
SiteDamage rankBySiteDamage(ScoreSet& scores, const LlamaModel& model, const ModelStats& stats,
                            const CalibrationSet& calibration, const SiteDamageOptions& options = {});

} // namespace npw
