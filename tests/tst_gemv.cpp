// npw's float32 matrix-vector kernel (core/models/gemv*.h, the decode path) against a float64
// product and against at::mv, over odd shapes (tails of 1–15 columns, 1–3 leftover rows), one
// and two vectors, one and two threads, non-contiguous operands, and the inputs it refuses; the
// tiled kernel for more vectors (LlamaGen's guided batches) in every tile shape; and the
// streaming-read kernel of the runtime benchmark's roofline.
#include "core/models/gemv.h"
#include "core/models/gemv_kernel.h"
#include "error_of.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <QtTest>

#include <cmath>
#include <tuple>

using namespace npw;

namespace {

// The rounding bound of a float32 dot product of n terms, whatever the summation order:
// |fl(Σ wx) − Σ wx| ≤ γ_n Σ|w||x| with γ_n ≈ n·2⁻²⁴ (Higham, Numerical Stability, §3.1), plus
// the rounding of the float32 products' operands being exact. An indexing mistake gives errors
// of the order of Σ|w||x| itself, far above it.
void checkAgainstFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& w, const char* what) {
    const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
    const at::Tensor exact = at::matmul(xd, wd.t());
    const at::Tensor scale = at::matmul(xd.abs(), wd.abs().t());
    const double gamma = double(w.size(1) + 2) * std::ldexp(1.0, -24);
    const at::Tensor excess = (y.to(at::kDouble) - exact).abs() - gamma * scale;
    QVERIFY2(excess.max().item<double>() <= 0, what);
}

at::Tensor portable(const at::Tensor& x, const at::Tensor& w) {
    at::Tensor y = at::empty({x.size(0), w.size(0)});
    gemvF32RowsPortable(w.data_ptr<float>(), w.size(1), w.size(1), x.data_ptr<float>(), x.size(1),
                        static_cast<int>(x.size(0)), y.data_ptr<float>(), w.size(0), 0, w.size(0));
    return y;
}

} // namespace

class TestGemv : public QObject {
    Q_OBJECT
private slots:
    void init() { at::set_num_threads(1); }

