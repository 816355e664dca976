// Issue 15: the default λ relative to the model's own c, and the cross-layer ranking by
// Theorem 3's compensated error L*. References are independent of the code under test:
// L* from the paper's remark with an explicit float64 inverse (and from compensatePrunedChannels,
// mask by mask), the convex-minorant slopes from the max-min formula of isotonic regression,
// c = 1ᵀA⁻¹1 by an LU solve of A built here from W and G.
#include "core/prune/compensation.h"
#include "core/prune/numerical_score.h"
#include "core/prune/pruner.h"
#include "core/prune/score.h"
#include "core/prune/select.h"
#include "core/util/error.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace npw;
using namespace npw::test;

namespace {

const auto f64 = at::TensorOptions().dtype(at::kDouble);

struct Layer {
    at::Tensor weight;  // [out, D]
    at::Tensor gram;    // per token
};

// Correlated inputs with unequal scales (as real activations), so that A is far from diagonal.
Layer randomLayer(int64_t d, int64_t out, uint64_t seed) {
    at::manual_seed(seed);
    Layer l;
    l.weight = at::randn({out, d}, f64) / std::sqrt(double(d));
    const at::Tensor scale = at::exp(at::randn({d}, f64) * 0.6);
    const at::Tensor mix = at::eye(d, f64) + 0.5 * at::randn({d, d}, f64) / std::sqrt(double(d));
    const at::Tensor x = at::matmul(at::randn({4 * d + 3, d}, f64) * scale, mix);
    l.gram = at::matmul(x.t(), x) / double(x.size(0));
    return l;
}

// The paper's remark with γ = 0: L* = tr(W_pᵀ (G⁻¹)_pp⁻¹ W_p) (½ and the 2 of 2G cancel), by an
// explicit float64 inverse.
double remarkLoss(const Layer& l, const std::vector<int64_t>& removed) {
    const at::Tensor s = at::linalg_inv(l.gram);
    const at::Tensor idx = at::tensor(removed, at::kLong);
    const at::Tensor spp = s.index_select(0, idx).index_select(1, idx);
    const at::Tensor wp = l.weight.t().index_select(0, idx);
    return at::trace(at::matmul(wp.t(), at::matmul(at::linalg_inv(spp), wp))).item<double>();
}

// Slope of the greatest convex minorant over step k: max over i < k of min over j ≥ k of
// (C_j − C_i)/(W_j − W_i), C and W cumulative (C_0 = W_0 = 0). O(n³), fine for a test.
std::vector<double> bruteMinorantSlopes(const std::vector<double>& inc, const std::vector<double>& w) {
    const size_t n = inc.size();
    std::vector<double> c(n + 1, 0), cw(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
        c[i + 1] = c[i] + inc[i];
        cw[i + 1] = cw[i] + w[i];
    }
    std::vector<double> out(n);
    for (size_t k = 1; k <= n; ++k) {
        double best = -std::numeric_limits<double>::infinity();
        for (size_t i = 0; i < k; ++i) {
            double worst = INFINITY;
            for (size_t j = k; j <= n; ++j) worst = std::min(worst, (c[j] - c[i]) / (cw[j] - cw[i]));
            best = std::max(best, worst);
        }
        out[k - 1] = best;
    }
    return out;
}

double cOf(const at::Tensor& weight, const at::Tensor& gramPerToken) {
    const at::Tensor w = weight.to(at::kDouble);
    const at::Tensor A = at::matmul(w.t(), w) * gramPerToken.to(at::kDouble);  // (W Wᵀ) ∘ G in the paper's layout
    const at::Tensor ones = at::ones({A.size(0), 1}, f64);
    return at::linalg_solve(A, ones).sum().item<double>();  // LU, not the code's Cholesky
}

struct Fixture {
    LlamaModel model;
    ModelStats stats;
};

Fixture makeFixture(std::vector<int64_t> heads, std::vector<int64_t> kv, std::vector<int64_t> inter, uint64_t seed = 11) {
    LlamaModel model(tinyLlama(std::move(heads), std::move(kv), std::move(inter), seed), chooseRuntime("cpu"));
    const CalibrationSet set = drawCalibrationSet(randomIds(3000, 40, seed + 1), 16, 32, seed + 2);
    ModelStats stats = calibrate(model, set);
    return {std::move(model), std::move(stats)};
}

} // namespace

