// Issue 15, the lstar-kl ranking (core/prune/site_damage.h): each site's L* curve scaled to the
// KL divergence that pruning that site alone does on the calibration windows. References here
// are independent of the code under test: the pruned model is built by zeroing the removed
// channels of the dense weights after Theorem 3's compensation (compensatePrunedChannels, no
// slicing, no applyMask), and KL is summed token by token from explicit float64 softmaxes.
#include "core/experiments/language_workbench.h"
#include "core/models/language_model.h"
#include "core/prune/compensation.h"
#include "core/prune/pruner.h"
#include "core/prune/score.h"
#include "core/prune/select.h"
#include "core/prune/site_damage.h"
#include "core/util/error.h"
#include "error_of.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>

using namespace npw;
using namespace npw::test;

namespace {

struct Fixture {
    LlamaModel model;
    CalibrationSet set;
    ModelStats stats;
};

Fixture fixture(uint64_t seed = 3) {
    LlamaModel model(tinyLlama({4, 4, 4}, {2, 2, 2}, {24, 20, 28}, seed), chooseRuntime("cpu"));
    CalibrationSet set = drawCalibrationSet(randomIds(3000, 40, seed + 1), 12, 32, seed + 2);
    ModelStats stats = calibrate(model, set);
    return {std::move(model), std::move(set), std::move(stats)};
}

PruneSettings settingsFor(CrossLayerRanking ranking) {
    PruneSettings s;
    s.crossLayer = ranking;
    return s;
}

// KL(p ‖ q) per token from logits, float64, by explicit loops (log-sum-exp per row).
double bruteKl(const at::Tensor& denseLogits, const at::Tensor& prunedLogits) {
    const at::Tensor a = denseLogits.to(at::kDouble).reshape({-1, denseLogits.size(-1)}).contiguous();
    const at::Tensor b = prunedLogits.to(at::kDouble).reshape({-1, prunedLogits.size(-1)}).contiguous();
    auto pa = a.accessor<double, 2>();
    auto pb = b.accessor<double, 2>();
    double sum = 0;
    for (int64_t t = 0; t < a.size(0); ++t) {
        double ma = -std::numeric_limits<double>::infinity(), mb = ma;
        for (int64_t v = 0; v < a.size(1); ++v) ma = std::max(ma, pa[t][v]), mb = std::max(mb, pb[t][v]);
        double za = 0, zb = 0;
        for (int64_t v = 0; v < a.size(1); ++v) za += std::exp(pa[t][v] - ma), zb += std::exp(pb[t][v] - mb);
        const double la = ma + std::log(za), lb = mb + std::log(zb);
        for (int64_t v = 0; v < a.size(1); ++v) {
            const double lp = pa[t][v] - la, lq = pb[t][v] - lb;
            sum += std::exp(lp) * (lp - lq);
        }
    }
    return sum / double(a.size(0));
}

} // namespace

class TestSiteDamage : public QObject {
    Q_OBJECT
private slots:
    // Before scaling lstar-kl ranks as lstar-rel; equal factors (any value) keep every selection,
    // unequal ones move the budget: a site made very expensive keeps all its units.
    void equalFactorsReproduceLstarRel() {
        const Fixture f = fixture();
        const ScoreSet rel = computeScores(f.model.checkpoint(), f.stats, settingsFor(CrossLayerRanking::RelativeCompensatedError));
        ScoreSet kl = computeScores(f.model.checkpoint(), f.stats, settingsFor(CrossLayerRanking::MeasuredDamage));
        // Unscaled, lstar-kl would silently rank as lstar-rel: refused.
        QVERIFY_THROWS_EXCEPTION(Error, MaskSelector{kl});
        const size_t layers = rel.ranking.size();
        scaleRankingBySite(kl, std::vector<double>(layers, 37.5), std::vector<double>(layers, 37.5));
        const MaskSelector a(rel), b(kl);
        for (double rho : {0.1, 0.2, 0.3, 0.4, 0.5}) {
            const SelectionResult x = a.select(rho, NAN, AlphaMode::Budget), y = b.select(rho, NAN, AlphaMode::Budget);
            QCOMPARE(y.mask.keepHeads, x.mask.keepHeads);
            QCOMPARE(y.mask.keepChannels, x.mask.keepChannels);
        }
        // Layer 0's MLP made 10⁶ times dearer: at ρ 0.3 it loses nothing, while lstar-rel takes some.
        ScoreSet skewed = computeScores(f.model.checkpoint(), f.stats, settingsFor(CrossLayerRanking::MeasuredDamage));
        std::vector<double> mlp(layers, 1.0);
        mlp[0] = 1e6;
        scaleRankingBySite(skewed, std::vector<double>(layers, 1.0), mlp);
        const auto kept = MaskSelector(skewed).select(0.3, NAN, AlphaMode::Budget).mask.keepChannels[0];
        QCOMPARE(std::count(kept.begin(), kept.end(), false), 0);
        const auto relKept = a.select(0.3, NAN, AlphaMode::Budget).mask.keepChannels[0];
        QVERIFY(std::count(relKept.begin(), relKept.end(), false) > 0);
        QVERIFY_THROWS_EXCEPTION(Error, scaleRankingBySite(skewed, std::vector<double>(layers, 0.0), mlp));
    }

