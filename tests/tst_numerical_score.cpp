// The numerical score: the closed form against Algorithm 1 as written and against a direct
// float64 solve of the penalised optimality system H z = A1 + λr1, the ρ/λ-invariance of the
// ranking, the degenerate cases of reference.md §1, and the head / KV-group reductions.
#include "core/prune/numerical_score.h"
#include "core/prune/select.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <cmath>

using namespace npw;

namespace {

struct Problem {
    at::Tensor weight;  // torch layout [out, D]
    at::Tensor gram;    // per token
    at::Tensor A;
};

// Inputs with unequal channel scales and some correlation, as real activations have.
Problem randomProblem(int64_t d, uint64_t seed, int64_t out = -1) {
    at::manual_seed(seed);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    Problem p;
    p.weight = at::randn({out > 0 ? out : d + 5, d}, f64) / std::sqrt(double(d));
    const at::Tensor scale = at::exp(at::randn({d}, f64) * 0.5);
    const at::Tensor mix = at::eye(d, f64) + 0.3 * at::randn({d, d}, f64) / std::sqrt(double(d));
    const at::Tensor x = at::matmul(at::randn({3 * d + 7, d}, f64) * scale, mix);
    p.gram = at::matmul(x.t(), x) / double(x.size(0));
    p.A = numericalScoreMatrix(p.weight, p.gram);
    return p;
}

double relativeError(const at::Tensor& a, const at::Tensor& b) {
    return (a - b).norm().item<double>() / b.norm().item<double>();
}

at::Tensor directSolve(const at::Tensor& A, double rho, double lambda) {
    const int64_t d = A.size(0);
    const double r = (1 - rho) * double(d);
    const at::Tensor h = A + lambda * at::ones({d, d}, A.options());
    const at::Tensor rhs = at::mv(A, at::ones({d}, A.options())) + lambda * r;
    return at::linalg_solve(h, rhs);
}

// A = S·C·S with C equicorrelated (0.9) and unequal scales S: channels whose scale is above the
// average get A⁻¹1 < 0, i.e. z > 1 before the box, which is where the upper bound binds.
at::Tensor correlatedA(int64_t d, uint64_t seed) {
    at::manual_seed(seed);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor scale = at::exp(at::randn({d}, f64) * 0.7);
    const at::Tensor c = 0.9 * at::ones({d, d}, f64) + 0.1 * at::eye(d, f64);
    return scale.unsqueeze(1) * c * scale.unsqueeze(0);
}

at::Tensor boxCaseA(int kind, int64_t d, uint64_t seed) {
    return kind == 0 ? randomProblem(d, seed).A : correlatedA(d, seed);
}

double objective(const at::Tensor& A, const at::Tensor& z, double rho, double lambda) {
    const at::Tensor e = z - 1;
    const double excess = z.sum().item<double>() - (1 - rho) * double(z.size(0));
    return 0.5 * at::dot(e, at::mv(A, e)).item<double>() + 0.5 * lambda * excess * excess;
}

// The bounded QP by brute force: every assignment of each channel to "free", "at 0" or "at 1"
// (3^D), the free ones solved exactly with the others on their bounds; the lowest objective
// among the assignments whose solution lies in the box is the minimiser (H is positive definite,
// so that assignment exists and its point is unique).
at::Tensor bruteForceBoxed(const at::Tensor& A, double rho, double lambda) {
    const int64_t d = A.size(0);
    const double r = (1 - rho) * double(d);
    const at::Tensor H = A + lambda;
    const at::Tensor b = A.sum(1) + lambda * r;
    int64_t patterns = 1;
    for (int64_t i = 0; i < d; ++i) patterns *= 3;
    double best = INFINITY;
    at::Tensor bestZ;
    for (int64_t code = 0; code < patterns; ++code) {
        std::vector<int> assignment(static_cast<size_t>(d));
        int64_t c = code;
        for (int64_t i = 0; i < d; ++i, c /= 3) assignment[size_t(i)] = int(c % 3);  // 0 free, 1 at 0, 2 at 1
        at::Tensor z = at::zeros({d}, at::kDouble);
        std::vector<int64_t> freeIdx;
        for (int64_t i = 0; i < d; ++i) {
            if (assignment[size_t(i)] == 0) freeIdx.push_back(i);
            if (assignment[size_t(i)] == 2) z[i] = 1.0;
        }
        if (!freeIdx.empty()) {
            const at::Tensor idx = at::tensor(freeIdx, at::kLong);
            const at::Tensor rhs = b.index_select(0, idx) - at::mv(H.index_select(0, idx), z);
            const at::Tensor zf = at::linalg_solve(H.index_select(0, idx).index_select(1, idx), rhs);
            if ((zf < -1e-12).any().item<bool>() || (zf > 1 + 1e-12).any().item<bool>()) continue;
            z.index_copy_(0, idx, zf);
        }
        const double f = objective(A, z, rho, lambda);
        if (f < best) best = f, bestZ = z;
    }
    return bestZ;
}

} // namespace

