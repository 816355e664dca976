// `npw eval` chooses layer-wise evaluation by itself when the model exceeds half of the
// (pretended, NPW_PHYSICAL_MEMORY_BYTES) physical memory and says so on stderr; --layerwise forces
// it; the JSON says which path ran and its tokens/s. Both paths give the same perplexity (1e-6
// relative; tst_layerwise_perplexity holds the core to it on more models), and the same as the
// eager PyTorch reference script. Bad input: a truncated safetensors file, --reference with
// layer-wise evaluation, a malformed memory size.
#include "core/io/safetensors.h"
#include "core/util/paths.h"
#include "cli_run.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Run = npw::test::CliRun;

} // namespace

class TestCliEvalLayerwise : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;
    QString ids_;

    Run run(const QStringList& args, const QString& physicalBytes = {}) {
        return npw::test::runCli(npw_, args, npw::test::withPhysicalMemory(physicalBytes));
    }

    QStringList evalArgs(const QString& model = "demo:lm") const {
        return {"eval", model, "--ids", ids_, "--seqlen", "32", "--max-windows", "5", "--batch", "2", "--json"};
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QVERIFY(dir_.isValid());
        ids_ = dir_.filePath("ids.txt");
        std::ofstream out(ids_.toStdString());
        std::mt19937_64 rng(4);
        for (int i = 0; i < 200; ++i) out << rng() % 200 << ' ';  // demo:lm's vocabulary is larger
    }

    void choosesLayerwiseWhenTheModelExceedsHalfTheMemory() {
        const Run whole = run(evalArgs());
        QVERIFY2(whole.rc == 0, qPrintable(whole.err));
        QCOMPARE(whole.json()["path"].get<std::string>(), std::string("whole-model"));
        QVERIFY(!whole.err.contains("layer by layer"));
        // demo:lm holds ~2.8M float32 parameters (11 MB): a pretended 16 MB machine is too small.
        const Run small = run(evalArgs(), "16000000");
        QVERIFY2(small.rc == 0, qPrintable(small.err));
        QCOMPARE(small.json()["path"].get<std::string>(), std::string("layerwise"));
        QVERIFY2(small.err.contains("layer by layer") && small.err.contains("NPW_PHYSICAL_MEMORY_BYTES"), qPrintable(small.err));
        const double a = whole.json()["ppl"].get<double>(), b = small.json()["ppl"].get<double>();
        QVERIFY2(std::abs(a - b) <= 1e-6 * a, qPrintable(QString("%1 vs %2").arg(a, 0, 'g', 17).arg(b, 0, 'g', 17)));
        QCOMPARE(small.json()["windows"].get<int64_t>(), int64_t(5));
        for (const Run* r : {&whole, &small}) {
            QVERIFY(r->json()["tokens_per_second"].get<double>() > 0);
            QVERIFY(r->json()["eval_seconds"].get<double>() > 0);
        }
        // A pretended 64 MB machine holds it: whole-model again, without a note.
        const Run roomy = run(evalArgs(), "64000000");
        QVERIFY2(roomy.rc == 0, qPrintable(roomy.err));
        QCOMPARE(roomy.json()["path"].get<std::string>(), std::string("whole-model"));
    }

    void layerwiseFlagForcesIt() {
        const Run r = run(evalArgs() << "--layerwise");
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QCOMPARE(r.json()["path"].get<std::string>(), std::string("layerwise"));
        QVERIFY(!r.err.contains("note:"));  // asked for, not chosen
    }

    void referenceNeedsWholeModel() {
        const Run r = run(evalArgs() << "--layerwise" << "--reference" << "demo:lm");
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("--reference") && r.err.contains("layer-wise"), qPrintable(r.err));
    }

    void truncatedSafetensorsIsRefusedByName() {
        const fs::path copy = fs::path(dir_.path().toStdString()) / "truncated";
        fs::create_directories(copy);
        const fs::path demo = npw::resolveModelPath("demo:lm");
        for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) fs::copy_file(demo / f, copy / f);
        const fs::path file = copy / "model.safetensors";
        fs::resize_file(file, fs::file_size(file) - 4096);
        const Run r = run(evalArgs(QString::fromStdString(copy.string())) << "--layerwise");
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains(QString::fromStdString(file.string())) && r.err.contains("truncated"), qPrintable(r.err));
    }

    // The eager PyTorch reference (tests/fixtures/eager_llama_eval.py, Hugging Face's forward
    // re-written) on a synthetic model written by the fixture script: the same perplexity as both
    // of npw's paths (1e-5 relative; it computes RoPE frequencies in float32, npw in float64), so
    // their tokens/s compare the same computation.
    void eagerPyTorchReferenceAgrees() {
        const QString python = "/usr/bin/python3";
        QProcess probe;
        probe.start(python, {"-c", "import torch, numpy"});
        if (!probe.waitForFinished(60000) || probe.exitStatus() != QProcess::NormalExit || probe.exitCode() != 0)
            QSKIP("/usr/bin/python3 with python3-torch and python3-numpy is not installed");
        const QString fixtures = QStringLiteral(NPW_TEST_DATA "/../fixtures/");
        const QString model = dir_.filePath("synthetic-tiny");
        QProcess make;
        make.start(python, {fixtures + "make_synthetic_hf_llama.py", "tiny", model, "1100"});
        QVERIFY(make.waitForFinished(120000) && make.exitCode() == 0);
        const QStringList window = {"--ids", model + "/ids.txt", "--seqlen", "128", "--max-windows", "8", "--batch", "3"};
        QProcess eager;
        eager.start(python, QStringList{fixtures + "eager_llama_eval.py", model} + window);
        QVERIFY(eager.waitForFinished(120000));
        QVERIFY2(eager.exitCode() == 0, eager.readAllStandardError().constData());
        const Json reference = Json::parse(eager.readAllStandardOutput().toStdString());
        QCOMPARE(reference["windows"].get<int64_t>(), int64_t(8));
        QVERIFY(reference["tokens_per_second"].get<double>() > 0);
        const double expected = reference["ppl"].get<double>();
        for (const QStringList& extra : {QStringList{}, QStringList{"--layerwise"}}) {
            const Run r = run(QStringList{"eval", model} + window + extra + QStringList{"--json"});
            QVERIFY2(r.rc == 0, qPrintable(r.err));
            const double ppl = r.json()["ppl"].get<double>();
            QVERIFY2(std::abs(ppl - expected) <= 1e-5 * expected,
                     qPrintable(QString("npw %1 vs eager PyTorch %2").arg(ppl, 0, 'g', 17).arg(expected, 0, 'g', 17)));
            QVERIFY(expected > 100);  // random weights, vocabulary 512: far from trivial
        }
    }

    // `npw bench --write-synthetic` writes bf16 shards tensor by tensor; `npw info` reads only
    // their headers (dtype, bytes); with a NaN in the weights info still answers (it reads no
    // value) while eval, whole-model or layer-wise, stops naming the file, tensor and index.
    void syntheticCheckpointAndNanWeights() {
        const QString model = dir_.filePath("written-tiny");
        const Run written = run({"bench", "--write-synthetic", "tiny", "--out", model, "--shard-mib", "1", "--json"});
        QVERIFY2(written.rc == 0, qPrintable(written.err));
        const Json w = written.json();
        QVERIFY(w["shards"].size() >= 2);
        QVERIFY(!fs::exists(model.toStdString() + ".npw-partial"));
        const Run again = run({"bench", "--write-synthetic", "tiny", "--out", model});
        QVERIFY2(again.rc == 1 && again.err.contains("already exists"), qPrintable(again.err));

        const Run info = run({"info", model, "--json"});
        QVERIFY2(info.rc == 0, qPrintable(info.err));
        const Json i = info.json();
        QCOMPARE(i["format"].get<std::string>(), std::string("safetensors"));
        QCOMPARE(i["file_dtypes"].size(), size_t(1));
        QCOMPARE(i["file_dtypes"]["BF16"].get<int64_t>(), 2 * w["parameters"].get<int64_t>());
        QCOMPARE(i["weight_bytes"].get<int64_t>(), 2 * w["parameters"].get<int64_t>());
        QCOMPARE(i["params"].get<int64_t>(), w["parameters"].get<int64_t>());
        QCOMPARE(i["files"].size(), w["shards"].size());
        const Run clean = run(evalArgs(model));
        QVERIFY2(clean.rc == 0, qPrintable(clean.err));
        QVERIFY(std::isfinite(clean.json()["ppl"].get<double>()));

        // A NaN at flat index 5 of one tensor, in whichever shard holds it.
        const std::string poisoned = "model.layers.1.mlp.up_proj.weight";
        std::string shard;
        for (const auto& name : w["shards"]) {
            const std::string path = model.toStdString() + "/" + name.get<std::string>();
            std::vector<std::pair<std::string, at::Tensor>> tensors;
            bool holds = false;
            {
                const auto file = npw::SafeTensorsFile::open(path);
                for (const std::string& t : file->names()) {
                    tensors.emplace_back(t, file->load(t));
                    holds = holds || t == poisoned;
                }
            }
            if (!holds) continue;
            for (auto& [t, value] : tensors)
                if (t == poisoned) value.view({-1})[5] = NAN;
            fs::remove(path);
            npw::writeSafeTensors(path, tensors, {{"format", "pt"}});
            shard = path;
        }
        QVERIFY(!shard.empty());
        const Run infoNan = run({"info", model, "--json"});
        QVERIFY2(infoNan.rc == 0, qPrintable(infoNan.err));
        for (const QStringList& args : {evalArgs(model), evalArgs(model) << "--layerwise"}) {
            const Run e = run(args);
            QVERIFY2(e.rc == 1 && e.err.contains(QString::fromStdString("'" + poisoned + "'")) &&
                         e.err.contains(QString::fromStdString(shard)) && e.err.contains("index 5)"),
                     qPrintable(e.err));
        }
    }

    void malformedMemorySizeIsRefused() {
        const Run r = run(evalArgs(), "lots");
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("NPW_PHYSICAL_MEMORY_BYTES") && r.err.contains("lots"), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestCliEvalLayerwise)
#include "tst_cli_eval_layerwise.moc"