    // One site's measured KL against a brute-force rebuild: layer 1's MLP, its first round(0.3·n)
    // channels in z-order removed, Theorem 3 applied to down_proj, the columns zeroed.
    void bruteForceKlOfOneSite() {
        const Fixture f = fixture();
        const ScoreSet kl = computeScores(f.model.checkpoint(), f.stats, settingsFor(CrossLayerRanking::MeasuredDamage));
        SiteDamageOptions options;
        options.maxWindows = 5;
        const SiteDamage damage = measureSiteDamage(f.model, f.stats, kl, f.set, options);
        QCOMPARE(damage.windows, int64_t(5));

        // The reference prefix by hand: the z-order is that of the channel scores s = −w (ascending).
        const std::vector<double> z = toDoubleVector(computeScores(f.model.checkpoint(), f.stats,
                                                                   settingsFor(CrossLayerRanking::Relaxed)).mlpChannels[1]);
        std::vector<size_t> order(z.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] < z[b]; });
        const size_t k = size_t(std::llround(0.3 * double(z.size())));
        std::vector<bool> keep(z.size(), true);
        for (size_t i = 0; i < k; ++i) keep[order[i]] = false;
        QCOMPARE(damage.mlpPrefix[1], int64_t(k));
        QCOMPARE(referencePrefixKeep(kl.ranking[1].channels, 0.3), keep);

        LlamaCheckpoint zeroed = f.model.checkpoint();
        zeroed.weights.layers[1].w_down = zeroed.weights.layers[1].w_down.clone();
        const CompensationResult c = compensatePrunedChannels(zeroed.weights.layers[1].w_down,
                                                              f.stats.mlp[1].gramPerToken(), keep, kl.settings.damp);
        zeroed.weights.layers[1].w_down = c.weight.to(at::kFloat);
        const LlamaModel pruned(std::move(zeroed), chooseRuntime("cpu"));
        double sum = 0;
        for (int w = 0; w < 5; ++w) {
            const at::Tensor ids = idsTensor({f.set.windows[size_t(w)]});
            sum += bruteKl(f.model.logits(ids), pruned.logits(ids));
        }
        const double expected = sum / 5;
        QVERIFY(expected > 0);
        // float32 forwards of a sliced and a zeroed model differ by rounding only.
        QVERIFY2(std::abs(damage.mlpKl[1] - expected) <= 1e-3 * expected + 1e-9,
                 qPrintable(QString("KL %1 vs brute force %2").arg(damage.mlpKl[1]).arg(expected)));
        // The factor: KL over lstar-rel's relative L* at the prefix (L* = the remark's value).
        QVERIFY(std::abs(damage.mlpRelLoss[1] * kl.mlpLossScale[1] - c.optimalLoss) <= 1e-7 * c.optimalLoss);
        QVERIFY(std::abs(damage.mlpFactor[1] - damage.mlpKl[1] / damage.mlpRelLoss[1]) <= 1e-12 * damage.mlpFactor[1]);
        QVERIFY(kl.mlpLossScale[1] > kl.mlpLossScale[0]);  // the residual stream grows with depth
    }

    // demo:lm through the whole flow (the workbench's prune, as npw prune takes it): every site's
    // KL is measured (none falls back to the median), every factor is finite and positive, the
    // report names the ranking; statistics read from a file (no windows) are refused.
    void demoFactorsFinitePositive() {
        const LanguageModel lm = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        const std::string calib = std::string(NPW_TEST_DATA) + "/../../resources/demo/data/kjv-ot.txt";
        const CalibrationSet set = drawCalibrationSet(readCalibrationStream(calib, false, lm), 16, 64, 0, calib);
        PruneSettings s = settingsFor(CrossLayerRanking::MeasuredDamage);
        s.ratio = 0.3;
        LanguagePruningWorkbench workbench(lm);
        workbench.setCalibration(LanguagePruningWorkbench::calibrate(lm, set));
        const WorkbenchPrune run = workbench.prune(s);
        QVERIFY(run.scores->siteDamageApplied);
        // The measurement the ranking scaled by: the one dispatch the workbench scores through,
        // again on the same statistics and windows (deterministic), this time keeping it.
        SiteDamage d;
        scoreModel(*lm.model, *workbench.calibration().stats, s, nullptr, &set, &d);
        QCOMPARE(d.attentionFactor.size(), size_t(6));
        for (size_t l = 0; l < 6; ++l)
            for (double kl : {d.attentionKl[l], d.mlpKl[l]}) QVERIFY2(kl > 0 && std::isfinite(kl), qPrintable(QString::number(kl)));
        for (size_t l = 0; l < 6; ++l)
            for (double f : {d.attentionFactor[l], d.mlpFactor[l]})
                QVERIFY2(f > 0 && std::isfinite(f), qPrintable(QString("layer %1 factor %2").arg(l).arg(f)));
        QCOMPARE(run.report.crossLayer, std::string("lstar-kl"));
        QVERIFY(std::abs(run.report.achievedRatio - 0.3) < 0.02);
        // Statistics without windows (--stats FILE): refused, naming the ranking.
        QTemporaryDir dir;
        const std::string statsFile = dir.filePath("stats.safetensors").toStdString();
        saveModelStats(*workbench.calibration().stats, statsFile, workbench.calibration().summary.toMetadata());
        LanguagePruningWorkbench fromFile(lm);
        fromFile.setCalibration(LanguagePruningWorkbench::calibrationFromFile(statsFile, 6));
        QVERIFY(fromFile.isCalibrated() && !fromFile.hasWindows());
        const QString refused = errorOf([&] { fromFile.prune(s); });
        QVERIFY2(refused.contains("lstar-kl") && refused.contains("--stats"), qPrintable(refused));
    }
};

QTEST_GUILESS_MAIN(TestSiteDamage)
#include "tst_site_damage.moc"
