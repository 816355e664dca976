// The baselines from the command line (issue 19), as a user types them, on the bundled demo:lm:
// `npw prune --method llm-pruner|slicegpt|block-influence` writes its export with the native knob
// in the JSON and the manifest and reaches --ratio; `npw eval` runs a SliceGPT export and a
// block-pruned one; `npw export-gguf` refuses the sliced model by name; `npw sweep` takes the
// three beside the other methods; options of another method and numerical-only flags exit 1.
// The sliced model runs wherever a language model only has to run text: `npw info`, `generate`,
// `compare` (beside demo:lm), `zeroshot` and `bench` exit 0 with sane JSON, `npw sweep
// --methods slicegpt --zeroshot … --speed` gives its zero-shot and speed rows; `prune` of the
// sliced model and `bench --llamacpp` refuse it by name.
#include "core/util/paths.h"

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <fstream>
#include <map>

using Json = nlohmann::json;

namespace {

struct Run {
    int rc = -1;
    QString out, err;
    Json json() const { return Json::parse(out.toStdString()); }
};

} // namespace

class TestCliBaselines : public QObject {
    Q_OBJECT

    QString npw_, calib_, eval_;
    QTemporaryDir dir_;

    Run run(const QStringList& args) {
        QProcess p;
        p.start(npw_, args);
        p.waitForFinished(600000);
        return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
    }

    // The SliceGPT export of demo:lm at ρ 0.3 (made once) and a 20-item verse task.
    QString slicedModel() {
        QString dir = dir_.filePath("sliced-runtime");
        if (!QFileInfo::exists(dir)) {
            const Run r = run(prune("slicegpt", "sliced-runtime"));
            if (r.rc != 0) qWarning("%s", qPrintable(r.err));
        }
        return dir;
    }
    QString verseTask() {
        QString file = dir_.filePath("verses.jsonl");
        if (!QFileInfo::exists(file)) run({"make-verse-task", "--text", eval_, "--out", file, "--n", "20"});
        return file;
    }

    QStringList prune(const QString& method, const QString& out) {
        return {"prune", "demo:lm", "--method", method, "--ratio", "0.3", "--calib", calib_, "--nsamples", "8",
                "--seqlen", "32", "--out", dir_.filePath(out), "--json"};
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        calib_ = QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-ot.txt");
        eval_ = QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-nt.txt");
        QVERIFY(dir_.isValid());
    }

    void pruneEachMethodAndEvaluate_data() {
        QTest::addColumn<QString>("method");
        QTest::addColumn<QString>("knob");
        QTest::newRow("block-influence") << "block-influence" << "blocks_removed";
        QTest::newRow("llm-pruner") << "llm-pruner" << "per_layer_ratio";
        QTest::newRow("slicegpt") << "slicegpt" << "slicing_fraction";
    }
    void pruneEachMethodAndEvaluate() {
        QFETCH(QString, method);
        QFETCH(QString, knob);
        const Run r = run(prune(method, method));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        QCOMPARE(j["method"].get<std::string>(), method.toStdString());
        QCOMPARE(j["native"]["knob"].get<std::string>(), knob.toStdString());
        QVERIFY(j["native"].contains(knob.toStdString()));
        QVERIFY(j["achieved_ratio"].get<double>() >= 0.3);
        std::ifstream manifestFile(dir_.filePath(method + "/npw-manifest.json").toStdString());
        const Json manifest = Json::parse(manifestFile);
        QCOMPARE(manifest["method"].get<std::string>(), method.toStdString());
        QCOMPARE(manifest["native"]["knob"].get<std::string>(), knob.toStdString());
        QCOMPARE(manifest["calibration"]["samples"].get<int64_t>(), int64_t(8));
        const Run e = run({"eval", dir_.filePath(method), "--text", eval_, "--seqlen", "64", "--max-windows", "4", "--json"});
        QVERIFY2(e.rc == 0, qPrintable(e.err));
        const double ppl = e.json()["ppl"].get<double>();
        QVERIFY(std::isfinite(ppl) && ppl > 1);
    }

