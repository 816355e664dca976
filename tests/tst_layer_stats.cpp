// Calibration statistics accumulated in chunks of any shape and dtype, against a brute-force
// float64 computation over all rows at once.
#include "core/prune/layer_stats.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QtTest>

using namespace npw;

namespace {

bool close(const at::Tensor& a, const at::Tensor& b, double rtol) {
    return (a - b).abs().max().item<double>() <= rtol * b.abs().max().item<double>();
}

} // namespace

class TestLayerStats : public QObject {
    Q_OBJECT
private slots:
    void chunksEqualBruteForce() {
        at::manual_seed(1);
        const int64_t d = 13;
        const auto f64 = at::TensorOptions().dtype(at::kDouble);
        // Chunks with different leading shapes and dtypes, as taps deliver them ([B, T, D] …).
        std::vector<at::Tensor> chunks = {at::randn({2, 5, d}, f64) * 3 + 1, at::randn({7, d}, f64),
                                          at::randn({1, 1, 3, d}, f64) - 2, at::randn({4, 6, d}).to(at::kFloat)};
        LayerStats s(d);
        std::vector<at::Tensor> rows;
        for (const at::Tensor& c : chunks) {
            s.accumulate(c);
            rows.push_back(c.reshape({-1, d}).to(at::kDouble));
        }
        const at::Tensor x = at::cat(rows);
        const int64_t n = x.size(0);
        QCOMPARE(s.tokens, n);
        QCOMPARE(s.channels(), d);
        QCOMPARE(s.gram.scalar_type(), at::kDouble);
        // accumulate updates the upper triangle only (symmetric rank-k updates); gramPerToken
        // symmetrises its copy, symmetriseGram the matrix itself, once.
        const at::Tensor xtx = at::matmul(x.t(), x);
        QVERIFY(s.gramIsTriangle());
        QVERIFY(close(at::triu(s.gram), at::triu(xtx), 1e-13));
        QVERIFY(close(s.gramPerToken(), xtx / double(n), 1e-13));
        s.symmetriseGram();
        QVERIFY(!s.gramIsTriangle());
        QVERIFY(at::equal(s.gram, s.gram.t()));
        QVERIFY(close(s.gram, xtx, 1e-13));
        QVERIFY(close(s.sum, x.sum(0), 1e-13));
        QVERIFY(close(s.sumSq, x.square().sum(0), 1e-13));
        QVERIFY(close(s.mean(), x.mean(0), 1e-13));
        QVERIFY(close(s.variance(), (x - x.mean(0)).square().mean(0), 1e-12));  // population variance
        QVERIFY(close(s.channelNorm(), x.norm(2, {0}), 1e-13));
    }

    void syrkGramAgainstFloat64BruteForce() {
        // Sizes around the symmetrise block (64) and BLAS's own blocking, float32 and bf16 inputs
        // (what taps deliver), many chunks: the rank-k updates against xᵀx summed in float64 at
        // once, to 1e-13 of its largest entry; then more tokens after a symmetrise.
        at::manual_seed(3);
        for (int64_t d : {1, 63, 64, 65, 130, 300}) {
            LayerStats s(d);
            std::vector<at::Tensor> rows;
            for (int chunk = 0; chunk < 5; ++chunk) {
                const at::Tensor c = at::randn({1 + 17 * chunk, d}).to(chunk % 2 ? at::kBFloat16 : at::kFloat);
                s.accumulate(c);
                rows.push_back(c.to(at::kDouble));
                if (chunk == 2) s.symmetriseGram();
            }
            const at::Tensor x = at::cat(rows);
            s.symmetriseGram();
            QVERIFY2(close(s.gram, at::matmul(x.t(), x), 1e-13), qPrintable(QString("D = %1").arg(d)));
        }
    }

    void oneCallWiderThanTheWideningBuffer() {
        // accumulate widens a call's rows to float64 in chunks of 16 MiB (at D = 2048: 1024 rows),
        // into a buffer its thread keeps: 2500 rows are three chunks, the last one short; then a
        // call with fewer rows reuses the buffer. Against xᵀx, Σx, Σx² in float64 at once.
        at::manual_seed(5);
        const int64_t d = 2048;
        LayerStats s(d);
        const at::Tensor big = at::randn({5, 500, d});  // [B, T, D] as taps deliver it, 2500 rows
        const at::Tensor small = at::randn({3, d}) + 0.5;
        s.accumulate(big);
        s.accumulate(small);
        const at::Tensor x = at::cat({big.reshape({-1, d}), small}).to(at::kDouble);
        QCOMPARE(s.tokens, int64_t(2503));
        s.symmetriseGram();
        QVERIFY(close(s.gram, at::matmul(x.t(), x), 1e-13));
        QVERIFY(close(s.sum, x.sum(0), 1e-12));
        QVERIFY(close(s.sumSq, x.square().sum(0), 1e-13));
    }

    void varianceSurvivesLargeOffsets() {
        // Activations with a mean far above their spread (outlier channels): float64 sums keep
        // the variance to better than 1e-8 where float32 would lose it entirely.
        at::manual_seed(2);
        const at::Tensor x = at::randn({4000, 3}, at::kDouble) + at::tensor({1e3, -5e2, 0.0}, at::kDouble);
        LayerStats s(3);
        for (int64_t i = 0; i < 4000; i += 500) s.accumulate(x.slice(0, i, i + 500));
        QVERIFY(close(s.variance(), (x - x.mean(0)).square().mean(0), 1e-8));
    }

    void errors() {
        LayerStats s(4);
        QVERIFY_THROWS_EXCEPTION(Error, s.accumulate(at::zeros({3, 5})));
        QVERIFY_THROWS_EXCEPTION(Error, s.gramPerToken());  // no tokens yet
        QVERIFY_THROWS_EXCEPTION(Error, s.variance());
        QVERIFY_THROWS_EXCEPTION(Error, LayerStats(0));
        LayerStats unsized;
        QVERIFY_THROWS_EXCEPTION(Error, unsized.accumulate(at::zeros({1, 4})));
    }
};

QTEST_GUILESS_MAIN(TestLayerStats)
#include "tst_layer_stats.moc"
