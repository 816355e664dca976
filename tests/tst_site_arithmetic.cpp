// The per-site arithmetic in owned buffers (one factorisation per call, Gram matrices updated as
// symmetric rank-k updates) against independent float64 brute force: A and c by an LU solve of
// (WᵀW)∘G built here, tr(W G Wᵀ) by the explicit product, the L* curve and Theorem 3 from the
// paper's formulas with an explicit inverse of 2G + γ'I, each for many masks and orders; and the
// forms that take a raw, triangle-only Gram with 1/N against the same with G/N complete.
#include "core/prune/compensation.h"
#include "core/prune/dense_kernels.h"
#include "core/prune/layer_stats.h"
#include "core/prune/numerical_score.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <random>

using namespace npw;

namespace {

const auto f64 = at::TensorOptions().dtype(at::kDouble);

double relativeGap(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

double maxRelative(const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
           std::max(b.to(at::kDouble).abs().max().item<double>(), 1e-300);
}

struct Site {
    at::Tensor weight;  // [out, D] float64
    at::Tensor x;       // calibration inputs [N, D]
    at::Tensor gram;    // xᵀx / N, float64, complete
    LayerStats stats;   // the same inputs accumulated in chunks (triangle only)
};

// Correlated inputs with unequal scales (as real activations).
Site randomSite(int64_t d, int64_t out, int64_t n, uint64_t seed) {
    at::manual_seed(static_cast<int64_t>(seed));
    Site s;
    s.weight = at::randn({out, d}, f64) / std::sqrt(double(d));
    const at::Tensor scale = at::exp(at::randn({d}, f64) * 0.6);
    const at::Tensor mix = at::eye(d, f64) + 0.5 * at::randn({d, d}, f64) / std::sqrt(double(d));
    s.x = at::matmul(at::randn({n, d}, f64) * scale, mix);
    s.gram = at::matmul(s.x.t(), s.x) / double(n);
    s.stats = LayerStats(d);
    for (int64_t i = 0; i < n; i += 37) s.stats.accumulate(s.x.slice(0, i, std::min(i + 37, n)));
    return s;
}

// Theorem 3 by its formula with an explicit inverse (float64): Hinv = (2G + γ'I)⁻¹.
at::Tensor explicitHinv(const at::Tensor& gram, double gamma, double* dampening) {
    const at::Tensor h2 = 2 * gram;
    *dampening = gamma * h2.diagonal().mean().item<double>();
    return at::linalg_inv(h2 + *dampening * at::eye(gram.size(0), f64));
}

double explicitLoss(const at::Tensor& weight, const at::Tensor& hinv, const at::Tensor& pruned) {
    const at::Tensor wp = weight.t().index_select(0, pruned);  // W[p, :]
    const at::Tensor hpp = hinv.index_select(0, pruned).index_select(1, pruned);
    return 0.5 * (wp * at::matmul(at::linalg_inv(hpp), wp)).sum().item<double>();
}

} // namespace

class TestSiteArithmetic : public QObject {
    Q_OBJECT
private slots:
    void numericalSolveAgainstLuSolve() {
        for (const auto& [d, out, seed] : std::vector<std::tuple<int64_t, int64_t, uint64_t>>{
                 {1, 3, 1}, {7, 5, 2}, {64, 300, 3}, {130, 70, 4}, {257, 513, 5}}) {
            const Site s = randomSite(d, out, 3 * d + 11, seed);
            // Reference: A built here, c and A⁻¹1 by an LU solve, energy by the explicit product.
            const at::Tensor a = at::matmul(s.weight.t(), s.weight) * s.gram;
            const at::Tensor ainv1 = at::linalg_solve(a, at::ones({d, 1}, f64)).squeeze(1);
            const double energy = at::trace(at::matmul(s.weight, at::matmul(s.gram, s.weight.t()))).item<double>();

            const NumericalSolve site =
                solveNumericalSite(s.weight, s.stats.gram, 1.0 / static_cast<double>(s.stats.tokens));
            QVERIFY(s.stats.gramIsTriangle());  // read without a symmetrised copy
            QCOMPARE(site.D, d);
            QCOMPARE(site.jitter, 0.0);
            QVERIFY2(maxRelative(site.Ainv1, ainv1) < 1e-8, qPrintable(QString("D = %1").arg(d)));
            QVERIFY(relativeGap(site.c, ainv1.sum().item<double>()) < 1e-9);
            QVERIFY(relativeGap(site.outputEnergy, energy) < 1e-12);
            // The tensor road (numericalScoreMatrix, then solveNumericalScore) agrees to rounding.
            const NumericalSolve viaA = solveNumericalScore(numericalScoreMatrix(s.weight, s.gram));
            QVERIFY(maxRelative(site.Ainv1, viaA.Ainv1) < 1e-9);
            QVERIFY(relativeGap(site.outputEnergy, viaA.outputEnergy) < 1e-12);
        }
    }