    void slicedModelIsRefusedByGguf() {
        const Run r = run(prune("slicegpt", "sliced-for-gguf"));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Run g = run({"export-gguf", dir_.filePath("sliced-for-gguf"), "--out", dir_.filePath("x.gguf")});
        QCOMPARE(g.rc, 1);
        QVERIFY2(g.err.contains("SliceGPT") && g.err.contains("npw-sliced-llama"), qPrintable(g.err));
        QVERIFY(!QFileInfo::exists(dir_.filePath("x.gguf")));
    }

    void sweepTakesTheBaselines() {
        const Run r = run({"sweep", "demo:lm", "--methods", "flap,llm-pruner,slicegpt,block-influence", "--ratios", "0.2",
                           "--nsamples", "4", "--seqlen", "32", "--calib", calib_, "--eval", "text:" + eval_,
                           "--eval-seqlen", "32", "--max-windows", "4", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        std::map<std::string, double> achieved;
        const Json j = r.json();
        for (const Json& row : j["rows"]) achieved[row["method"].get<std::string>()] = row["achieved_ratio"].get<double>();
        for (const char* m : {"flap", "llm-pruner", "slicegpt", "block-influence"}) {
            QVERIFY2(achieved.count(m), m);
            QVERIFY2(achieved[m] >= 0.2 - 0.01, m);
        }
    }

    void slicedModelRunsText() {
        const QString sliced = slicedModel();
        QVERIFY(QFileInfo::exists(sliced + "/npw-sliced.safetensors"));

        const Run info = run({"info", sliced, "--json"});
        QVERIFY2(info.rc == 0, qPrintable(info.err));
        QCOMPARE(info.json()["structure"].get<std::string>(), std::string("npw-sliced-llama"));
        const auto widths = info.json()["residual_widths"].get<std::vector<int64_t>>();
        QCOMPARE(int64_t(widths.size()), int64_t(1 + 2 * info.json()["layers"].get<int64_t>()));
        QVERIFY(widths.front() < info.json()["hidden"].get<int64_t>());

        const Run g = run({"generate", sliced, "--prompt", "In the beginning", "--tokens", "12", "--no-stop", "--json"});
        QVERIFY2(g.rc == 0, qPrintable(g.err));
        QCOMPARE(g.json()["ids"].size(), size_t(12));
        QVERIFY(!g.json()["text"].get<std::string>().empty());
        QCOMPARE(g.json()["structure"].get<std::string>(), std::string("npw-sliced-llama"));

        const Run c = run({"compare", "demo:lm", sliced, "--prompt", "And Jesus said", "--tokens", "10", "--json"});
        QVERIFY2(c.rc == 0, qPrintable(c.err));
        const Json models = c.json()["prompts"][0]["models"];
        QCOMPARE(models.size(), size_t(2));
        QCOMPARE(models[0]["kl"].get<double>(), 0.0);
        const double kl = models[1]["kl"].get<double>(), nll = models[1]["nll"].get<double>();
        QVERIFY2(std::isfinite(kl) && kl > 0 && std::isfinite(nll) && nll > 0, qPrintable(c.out));

        const Run z = run({"zeroshot", sliced, "--task", "mc:" + verseTask(), "--json"});
        QVERIFY2(z.rc == 0, qPrintable(z.err));
        const Json task = z.json()["tasks"][0];
        QCOMPARE(task["items"].get<int64_t>(), int64_t(20));
        QVERIFY(task["acc"].get<double>() >= 0 && task["acc"].get<double>() <= 1);

        const Run b = run({"bench", sliced, "--prompt-tokens", "16", "--decode-tokens", "8", "--repeats", "1", "--json"});
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QVERIFY(b.json()["decode_tokens_per_s"].get<double>() > 0 && b.json()["prefill_tokens_per_s"].get<double>() > 0);
        QCOMPARE(b.json()["params"].get<int64_t>(), info.json()["params"].get<int64_t>());
        QVERIFY(b.json()["peak_memory_mib"].get<double>() > 0);
    }

    void slicedModelIsRefusedWhereALlamaIsNeeded() {
        const QString sliced = slicedModel();
        QStringList again = prune("numerical", "again");
        again[1] = sliced;
        const Run p = run(again);
        QCOMPARE(p.rc, 1);
        QVERIFY2(p.err.contains("SliceGPT") && p.err.contains("needs a LLaMA"), qPrintable(p.err));
        const Run b = run({"bench", sliced, "--llamacpp"});
        QCOMPARE(b.rc, 1);
        QVERIFY2(b.err.contains("--llamacpp") && b.err.contains("SliceGPT"), qPrintable(b.err));
    }

    void sweepGivesSliceGptZeroShotAndSpeedRows() {
        const Run r = run({"sweep", "demo:lm", "--methods", "slicegpt", "--ratios", "0.3", "--seeds", "1", "--nsamples", "4",
                           "--seqlen", "32", "--calib", calib_, "--eval", "text:" + eval_, "--eval-seqlen", "32",
                           "--max-windows", "2", "--zeroshot", "mc:" + verseTask(), "--zeroshot-limit", "10", "--speed",
                           "--speed-tokens", "8", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        std::map<std::string, Json> sliced;  // eval set → the slicegpt row
        for (const Json& row : j["rows"])
            if (row["method"] == "slicegpt") sliced[row["eval"].get<std::string>()] = row;
        QString evals;
        for (const auto& [eval, row] : sliced) evals += QString::fromStdString(eval) + " ";
        QVERIFY2(sliced.count("speed") && sliced.size() == 3, qPrintable("slicegpt rows: " + evals));
        const Json speed = sliced["speed"];
        QVERIFY(speed["decode_tokens_per_s"].get<double>() > 0 && speed["prefill_tokens_per_s"].get<double>() > 0);
        QVERIFY(speed["parameters"].get<int64_t>() > 0 && speed["kv_cache_mib"].get<double>() > 0);
        for (const auto& [eval, row] : sliced)
            if (eval != "speed" && row["acc"].is_number()) {
                QCOMPARE(row["eval_tokens"].get<int64_t>(), int64_t(10));
                QVERIFY(row["acc"].get<double>() >= 0 && row["acc"].get<double>() <= 1);
                QVERIFY(row["achieved_ratio"].get<double>() >= 0.3);
                return;
            }
        QFAIL(qPrintable("no zero-shot row for slicegpt: " + r.out));
    }

    void wrongOptionsExitOne() {
        struct Case {
            QStringList args;
            QString words;
        };
        QStringList withStats = prune("llm-pruner", "bad1");
        withStats << "--save-stats" << dir_.filePath("s.safetensors");
        QStringList taylorElsewhere = prune("slicegpt", "bad2");
        taylorElsewhere << "--taylor" << "param_mix";
        QStringList range = prune("llm-pruner", "bad3");
        range << "--llm-pruner-layers" << "2-9";
        QStringList badTaylor = prune("llm-pruner", "bad4");
        badTaylor << "--taylor" << "second";
        for (const Case& c : std::vector<Case>{{withStats, "--save-stats does not apply to --method llm-pruner"},
                                               {taylorElsewhere, "--taylor is an llm-pruner option"},
                                               {range, "the model has layers 0-5"},
                                               {badTaylor, "param_first"}}) {
            const Run r = run(c.args);
            QVERIFY2(r.rc == 1, qPrintable(c.args.join(' ') + " → " + QString::number(r.rc)));
            QVERIFY2(r.err.contains(c.words), qPrintable(r.err + " (missing: " + c.words + ")"));
        }
    }
};

QTEST_GUILESS_MAIN(TestCliBaselines)
#include "tst_cli_baselines.moc"
