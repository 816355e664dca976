// The image metrics (core/eval/image_metrics.h) against closed forms and independent
// references: Fréchet distances of Gaussians (diagonal, commuting, 2×2 non-commuting in
// closed form, larger non-commuting and rank-deficient cases from numpy's eigvals of Σ1Σ2),
// IS of uniform and one-hot posteriors and of random logits (numpy), precision/recall on
// constructed point sets and against a brute-force reference, reference-statistics files.
#include "core/eval/image_metrics.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace npw;

namespace {

at::Tensor fromJson(const nlohmann::json& j) {
    if (!j.is_array()) return at::tensor(j.get<double>(), at::kDouble);
    if (!j.empty() && j[0].is_array()) {
        std::vector<at::Tensor> rows;
        for (const auto& r : j) rows.push_back(fromJson(r));
        return at::stack(rows);
    }
    return at::tensor(j.get<std::vector<double>>(), at::kDouble);
}

nlohmann::json reference() {
    std::ifstream in(std::string(NPW_TEST_DATA) + "/metrics/frechet_reference.json");
    if (!in) qFatal("missing tests/data/metrics/frechet_reference.json (run tests/fixtures/make_metrics_fixtures.py)");
    return nlohmann::json::parse(in);
}

at::Tensor randomOrthogonal(int64_t d, at::Generator& gen) {
    return std::get<0>(at::linalg_qr(at::randn({d, d}, gen, at::kDouble)));
}

// Brute force, one pair at a time in plain doubles: the k-th smallest squared distance of
// each row to all rows of the same set (itself included, as distance 0).
std::vector<double> bruteRadii(const std::vector<std::vector<double>>& x, int k) {
    std::vector<double> radii;
    for (const auto& a : x) {
        std::vector<double> d;
        for (const auto& b : x) {
            double s = 0;
            for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
            d.push_back(s);
        }
        std::sort(d.begin(), d.end());
        radii.push_back(d[k]);
    }
    return radii;
}

// Fraction of `points` within the radius of at least one of `manifold`.
double bruteCoverage(const std::vector<std::vector<double>>& manifold, const std::vector<double>& radii,
                     const std::vector<std::vector<double>>& points) {
    int inside = 0;
    for (const auto& p : points) {
        bool in = false;
        for (size_t m = 0; m < manifold.size() && !in; ++m) {
            double s = 0;
            for (size_t i = 0; i < p.size(); ++i) s += (p[i] - manifold[m][i]) * (p[i] - manifold[m][i]);
            in = s <= radii[m];
        }
        inside += in;
    }
    return double(inside) / double(points.size());
}

std::vector<std::vector<double>> rows(const at::Tensor& t) {
    std::vector<std::vector<double>> out;
    at::Tensor d = t.to(at::kDouble).contiguous();
    for (int64_t i = 0; i < d.size(0); ++i)
        out.emplace_back(d[i].data_ptr<double>(), d[i].data_ptr<double>() + d.size(1));
    return out;
}

} // namespace

class TestImageMetrics : public QObject {
    Q_OBJECT

private slots:
    void frechetDiagonalAndCommuting_data() {
        QTest::addColumn<int>("dim");
        QTest::addColumn<bool>("rotate");
        QTest::newRow("diagonal 1") << 1 << false;
        QTest::newRow("diagonal 12") << 12 << false;
        QTest::newRow("commuting 12 (common eigenbasis)") << 12 << true;
        QTest::newRow("commuting 64 (common eigenbasis)") << 64 << true;
    }
    // Σ1 = Q diag(a) Qᵀ, Σ2 = Q diag(b) Qᵀ commute: FD = ‖Δμ‖² + Σ (√a − √b)².
    void frechetDiagonalAndCommuting() {
        QFETCH(int, dim);
        QFETCH(bool, rotate);
        at::Generator gen = at::detail::createCPUGenerator(dim * 31 + rotate);
        at::Tensor mu1 = at::randn({dim}, gen, at::kDouble), mu2 = at::randn({dim}, gen, at::kDouble);
        at::Tensor a = at::rand({dim}, gen, at::kDouble) * 3 + 0.01, b = at::rand({dim}, gen, at::kDouble) * 3 + 0.01;
        at::Tensor s1 = at::diag(a), s2 = at::diag(b);
        if (rotate) {
            at::Tensor q = randomOrthogonal(dim, gen);
            s1 = at::matmul(at::matmul(q, s1), q.t());
            s2 = at::matmul(at::matmul(q, s2), q.t());
        }
        const double expected =
            (mu1 - mu2).pow(2).sum().item<double>() + (a.sqrt() - b.sqrt()).pow(2).sum().item<double>();
        const double got = frechetDistance(mu1, s1, mu2, s2);
        QVERIFY2(std::abs(got - expected) <= 1e-9 * std::max(1.0, expected),
                 qPrintable(QString("got %1, closed form %2").arg(got, 0, 'g', 17).arg(expected, 0, 'g', 17)));
    }

