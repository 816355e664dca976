// lstar-kl: each site's L* curve calibrated by its measured end-to-end damage (site_damage.h).
#include "core/prune/site_damage.h"

#include "core/prune/apply.h"
#include "core/prune/compensation.h"
#include "core/prune/units.h"
#include "core/util/error.h"
#include "core/util/finite.h"
#include "core/models/non_finite.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace npw {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

at::Tensor idsOf(const std::vector<std::vector<int32_t>>& windows, size_t first, size_t count) {
    const int64_t t = static_cast<int64_t>(windows[first].size());
    at::Tensor ids = at::empty({static_cast<int64_t>(count), t}, at::kLong);
    auto a = ids.accessor<int64_t, 2>();
    for (size_t b = 0; b < count; ++b)
        for (int64_t i = 0; i < t; ++i) a[static_cast<int64_t>(b)][i] = windows[first + b][static_cast<size_t>(i)];
    return ids;
}

// The o_proj input channels of the units a keep-mask removes.
std::vector<int64_t> removedAttentionChannels(const LlamaConfig& config, const AttentionUnits& units,
                                              const std::vector<bool>& keep) {
    std::vector<int64_t> out;
    const std::vector<bool> queries = units.keptQueryHeads(keep);
    for (size_t h = 0; h < queries.size(); ++h)
        if (!queries[h])
            for (int64_t j = 0; j < config.head_dim; ++j) out.push_back(static_cast<int64_t>(h) * config.head_dim + j);
    return out;
}

// L* of removing `channels` with Theorem 3, with the fallback dampening the ranking uses
// (score.cpp, compensatedErrorScores) when G cannot be factorised at γ.
double compensatedLoss(const at::Tensor& weight, const LayerStats& stats, const std::vector<int64_t>& channels,
                       double damp) {
    for (double gamma = damp;; gamma = gamma > 0 ? gamma * 100 : 1e-10) {
        try {
            return compensatedLossCurveScaled(weight, stats.gram, 1.0 / static_cast<double>(stats.tokens), channels, gamma)
                .back();
        } catch (const Error&) {
            if (gamma >= 1e-2) throw;
        }
    }
}

double median(std::vector<double> v) {
    if (v.empty()) return 1.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

std::vector<bool> referencePrefixKeep(const std::vector<double>& ranking, double ratio) {
    const size_t n = ranking.size();
    std::vector<bool> keep(n, true);
    if (n == 0) return keep;
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranking[a] < ranking[b]; });
    const auto k = std::clamp<size_t>(static_cast<size_t>(std::llround(ratio * static_cast<double>(n))), 1, n);
    for (size_t i = 0; i < k; ++i) keep[order[i]] = false;
    return keep;
}

double meanKlDivergence(const LlamaModel& dense, const LlamaModel& pruned, const std::vector<std::vector<int32_t>>& windows,
                        int64_t windowsPerPass) {
    if (windows.empty()) throw Error("KL divergence: no windows");
    const size_t step = static_cast<size_t>(std::max<int64_t>(1, windowsPerPass));
    double sum = 0;
    int64_t tokens = 0;
    for (size_t first = 0; first < windows.size(); first += step) {
        const size_t count = std::min(step, windows.size() - first);
        const at::Tensor ids = idsOf(windows, first, count);
        const at::Tensor p = at::log_softmax(dense.logits(ids).to(at::kDouble), -1);
        const at::Tensor q = at::log_softmax(pruned.logits(ids).to(at::kDouble), -1);
        const at::Tensor perWindow = (p.exp() * (p - q)).sum({1, 2}).cpu();
        for (int64_t b = 0; b < perWindow.size(0); ++b) {
            const double kl = perWindow[b].item<double>();
            if (!std::isfinite(kl)) {  // where the forward went non-finite: the dense model's, else the pruned one's
                std::string where = locateNonFinite(dense, ids[b].unsqueeze(0));
                if (!where.empty()) where = "in the dense model, " + where;
                else if (!(where = locateNonFinite(pruned, ids[b].unsqueeze(0))).empty()) where = "in the pruned model, " + where;
                throw Error("the KL divergence from the dense model became non-finite (" + std::string(nonFiniteName(kl)) +
                            ") in calibration window " + std::to_string(first + static_cast<size_t>(b) + 1) +
                            (where.empty() ? std::string() : ": " + where) + kNonFiniteHint);
            }
            sum += kl;
        }
        tokens += ids.numel();
    }
    return sum / static_cast<double>(tokens);
}