class TestNumericalScore : public QObject {
    Q_OBJECT
private slots:
    void scoreMatrixIsHadamardOverInputChannels() {
        // A = (W Wᵀ) ∘ G with the paper's W = weight.T: a [3, 2] weight has 2 input channels.
        const at::Tensor weight = at::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, at::kDouble).reshape({3, 2});
        const at::Tensor gram = at::tensor({2.0, 1.0, 1.0, 3.0}, at::kDouble).reshape({2, 2});
        const at::Tensor A = numericalScoreMatrix(weight, gram);
        // weight.T @ weight = [[35, 44], [44, 56]]
        const at::Tensor expected = at::tensor({70.0, 44.0, 44.0, 168.0}, at::kDouble).reshape({2, 2});
        QVERIFY(at::equal(A, expected));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreMatrix(weight.t(), gram));
    }

    void closedFormEqualsNewton_data() {
        QTest::addColumn<int>("d");
        QTest::addColumn<int>("T");
        QTest::addColumn<bool>("reuse");
        for (int d : {8, 64, 256})
            for (int t : {1, 50})
                for (bool reuse : {false, true})
                    QTest::addRow("D=%d T=%d %s", d, t, reuse ? "factorised once" : "as written") << d << t << reuse;
    }
    void closedFormEqualsNewton() {
        QFETCH(int, d);
        QFETCH(int, T);
        QFETCH(bool, reuse);
        const Problem p = randomProblem(d, 100 + d);
        const NumericalSolve solve = solveNumericalScore(p.A);
        QCOMPARE(solve.jitter, 0.0);
        for (double rho : {0.1, 0.5})
            for (double lambda : {1e-2, 1.0, 1e2}) {
                at::manual_seed(d + T);
                const at::Tensor z0 = at::rand({d}, at::kDouble);
                const at::Tensor newton = numericalScoreNewton(p.A, (1 - rho) * d, lambda, T, z0, reuse);
                const at::Tensor closed = numericalScoreClosedForm(solve, rho, lambda);
                const double err = relativeError(closed, newton);
                if (!(err < 1e-8)) QFAIL(qPrintable(QString("ρ %1 λ %2: relative error %3").arg(rho).arg(lambda).arg(err)));
            }
    }

    void closedFormEqualsDirectSolve_data() {
        QTest::addColumn<int>("d");
        QTest::newRow("D=8") << 8;
        QTest::newRow("D=64") << 64;
        QTest::newRow("D=256") << 256;
    }
    void closedFormEqualsDirectSolve() {
        QFETCH(int, d);
        const Problem p = randomProblem(d, 7 * d);
        const NumericalSolve solve = solveNumericalScore(p.A);
        QCOMPARE(solve.D, int64_t(d));
        QVERIFY(std::abs(solve.c - solve.Ainv1.sum().item<double>()) <= 1e-12 * std::abs(solve.c));
        for (double rho : {0.0, 0.2, 0.7, 1.0})
            for (double lambda : {1e-3, 1.0, 1e3}) {
                const double err = relativeError(numericalScoreClosedForm(solve, rho, lambda), directSolve(p.A, rho, lambda));
                if (!(err < 1e-8)) QFAIL(qPrintable(QString("ρ %1 λ %2: relative error %3").arg(rho).arg(lambda).arg(err)));
            }
    }

    void rankingInsideLayerIndependentOfRhoAndLambda() {
        const Problem p = randomProblem(64, 3);
        const NumericalSolve solve = solveNumericalScore(p.A);
        const at::Tensor reference = at::argsort(-solve.Ainv1);
        for (double rho : {0.05, 0.3, 0.9})
            for (double lambda : {1e-4, 1.0, 1e4})
                QVERIFY(at::equal(at::argsort(numericalScoreClosedForm(solve, rho, lambda)), reference));
    }

    void penaltyOnlyApproachesTheConstraint() {
        // ⟨1, z⟩ = D − ρD·λc/(1 + λc): the penalty never meets r = (1 − ρ)D exactly; it gets
        // there as λ → ∞, and z → 1 (nothing pruned by the score) as λ → 0.
        const Problem p = randomProblem(32, 5);
        const NumericalSolve s = solveNumericalScore(p.A);
        const double rho = 0.4, d = 32;
        for (double lambda : {1e-6, 1.0, 1e6}) {
            const double sum = numericalScoreClosedForm(s, rho, lambda).sum().item<double>();
            const double expected = d - rho * d * lambda * s.c / (1 + lambda * s.c);
            QVERIFY(std::abs(sum - expected) < 1e-9 * d);
        }
        QVERIFY(std::abs(numericalScoreClosedForm(s, rho, 1e9).sum().item<double>() - (1 - rho) * d) < 1e-4);
        QVERIFY((numericalScoreClosedForm(s, rho, 1e-9) - 1).abs().max().item<double>() < 1e-6);
    }

    void degenerateEq7NeverPrunesHeads() {
        // reference.md §1: eq. 7 read literally, with α = 4·D_h/3 ≫ 1 and head scores near
        // 1 − ρ or above, ranks every head above every channel: the paper reading removes
        // only channels, for any λ and ρ. (Measured on stories260K: 0 of 40 heads.)
        const int64_t headDim = 8, heads = 4, inter = 48, layers = 2;
        const double alpha = 4.0 * headDim / 3;
        for (double lambda : {1e-3, 1.0, 1e3})
            for (double rho : {0.1, 0.3, 0.5}) {
                std::vector<LayerScores> scores;
                for (int64_t l = 0; l < layers; ++l) {
                    const NumericalSolve attention = solveNumericalScore(randomProblem(heads * headDim, 10 + l).A);
                    const NumericalSolve mlp = solveNumericalScore(randomProblem(inter, 20 + l).A);
                    scores.push_back(numericalLayerScores(attention, mlp, headDim, rho, lambda));
                }
                const SelectionResult r = selectGlobal(scores, std::vector<LayerUnitCost>(layers, {4 * headDim * 32, 3 * 32}),
                                                       rho, alpha, AlphaMode::Paper);
                QCOMPARE(r.removedHeads, int64_t(0));
                QCOMPARE(r.removedChannels, std::llround(rho * double(layers * (heads + inter))));
            }
    }

    void deadChannelNeedsJitterAndRanksLast() {
        // A channel that never fires (a zero row and column of G) makes A singular: the solve
        // adds a tiny relative jitter, says so, and that channel gets by far the lowest score.
        Problem p = randomProblem(16, 9);
        p.gram.select(0, 5).zero_();
        p.gram.select(1, 5).zero_();
        const NumericalSolve s = solveNumericalScore(numericalScoreMatrix(p.weight, p.gram));
        QVERIFY(s.jitter > 0);
        QVERIFY(s.jitter < 1e-6 * p.A.diagonal().mean().item<double>());
        const at::Tensor z = numericalScoreClosedForm(s, 0.3, 1.0);
        QVERIFY(at::isfinite(z).all().item<bool>());
        QCOMPARE(at::argmin(z).item<int64_t>(), int64_t(5));
        // An all-zero A (a layer whose weight is zero): all channels equal, z = 1 − ρ·λD/(1e-12 + λD).
        const NumericalSolve zero = solveNumericalScore(at::zeros({4, 4}, at::kDouble));
        QVERIFY(zero.jitter > 0);
        QVERIFY((numericalScoreClosedForm(zero, 0.25, 1.0) - 0.75).abs().max().item<double>() < 1e-9);
    }

    void boxedEqualsBruteForceBoundedQp_data() {
        QTest::addColumn<double>("rho");
        QTest::addColumn<double>("lambda");
        QTest::addColumn<int>("seed");
        QTest::addColumn<int>("kind");  // 0: randomProblem's A, 1: correlatedA
        // Large λ with a big ρ pushes some z below 0; correlated inputs push some above 1.
        QTest::newRow("rho .3 lambda 1e-3") << 0.3 << 1e-3 << 1 << 0;
        QTest::newRow("rho .5 lambda 1") << 0.5 << 1.0 << 2 << 0;
        QTest::newRow("rho .7 lambda 100") << 0.7 << 100.0 << 3 << 0;
        QTest::newRow("rho .9 lambda 10") << 0.9 << 10.0 << 4 << 0;
        QTest::newRow("rho .2 lambda 1e3") << 0.2 << 1e3 << 5 << 0;
        QTest::newRow("correlated rho .3 lambda 1") << 0.3 << 1.0 << 6 << 1;
        QTest::newRow("correlated rho .6 lambda 100") << 0.6 << 100.0 << 7 << 1;
        QTest::newRow("correlated rho .5 lambda 1e-2") << 0.5 << 1e-2 << 8 << 1;
    }
    void boxedEqualsBruteForceBoundedQp() {
        QFETCH(double, rho);
        QFETCH(double, lambda);
        QFETCH(int, seed);
        QFETCH(int, kind);
        const Problem p{at::Tensor(), at::Tensor(), boxCaseA(kind, 8, uint64_t(seed))};
        const BoxedNumericalScore boxed = numericalScoreBoxed(p.A, rho, lambda);
        const at::Tensor reference = bruteForceBoxed(p.A, rho, lambda);
        QVERIFY(reference.defined());
        const double deviation = (boxed.z - reference).abs().max().item<double>();
        QVERIFY2(deviation < 1e-8, qPrintable(QString("max |z - z_bruteforce| = %1").arg(deviation)));
        QVERIFY((boxed.z >= 0).all().item<bool>() && (boxed.z <= 1).all().item<bool>());
        QVERIFY(boxed.kktViolation < 1e-9);
        // Bounds that bind are reported; where none binds the box changes nothing.
        const at::Tensor free = numericalScoreClosedForm(solveNumericalScore(p.A), rho, lambda);
        const bool outside = (free < 0).any().item<bool>() || (free > 1).any().item<bool>();
        QCOMPARE(boxed.atZero + boxed.atOne > 0, outside);
        if (!outside) QVERIFY((boxed.z - free).abs().max().item<double>() < 1e-10);
    }

    void boxedBindsInTheCasesAbove() {
        // Not a vacuous comparison: the rows above include a case on each bound.
        bool zero = false, one = false;
        const double cases[][4] = {{0.3, 1e-3, 1, 0}, {0.5, 1.0, 2, 0},   {0.7, 100.0, 3, 0}, {0.9, 10.0, 4, 0},
                                   {0.2, 1e3, 5, 0},  {0.3, 1.0, 6, 1},   {0.6, 100.0, 7, 1}, {0.5, 1e-2, 8, 1}};
        for (const auto& c : cases) {
            const BoxedNumericalScore b = numericalScoreBoxed(boxCaseA(int(c[3]), 8, uint64_t(c[2])), c[0], c[1]);
            zero = zero || b.atZero > 0;
            one = one || b.atOne > 0;
        }
        QVERIFY(zero);
        QVERIFY(one);
    }

    void boxedSatisfiesKktAtRealisticSize() {
        // D = 200 (3^D is out of reach): the optimality conditions checked here, independently
        // of the solver's own residual: ∇f = A(z − 1) + λ(1ᵀz − r)·1 vanishes on free channels,
        // is ≥ 0 where z = 0 and ≤ 0 where z = 1.
        const Problem p = randomProblem(200, 11);
        for (double lambda : {1e-3, 1.0, 1e3}) {
            const double rho = 0.6;
            const BoxedNumericalScore boxed = numericalScoreBoxed(p.A, rho, lambda);
            const at::Tensor& z = boxed.z;
            const at::Tensor g = at::mv(p.A, z - 1) + lambda * (z.sum().item<double>() - (1 - rho) * 200);
            const double scale = std::max(p.A.diagonal().abs().max().item<double>(), lambda * 200);
            const at::Tensor freeMask = (z > 1e-12) & (z < 1 - 1e-12);
            const double freeResidual = (g * freeMask).abs().max().item<double>() / scale;
            const double lowerResidual = at::relu(-g * (z <= 1e-12)).max().item<double>() / scale;
            const double upperResidual = at::relu(g * (z >= 1 - 1e-12)).max().item<double>() / scale;
            QVERIFY2(freeResidual < 1e-9 && lowerResidual < 1e-9 && upperResidual < 1e-9,
                     qPrintable(QString("λ %1: residuals %2 %3 %4").arg(lambda).arg(freeResidual).arg(lowerResidual).arg(upperResidual)));
            // The box never does worse than clamping the unconstrained minimiser.
            const at::Tensor clamped = numericalScoreClosedForm(solveNumericalScore(p.A), rho, lambda).clamp(0, 1);
            QVERIFY(objective(p.A, z, rho, lambda) <= objective(p.A, clamped, rho, lambda) * (1 + 1e-12));
        }
    }

    void invalidArgumentsThrow() {
        const Problem p = randomProblem(8, 1);
        const NumericalSolve s = solveNumericalScore(p.A);
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreClosedForm(s, -0.1, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreClosedForm(s, 1.1, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreClosedForm(s, 0.5, 0.0));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreNewton(p.A, 4, 1.0, 0, at::zeros({8}, at::kDouble), true));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreNewton(p.A, 4, 1.0, 5, at::zeros({7}, at::kDouble), true));
        at::Tensor bad = p.A.clone();
        bad[0][0] = std::nan("");
        QVERIFY_THROWS_EXCEPTION(Error, solveNumericalScore(bad));
        QVERIFY_THROWS_EXCEPTION(Error, solveNumericalScore(at::zeros({3, 4}, at::kDouble)));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreBoxed(p.A, 1.5, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreBoxed(p.A, 0.5, 0.0));
        QVERIFY_THROWS_EXCEPTION(Error, numericalScoreBoxed(bad, 0.5, 1.0));
    }

    void headAndGroupScoresAreBlockMeans() {
        const at::Tensor z = at::arange(12, at::kDouble);  // 3 heads of D_h = 4, or groups of g = 3 heads of 2
        QCOMPARE(blockMeanScores(z, 4), (std::vector<double>{1.5, 5.5, 9.5}));
        QCOMPARE(blockMeanScores(z, 6), (std::vector<double>{2.5, 8.5}));
        QCOMPARE(blockSumScores(z, 6), (std::vector<double>{15.0, 51.0}));
        QVERIFY_THROWS_EXCEPTION(Error, blockMeanScores(z, 5));

        const NumericalSolve attention = solveNumericalScore(randomProblem(12, 2).A);
        const NumericalSolve mlp = solveNumericalScore(randomProblem(10, 3).A);
        const LayerScores s = numericalLayerScores(attention, mlp, 4, 0.3, 2.0);
        QCOMPARE(s.heads, blockMeanScores(numericalScoreClosedForm(attention, 0.3, 2.0), 4));
        QCOMPARE(s.channels, toDoubleVector(numericalScoreClosedForm(mlp, 0.3, 2.0)));
        QVERIFY(numericalLayerScores(NumericalSolve{}, mlp, 4, 0.3, 2.0).heads.empty());
    }
};

QTEST_GUILESS_MAIN(TestNumericalScore)
#include "tst_numerical_score.moc"
