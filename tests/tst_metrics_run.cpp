// The glue of `npw metrics` (core/eval/metrics_run.h): image sets by name, limits, degraded
// copies (blur keeps constants, noise is per image and independent of batching), and cached
// reference statistics (written once, read back identical, refused for another network).
#include "core/eval/metrics_run.h"
#include "core/io/image_files.h"
#include "core/models/image_classifier.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

using namespace npw;

namespace {

std::unique_ptr<FeatureNetwork> classifierNetwork(uint64_t seed) {
    ImageClassifier m;
    m.config.imageSize = 8;
    m.config.conv1 = 3;
    m.config.conv2 = 8;
    m.config.hidden = 5;
    m.config.numClasses = 4;
    m.weights = initClassifierWeights(m.config, seed);
    return makeClassifierFeatureNetwork(m, "test-classifier@" + std::to_string(seed));
}

} // namespace

class TestMetricsRun : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void limitAndDegrade() {
        at::Generator gen = at::detail::createCPUGenerator(1);
        ImageSource src = imageSourceFromTensor(at::rand({10, 1, 12, 12}, gen), "random");
        QCOMPARE(limitImages(src, 4).count, int64_t(4));
        QCOMPARE(limitImages(src, 0).count, int64_t(10));

        // Blur: a constant image stays constant (normalised kernel, replicated borders); a
        // single bright pixel spreads and keeps its total away from the border.
        ImageSource flat = imageSourceFromTensor(at::full({2, 3, 9, 9}, 0.3), "flat");
        QVERIFY(at::allclose(degradeImages(flat, "blur:1.5").read(0, 2), at::full({2, 3, 9, 9}, 0.3), 0, 1e-6));
        at::Tensor dot = at::zeros({1, 1, 15, 15});
        dot[0][0][7][7] = 1.0;
        at::Tensor blurred = degradeImages(imageSourceFromTensor(dot, "dot"), "blur:1").read(0, 1);
        QVERIFY(std::abs(blurred.sum().item<double>() - 1.0) < 1e-5);
        QVERIFY(blurred[0][0][7][7].item<float>() < 0.2f && blurred[0][0][7][8].item<float>() > 0.05f);

        // Noise: per image, so batches of 3 and one batch of 10 agree; clamped to [0,1].
        ImageSource noisy = degradeImages(src, "noise:0.2", 7);
        at::Tensor whole = noisy.read(0, 10);
        at::Tensor parts = at::cat({noisy.read(0, 3), noisy.read(3, 3), noisy.read(6, 4)});
        QVERIFY(at::equal(whole, parts));
        QVERIFY(whole.min().item<float>() >= 0 && whole.max().item<float>() <= 1);
        const double rms = (whole - src.read(0, 10)).pow(2).mean().sqrt().item<double>();
        QVERIFY2(rms > 0.12 && rms < 0.2, qPrintable(QString("noise rms %1").arg(rms)));
        QVERIFY(!at::equal(degradeImages(src, "noise:0.2", 8).read(0, 10), whole));
        QVERIFY(at::equal(degradeImages(src, "none").read(0, 10), src.read(0, 10)));
        QVERIFY_THROWS_EXCEPTION(Error, degradeImages(src, "jpeg:3"));
        QVERIFY_THROWS_EXCEPTION(Error, degradeImages(src, "blur:-1"));
    }

    void referenceIsCachedPerNetworkAndImages() {
        const QString images = dir_.filePath("ref");
        QDir().mkpath(images);
        at::Generator gen = at::detail::createCPUGenerator(2);
        for (int i = 0; i < 12; ++i)
            writePng(QString("%1/%2.png").arg(images).arg(i, 2, 10, QChar('0')).toStdString(), at::rand({1, 8, 8}, gen));
        const std::string cache = dir_.filePath("cache").toStdString();
        auto net = classifierNetwork(1);
        ResolvedReference first = resolveReference(images.toStdString(), *net, cache, 5);
        QVERIFY(!first.fromCache);
        QVERIFY(std::filesystem::exists(first.cachePath));
        QCOMPARE(first.stats.features.size(0), int64_t(12));
        QCOMPARE(first.stats.metadata.at("feature_network"), std::string("test-classifier@1"));
        ResolvedReference second = resolveReference(images.toStdString(), *net, cache, 5);
        QVERIFY(second.fromCache);
        QCOMPARE(second.cachePath, first.cachePath);
        QVERIFY(at::equal(second.stats.pooled.cov, first.stats.pooled.cov));
        QVERIFY(at::equal(second.stats.radii, first.stats.radii));

        // A damaged cache entry is recomputed, not fatal.
        {
            QFile damaged(QString::fromStdString(first.cachePath));
            QVERIFY(damaged.open(QIODevice::WriteOnly));
            damaged.write("not safetensors");
        }
        ResolvedReference again = resolveReference(images.toStdString(), *net, cache, 5);
        QVERIFY(!again.fromCache);
        QVERIFY(at::equal(again.stats.radii, first.stats.radii));
        QVERIFY(resolveReference(images.toStdString(), *net, cache, 5).fromCache);

        // Another network: another cache entry, never the first one's statistics.
        auto other = classifierNetwork(2);
        ResolvedReference third = resolveReference(images.toStdString(), *other, cache, 5);
        QVERIFY(!third.fromCache && third.cachePath != first.cachePath);
        // A statistics file given directly must match the network.
        QVERIFY(resolveReference(first.cachePath, *net, "").fromCache);
        try {
            resolveReference(first.cachePath, *other, "");
            QFAIL("accepted statistics of another feature network");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("test-classifier@1") && QString(e.what()).contains("test-classifier@2"));
        }
        // Changed images: a new key.
        writePng((images + "/12.png").toStdString(), at::rand({1, 8, 8}, gen));
        QVERIFY(!resolveReference(images.toStdString(), *net, cache, 5).fromCache);
        // No cache dir: nothing written.
        QVERIFY(resolveReference(images.toStdString(), *net, "", 5).cachePath.empty());
        QVERIFY_THROWS_EXCEPTION(Error, imageSourceFromSpec(dir_.filePath("missing").toStdString()));
    }
};

QTEST_GUILESS_MAIN(TestMetricsRun)
#include "tst_metrics_run.moc"
