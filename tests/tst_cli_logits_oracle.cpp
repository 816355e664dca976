// The pruned export's logits against an independent forward pass: `npw generate --logits` writes
// the prompt's logits as a NumPy .npy file, and tests/fixtures/check_hf_logits_numpy.py (numpy
// alone, float64, one layer at a time, bfloat16 decoded by shifting bits) computes them from the
// exported shards. The model: demo:lm-gqa (grouped-query attention) re-saved in bfloat16 as three
// shards, pruned by the layer-by-layer road with the defaults (numerical score, Theorem 3's
// compensation), so the export is bfloat16, sharded, with per-layer head counts and widths.
// This is the check the 7B export gets (README, "Pruning a 7B"), here at a size CI runs.
// Tolerance: max|Δ| / max|logit| ≤ 1e-4 (npw computes in float32 on the same bfloat16 weights;
// measured 2.5e-7). The oracle must also refuse: the dense model's logits against the pruned
// export differ by far more than the tolerance, so a reference that passed everything would fail.
#include "core/models/model_loader.h"
#include "bf16_checkpoint_copy.h"
#include "cli_run.h"

#include <nlohmann/json.hpp>

#include <QCoreApplication>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>

using Json = nlohmann::json;
namespace fs = std::filesystem;
using namespace npw;

class TestCliLogitsOracle : public QObject {
    Q_OBJECT

    QString npw_, python_ = "/usr/bin/python3", oracle_;
    QTemporaryDir dir_;
    const QString ids_ = "1 450 1996 1063 278 1918 892 727 471";

    // Runs the oracle on `model` against `npy`; its JSON, and its exit code in *rc.
    Json oracle(const QString& model, const QString& npy, int* rc) {
        QProcess p;
        p.start(python_, {oracle_, model, "--ids", ids_, "--compare", npy, "--tol", "1e-4"});
        if (!p.waitForFinished(300000)) qFatal("the oracle did not finish");
        *rc = p.exitCode();
        const QByteArray out = p.readAllStandardOutput();
        if (out.isEmpty()) qFatal("the oracle printed nothing: %s", p.readAllStandardError().constData());
        return Json::parse(out.toStdString());
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        oracle_ = QStringLiteral(NPW_TEST_DATA "/../fixtures/check_hf_logits_numpy.py");
        QVERIFY(dir_.isValid());
        QProcess probe;
        probe.start(python_, {"-c", "import numpy"});
        if (!probe.waitForFinished(60000) || probe.exitCode() != 0) QSKIP("/usr/bin/python3 with python3-numpy is not installed");
    }

    void prunedBfloat16ExportAgreesWithNumpy() {
        // demo:lm-gqa in bfloat16, three shards.
        LlamaCheckpoint dense = loadLlamaCheckpoint("demo:lm-gqa");
        const std::string source = dir_.filePath("bf16-gqa").toStdString();
        npw::test::saveBf16Shards(dense, source);
        QVERIFY(fs::exists(source + "/model.safetensors.index.json"));

        const QString src = QString::fromStdString(source), out = dir_.filePath("pruned");
        const QString calib = QStringLiteral(NPW_TEST_DATA "/../../resources/demo/data/kjv-nt.txt");
        const npw::test::CliRun pruned = npw::test::runCli(
            npw_, {"prune", src, "--layerwise", "--ratio", "0.3", "--calib", calib, "--nsamples", "8", "--seqlen", "64",
                   "--out", out, "--json"});
        QVERIFY2(pruned.rc == 0, qPrintable(pruned.err));
        QVERIFY(pruned.json()["road"]["layerwise"].get<bool>());
        const LlamaCheckpoint back = loadLlamaCheckpoint(out.toStdString(), WeightStorage::Mapped);
        QCOMPARE(back.weights.layers[0].w_down.scalar_type(), at::kBFloat16);  // bfloat16 again

        const QString npy = dir_.filePath("pruned.npy"), denseNpy = dir_.filePath("dense.npy");
        for (const auto& [model, file] : {std::pair{out, npy}, std::pair{src, denseNpy}}) {
            const npw::test::CliRun g =
                npw::test::runCli(npw_, {"generate", model, "--prompt-ids", ids_, "--tokens", "1", "--logits", file});
            QVERIFY2(g.rc == 0, qPrintable(g.err));
        }
        int rc = -1;
        const Json agree = oracle(out, npy, &rc);
        qInfo("pruned export: max|Δ| / max|logit| = %.3g over %d tokens × %d (same argmax: %s)",
              agree["relative"].get<double>(), agree["tokens"].get<int>(), agree["vocab"].get<int>(),
              agree["same_argmax"].get<bool>() ? "yes" : "no");
        QCOMPARE(rc, 0);
        QVERIFY(agree["relative"].get<double>() <= 1e-4);
        QCOMPARE(agree["tokens"].get<int>(), 9);

        const Json differ = oracle(out, denseNpy, &rc);  // the dense model's logits are not the pruned one's
        QCOMPARE(rc, 1);
        QVERIFY(differ["relative"].get<double>() > 1e-2);
    }

    // The .npy is refused where it would overwrite a file of the model.
    void logitsFileIsGuarded() {
        const QString model = dir_.filePath("bf16-gqa");
        const npw::test::CliRun g = npw::test::runCli(
            npw_, {"generate", model, "--prompt-ids", "1 2", "--tokens", "1", "--logits", model + "/config.json"});
        QCOMPARE(g.rc, 1);
        QVERIFY2(g.err.contains("config.json"), qPrintable(g.err));
    }
};

QTEST_GUILESS_MAIN(TestCliLogitsOracle)
#include "tst_cli_logits_oracle.moc"
