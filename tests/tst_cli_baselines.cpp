// The baselines from the command line (issue 19), as a user types them, on the bundled demo:lm:
// `npw prune --method llm-pruner|slicegpt|block-influence` writes its export with the native knob
// in the JSON and the manifest and reaches --ratio; `npw eval` runs a SliceGPT export and a
// block-pruned one; `npw export-gguf` refuses the sliced model by name; `npw sweep` takes the
// three beside the other methods; options of another method and numerical-only flags exit 1.
#include "core/util/paths.h"

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>

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
