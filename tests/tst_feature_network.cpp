// Feature networks (core/eval/feature_network.h): a TorchScript module written by Debian's
// torch 1.13 (tests/fixtures/make_metrics_fixtures.py) must give PyTorch's outputs; malformed
// modules are refused by name; the classifier network and the image sources (tensor, PNG folder)
// feed extractFeatures, whose batching must not change the features.
#include "core/eval/feature_network.h"
#include "core/io/image_files.h"
#include "core/models/image_classifier.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <nlohmann/json.hpp>

using namespace npw;

namespace {

const std::string kData = std::string(NPW_TEST_DATA) + "/metrics/";

at::Tensor fromJson(const nlohmann::json& j) {
    if (!j.is_array()) return at::tensor(j.get<double>(), at::kFloat);
    if (!j.empty() && j[0].is_array()) {
        std::vector<at::Tensor> parts;
        for (const auto& r : j) parts.push_back(fromJson(r));
        return at::stack(parts);
    }
    return at::tensor(j.get<std::vector<float>>(), at::kFloat);
}

void expectError(const std::function<void()>& f, const QStringList& mustContain) {
    try {
        f();
    } catch (const Error& e) {
        for (const QString& s : mustContain)
            QVERIFY2(QString(e.what()).contains(s), qPrintable(QString("'%1' lacks '%2'").arg(e.what(), s)));
        return;
    }
    QFAIL("no npw::Error thrown");
}

ImageClassifier smallClassifier() {
    ImageClassifier m;
    m.config.imageSize = 8;
    m.config.conv1 = 3;
    m.config.conv2 = 9;
    m.config.hidden = 6;
    m.config.numClasses = 4;
    m.weights = initClassifierWeights(m.config, 3);
    return m;
}

} // namespace

class TestFeatureNetwork : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void torchScriptMatchesPyTorch() {
        std::ifstream in(kData + "tiny_features_expected.json");
        QVERIFY(in.good());
        const nlohmann::json expected = nlohmann::json::parse(in);
        auto net = loadFeatureNetwork(kData + "tiny_features.pt");
        QVERIFY(QString::fromStdString(net->identity()).startsWith("torchscript@"));
        NetworkFeatures f = net->forward(fromJson(expected["input"]));
        for (auto [got, name] : {std::pair{f.pooled, "pooled"}, {f.logits, "logits"}, {f.spatial, "spatial"}}) {
            at::Tensor want = fromJson(expected[name]);
            QCOMPARE(got.sizes(), want.sizes());
            const double err = (got - want).abs().max().item<double>();
            QVERIFY2(err < 1e-5, qPrintable(QString("%1: max error %2").arg(name).arg(err)));
        }
        QCOMPARE(f.spatial.sizes(), at::IntArrayRef({3, 8, 4, 4}));
    }

    void malformedModulesAreRefused() {
        auto single = loadFeatureNetwork(kData + "tiny_single_output.pt");
        expectError([&] { single->forward(at::rand({2, 3, 8, 8})); }, {"tiny_single_output.pt", "tuple of 3"});
        auto net = loadFeatureNetwork(kData + "tiny_features.pt");
        expectError([&] { net->forward(at::rand({2, 5, 8, 8})); }, {"tiny_features.pt", "[2, 5, 8, 8]"});
        expectError([&] { loadFeatureNetwork(kData + "frechet_reference.json"); },
                    {"frechet_reference.json", "torch.jit.save"});
        expectError([&] { loadFeatureNetwork(kData + "absent.pt"); }, {"absent.pt", "does not exist"});
    }

    void extractFeaturesIsIndependentOfBatching() {
        auto net = loadFeatureNetwork(kData + "tiny_features.pt");
        at::Generator gen = at::detail::createCPUGenerator(1);
        ImageSource src = imageSourceFromTensor(at::rand({7, 1, 8, 8}, gen), "random grey");
        FeatureSet whole = extractFeatures(*net, src, 100), batched = extractFeatures(*net, src, 3);
        QCOMPARE(whole.pooled.sizes(), at::IntArrayRef({7, 6}));
        QCOMPARE(whole.logits.sizes(), at::IntArrayRef({7, 4}));
        QCOMPARE(whole.spatial.sizes(), at::IntArrayRef({7, 7 * 4 * 4}));
        QVERIFY(at::allclose(whole.pooled, batched.pooled, 1e-5, 1e-6));
        QVERIFY(at::allclose(whole.spatial, batched.spatial, 1e-5, 1e-6));
    }

    void classifierNetworkFromFolder() {
        ImageClassifier m = smallClassifier();
        const std::string modelDir = dir_.filePath("clf").toStdString();
        saveImageClassifier(m, modelDir);
        auto net = loadFeatureNetwork(modelDir);
        QVERIFY(QString::fromStdString(net->identity()).startsWith("npw-image-classifier@"));
        at::Tensor x = at::rand({5, 3, 8, 8});
        NetworkFeatures f = net->forward(x);
        ClassifierOutputs direct = classifierForward(m.config, m.weights, x);
        QVERIFY(at::equal(f.logits, direct.logits));
        QCOMPARE(f.spatial.sizes(), at::IntArrayRef({5, 9, 2, 2}));
        // Another weight file, another identity (the cache key of reference statistics).
        ImageClassifier other = m;
        other.weights = initClassifierWeights(m.config, 4);
        saveImageClassifier(other, dir_.filePath("clf2").toStdString());
        QVERIFY(loadFeatureNetwork(dir_.filePath("clf2").toStdString())->identity() != net->identity());
    }

    void pngFolderSource() {
        const QString folder = dir_.filePath("pngs");
        QDir().mkpath(folder);
        at::Generator gen = at::detail::createCPUGenerator(2);
        at::Tensor images = at::rand({3, 3, 6, 5}, gen);
        for (int i = 0; i < 3; ++i)
            writePng(QString("%1/img%2.png").arg(folder).arg(i).toStdString(), images[i]);
        writePng((folder + "/grey.png").toStdString(), images[0].narrow(0, 0, 1));
        ImageSource src = imageSourceFromFolder(folder.toStdString());
        QCOMPARE(src.count, int64_t(4));
        at::Tensor back = src.read(1, 3);  // sorted: grey.png, img0, img1, img2
        QCOMPARE(back.sizes(), at::IntArrayRef({3, 3, 6, 5}));
        QVERIFY((back - images.narrow(0, 0, 3)).abs().max().item<double>() <= 0.5 / 255 + 1e-6);
        at::Tensor grey = src.read(0, 1)[0];
        QVERIFY(at::equal(grey[0], grey[2]));
        writePng((folder + "/zbig.png").toStdString(), at::rand({3, 7, 5}));
        ImageSource mixed = imageSourceFromFolder(folder.toStdString());
        expectError([&] { mixed.read(0, 5); }, {"zbig.png", "one size"});
        expectError([&] { imageSourceFromFolder(dir_.filePath("nothing").toStdString()); }, {"nothing"});
    }
};

QTEST_GUILESS_MAIN(TestFeatureNetwork)
#include "tst_feature_network.moc"
