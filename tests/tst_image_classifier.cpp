// The demo feature classifier and its trainer: forward shapes and input handling, save/load
// with shape checks, a training run that learns, determinism from the seed, and checkpoint +
// resume = one uninterrupted run (bit for bit). The bundled classifier, when present, must
// reach 88% on the Fashion-MNIST test set.
#include "core/data/fashion_mnist.h"
#include "core/io/safetensors.h"
#include "core/models/image_classifier.h"
#include "core/train/classifier_trainer.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace npw;

namespace {

ImageClassifierConfig tinyConfig() {
    ImageClassifierConfig c;
    c.imageSize = 8;
    c.conv1 = 4;
    c.conv2 = 6;
    c.hidden = 12;
    c.numClasses = 3;
    return c;
}

// Three classes of 8×8 images: a bright left half, a bright top half, a bright centre; noisy.
std::pair<at::Tensor, at::Tensor> synthetic(int64_t n, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    at::Tensor x = at::rand({n, 1, 8, 8}, gen) * 0.4;
    at::Tensor y = at::arange(n, at::kLong).remainder(3);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t c = y[i].item<int64_t>();
        if (c == 0) x[i].narrow(2, 0, 4).add_(0.6);
        if (c == 1) x[i].narrow(1, 0, 4).add_(0.6);
        if (c == 2) x[i].narrow(1, 2, 4).narrow(2, 2, 4).add_(0.6);
    }
    return {x, y};
}

ClassifierTrainOptions tinyOptions() {
    ClassifierTrainOptions o;
    o.config = tinyConfig();
    o.epochs = 3;
    o.batchSize = 16;
    o.warmupSteps = 2;
    o.learningRate = 1e-2;
    o.seed = 5;
    return o;
}

at::Tensor fromJson(const nlohmann::json& j) {
    if (!j.empty() && j[0].is_array()) {
        std::vector<at::Tensor> parts;
        for (const auto& r : j) parts.push_back(fromJson(r));
        return at::stack(parts);
    }
    return at::tensor(j.get<std::vector<float>>(), at::kFloat);
}

bool sameWeights(ImageClassifierWeights a, ImageClassifierWeights b) {
    auto na = a.named(), nb = b.named();
    for (size_t i = 0; i < na.size(); ++i)
        if (!at::equal(*na[i].second, *nb[i].second)) return false;
    return true;
}

} // namespace