    // 2×2, non-commuting: tr sqrt(M) = sqrt(tr M + 2 sqrt(det M)) for M = Σ1Σ2 (eigenvalues ≥ 0).
    void frechetTwoByTwoNonCommuting() {
        at::Tensor s1 = at::tensor({2.0, 0.7, 0.7, 1.0}, at::kDouble).view({2, 2});
        at::Tensor s2 = at::tensor({0.5, -0.3, -0.3, 1.5}, at::kDouble).view({2, 2});
        QVERIFY(at::matmul(s1, s2).sub(at::matmul(s2, s1)).abs().max().item<double>() > 0.1);
        at::Tensor mu1 = at::tensor({0.5, -1.0}, at::kDouble), mu2 = at::tensor({-0.25, 2.0}, at::kDouble);
        at::Tensor m = at::matmul(s1, s2);
        const double trSqrt = std::sqrt(m.trace().item<double>() + 2 * std::sqrt(at::det(m).item<double>()));
        const double expected = (mu1 - mu2).pow(2).sum().item<double>() + s1.trace().item<double>() +
                                s2.trace().item<double>() - 2 * trSqrt;
        QVERIFY(std::abs(frechetDistance(mu1, s1, mu2, s2) - expected) < 1e-12);
        // symmetric in its arguments
        QVERIFY(std::abs(frechetDistance(mu2, s2, mu1, s1) - expected) < 1e-12);
    }

    void frechetAgainstNumpy() {
        // Named: a range-for over reference()["frechet"] iterates a member of a temporary that is
        // destroyed before the loop body runs (AddressSanitizer: heap-use-after-free).
        const nlohmann::json cases = reference();
        for (const auto& c : cases["frechet"]) {
            const double expected = c["distance"].get<double>();
            const double got =
                frechetDistance(fromJson(c["mu1"]), fromJson(c["sigma1"]), fromJson(c["mu2"]), fromJson(c["sigma2"]));
            QVERIFY2(std::abs(got - expected) <= 1e-8 * std::max(1.0, std::abs(expected)),
                     qPrintable(QString::fromStdString(c["name"].get<std::string>()) +
                                QString(": got %1, numpy %2").arg(got, 0, 'g', 17).arg(expected, 0, 'g', 17)));
        }
    }

    void frechetOfIdenticalGaussiansIsZero() {
        at::Generator gen = at::detail::createCPUGenerator(5);
        at::Tensor f = at::randn({200, 30}, gen, at::kDouble);
        GaussianStats s = gaussianStats(f);
        QVERIFY(std::abs(frechetDistance(s, s)) < 1e-9);
        // rank-deficient (fewer samples than dimensions): still finite and zero
        GaussianStats thin = gaussianStats(f.narrow(0, 0, 10));
        const double d = frechetDistance(thin, thin);
        QVERIFY2(std::abs(d) < 1e-9, qPrintable(QString("FD %1").arg(d)));
    }