    void numericalSolveReadsAnyDtypeBlockByBlock() {
        // 600 rows: three row blocks of the weight; bf16 and float32 weights as they are stored.
        const Site s = randomSite(48, 600, 200, 9);
        for (at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
            const at::Tensor w = s.weight.to(dtype);
            const NumericalSolve site = solveNumericalSite(w, s.gram);
            const at::Tensor a = at::matmul(w.to(at::kDouble).t(), w.to(at::kDouble)) * s.gram;
            QVERIFY(maxRelative(site.Ainv1, at::linalg_solve(a, at::ones({48, 1}, f64)).squeeze(1)) < 1e-8);
        }
    }

    void singularSiteTakesTheSameJitter() {
        // A dead input channel: A singular; the site road and the tensor road add the same jitter.
        Site s = randomSite(20, 30, 80, 11);
        s.gram.index_fill_(0, at::tensor({int64_t(4)}), 0.0);
        s.gram.index_fill_(1, at::tensor({int64_t(4)}), 0.0);
        const NumericalSolve site = solveNumericalSite(s.weight, s.gram);
        const NumericalSolve viaA = solveNumericalScore(numericalScoreMatrix(s.weight, s.gram));
        QVERIFY(site.jitter > 0);
        QCOMPARE(site.jitter, viaA.jitter);
        QVERIFY(maxRelative(site.Ainv1, viaA.Ainv1) < 1e-6);
        at::Tensor bad = s.gram.clone();
        bad[3][5] = std::nan("");
        QVERIFY_THROWS_EXCEPTION(Error, solveNumericalSite(s.weight, bad));
        QVERIFY_THROWS_EXCEPTION(Error, solveNumericalSite(s.weight.t(), s.gram));
        QVERIFY_THROWS_EXCEPTION(Error, solveNumericalSite(s.weight, s.gram, 0.0));
    }

    void lossCurveAgainstExplicitInverse() {
        // Whole orders and partial ones (channels left out stay in H, as compensation keeps them).
        std::mt19937_64 rng(5);
        for (const auto& [d, out] : std::vector<std::pair<int64_t, int64_t>>{{9, 4}, {40, 90}, {96, 300}}) {
            const Site s = randomSite(d, out, 2 * d + 5, static_cast<uint64_t>(d));
            for (double gamma : {0.0, 0.01, 0.3}) {
                double damp = 0;
                const at::Tensor hinv = explicitHinv(s.gram, gamma, &damp);
                std::vector<int64_t> order(static_cast<size_t>(d));
                for (int64_t i = 0; i < d; ++i) order[size_t(i)] = i;
                std::shuffle(order.begin(), order.end(), rng);
                for (size_t m : {size_t(d), size_t(d) / 2, size_t(1)}) {
                    const std::vector<int64_t> part(order.begin(), order.begin() + static_cast<int64_t>(m));
                    const std::vector<double> curve = compensatedLossCurve(s.weight, s.gram, part, gamma);
                    const std::vector<double> scaled = compensatedLossCurveScaled(
                        s.weight, s.stats.gram, 1.0 / static_cast<double>(s.stats.tokens), part, gamma);
                    QCOMPARE(curve.size(), m);
                    for (size_t k = 1; k <= m; k += std::max<size_t>(1, m / 7)) {
                        const at::Tensor pruned = at::tensor(std::vector<int64_t>(part.begin(), part.begin() + int64_t(k)));
                        const double reference = explicitLoss(s.weight, hinv, pruned);
                        QVERIFY2(relativeGap(curve[k - 1], reference) < 1e-9,
                                 qPrintable(QString("D %1 γ %2 m %3 k %4: %5 vs %6").arg(d).arg(gamma).arg(m).arg(k)
                                                .arg(curve[k - 1]).arg(reference)));
                        QVERIFY(relativeGap(scaled[k - 1], curve[k - 1]) < 1e-11);
                    }
                }
            }
        }
    }