class TestImageClassifier : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void forwardShapesAndInputs() {
        ImageClassifierConfig c;  // the demo's shape: 28×28, 32/64 channels, 128 hidden, 10 classes
        ImageClassifierWeights w = initClassifierWeights(c, 1);
        at::Tensor grey = at::rand({4, 1, 28, 28});
        ClassifierOutputs o = classifierForward(c, w, grey);
        QCOMPARE(o.pooled.sizes(), at::IntArrayRef({4, 128}));
        QCOMPARE(o.logits.sizes(), at::IntArrayRef({4, 10}));
        QCOMPARE(o.spatial.sizes(), at::IntArrayRef({4, 64, 7, 7}));
        QVERIFY(o.pooled.min().item<float>() >= 0);  // after ReLU
        // RGB with equal channels is the grey image.
        QVERIFY(at::allclose(classifierForward(c, w, grey.expand({-1, 3, -1, -1})).logits, o.logits, 1e-5, 1e-6));
        // Other sizes are resized: a 56×56 upsampling of the image gives nearly the same logits.
        at::Tensor big = at::upsample_nearest2d(grey, {56, 56});
        QCOMPARE(classifierForward(c, w, big).logits.sizes(), at::IntArrayRef({4, 10}));
        QVERIFY_THROWS_EXCEPTION(Error, classifierForward(c, w, at::rand({4, 2, 28, 28})));
    }

    // The architecture against plain PyTorch modules (nn.Conv2d, max_pool2d, flatten, nn.Linear)
    // whose weights tests/fixtures/make_metrics_fixtures.py wrote as a classifier folder.
    void matchesPyTorchReference() {
        const std::string data = std::string(NPW_TEST_DATA) + "/metrics/";
        std::ifstream in(data + "classifier_expected.json");
        QVERIFY(in.good());
        const nlohmann::json expected = nlohmann::json::parse(in);
        ImageClassifier m = loadImageClassifier(data + "classifier");
        ClassifierOutputs o = classifierForward(m.config, m.weights, fromJson(expected["input"]));
        for (auto [got, name] : {std::pair{o.pooled, "pooled"}, {o.logits, "logits"}, {o.spatial, "spatial"}}) {
            at::Tensor want = fromJson(expected[name]);
            QCOMPARE(got.sizes(), want.sizes());
            const double err = (got - want).abs().max().item<double>();
            QVERIFY2(err < 1e-5, qPrintable(QString("%1: max error %2").arg(name).arg(err)));
        }
    }

    void saveLoadAndShapeChecks() {
        ImageClassifier m;
        m.config = tinyConfig();
        m.config.classNames = {"a", "b", "c"};
        m.weights = initClassifierWeights(m.config, 2);
        const std::string d = dir_.filePath("model").toStdString();
        saveImageClassifier(m, d, R"({"note":"test"})");
        ImageClassifier back = loadImageClassifier(d);
        QCOMPARE(back.config.classNames, m.config.classNames);
        QVERIFY(sameWeights(back.weights, m.weights));
        // Wrong shape: the tensor and both shapes are named.
        ImageClassifier wrong = m;
        wrong.weights.fc1W = at::zeros({12, 5});
        const std::string bad = dir_.filePath("bad").toStdString();
        saveImageClassifier(wrong, bad);
        try {
            loadImageClassifier(bad);
            QFAIL("accepted a wrong shape");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("fc1.weight") && QString(e.what()).contains("[12, 5]") &&
                    QString(e.what()).contains("[12, 24]"));
        }
        QVERIFY_THROWS_EXCEPTION(Error, loadImageClassifier(dir_.filePath("absent").toStdString()));
    }

    void trainingLearnsAndIsDeterministic() {
        auto [x, y] = synthetic(96, 1);
        ClassifierTrainStatus s1, s2, s3;
        ClassifierTrainOptions o = tinyOptions();
        o.epochs = 6;
        ImageClassifier m{o.config, trainClassifier(x, y, o, s1)};
        QVERIFY(s1.finished);
        QCOMPARE(s1.steps, int64_t(36));
        auto [tx, ty] = synthetic(60, 2);
        const double acc = classifierAccuracy(m, tx, ty);
        QVERIFY2(acc >= 0.9, qPrintable(QString("held-out accuracy %1").arg(acc)));
        QVERIFY(sameWeights(trainClassifier(x, y, o, s2), m.weights));
        o.seed = 6;
        QVERIFY(!sameWeights(trainClassifier(x, y, o, s3), m.weights));
    }

    // Cancelled at step 7 (last checkpoint at 5), resumed: the same weights as one run.
    void checkpointAndResumeEqualsUninterrupted() {
        auto [x, y] = synthetic(64, 3);
        ClassifierTrainOptions o = tinyOptions();
        ClassifierTrainStatus whole;
        ImageClassifierWeights reference = trainClassifier(x, y, o, whole);
        o.checkpointPath = dir_.filePath("ck.safetensors").toStdString();
        o.checkpointEvery = 5;
        ClassifierTrainStatus first;
        QVERIFY_THROWS_EXCEPTION(Cancelled, trainClassifier(x, y, o, first, [](const Progress& p) {
                                     return p.done < 7;
                                 }));
        QCOMPARE(SafeTensorsFile::open(o.checkpointPath)->metadata().at("step"), std::string("5"));
        ClassifierTrainStatus second;
        ImageClassifierWeights resumed = trainClassifier(x, y, o, second);
        QVERIFY(second.finished);
        QVERIFY(sameWeights(resumed, reference));
        // Another run's options are refused against this checkpoint.
        ClassifierTrainOptions other = o;
        other.learningRate = 3e-2;
        ClassifierTrainStatus s;
        try {
            trainClassifier(x, y, other, s);
            QFAIL("resumed another run's checkpoint");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("ck.safetensors"));
        }
    }

    void bundledClassifierAccuracy() {
        const std::string dir = resourcesDir() + "/demo/classifier";
        if (!std::filesystem::exists(dir + "/model.safetensors")) QSKIP("resources/demo/classifier is not there");
        if (!std::filesystem::exists(fashionMnistDir() + "/t10k-images-idx3-ubyte.gz"))
            QSKIP("dataset-fashion-mnist is not installed");
        ImageClassifier m = loadImageClassifier(dir);
        LabelledImages test = loadFashionMnist("test");
        const double acc = classifierAccuracy(m, test.images, test.labels);
        qInfo("bundled classifier: test accuracy %.4f", acc);
        QVERIFY2(acc >= 0.88, qPrintable(QString("test accuracy %1").arg(acc)));
    }
};

QTEST_GUILESS_MAIN(TestImageClassifier)
#include "tst_image_classifier.moc"