    void frechetRejectsMismatchedShapes() {
        at::Tensor mu = at::zeros({3}, at::kDouble), s = at::eye(3, at::kDouble);
        try {
            frechetDistance(mu, s, at::zeros({4}, at::kDouble), at::eye(4, at::kDouble));
            QFAIL("accepted means of different lengths");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("[3]") && QString(e.what()).contains("[4]"));
        }
        QVERIFY_THROWS_EXCEPTION(Error, frechetDistance(mu, at::eye(2, at::kDouble), mu, s));
        at::Tensor bad = s.clone();
        bad[0][0] = std::nan("");
        QVERIFY_THROWS_EXCEPTION(Error, frechetDistance(mu, bad, mu, s));
    }

    void gaussianFitAndFidAgainstNumpy() {
        auto f = reference()["features"];
        at::Tensor a = fromJson(f["a"]), b = fromJson(f["b"]);
        GaussianStats sa = gaussianStats(a), sb = gaussianStats(b);
        QVERIFY(at::allclose(sa.mean, fromJson(f["mean_a"]), 0, 1e-12));
        QVERIFY(at::allclose(sa.cov, fromJson(f["cov_a"]), 0, 1e-12));
        QCOMPARE(sa.count, int64_t(60));
        QVERIFY(std::abs(frechetDistance(sa, sb) - f["fid"].get<double>()) < 1e-9);
    }

    void inceptionScoreUniformIsOne() {
        InceptionScore s = inceptionScore(at::zeros({40, 10}), 4);
        QVERIFY(std::abs(s.mean - 1.0) < 1e-12);
        QVERIFY(s.std < 1e-12);
        QCOMPARE(s.splits, int64_t(4));
    }

    void inceptionScoreOfConfidentBalancedClassesIsK_data() {
        QTest::addColumn<int>("classes");
        QTest::addColumn<int>("splits");
        QTest::newRow("K=10, 1 split") << 10 << 1;
        QTest::newRow("K=10, 5 splits") << 10 << 5;
        QTest::newRow("K=3, 2 splits") << 3 << 2;
    }
    void inceptionScoreOfConfidentBalancedClassesIsK() {
        QFETCH(int, classes);
        QFETCH(int, splits);
        const int64_t n = int64_t(classes) * splits * 4;
        // Sample i is sure of class i mod K (logit 60 against 0: p ≈ 1 − (K−1)e⁻⁶⁰).
        at::Tensor logits = at::zeros({n, classes});
        for (int64_t i = 0; i < n; ++i) logits[i][i % classes] = 60.0;
        InceptionScore s = inceptionScore(logits, splits);
        QVERIFY2(std::abs(s.mean - classes) < 1e-9, qPrintable(QString("IS %1").arg(s.mean, 0, 'g', 17)));
        QVERIFY(s.std < 1e-9);
        // Extreme logits underflow p to exactly 0 for the other classes: still K, no NaN.
        InceptionScore hard = inceptionScore(logits * 100, splits);
        QVERIFY(std::abs(hard.mean - classes) < 1e-9);
        // All samples sure of the same class: IS = 1.
        at::Tensor same = at::zeros({n, classes});
        same.select(1, 0).fill_(60.0);
        QVERIFY(std::abs(inceptionScore(same, splits).mean - 1.0) < 1e-9);
    }

    void inceptionScoreAgainstNumpy() {
        auto r = reference()["inception"];
        InceptionScore s = inceptionScore(fromJson(r["logits"]), r["splits"].get<int>());
        QVERIFY(std::abs(s.mean - r["mean"].get<double>()) < 1e-12);
        QVERIFY(std::abs(s.std - r["std"].get<double>()) < 1e-12);
        QVERIFY_THROWS_EXCEPTION(Error, inceptionScore(at::zeros({3, 4}), 4));
        QVERIFY_THROWS_EXCEPTION(Error, inceptionScore(at::zeros({3}), 1));
    }

    void precisionRecallIdenticalSetsIsOne() {
        at::Generator gen = at::detail::createCPUGenerator(3);
        at::Tensor x = at::randn({300, 16}, gen);
        PrecisionRecall pr = precisionRecall(x, x.clone(), 3, 64);
        QCOMPARE(pr.precision, 1.0);
        QCOMPARE(pr.recall, 1.0);
    }

    void precisionRecallDisjointFarSetsIsZero() {
        at::Generator gen = at::detail::createCPUGenerator(4);
        at::Tensor a = at::randn({200, 8}, gen), b = at::randn({150, 8}, gen) + 1000.0;
        PrecisionRecall pr = precisionRecall(a, b, 3, 50);
        QCOMPARE(pr.precision, 0.0);
        QCOMPARE(pr.recall, 0.0);
    }

    // By hand, 1-D, k = 3. Reference 0..9: radius² 9 at the two ends, 4 elsewhere.
    // Samples −3.5 (3.5² = 12.25 > 9 from 0: out), 4.5 (in), 11.9 (2.9² = 8.41 ≤ 9 from 9: in),
    // 20 (out): precision 2/4. The samples' own radii (k = 3 of 4 points: their farthest
    // other sample, ≥ 15.4) cover every reference point: recall 1.
    void precisionRecallOnALine() {
        at::Tensor ref = at::arange(10, at::kDouble).unsqueeze(1);
        at::Tensor radii = manifoldRadii(ref, 3);
        std::vector<double> expectRadii = {9, 4, 4, 4, 4, 4, 4, 4, 4, 9};
        for (int i = 0; i < 10; ++i) QCOMPARE(radii[i].item<double>(), expectRadii[i]);
        at::Tensor samples = at::tensor({-3.5, 4.5, 11.9, 20.0}, at::kDouble).unsqueeze(1);
        PrecisionRecall pr = precisionRecall(ref, samples, 3, 3);
        QCOMPARE(pr.precision, 0.5);
        QCOMPARE(pr.recall, 1.0);
        // Roles swapped: precision and recall swap too.
        PrecisionRecall swapped = precisionRecall(samples, ref, 3, 3);
        QCOMPARE(swapped.precision, 1.0);
        QCOMPARE(swapped.recall, 0.5);
    }

    void precisionRecallAgainstBruteForce_data() {
        QTest::addColumn<int>("rowBatch");
        QTest::newRow("one block") << 4096;
        QTest::newRow("blocks of 7 (uneven)") << 7;
    }
    void precisionRecallAgainstBruteForce() {
        QFETCH(int, rowBatch);
        at::Generator gen = at::detail::createCPUGenerator(9);
        at::Tensor ref = at::randn({120, 5}, gen, at::kDouble);
        at::Tensor samples = at::randn({90, 5}, gen, at::kDouble) * 1.3 + 0.4;
        const auto r = rows(ref), s = rows(samples);
        const auto radiiR = bruteRadii(r, 3), radiiS = bruteRadii(s, 3);
        at::Tensor radii = manifoldRadii(ref, 3, rowBatch);
        for (size_t i = 0; i < radiiR.size(); ++i) QVERIFY(std::abs(radii[i].item<double>() - radiiR[i]) < 1e-9);
        const double precision = bruteCoverage(r, radiiR, s), recall = bruteCoverage(s, radiiS, r);
        QVERIFY2(precision > 0.2 && precision < 0.97 && recall > 0.2 && recall < 0.97,  // a non-trivial case
                 qPrintable(QString("precision %1 recall %2").arg(precision).arg(recall)));
        PrecisionRecall pr = precisionRecall(ref, samples, 3, rowBatch);
        QCOMPARE(pr.precision, precision);
        QCOMPARE(pr.recall, recall);
        // With the reference radii given (as cached statistics do): the same.
        PrecisionRecall cached = precisionRecall(ref, samples, 3, rowBatch, radii);
        QCOMPARE(cached.precision, precision);
        QVERIFY_THROWS_EXCEPTION(Error, manifoldRadii(ref.narrow(0, 0, 3), 3));
    }

    void sfidFeaturesTakeTheFirstSevenChannelsChannelLast() {
        at::Tensor spatial = at::arange(2 * 9 * 2 * 3, at::kFloat).view({2, 9, 2, 3});
        at::Tensor f = sfidFeatures(spatial);
        QCOMPARE(f.sizes(), at::IntArrayRef({2, 7 * 2 * 3}));
        // element (n, h, w, c) of the channel-last layout
        for (int64_t c = 0; c < 7; ++c)
            QCOMPARE(f[1][(1 * 3 + 2) * 7 + c].item<float>(), spatial[1][c][1][2].item<float>());
        QVERIFY_THROWS_EXCEPTION(Error, sfidFeatures(at::zeros({2, 6, 2, 2})));
    }

    // FID's bootstrap interval against numpy's (tests/fixtures/fid_bootstrap_numpy.py): the same
    // resamples (splitmix64 indices), each FID by another route (eigenvalues of the non-symmetric
    // product S1·S2), numpy.percentile's 5th and 95th less the resamples' bias; the interval holds
    // the FID of all the images.
    void fidBootstrapAgainstNumpy() {
        const nlohmann::json f = reference()["features"];
        const at::Tensor a = fromJson(f["a"]), b = fromJson(f["b"]);
        std::ifstream in(std::string(NPW_TEST_DATA) + "/metrics/fid_bootstrap_reference.json");
        QVERIFY2(in, "missing tests/data/metrics/fid_bootstrap_reference.json (run tests/fixtures/fid_bootstrap_numpy.py)");
        const nlohmann::json expected = nlohmann::json::parse(in);
        QCOMPARE(expected["cases"].size(), size_t(2));
        for (const nlohmann::json& c : expected["cases"]) {
            const FidInterval i = fidBootstrapInterval(a, gaussianStats(b), c["resamples"].get<int64_t>(), c["seed"].get<uint64_t>());
            QCOMPARE(i.resamples, c["resamples"].get<int64_t>());
            QVERIFY(std::abs(i.bias - c["bias"].get<double>()) < 1e-8);
            QVERIFY(i.low < f["fid"].get<double>() && f["fid"].get<double>() < i.high);
            QVERIFY2(std::abs(i.low - c["low"].get<double>()) < 1e-8 && std::abs(i.high - c["high"].get<double>()) < 1e-8,
                     qPrintable(QString("npw %1–%2, numpy %3–%4").arg(i.low, 0, 'g', 17).arg(i.high, 0, 'g', 17)
                                    .arg(c["low"].get<double>(), 0, 'g', 17).arg(c["high"].get<double>(), 0, 'g', 17)));
        }
        QVERIFY_THROWS_EXCEPTION(Error, fidBootstrapInterval(a, gaussianStats(b), 1));
        QVERIFY_THROWS_EXCEPTION(Error, fidBootstrapInterval(a.narrow(0, 0, 1), gaussianStats(b)));
    }

    // More images, a narrower interval: 16 times the images, about a quarter of the width (the
    // spread falls as 1/sqrt(N)); each holds the FID of its images.
    void fidBootstrapNarrowsWithMoreImages() {
        at::Generator gen = at::detail::createCPUGenerator(5);
        const GaussianStats reference = gaussianStats(at::randn({4000, 4}, gen, at::kDouble) + 0.5);
        const at::Tensor all = at::randn({1600, 4}, gen, at::kDouble);
        const FidInterval few = fidBootstrapInterval(all.narrow(0, 0, 100), reference);
        const FidInterval many = fidBootstrapInterval(all, reference);
        QVERIFY(few.low < few.high && many.low < many.high);
        const double fewWidth = few.high - few.low, manyWidth = many.high - many.low;
        QVERIFY2(manyWidth < 0.5 * fewWidth, qPrintable(QString("%1 vs %2").arg(manyWidth).arg(fewWidth)));
        for (const auto& [interval, n] : {std::pair{few, int64_t(100)}, {many, int64_t(1600)}}) {
            const double fid = frechetDistance(gaussianStats(all.narrow(0, 0, n)), reference);
            QVERIFY2(interval.low < fid && fid < interval.high,
                     qPrintable(QString("FID %1, interval %2–%3").arg(fid).arg(interval.low).arg(interval.high)));
        }
        // Fewer images than dimensions: resamples repeat images and read far higher; the interval
        // is still about FID itself (its bias taken out), and says how large that bias was.
        const at::Tensor wide = at::randn({40, 64}, gen, at::kDouble);
        const GaussianStats wideReference = gaussianStats(at::randn({2000, 64}, gen, at::kDouble) + 0.3);
        const FidInterval singular = fidBootstrapInterval(wide, wideReference);
        const double wideFid = frechetDistance(gaussianStats(wide), wideReference);
        QVERIFY2(singular.bias > 0.05 * wideFid, qPrintable(QString("bias %1 of FID %2").arg(singular.bias).arg(wideFid)));
        QVERIFY2(singular.low < wideFid && wideFid < singular.high,
                 qPrintable(QString("FID %1, interval %2–%3").arg(wideFid).arg(singular.low).arg(singular.high)));
    }

    void referenceStatsRoundTripAndMetrics() {
        at::Generator gen = at::detail::createCPUGenerator(12);
        FeatureSet ref{at::randn({400, 6}, gen), at::randn({400, 5}, gen), at::randn({400, 14}, gen)};
        ReferenceStats stats = makeReferenceStats(ref, {{"feature_network", "test-net"}, {"images", "random"}});
        QTemporaryDir dir;
        const std::string path = dir.filePath("ref.safetensors").toStdString();
        saveReferenceStats(stats, path);
        ReferenceStats back = loadReferenceStats(path);
        QCOMPARE(back.metadata.at("feature_network"), std::string("test-net"));
        QCOMPARE(back.metadata.at("count"), std::string("400"));
        QCOMPARE(back.k, int64_t(3));
        QVERIFY(at::equal(back.pooled.cov, stats.pooled.cov));
        QVERIFY(at::equal(back.radii, stats.radii));

        // Same distribution: small FID; shifted: FID ≈ ‖shift‖² larger, precision drops.
        FeatureSet same{at::randn({400, 6}, gen), at::randn({400, 5}, gen), at::randn({400, 14}, gen)};
        FeatureSet shifted{same.pooled + 2.0, same.logits, same.spatial + 1.0};
        ImageMetrics good = computeImageMetrics(back, same), bad = computeImageMetrics(back, shifted);
        QVERIFY(good.fid < 0.5 && good.sfid < 1.5);
        QVERIFY(std::abs(bad.fid - (good.fid + 6 * 4.0)) < 1.0);
        QVERIFY(good.precision > 0.8 && good.recall > 0.8);
        QVERIFY(bad.precision < 0.3);
        QCOMPARE(good.samples, int64_t(400));
        // 400 images of 6 features are more than FID's 4 per dimension: no bootstrap interval;
        // 20 are fewer: the interval, over 200 resamples, on either side of nothing in particular
        // but ordered and finite.
        QCOMPARE(good.fidResamples, int64_t(0));
        QVERIFY(std::isnan(good.fidLow) && std::isnan(good.fidHigh));
        FeatureSet few{same.pooled.narrow(0, 0, 20), same.logits.narrow(0, 0, 20), same.spatial.narrow(0, 0, 20)};
        const ImageMetrics small = computeImageMetrics(back, few);
        QCOMPARE(small.fidResamples, kFidBootstrapResamples);
        QVERIFY(std::isfinite(small.fidLow) && small.fidLow <= small.fidHigh);

        // Features of another network (another width) are refused, naming the reference's network.
        FeatureSet other{at::randn({50, 7}, gen), at::randn({50, 5}, gen), at::randn({50, 14}, gen)};
        try {
            computeImageMetrics(back, other);
            QFAIL("accepted features of another width");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("test-net"));
        }
        // A safetensors file that is not reference statistics: named in the error.
        const std::string plain = dir.filePath("plain.safetensors").toStdString();
        writeSafeTensors(plain, {{"x", at::zeros({2})}});
        try {
            loadReferenceStats(plain);
            QFAIL("accepted a file that is not reference statistics");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("plain.safetensors"));
        }
    }
};

QTEST_GUILESS_MAIN(TestImageMetrics)
#include "tst_image_metrics.moc"
