// The bundled image model demo:c2i as a user drives it from the command line (the npw binary of
// this build tree): its samples are recognisably the requested classes, it prunes, the pruned
// export generates, and the image sweep measures every model. The metrics' reference is a
// folder of 300 Fashion-MNIST test images (written here) so the suite stays quick; README's
// table uses all 10 000.
#include "core/data/fashion_mnist.h"
#include "core/io/image_png.h"
#include "core/models/llamagen.h"

#include <ATen/ATen.h>
#include <QCoreApplication>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <cmath>

using namespace npw;

class TestC2iDemo : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QVERIFY(dir_.isValid());
        reference_ = dir_.path() + "/reference";
        QDir().mkpath(reference_);
        const LabelledImages test = loadFashionMnist("test");
        for (int i = 0; i < 300; ++i)
            writePng((reference_ + QString("/%1.png").arg(i, 3, 10, QChar('0'))).toStdString(), test.images[i]);
    }

    void infoDescribesTheDemo() {
        const QJsonObject j = run({"info", "demo:c2i", "--json"});
        QCOMPARE(j["model_type"].toString(), QString("llamagen-c2i"));
        QCOMPARE(j["layers"].toInt(), 4);
        QCOMPARE(j["grid"].toInt(), 7);
        QCOMPARE(j["num_classes"].toInt(), 10);
        QCOMPARE(j["image_size"].toInt(), 28);
    }

    void samplesAreTheRequestedClasses() {
        // The demo classifier (92.7% on real test images) names the requested class of most
        // guided samples; README reports the same on 1 000 samples.
        const QJsonObject j = run({"metrics", "--model", "demo:c2i", "--n", "200", "--cfg", "2", "--seed", "0",
                                   "--reference", reference_, "--json"});
        QVERIFY2(j["class_accuracy"].toDouble() >= 0.8, qPrintable(QString::number(j["class_accuracy"].toDouble())));
        QCOMPARE(j["samples"].toInt(), 200);
        QVERIFY(std::isfinite(j["fid"].toDouble()) && j["fid"].toDouble() > 0);
        // 200 images of the demo classifier's 128-dimensional features: fewer than the 4 · 128
        // FID needs (README: 50 images read 121-137 against about 61 at 1,040), said so.
        QCOMPARE(j["feature_dims"].toInt(), 128);
        QCOMPARE(j["fid_min_samples"].toInt(), 512);
        QVERIFY2(j["fid_warning"].toString().contains("200 images is noise"), qPrintable(j["fid_warning"].toString()));
    }

    void prunesAndThePrunedModelGenerates() {
        const QString out = dir_.path() + "/pruned";
        const QJsonObject j = run({"prune", "demo:c2i", "--method", "numerical", "--ratio", "0.2", "--calib", "generated",
                                   "--per-class", "4", "--cfg", "2", "--out", out, "--json"});
        QVERIFY(j["achieved_ratio"].toDouble() >= 0.2);
        QCOMPARE(j["calibration"].toObject()["samples"].toInt(), 40);
        const QJsonObject g = run({"generate", out, "--class", "0,9", "--n", "2", "--cfg", "2", "--out",
                                   dir_.path() + "/pruned.png", "--json"});
        QCOMPARE(g["images"].toInt(), 4);
        QCOMPARE(g["image_size"].toInt(), 28);
    }

    void sweepMeasuresEveryModel() {
        QByteArray err;
        const QJsonObject j = run({"sweep", "demo:c2i", "--methods", "numerical,flap", "--ratios", "0.2", "--samples", "40",
                                   "--per-class", "2", "--cfg", "2", "--reference", reference_, "--json"},
                                  &err);
        // 40 images: every row says its FID is noise, and stderr says it once, before any number.
        QCOMPARE(QString::fromUtf8(err).count("warning: FID on 40 images is noise"), 1);
        QVERIFY2(err.contains("at least 512") && err.contains("singular"), err.constData());
        const QJsonArray rows = j["rows"].toArray();
        QCOMPARE(rows.size(), 3);
        QCOMPARE(rows[0].toObject()["method"].toString(), QString("dense"));
        for (int i = 0; i < 3; ++i) {
            const QJsonObject r = rows[i].toObject();
            QVERIFY(std::isfinite(r["fid"].toDouble()));
            QVERIFY(r["tokens_per_s"].toDouble() > 0);
            QCOMPARE(r["samples"].toInt(), 40);
            QVERIFY2(r["fid_warning"].toString().contains("needs at least 512"), qPrintable(r["fid_warning"].toString()));
            if (i > 0) {
                QVERIFY(r["achieved_ratio"].toDouble() >= 0.2);
                QVERIFY(r["parameters"].toInt() < rows[0].toObject()["parameters"].toInt());
            }
        }
    }

    void sweepMeasuresTheHeldOutTokenPerplexity() {
        // --token-ppl-only: no images generated (FID null), every row gets the held-out token
        // perplexity; pruning at ρ 0.5 costs likelihood (the default and FLAP alike: measured
        // 8.1 dense against 11.9 and 35 on 2,000 images, README).
        const QJsonObject j = run({"sweep", "demo:c2i", "--methods", "numerical,flap", "--ratios", "0.5", "--per-class",
                                   "2", "--cfg", "2", "--token-ppl", "300", "--token-ppl-only", "--reference", reference_,
                                   "--json"});
        const QJsonArray rows = j["rows"].toArray();
        QCOMPARE(rows.size(), 3);
        const double dense = rows[0].toObject()["token_ppl"].toDouble();
        QVERIFY2(std::isfinite(dense) && dense > 1 && dense < 512, qPrintable(QString::number(dense)));
        for (int i = 0; i < 3; ++i) {
            const QJsonObject r = rows[i].toObject();
            QVERIFY(r["fid"].isNull());
            if (i > 0) QVERIFY(r["token_ppl"].toDouble() > dense);
        }
        // Without --token-ppl the flag has nothing to measure.
        QProcess p;
        p.start(npw_, {"sweep", "demo:c2i", "--methods", "flap", "--ratios", "0.5", "--token-ppl-only"});
        QVERIFY(p.waitForFinished(600000));
        QCOMPARE(p.exitCode(), 1);
        QVERIFY(QString(p.readAllStandardError()).contains("--token-ppl N"));
    }

private:
    QJsonObject run(const QStringList& args, QByteArray* stderrOut = nullptr) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("NPW_CACHE_DIR", dir_.path() + "/cache");
        p.setProcessEnvironment(env);
        p.start(npw_, args);
        if (!p.waitForFinished(600000)) return {};
        const QByteArray err = p.readAllStandardError();
        if (stderrOut) *stderrOut = err;
        if (p.exitCode() != 0) qWarning("npw %s failed: %s", qPrintable(args.join(' ')), err.constData());
        return QJsonDocument::fromJson(p.readAllStandardOutput()).object();
    }

    QTemporaryDir dir_;
    QString npw_, reference_;
};

QTEST_GUILESS_MAIN(TestC2iDemo)
#include "tst_c2i_demo.moc"