SiteDamage measureSiteDamage(const LlamaModel& model, const ModelStats& stats, const ScoreSet& scores,
                             const CalibrationSet& calibration, const SiteDamageOptions& options) {
    if (!scores.rankingIsCompensatedError() || scores.attentionLossScale.size() != scores.ranking.size())
        throw Error("site damage: the score set is not ranked by the compensated error L* (ranking " +
                    crossLayerRankingName(scores.settings.crossLayer) + ")");
    if (calibration.windows.empty())
        throw Error("ranking lstar-kl measures each site's damage on the calibration windows, and there are none "
                    "(statistics read from a file carry no windows: calibrate instead)");
    if (!(options.referenceRatio > 0 && options.referenceRatio < 1))
        throw Error("site damage: the reference ratio must lie in (0, 1), got " + std::to_string(options.referenceRatio));
    const size_t nWindows = std::min(calibration.windows.size(), static_cast<size_t>(std::max<int64_t>(1, options.maxWindows)));
    const std::vector<std::vector<int32_t>> windows(calibration.windows.begin(),
                                                    calibration.windows.begin() + static_cast<std::ptrdiff_t>(nWindows));
    const LlamaCheckpoint& dense = model.checkpoint();
    const size_t layers = scores.ranking.size();
    SiteDamage out;
    out.windows = static_cast<int64_t>(nWindows);
    out.tokens = out.windows * static_cast<int64_t>(windows.front().size());
    for (auto* v : {&out.attentionKl, &out.mlpKl, &out.attentionRelLoss, &out.mlpRelLoss, &out.attentionFactor,
                    &out.mlpFactor})
        v->assign(layers, kNaN);
    out.attentionPrefix.assign(layers, 0);
    out.mlpPrefix.assign(layers, 0);

    // Every site's mask starts from "keep everything".
    Mask full;
    for (const LayerScores& s : scores.ranking) {
        full.keepHeads.emplace_back(s.heads.size(), true);
        full.keepChannels.emplace_back(s.channels.size(), true);
    }
    auto klOf = [&](const Mask& mask) {
        PrunedModel pruned = applyMask(dense, stats, mask, scores.settings);
        const LlamaModel prunedModel(std::move(pruned.checkpoint), model.runtime());
        return meanKlDivergence(model, prunedModel, windows, options.windowsPerPass);
    };
    std::vector<double> valid;
    for (size_t l = 0; l < layers; ++l) {
        const LlamaLayerWeights& w = dense.weights.layers.at(l);
        const std::string where = " of layer " + std::to_string(l);
        try {
            if (!scores.ranking[l].heads.empty()) {
                const std::vector<bool> keep = referencePrefixKeep(scores.ranking[l].heads, options.referenceRatio);
                const AttentionUnits units(scores.config, static_cast<int64_t>(l), scores.settings.attentionUnit);
                Mask mask = full;
                mask.keepHeads[l] = keep;
                out.attentionPrefix[l] = std::count(keep.begin(), keep.end(), false);
                out.attentionKl[l] = klOf(mask);
                out.attentionRelLoss[l] = compensatedLoss(w.wo, stats.attn.at(l), removedAttentionChannels(scores.config, units, keep),
                                                          scores.settings.damp) / scores.attentionLossScale[l];
                out.attentionFactor[l] = out.attentionKl[l] / out.attentionRelLoss[l];
            }
            if (!scores.ranking[l].channels.empty()) {
                const std::vector<bool> keep = referencePrefixKeep(scores.ranking[l].channels, options.referenceRatio);
                std::vector<int64_t> channels;
                for (size_t j = 0; j < keep.size(); ++j)
                    if (!keep[j]) channels.push_back(static_cast<int64_t>(j));
                Mask mask = full;
                mask.keepChannels[l] = keep;
                out.mlpPrefix[l] = static_cast<int64_t>(channels.size());
                out.mlpKl[l] = klOf(mask);
                out.mlpRelLoss[l] = compensatedLoss(w.w_down, stats.mlp.at(l), channels, scores.settings.damp) /
                                    scores.mlpLossScale[l];
                out.mlpFactor[l] = out.mlpKl[l] / out.mlpRelLoss[l];
            }
        } catch (const Error& e) {
            throw Error("measuring the damage of pruning one site" + where + ": " + e.what());
        }
        for (double f : {out.attentionFactor[l], out.mlpFactor[l]})
            if (f > 0 && std::isfinite(f)) valid.push_back(f);
    }
    const double fallback = median(valid);
    for (size_t l = 0; l < layers; ++l) {
        if (!scores.ranking[l].heads.empty() && !(out.attentionFactor[l] > 0 && std::isfinite(out.attentionFactor[l])))
            out.attentionFactor[l] = fallback;
        if (!scores.ranking[l].channels.empty() && !(out.mlpFactor[l] > 0 && std::isfinite(out.mlpFactor[l])))
            out.mlpFactor[l] = fallback;
    }
    return out;
}

void scaleRankingBySite(ScoreSet& scores, const std::vector<double>& attentionFactor, const std::vector<double>& mlpFactor) {
    if (attentionFactor.size() != scores.ranking.size() || mlpFactor.size() != scores.ranking.size())
        throw Error("site damage: " + std::to_string(attentionFactor.size()) + "/" + std::to_string(mlpFactor.size()) +
                    " factors for " + std::to_string(scores.ranking.size()) + " layers");
    auto scale = [](std::vector<double>& values, double f, const std::string& site) {
        if (values.empty()) return;
        if (!(f > 0) || !std::isfinite(f))
            throw Error("site damage: the factor of " + site + " must be positive and finite, got " + std::to_string(f));
        // f > 0 keeps the site's order; its slopes stay nondecreasing along the z-order.
        for (double& v : values) v *= f;
    };
    for (size_t l = 0; l < scores.ranking.size(); ++l) {
        scale(scores.ranking[l].heads, attentionFactor[l], "attention in layer " + std::to_string(l));
        scale(scores.ranking[l].channels, mlpFactor[l], "the MLP in layer " + std::to_string(l));
    }
    scores.siteDamageApplied = true;
}

SiteDamage rankBySiteDamage(ScoreSet& scores, const LlamaModel& model, const ModelStats& stats,
                            const CalibrationSet& calibration, const SiteDamageOptions& options) {
    SiteDamage damage = measureSiteDamage(model, stats, scores, calibration, options);
    scaleRankingBySite(scores, damage.attentionFactor, damage.mlpFactor);
    return damage;
}

} // namespace npw
