// Theorem 3's compensation against a brute-force least-squares refit of the kept rows, the
// Remark's L* against the achieved loss, the dampened variant against its own normal
// equations, and FLAP's bias compensation.
#include "core/prune/compensation.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <cmath>
#include <random>
#include <tuple>

using namespace npw;

namespace {

const auto f64 = at::TensorOptions().dtype(at::kDouble);

struct Case {
    at::Tensor x;       // [N, D] calibration inputs
    at::Tensor weight;  // torch layout [out, D]
    at::Tensor gram;    // XᵀX
    std::vector<bool> keep;
};

Case randomCase(int64_t d, int64_t out, int64_t n, double prunedFraction, uint64_t seed) {
    at::manual_seed(seed);
    Case c;
    c.x = at::randn({n, d}, f64) * at::exp(at::randn({d}, f64) * 0.3) + 0.1 * at::randn({n, 1}, f64);
    c.weight = at::randn({out, d}, f64);
    c.gram = at::matmul(c.x.t(), c.x);
    std::mt19937 rng(seed);
    c.keep.assign(d, true);
    for (int64_t j = 0; j < d; ++j) c.keep[j] = std::uniform_real_distribution<double>()(rng) >= prunedFraction;
    c.keep[0] = false;  // at least one pruned,
    c.keep[1] = true;   // at least one kept
    return c;
}

at::Tensor indices(const std::vector<bool>& keep, bool value) {
    std::vector<int64_t> idx;
    for (size_t j = 0; j < keep.size(); ++j)
        if (keep[j] == value) idx.push_back(int64_t(j));
    return at::tensor(idx, at::kLong);
}

double relativeError(const at::Tensor& a, const at::Tensor& b) {
    return (a - b).norm().item<double>() / b.norm().item<double>();
}

} // namespace

class TestCompensation : public QObject {
    Q_OBJECT
private slots:
    void equalsLeastSquaresRefit_data() {
        QTest::addColumn<int>("d");
        QTest::addColumn<int>("out");
        QTest::addColumn<double>("pruned");
        QTest::newRow("D=6, out 4, a third pruned") << 6 << 4 << 0.33;
        QTest::newRow("D=24, out 10, half pruned") << 24 << 10 << 0.5;
        QTest::newRow("D=64, out 16, 80% pruned") << 64 << 16 << 0.8;
        QTest::newRow("D=64, out 96, 10% pruned") << 64 << 96 << 0.1;
    }
    void equalsLeastSquaresRefit() {
        QFETCH(int, d);
        QFETCH(int, out);
        QFETCH(double, pruned);
        const Case c = randomCase(d, out, 3 * d + 11, pruned, uint64_t(d * out));
        const CompensationResult r = compensatePrunedChannels(c.weight, c.gram, c.keep, /*gamma=*/0.0);
        QCOMPARE(r.dampening, 0.0);
        QCOMPARE(r.weight.sizes(), c.weight.sizes());

        // Pruned input channels are exactly zero.
        const at::Tensor p = indices(c.keep, false), k = indices(c.keep, true);
        QVERIFY(r.weight.index_select(1, p).eq(0).all().item<bool>());

        // Brute force: with the pruned rows fixed at zero, the kept rows minimise
        // ‖X_k W' − X W‖ (paper orientation W = weight.T): ordinary least squares in float64.
        const at::Tensor target = at::matmul(c.x, c.weight.t());
        const at::Tensor refit = std::get<0>(at::linalg_lstsq(c.x.index_select(1, k), target));
        const double err = relativeError(r.weight.index_select(1, k).t(), refit);
        QVERIFY2(err < 1e-8, qPrintable(QString("relative error %1").arg(err)));

        // L* (Remark) is the achieved loss 𝓛(δW*) = ‖X δW*‖²_F, i.e. half of δWᵀ(2G)δW.
        const at::Tensor deltaW = (r.weight - c.weight).t();
        const double achieved = at::matmul(c.x, deltaW).square().sum().item<double>();
        QVERIFY2(std::abs(r.optimalLoss - achieved) <= 1e-8 * achieved,
                 qPrintable(QString("L* %1 vs achieved %2").arg(r.optimalLoss).arg(achieved)));
        const double halfWithHessian = 0.5 * (deltaW * at::matmul(2 * c.gram, deltaW)).sum().item<double>();
        QVERIFY(std::abs(r.optimalLoss - halfWithHessian) <= 1e-8 * achieved);
        // ... and the least-squares residual of the brute force.
        const double residual = (at::matmul(c.x.index_select(1, k), refit) - target).square().sum().item<double>();
        QVERIFY(std::abs(r.optimalLoss - residual) <= 1e-8 * residual);
        // Compensation beats plain removal.
        at::Tensor removed = c.weight.clone();
        removed.index_fill_(1, p, 0.0);
        QVERIFY(achieved < at::matmul(c.x, (removed - c.weight).t()).square().sum().item<double>());
    }