class TestCrossLayer : public QObject {
    Q_OBJECT

private slots:
    // Element k−1 of the curve is L* of the first k channels: against the paper's remark (γ = 0,
    // explicit inverse) and against compensatePrunedChannels mask by mask (γ = 0.01).
    void lossCurveEqualsTheorem3() {
        const Layer l = randomLayer(12, 9, 3);
        std::vector<int64_t> order = {7, 2, 11, 0, 5, 9, 3};  // a subset, in removal order
        const std::vector<double> exact = compensatedLossCurve(l.weight, l.gram, order, 0.0);
        const std::vector<double> damped = compensatedLossCurve(l.weight, l.gram, order, 0.01);
        QCOMPARE(exact.size(), order.size());
        for (size_t k = 1; k <= order.size(); ++k) {
            const std::vector<int64_t> first(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
            const double reference = remarkLoss(l, first);
            QVERIFY2(std::abs(exact[k - 1] - reference) <= 1e-9 * reference, qPrintable(QString::number(k)));
            std::vector<bool> keep(12, true);
            for (int64_t j : first) keep[size_t(j)] = false;
            const double viaMask = compensatePrunedChannels(l.weight, l.gram, keep, 0.01).optimalLoss;
            QVERIFY2(std::abs(damped[k - 1] - viaMask) <= 1e-9 * viaMask, qPrintable(QString::number(k)));
            if (k > 1) QVERIFY(exact[k - 1] >= exact[k - 2]);  // removing more never costs less
        }
        // All channels: nothing is left to compensate with, L* = tr(Wᵀ G W), the layer's output energy.
        std::vector<int64_t> all(12);
        for (int64_t j = 0; j < 12; ++j) all[size_t(j)] = j;
        const double energy = at::trace(at::matmul(l.weight, at::matmul(l.gram, l.weight.t()))).item<double>();
        QVERIFY(std::abs(compensatedLossCurve(l.weight, l.gram, all, 0.0).back() - energy) <= 1e-9 * energy);
    }

    void lossCurveRejectsBadOrders() {
        const Layer l = randomLayer(6, 4, 1);
        QVERIFY_THROWS_EXCEPTION(Error, compensatedLossCurve(l.weight, l.gram, {1, 1}, 0.01));
        QVERIFY_THROWS_EXCEPTION(Error, compensatedLossCurve(l.weight, l.gram, {6}, 0.01));
        QVERIFY_THROWS_EXCEPTION(Error, compensatedLossCurve(l.weight, l.gram, {0}, -1.0));
        QVERIFY(compensatedLossCurve(l.weight, l.gram, {}, 0.01).empty());
    }

    void minorantSlopesEqualMaxMinFormula() {
        std::mt19937_64 rng(5);
        std::uniform_real_distribution<double> u(0, 1);
        for (int trial = 0; trial < 200; ++trial) {
            const size_t n = 1 + rng() % 9;
            std::vector<double> inc(n), w(n);
            for (size_t i = 0; i < n; ++i) {
                inc[i] = u(rng) < 0.3 ? 0.0 : std::pow(10.0, 3 * u(rng) - 1);  // jumps and flats
                w[i] = trial % 2 ? 1.0 : 1 + std::floor(4 * u(rng));
            }
            const std::vector<double> got = convexMinorantSlopes(inc, w), want = bruteMinorantSlopes(inc, w);
            for (size_t i = 0; i < n; ++i) {
                QVERIFY2(std::abs(got[i] - want[i]) <= 1e-12 * std::max(1.0, std::abs(want[i])),
                         qPrintable(QString("trial %1 step %2: %3 vs %4").arg(trial).arg(i).arg(got[i]).arg(want[i])));
                if (i > 0) QVERIFY(got[i] >= got[i - 1]);
            }
        }
        QVERIFY_THROWS_EXCEPTION(Error, convexMinorantSlopes({1.0}, {0.0}));
        QVERIFY_THROWS_EXCEPTION(Error, convexMinorantSlopes({1.0, 2.0}, {1.0}));
    }

    // The default λ is λ_rel / median c, c recomputed here by LU from W and the statistics; an
    // absolute λ is used as given.
    void relativeLambdaIsRelativeToMedianC() {
        const Fixture f = makeFixture({2, 2, 2}, {2, 2, 2}, {12, 10, 8});
        PruneSettings s;
        s.ratio = 0.3;
        QVERIFY(s.lambdaIsRelative());
        const ScoreSet set = computeScores(f.model.checkpoint(), f.stats, s);
        std::vector<double> cs;
        for (size_t l = 0; l < 3; ++l) {
            const LlamaLayerWeights& w = f.model.checkpoint().weights.layers[l];
            cs.push_back(cOf(w.wo, f.stats.attn[l].gramPerToken()));
            cs.push_back(cOf(w.w_down, f.stats.mlp[l].gramPerToken()));
        }
        std::sort(cs.begin(), cs.end());
        const double median = 0.5 * (cs[2] + cs[3]);  // six sites
        QVERIFY2(std::abs(set.medianC - median) <= 1e-8 * median, qPrintable(QString("%1 vs %2").arg(set.medianC).arg(median)));
        QVERIFY(std::abs(set.settings.lambda - kDefaultLambdaRel / median) <= 1e-8 * set.settings.lambda);

        s.lambda = 3e-3;
        QCOMPARE(computeScores(f.model.checkpoint(), f.stats, s).settings.lambda, 3e-3);
    }

    // Scaling every o_proj/down_proj by k (8: exact in float32) scales A by k² and c by 1/k²: the relative λ follows, and
    // z (and the masks of both rankings) do not change; an absolute λ would.
    void relativeLambdaIgnoresTheModelsScale() {
        const Fixture f = makeFixture({2, 2}, {2, 2}, {12, 10});
        LlamaCheckpoint scaled = f.model.checkpoint();
        for (LlamaLayerWeights& w : scaled.weights.layers) {
            w.wo = w.wo * 8.0;
            w.w_down = w.w_down * 8.0;
        }
        for (CrossLayerRanking ranking : {CrossLayerRanking::Relaxed, CrossLayerRanking::CompensatedError}) {
            PruneSettings s;
            s.ratio = 0.3;
            s.crossLayer = ranking;
            const ScoreSet a = computeScores(f.model.checkpoint(), f.stats, s);
            const ScoreSet b = computeScores(scaled, f.stats, s);
            QVERIFY(std::abs(b.settings.lambda / a.settings.lambda - 64.0) < 1e-9);
            for (size_t l = 0; l < 2; ++l)
                QVERIFY((a.attentionChannelScoresAt(l, 0.3) - b.attentionChannelScoresAt(l, 0.3)).abs().max().item<double>() < 1e-9);
            for (double rho : {0.1, 0.3, 0.5}) {
                const Mask ma = selectMask(a, rho, std::nan(""), AlphaMode::Budget).mask;
                const Mask mb = selectMask(b, rho, std::nan(""), AlphaMode::Budget).mask;
                QVERIFY(ma.keepHeads == mb.keepHeads);
                QVERIFY(ma.keepChannels == mb.keepChannels);
            }
        }
    }

    // The L* ranking: each site's units keep the z-order, and every unit's score is the convex-hull
    // slope of L* per parameter (what its removal costs: higher = keep), L* recomputed here prefix by prefix with compensatePrunedChannels.
    // GQA with KV groups, so a unit spans g·D_h channels.
    void compensatedRankingFollowsHullOfLStar() {
        const Fixture f = makeFixture({4, 4}, {2, 2}, {10, 9});
        PruneSettings s;
        s.ratio = 0.3;
        s.crossLayer = CrossLayerRanking::CompensatedError;
        const ScoreSet set = computeScores(f.model.checkpoint(), f.stats, s);
        QVERIFY(set.rankingIsCompensatedError());
        // lstar-rel: the same curves over the residual stream's energy where each site adds its
        // output (the embedding's mean squared row norm, then every block's tr(W G Wᵀ) in order).
        PruneSettings rel = s;
        rel.crossLayer = CrossLayerRanking::RelativeCompensatedError;
        const ScoreSet relSet = computeScores(f.model.checkpoint(), f.stats, rel);
        double residual = f.model.checkpoint().weights.embed.to(at::kDouble).pow(2).sum(1).mean().item<double>();
        for (size_t l = 0; l < 2; ++l)
            for (bool attention : {true, false}) {
                const LlamaLayerWeights& w = f.model.checkpoint().weights.layers[l];
                const at::Tensor weight = (attention ? w.wo : w.w_down).to(at::kDouble);
                const at::Tensor gram = (attention ? f.stats.attn[l] : f.stats.mlp[l]).gramPerToken();
                residual += at::trace(at::matmul(weight, at::matmul(gram, weight.t()))).item<double>();
                const std::vector<double>& a = attention ? set.ranking[l].heads : set.ranking[l].channels;
                const std::vector<double>& b = attention ? relSet.ranking[l].heads : relSet.ranking[l].channels;
                for (size_t i = 0; i < a.size(); ++i)
                    QVERIFY2(std::abs(b[i] * residual - a[i]) <= 1e-7 * std::abs(a[i]) + 1e-300,
                             qPrintable(QString("layer %1 unit %2: %3 vs %4").arg(l).arg(i).arg(b[i] * residual).arg(a[i])));
            }
        PruneSettings relaxed = s;
        relaxed.crossLayer = CrossLayerRanking::Relaxed;
        const ScoreSet zSet = computeScores(f.model.checkpoint(), f.stats, relaxed);
        const int64_t dh = set.config.head_dim, g = 2;
        for (size_t l = 0; l < 2; ++l) {
            const LlamaLayerWeights& w = f.model.checkpoint().weights.layers[l];
            for (bool attention : {true, false}) {
                const std::vector<double>& z = attention ? zSet.ranking[l].heads : zSet.ranking[l].channels;
                const std::vector<double>& got = attention ? set.ranking[l].heads : set.ranking[l].channels;
                const at::Tensor weight = attention ? w.wo : w.w_down;
                const at::Tensor gram = (attention ? f.stats.attn[l] : f.stats.mlp[l]).gramPerToken();
                const double params = double(attention ? set.costs[l].headParams : set.costs[l].channelParams);
                std::vector<size_t> order(z.size());
                for (size_t i = 0; i < order.size(); ++i) order[i] = i;
                std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] < z[b]; });
                std::vector<bool> keep(size_t(weight.size(1)), true);
                std::vector<double> inc, weights;
                double previous = 0;
                for (size_t u : order) {
                    const int64_t width = attention ? g * dh : 1;
                    for (int64_t j = 0; j < width; ++j) keep[size_t(int64_t(u) * width + j)] = false;
                    const double loss = compensatePrunedChannels(weight, gram, keep, s.damp).optimalLoss;
                    inc.push_back(loss - previous);
                    weights.push_back(params);
                    previous = loss;
                }
                const std::vector<double> slopes = bruteMinorantSlopes(inc, weights);
                for (size_t k = 0; k < order.size(); ++k) {
                    const double want = slopes[k];
                    QVERIFY2(std::abs(got[order[k]] - want) <= 1e-7 * std::abs(want) + 1e-300,
                             qPrintable(QString("layer %1 %2 step %3: %4 vs %5").arg(l).arg(attention).arg(k)
                                            .arg(got[order[k]]).arg(want)));
                    if (k > 0) QVERIFY(got[order[k]] > got[order[k - 1]]);  // strictly: a budget cuts a prefix
                }
            }
        }
        // Every selection removes a prefix of each site's z-order.
        for (double rho : {0.1, 0.2, 0.3, 0.5, 0.7}) {
            const Mask m = selectMask(set, rho, std::nan(""), AlphaMode::Budget).mask;
            for (size_t l = 0; l < 2; ++l) {
                auto isPrefix = [](const std::vector<double>& z, const std::vector<bool>& keep) {
                    for (size_t a = 0; a < z.size(); ++a)
                        for (size_t b = 0; b < z.size(); ++b)
                            if (!keep[a] && keep[b] && z[b] < z[a]) return false;
                    return true;
                };
                QVERIFY(isPrefix(zSet.ranking[l].heads, m.keepHeads[l]));
                QVERIFY(isPrefix(zSet.ranking[l].channels, m.keepChannels[l]));
            }
            QVERIFY(achievedRatio(m, set.costs) >= rho - 1e-12);
        }
    }

    void settingsAreValidated() {
        PruneSettings s;
        s.lambdaRel = 0;
        QVERIFY_THROWS_EXCEPTION(Error, s.validate());
        s.lambdaRel = std::nan("");
        QVERIFY_THROWS_EXCEPTION(Error, s.validate());
        s.lambdaRel = 1;
        s.validate();
        s.lambda = -1;
        QVERIFY_THROWS_EXCEPTION(Error, s.validate());
        QCOMPARE(parseCrossLayerRanking("lstar"), CrossLayerRanking::CompensatedError);
        QCOMPARE(parseCrossLayerRanking("z"), CrossLayerRanking::Relaxed);
        QCOMPARE(parseCrossLayerRanking("lstar-rel"), CrossLayerRanking::RelativeCompensatedError);
        QVERIFY_THROWS_EXCEPTION(Error, parseCrossLayerRanking("L*"));
    }
};

QTEST_GUILESS_MAIN(TestCrossLayer)
#include "tst_cross_layer.moc"