    void shapes_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("nvec");
        for (int nvec : {1, 2}) {
            for (auto [r, c] : std::vector<std::pair<int, int>>{
                     {1, 1}, {7, 13}, {4, 16}, {5, 17}, {3, 8}, {33, 31}, {768, 2048}, {2048, 768}, {11, 1}})
                QTest::newRow(qPrintable(QString("%1x%2, %3 vector(s)").arg(r).arg(c).arg(nvec))) << r << c << nvec;
        }
    }
    void shapes() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, nvec);
        at::manual_seed(rows * 1000 + cols + nvec);
        const at::Tensor w = at::randn({rows, cols}), x = at::randn({nvec, cols});
        QVERIFY(gemvF32Applies(x, w));
        const at::Tensor y = gemvF32(x, w);
        QCOMPARE(y.sizes().vec(), (std::vector<int64_t>{nvec, rows}));
        checkAgainstFloat64(y, x, w, "dispatched kernel vs float64");
        checkAgainstFloat64(portable(x, w), x, w, "portable kernel vs float64");
        // at::mv (OpenBLAS) sums in another order: both lie within the bound of the exact value,
        // so within twice the bound of each other.
        const at::Tensor mv = at::matmul(x, w.t());
        const at::Tensor scale = at::matmul(x.abs(), w.abs().t()).to(at::kDouble);
        const double gamma = 2.0 * double(cols + 2) * std::ldexp(1.0, -24);
        QVERIFY(((y - mv).abs().to(at::kDouble) - gamma * scale).max().item<double>() <= 0);
        // Rows split across two threads: each row is still one thread's sum in the same order.
        at::set_num_threads(2);
        QVERIFY(at::equal(gemvF32(x, w), y));
    }

    // Operands that are not contiguous rows are copied (the result is the product of what the
    // tensors hold); a row slice of a wider matrix is read in place.
    void nonContiguous() {
        at::manual_seed(3);
        const at::Tensor wt = at::randn({40, 24});          // w = wtᵀ: [24, 40], column-major
        const at::Tensor xs = at::randn({40, 2}).t();        // [2, 40], row stride 1
        const at::Tensor wide = at::randn({24, 56});
        const at::Tensor slice = wide.narrow(1, 8, 40);      // rows of 40 at a stride of 56
        QVERIFY(!xs.is_contiguous() && !slice.is_contiguous());
        checkAgainstFloat64(gemvF32(xs, wt.t()), xs, wt.t(), "transposed operands");
        checkAgainstFloat64(gemvF32(xs, slice), xs, slice, "row slice");
        QVERIFY(at::equal(gemvF32(xs, slice), gemvF32(xs.contiguous(), slice.contiguous())));
    }

    // Three or more vectors (LlamaGen's guided batches) go through the tiled kernel: every tile
    // shape (1–2 weight rows × 1–6 vectors, partial tiles at both edges) against float64, both
    // versions, and the dispatched product split across two threads equal to one thread's.
    void tiled_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("nvec");
        for (auto [r, c, n] : std::vector<std::tuple<int, int, int>>{
                 {1, 1, 3}, {7, 13, 3}, {5, 17, 4}, {33, 31, 5}, {9, 8, 7}, {3, 64, 13}, {64, 768, 8}, {768, 256, 32},
                 {11, 2048, 33}, {2, 9, 64}, {5, 100, 20}})
            QTest::newRow(qPrintable(QString("%1x%2, %3 vectors").arg(r).arg(c).arg(n))) << r << c << n;
    }
    void tiled() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, nvec);
        at::manual_seed(rows * 7919 + cols * 31 + nvec);
        const at::Tensor w = at::randn({rows, cols}), x = at::randn({nvec, cols});
        for (int R = 1; R <= 2; ++R)
            for (int V = 1; V <= 6; ++V)
                for (bool portableVersion : {false, true}) {
                    at::Tensor y = at::full({nvec, rows}, std::nanf(""));  // every output must be written
                    gemvF32RowsTiled(w.data_ptr<float>(), cols, cols, x.data_ptr<float>(), cols, nvec, y.data_ptr<float>(),
                                     rows, 0, rows, R, V, portableVersion);
                    checkAgainstFloat64(y, x, w, qPrintable(QString("tile %1x%2%3").arg(R).arg(V).arg(portableVersion ? " portable" : "")));
                }
        if (nvec <= gemvF32MaxRows() && (nvec <= 16 || cols >= 256)) {
            QVERIFY(gemvF32Applies(x, w));
            const at::Tensor y = gemvF32(x, w);
            checkAgainstFloat64(y, x, w, "dispatched tiled kernel vs float64");
            checkAgainstFloat64(portable(x, w), x, w, "portable tiled kernel vs float64");
            at::set_num_threads(2);
            QVERIFY(at::equal(gemvF32(x, w), y));
        } else {
            QVERIFY(!gemvF32Applies(x, w));  // GEMM's case
        }
    }

    // A batch of rows that is a strided view (rows of a wider activation) and a transposed weight.
    void tiledNonContiguous() {
        at::manual_seed(5);
        const int64_t n = std::min<int64_t>(6, gemvF32MaxRows());
        const at::Tensor wide = at::randn({n, 50});
        const at::Tensor xs = wide.narrow(1, 5, 40);        // rows of 40 at a stride of 50
        const at::Tensor wt = at::randn({40, 24});          // w = wtᵀ: column-major
        QVERIFY(!xs.is_contiguous() && !wt.t().is_contiguous());
        checkAgainstFloat64(gemvF32(xs, wt.t()), xs, wt.t(), "strided rows, transposed weight");
        QVERIFY(at::equal(gemvF32(xs, wt.t()), gemvF32(xs.contiguous(), wt.t().contiguous())));
    }

    void refused() {
        const at::Tensor w = at::randn({6, 5}), x = at::randn({1, 5});
        QVERIFY(!gemvF32Applies(x.to(at::kDouble), w));
        QVERIFY(!gemvF32Applies(x, w.to(at::kHalf)));
        QVERIFY(!gemvF32Applies(at::randn({gemvF32MaxRows() + 1, 5}), w));  // more rows: GEMM's case
        QVERIFY(gemvF32Applies(at::randn({16, 5}), w));
        QVERIFY(!gemvF32Applies(at::randn({17, 5}), w));  // narrow and more than 16 rows: GEMM's case
        QVERIFY(gemvF32Applies(at::randn({17, 256}), at::randn({3, 256})));
        QVERIFY(!gemvF32Applies(at::randn({1, 4}), w));  // width mismatch
        QVERIFY(!gemvF32Applies(x, w.clone().requires_grad_(true)));
        QVERIFY(!gemvF32Applies(x.view({5}), w));
        QVERIFY(test::errorOf([&] { gemvF32(at::randn({1, 4}), w); }).contains("expected x [rows, in]"));
    }

    // The roofline's read kernel: a sum of n floats against float64 (n covering the 64- and
    // 32-float main loops' tails).
    void streamSum() {
        for (int64_t n : {0, 1, 31, 63, 64, 65, 1000, 100003}) {
            at::manual_seed(n);
            const at::Tensor v = at::rand({n});
            const double exact = v.to(at::kDouble).sum().item<double>();
            const double bound = double(n + 2) * std::ldexp(1.0, -24) * exact;  // all terms ≥ 0
            QVERIFY2(std::abs(streamSumF32(v.data_ptr<float>(), n) - exact) <= bound + 1e-30, qPrintable(QString::number(n)));
        }
    }

    void isaIsNamed() {
        const QString isa = gemvF32Isa();
        QVERIFY(isa == "avx512f" || isa == "avx2+fma" || isa == "portable");
        setGemvIsaLimit(GemvIsaLimit::Avx2);
        QVERIFY(QString(gemvF32Isa()) != "avx512f");
        setGemvIsaLimit(GemvIsaLimit::Portable);
        QCOMPARE(QString(gemvF32Isa()), QString("portable"));
        setGemvIsaLimit(GemvIsaLimit::Best);
        QCOMPARE(QString(gemvF32Isa()), isa);
    }

    // Every version this machine has (the limit set process-wide: AVX-512 where the CPU has it,
    // AVX2, portable) against float64, on shapes whose widths cover the 64-column AVX-512 step's
    // tails, and the versions within twice the bound of each other (both within it of the exact
    // value; their reduction orders differ).
    void everyVersion_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("nvec");
        for (int nvec : {1, 2})
            for (auto [r, c] : std::vector<std::pair<int, int>>{{3, 15}, {5, 16}, {4, 63}, {6, 64}, {7, 65}, {9, 127},
                                                                {17, 200}, {64, 4096}})
                QTest::newRow(qPrintable(QString("%1x%2, %3 vector(s)").arg(r).arg(c).arg(nvec))) << r << c << nvec;
    }
    void everyVersion() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, nvec);
        at::manual_seed(rows * 613 + cols + nvec);
        const at::Tensor w = at::randn({rows, cols}), x = at::randn({nvec, cols});
        std::vector<at::Tensor> ys;
        for (GemvIsaLimit limit : {GemvIsaLimit::Best, GemvIsaLimit::Avx2, GemvIsaLimit::Portable}) {
            setGemvIsaLimit(limit);
            ys.push_back(gemvF32(x, w));
            checkAgainstFloat64(ys.back(), x, w, qPrintable(QString(gemvF32Isa()) + " vs float64"));
        }
        setGemvIsaLimit(GemvIsaLimit::Best);
        const at::Tensor scale = at::matmul(x.abs(), w.abs().t()).to(at::kDouble);
        const double gamma = 2.0 * double(cols + 2) * std::ldexp(1.0, -24);
        for (size_t i = 1; i < ys.size(); ++i)
            QVERIFY(((ys[0] - ys[i]).abs().to(at::kDouble) - gamma * scale).max().item<double>() <= 0);
    }
};

QTEST_GUILESS_MAIN(TestGemv)
#include "tst_gemv.moc"