    void dampenedIsRidgeOnTheKeptRows() {
        // With γ' = γ·mean(diag 2G) the result minimises ‖XδW‖² + ½γ'‖δW‖²_F with the pruned
        // rows fixed: δW_k = (2G_kk + γ'I)⁻¹ 2G_kp W_p, and L* is that minimum.
        const Case c = randomCase(20, 7, 80, 0.4, 3);
        const double gamma = 0.05;
        const CompensationResult r = compensatePrunedChannels(c.weight, c.gram, c.keep, gamma);
        const double dampening = gamma * 2 * c.gram.diagonal().mean().item<double>();
        QVERIFY(std::abs(r.dampening - dampening) <= 1e-12 * dampening);

        const at::Tensor p = indices(c.keep, false), k = indices(c.keep, true);
        const at::Tensor w = c.weight.t();
        const at::Tensor gkk = c.gram.index_select(0, k).index_select(1, k);
        const at::Tensor gkp = c.gram.index_select(0, k).index_select(1, p);
        const at::Tensor lhs = 2 * gkk + dampening * at::eye(k.size(0), f64);
        const at::Tensor deltaKept = at::linalg_solve(lhs, at::matmul(2 * gkp, w.index_select(0, p)));
        const at::Tensor expectedKept = w.index_select(0, k) + deltaKept;
        QVERIFY(relativeError(r.weight.t().index_select(0, k), expectedKept) < 1e-9);

        const at::Tensor deltaW = (r.weight - c.weight).t();
        const double objective = at::matmul(c.x, deltaW).square().sum().item<double>() +
                                 0.5 * dampening * deltaW.square().sum().item<double>();
        QVERIFY(std::abs(r.optimalLoss - objective) <= 1e-9 * objective);
    }

    void edgeMasks() {
        const Case c = randomCase(10, 5, 40, 0.3, 8);
        // Nothing pruned: the weight is unchanged and nothing is lost.
        CompensationResult r = compensatePrunedChannels(c.weight, c.gram, std::vector<bool>(10, true), 0.0);
        QVERIFY(at::equal(r.weight, c.weight));
        QCOMPARE(r.optimalLoss, 0.0);
        // Everything pruned: the weight is zero and the loss is the whole output ‖XW‖².
        r = compensatePrunedChannels(c.weight, c.gram, std::vector<bool>(10, false), 0.0);
        QVERIFY(r.weight.eq(0).all().item<bool>());
        const double whole = at::matmul(c.x, c.weight.t()).square().sum().item<double>();
        QVERIFY(std::abs(r.optimalLoss - whole) <= 1e-9 * whole);
    }

    void singularGramNeedsDampening() {
        // Fewer tokens than channels: G is singular. γ = 0 says so; the default γ works.
        const Case c = randomCase(16, 4, 8, 0.5, 4);
        QVERIFY_THROWS_EXCEPTION(Error, compensatePrunedChannels(c.weight, c.gram, c.keep, 0.0));
        const CompensationResult r = compensatePrunedChannels(c.weight, c.gram, c.keep);
        QVERIFY(r.dampening > 0);
        QVERIFY(at::isfinite(r.weight).all().item<bool>());
        QVERIFY(r.weight.index_select(1, indices(c.keep, false)).eq(0).all().item<bool>());
    }

    void keepsDtypeAndChecksShapes() {
        const Case c = randomCase(12, 6, 50, 0.3, 5);
        const CompensationResult r = compensatePrunedChannels(c.weight.to(at::kFloat), c.gram, c.keep);
        QCOMPARE(r.weight.scalar_type(), at::kFloat);
        QVERIFY_THROWS_EXCEPTION(Error, compensatePrunedChannels(c.weight.t(), c.gram, c.keep));
        QVERIFY_THROWS_EXCEPTION(Error, compensatePrunedChannels(c.weight, c.gram, std::vector<bool>(11, true)));
        QVERIFY_THROWS_EXCEPTION(Error, compensatePrunedChannels(c.weight, c.gram, c.keep, -1.0));
    }

    void flapBias() {
        // bias = (mean ∘ (1 − keep)) @ weightᵀ, by hand.
        const at::Tensor weight = at::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, f64).reshape({2, 3});
        const at::Tensor mean = at::tensor({1.0, 10.0, 100.0}, f64);
        const at::Tensor bias = flapBiasCompensation(weight, mean, {true, false, true});
        QVERIFY(at::equal(bias, at::tensor({20.0, 50.0}, f64)));

        // For inputs that sit at their mean on the pruned channels, pruned layer + bias
        // reproduces the original output exactly.
        const Case c = randomCase(9, 4, 30, 0.4, 6);
        at::Tensor x = c.x.clone();
        const at::Tensor channelMean = x.mean(0);
        const at::Tensor p = indices(c.keep, false);
        x.index_copy_(1, p, channelMean.index_select(0, p).expand({x.size(0), p.size(0)}).contiguous());
        at::Tensor pruned = c.weight.clone();
        pruned.index_fill_(1, p, 0.0);
        const at::Tensor b = flapBiasCompensation(c.weight, channelMean, c.keep);
        QVERIFY(at::allclose(at::matmul(x, pruned.t()) + b, at::matmul(x, c.weight.t()), 1e-12, 1e-12));
        QVERIFY_THROWS_EXCEPTION(Error, flapBiasCompensation(c.weight, channelMean.slice(0, 0, 8), c.keep));
    }
};

QTEST_GUILESS_MAIN(TestCompensation)
#include "tst_compensation.moc"