    void compensationAgainstExplicitInverse() {
        std::mt19937_64 rng(7);
        for (const auto& [d, out] : std::vector<std::pair<int64_t, int64_t>>{{6, 3}, {50, 700}, {120, 64}}) {
            const Site s = randomSite(d, out, 3 * d, static_cast<uint64_t>(d) + 100);
            for (double gamma : {0.0, 0.01}) {
                double damp = 0;
                const at::Tensor hinv = explicitHinv(s.gram, gamma, &damp);
                for (int trial = 0; trial < 4; ++trial) {
                    std::vector<bool> keep(static_cast<size_t>(d));
                    std::vector<int64_t> prunedIdx;
                    for (int64_t i = 0; i < d; ++i) {
                        keep[size_t(i)] = trial == 3 ? false : (rng() % 3 != 0);
                        if (!keep[size_t(i)]) prunedIdx.push_back(i);
                    }
                    if (prunedIdx.empty()) continue;
                    const at::Tensor p = at::tensor(prunedIdx);
                    // δW* = −Hinv[:, p] Hinv[p, p]⁻¹ W[p, :] (paper's orientation W = weight.T).
                    const at::Tensor w = s.weight.t();
                    const at::Tensor delta = -at::matmul(hinv.index_select(1, p),
                                                         at::matmul(at::linalg_inv(hinv.index_select(0, p).index_select(1, p)),
                                                                    w.index_select(0, p)));
                    at::Tensor expected = (w + delta).t().contiguous();
                    expected.index_fill_(1, p, 0.0);
                    const at::Tensor wp = s.weight.index_select(1, p);
                    const double zeroed =
                        (at::matmul(wp, s.gram.index_select(0, p).index_select(1, p)) * wp).sum().item<double>();

                    const CompensationResult r = compensatePrunedChannels(s.weight, s.gram, keep, gamma);
                    const CompensationResult scaled = compensatePrunedChannelsScaled(
                        s.weight, s.stats.gram, 1.0 / static_cast<double>(s.stats.tokens), keep, gamma);
                    QVERIFY2(maxRelative(r.weight, expected) < 1e-8, qPrintable(QString("D %1 trial %2").arg(d).arg(trial)));
                    QVERIFY(at::equal(r.weight.index_select(1, p), at::zeros_like(r.weight.index_select(1, p))));
                    QVERIFY(relativeGap(r.optimalLoss, explicitLoss(s.weight, hinv, p)) < 1e-9);
                    QVERIFY(relativeGap(r.dampening, damp) < 1e-13);
                    QVERIFY2(relativeGap(r.uncompensatedLoss, zeroed) < 1e-9,
                             qPrintable(QString("%1 vs %2").arg(r.uncompensatedLoss).arg(zeroed)));
                    QVERIFY(relativeGap(r.deltaSquaredNorm, (r.weight - s.weight).square().sum().item<double>()) < 1e-12);
                    QVERIFY(maxRelative(scaled.weight, r.weight) < 1e-11);
                    QVERIFY(relativeGap(scaled.optimalLoss, r.optimalLoss) < 1e-11);
                    // With γ = 0, L* is exactly the achieved output error ‖X δW‖²/N.
                    if (gamma == 0) {
                        const at::Tensor achieved = at::matmul(s.x, (r.weight - s.weight).t());
                        QVERIFY(relativeGap(r.optimalLoss, achieved.square().sum().item<double>() / double(s.x.size(0))) < 1e-8);
                    }
                }
            }
        }
    }

    void compensationKeepsDtypeAndReadsBf16() {
        const Site s = randomSite(32, 300, 100, 21);
        std::vector<bool> keep(32, true);
        for (int i = 0; i < 32; i += 3) keep[size_t(i)] = false;
        const at::Tensor w16 = s.weight.to(at::kBFloat16);
        const CompensationResult r = compensatePrunedChannels(w16, s.gram, keep, 0.01);
        const CompensationResult ref = compensatePrunedChannels(w16.to(at::kDouble), s.gram, keep, 0.01);
        QCOMPARE(r.weight.scalar_type(), at::kBFloat16);
        // bf16 keeps 8 bits: the result is the float64 one rounded.
        QVERIFY(maxRelative(r.weight, ref.weight) < 1e-2);
        QVERIFY(relativeGap(r.optimalLoss, ref.optimalLoss) < 1e-12);
    }

    void workMeterCountsTheFactorisations() {
        const Site s = randomSite(40, 50, 100, 31);
        const dense::StageWork before = dense::workSoFar(dense::WorkStage::LossCurve);
        std::vector<int64_t> order(40);
        for (int64_t i = 0; i < 40; ++i) order[size_t(i)] = i;
        (void)compensatedLossCurve(s.weight, s.gram, order, 0.01);
        const dense::StageWork after = dense::workSoFar(dense::WorkStage::LossCurve);
        // One Cholesky (D³/3) and one triangular multiply (D²·out) per curve.
        QCOMPARE(after.choleskyFlops - before.choleskyFlops, 40.0 * 40 * 40 / 3);
        QCOMPARE(after.gemmFlops - before.gemmFlops, 40.0 * 40 * 50);
        QVERIFY(after.seconds > before.seconds);
    }
};

QTEST_GUILESS_MAIN(TestSiteArithmetic)
#include "tst_site_arithmetic.moc"
