// The baselines' metrics (FLAP WIFV and its squared attention variant, Wanda-sp, magnitude),
// the per-layer standardisation and FLAP's layer scores, on hand-computable inputs.
#include "core/prune/baseline_metrics.h"
#include "core/prune/layer_stats.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <cmath>

using namespace npw;

namespace {

const auto f64 = at::TensorOptions().dtype(at::kDouble);

// out = 2, D = 2: input channel 0 feeds column [1, 3], channel 1 feeds column [−2, 4].
at::Tensor handWeight() { return at::tensor({1.0, -2.0, 3.0, 4.0}, f64).reshape({2, 2}); }

bool near(const at::Tensor& a, const std::vector<double>& expected) {
    return at::allclose(a, at::tensor(expected, f64), 1e-14, 1e-14);
}

} // namespace

class TestBaselineMetrics : public QObject {
    Q_OBJECT
private slots:
    void flapWifv() {
        // Σ_rows W² per column = [10, 20]; variance [0.5, 2] → [5, 40]; attention squares it.
        const at::Tensor variance = at::tensor({0.5, 2.0}, f64);
        QVERIFY(near(flapChannelMetric(handWeight(), variance), {5.0, 40.0}));
        QVERIFY(near(flapAttentionChannelMetric(handWeight(), variance), {25.0, 1600.0}));
    }

    void wandaSp() {
        // mean_i |W[i, j]| = [2, 3]; ‖X_j‖ = [2, 1] → [4, 3].
        QVERIFY(near(wandaSpChannelMetric(handWeight(), at::tensor({2.0, 1.0}, f64)), {4.0, 3.0}));
    }

    void magnitude() {
        QVERIFY(near(magnitudeChannelMetric(handWeight()), {std::sqrt(10.0), std::sqrt(20.0)}));
    }

    void fromLayerStats() {
        // X = [[1, 0], [3, 2]]: mean [2, 1], population variance [1, 1], ‖X_j‖ = [√10, 2].
        LayerStats s(2);
        s.accumulate(at::tensor({1.0, 0.0, 3.0, 2.0}, f64).reshape({2, 2}));
        QVERIFY(near(flapChannelMetric(handWeight(), s.variance()), {10.0, 20.0}));
        QVERIFY(near(wandaSpChannelMetric(handWeight(), s.channelNorm()), {2 * std::sqrt(10.0), 6.0}));
    }

    void standardisation() {
        // mean 2.5, sample standard deviation √(5/3), as torch.std.
        const double sd = std::sqrt(5.0 / 3.0);
        QVERIFY(near(standardisePerLayer(at::tensor({1.0, 2.0, 3.0, 4.0}, f64)),
                     {-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd}));
        QVERIFY(near(standardisePerLayer(at::full({5}, 7.0, f64)), {0, 0, 0, 0, 0}));  // no NaN
        QVERIFY_THROWS_EXCEPTION(Error, standardisePerLayer(at::ones({1}, f64)));
    }

    void flapLayerScoresComposeTheSteps() {
        at::manual_seed(3);
        const at::Tensor wo = at::randn({6, 8}, f64), wdown = at::randn({6, 5}, f64);
        const at::Tensor varAttn = at::rand({8}, f64), varMlp = at::rand({5}, f64);
        const LayerScores s = flapLayerScores(wo, varAttn, wdown, varMlp, 4);
        const at::Tensor attn = standardisePerLayer((varAttn * wo.square().sum(0)).square());
        QCOMPARE(s.heads.size(), size_t(2));
        QVERIFY(std::abs(s.heads[0] - attn.slice(0, 0, 4).mean().item<double>()) < 1e-14);
        QVERIFY(std::abs(s.heads[1] - attn.slice(0, 4, 8).mean().item<double>()) < 1e-14);
        QCOMPARE(s.channels, toDoubleVector(standardisePerLayer(varMlp * wdown.square().sum(0))));
        QVERIFY(flapLayerScores(at::Tensor(), at::Tensor(), wdown, varMlp, 4).heads.empty());
    }

    void shapeErrors() {
        QVERIFY_THROWS_EXCEPTION(Error, flapChannelMetric(handWeight(), at::ones({3}, f64)));
        QVERIFY_THROWS_EXCEPTION(Error, wandaSpChannelMetric(at::ones({4}, f64), at::ones({4}, f64)));
    }
};

QTEST_GUILESS_MAIN(TestBaselineMetrics)
#include "tst_baseline_metrics.moc"
