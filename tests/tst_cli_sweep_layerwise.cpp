// `npw sweep` takes npw prune's road rule (layerwise_prune.h: choosePruneRoad): in RAM while the
// model in float32 and its statistics fit in half of the (pretended, NPW_PHYSICAL_MEMORY_BYTES) RAM,
// else — or with --layerwise — layer by layer (runSweepLayerwise: calibrate into a scratch file,
// score from it, write each pruned model layer by layer into a work folder and evaluate it one block
// at a time). On a small float32 model both roads give the same rows: the same achieved ratios and
// λ, perplexities within 1e-6 relative (the same float32 arithmetic in another order), the same CSV
// columns; the work folder is gone afterwards, and a killed sweep's folder is removed by the next
// run while a live process's is left alone. What the road cannot do is refused by name.
#include "core/models/model_loader.h"
#include "bf16_checkpoint_copy.h"
#include "cli_run.h"

#include <nlohmann/json.hpp>

#include <QCoreApplication>
#include <QFileInfo>
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

// demo:lm: 2.8M float32 parameters and ~1 MB of statistics: a pretended 16 MB machine is too small.
const QString kSmallMachine = "16000000";

// Entries of `dir` that a sweep's work leaves behind when it is not cleaned up.
QStringList workLeftIn(const QString& dir) {
    QStringList left;
    for (const auto& entry : fs::directory_iterator(dir.toStdString())) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("npw-sweep-", 0) == 0 || name.find(".npw-") != std::string::npos ||
            name.rfind("npw-studio-grams-", 0) == 0)
            left << QString::fromStdString(name);
    }
    return left;
}

} // namespace

class TestCliSweepLayerwise : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;
    QString calib_, eval_;

    Run run(const QStringList& args, const QString& physicalBytes = {}) {
        return npw::test::runCli(npw_, args, npw::test::withPhysicalMemory(physicalBytes));
    }

    QStringList sweepArgs(const QString& csv, const QStringList& extra = {}) const {
        return QStringList{"sweep", "demo:lm", "--methods", "numerical,flap,wanda-sp", "--ratios", "0.2,0.45",
                           "--seeds", "2", "--nsamples", "8", "--seqlen", "32", "--calib", calib_, "--calib-ids",
                           "--eval", "ids:" + eval_ + ",text:" + eval_, "--eval-seqlen", "32", "--max-windows", "20",
                           "--csv", csv, "--json"} +
               extra;
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QVERIFY(dir_.isValid());
        calib_ = dir_.filePath("calib.txt");
        eval_ = dir_.filePath("eval.txt");
        std::mt19937_64 rng(4);
        std::ofstream calib(calib_.toStdString()), eval(eval_.toStdString());
        for (int i = 0; i < 2000; ++i) calib << rng() % 200 << ' ';
        for (int i = 0; i < 1500; ++i) eval << rng() % 200 << ' ';
    }

    // The same sweep on both roads: every row alike, the CSV's columns alike, nothing left behind.
    void bothRoadsGiveTheSameRows() {
        const QString ramDir = dir_.filePath("ram"), lwDir = dir_.filePath("lw");
        QVERIFY(QDir().mkpath(ramDir) && QDir().mkpath(lwDir));
        const Run a = run(sweepArgs(ramDir + "/rows.csv"));
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        QCOMPARE(a.json()["road"]["layerwise"].get<bool>(), false);
        QVERIFY2(!a.err.contains("layer by layer"), qPrintable(a.err));
        const Run b = run(sweepArgs(lwDir + "/rows.csv"), kSmallMachine);
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QCOMPARE(b.json()["road"]["layerwise"].get<bool>(), true);
        QCOMPARE(b.json()["road"]["forced"].get<bool>(), false);
        // One sentence on stderr: the road, why, and where its work goes.
        QVERIFY2(b.err.contains("note: sweeping layer by layer") && b.err.contains("NPW_PHYSICAL_MEMORY_BYTES") &&
                     b.err.contains(lwDir + "/npw-sweep-"),
                 qPrintable(b.err));

        const Json x = a.json()["rows"];
        const Json y = b.json()["rows"];
        // dense + 2 seeds × 3 methods × 2 ratios, each on 2 sets
        QCOMPARE(x.size(), size_t(2 * (1 + 2 * 3 * 2)));
        QCOMPARE(y.size(), x.size());
        double worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            const std::string what = x[i].dump();
            for (const char* same : {"method", "ratio", "seed", "eval", "calib_samples", "calib_seqlen", "calib_hash",
                                     "calib_distinct_tokens", "achieved_ratio", "achieved_ratio_model", "eval_tokens",
                                     "eval_windows", "eval_seqlen", "eval_hash", "lambda_rel"})
                QVERIFY2(x[i][same] == y[i][same], qPrintable(QString::fromStdString(what + "\n" + y[i].dump())));
            if (x[i]["method"] == "numerical") {
                const double l0 = x[i]["lambda_used"].get<double>(), l1 = y[i]["lambda_used"].get<double>();
                QVERIFY2(std::abs(l0 - l1) <= 1e-9 * std::abs(l0), qPrintable(QString::fromStdString(what)));
            }
            for (const char* close : {"ppl", "nll"}) {
                const double p0 = x[i][close].get<double>(), p1 = y[i][close].get<double>();
                QVERIFY2(std::isfinite(p1), qPrintable(QString::fromStdString(y[i].dump())));
                worst = std::max(worst, std::abs(p0 - p1) / std::abs(p0));
            }
        }
        qInfo("largest relative perplexity / nll difference between the roads: %.3g", worst);
        QVERIFY2(worst <= 1e-6, qPrintable(QString::number(worst)));
        // The pruned models differ from the dense one (the rows are not all the dense model's).
        QVERIFY(y[2]["ppl"] != y[0]["ppl"]);

        // The CSV: the same header, the same rows' settings.
        auto lines = [](const QString& file) {
            QFile f(file);
            f.open(QIODevice::ReadOnly);
            return QString::fromUtf8(f.readAll()).split('\n');
        };
        const QStringList ramCsv = lines(ramDir + "/rows.csv"), lwCsv = lines(lwDir + "/rows.csv");
        QCOMPARE(lwCsv.size(), ramCsv.size());
        QCOMPARE(lwCsv[0], ramCsv[0]);
        // The work folder (beside --csv: scratch file, exports, staging folders) is gone.
        QVERIFY2(workLeftIn(lwDir).isEmpty(), qPrintable(workLeftIn(lwDir).join(", ")));
    }

    // The other methods a sweep takes on this road, numerical-box rescored per ratio among them:
    // the same achieved ratios, perplexities within 1e-6 relative.
    void everyOtherMethodAgreesToo() {
        const QString ramDir = dir_.filePath("ram2"), lwDir = dir_.filePath("lw2");
        QVERIFY(QDir().mkpath(ramDir) && QDir().mkpath(lwDir));
        const QStringList methods{"--methods", "numerical-box,numerical-nocomp,numerical-z,numerical-lstar,"
                                               "numerical-lstar-rel,magnitude,random", "--lambda-rel", "0.01"};
        auto args = [&](const QString& dir) {
            return QStringList{"sweep", "demo:lm", "--ratios", "0.3", "--seeds", "1", "--nsamples", "8", "--seqlen",
                               "32", "--calib", calib_, "--calib-ids", "--eval", "ids:" + eval_, "--eval-seqlen", "32",
                               "--max-windows", "10", "--csv", dir + "/rows.csv", "--json"} +
                   methods;
        };
        const Run a = run(args(ramDir));
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        const Run b = run(args(lwDir) << "--layerwise");
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        const Json x = a.json()["rows"], y = b.json()["rows"];
        QCOMPARE(x.size(), size_t(8));
        QCOMPARE(y.size(), x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            const QString what = QString::fromStdString(x[i].dump() + "\n" + y[i].dump());
            QVERIFY2(x[i]["method"] == y[i]["method"] && x[i]["achieved_ratio"] == y[i]["achieved_ratio"] &&
                         x[i]["achieved_ratio_model"] == y[i]["achieved_ratio_model"],
                     qPrintable(what));
            const double p0 = x[i]["ppl"].get<double>(), p1 = y[i]["ppl"].get<double>();
            QVERIFY2(std::abs(p0 - p1) <= 1e-6 * p0, qPrintable(what));
        }
        QVERIFY(workLeftIn(lwDir).isEmpty());
    }

    // A bfloat16 checkpoint: the layer-wise road writes each pruned model in bfloat16 (the
    // compensated o_proj / down_proj rounded), the in-RAM road evaluates its float32 result. The
    // dense rows are the same evaluation; the pruned rows keep the same masks and differ by that
    // rounding only (measured: 3.9e-4 relative here, on random ids a model finds very unlikely;
    // 1e-5 on a synthetic 134M model).
    void aBf16CheckpointDiffersByTheExportsRoundingOnly() {
        const QString model = dir_.filePath("bf16-model");
        npw::test::saveBf16Shards(npw::loadLlamaCheckpoint("demo:lm"), model.toStdString());
        const QString ramDir = dir_.filePath("ram3"), lwDir = dir_.filePath("lw3");
        QVERIFY(QDir().mkpath(ramDir) && QDir().mkpath(lwDir));
        auto args = [&](const QString& dir) {
            return QStringList{"sweep", model, "--methods", "numerical,flap", "--ratios", "0.3", "--seeds", "1",
                               "--nsamples", "8", "--seqlen", "32", "--calib", calib_, "--calib-ids", "--eval",
                               "ids:" + eval_, "--eval-seqlen", "32", "--max-windows", "10", "--csv", dir + "/rows.csv",
                               "--json"};
        };
        const Run a = run(args(ramDir));
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        const Run b = run(args(lwDir) << "--layerwise");
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        const Json x = a.json()["rows"], y = b.json()["rows"];
        QCOMPARE(x.size(), size_t(3));
        QCOMPARE(y.size(), x.size());
        QCOMPARE(x[0]["ppl"], y[0]["ppl"]);  // dense
        double worst = 0;
        for (size_t i = 1; i < x.size(); ++i) {
            QVERIFY2(x[i]["achieved_ratio"] == y[i]["achieved_ratio"], qPrintable(QString::fromStdString(y[i].dump())));
            const double p0 = x[i]["ppl"].get<double>(), p1 = y[i]["ppl"].get<double>();
            worst = std::max(worst, std::abs(p0 - p1) / p0);
        }
        qInfo("bfloat16: largest relative perplexity difference between the roads: %.3g", worst);
        QVERIFY2(worst <= 1e-3, qPrintable(QString::number(worst)));
        QVERIFY(workLeftIn(lwDir).isEmpty());
    }

    void forcedByTheFlag() {
        const QString out = dir_.filePath("forced");
        QVERIFY(QDir().mkpath(out));
        const Run r = run({"sweep", "demo:lm", "--methods", "numerical", "--ratios", "0.3", "--seeds", "1", "--nsamples",
                           "4", "--seqlen", "32", "--calib", calib_, "--calib-ids", "--eval", "ids:" + eval_,
                           "--eval-seqlen", "32", "--max-windows", "4", "--layerwise", "--csv", out + "/rows.csv", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QCOMPARE(r.json()["road"]["forced"].get<bool>(), true);
        QVERIFY2(r.err.contains("sweeping layer by layer (--layerwise"), qPrintable(r.err));
        QCOMPARE(r.json()["rows"].size(), size_t(2));
        QVERIFY(workLeftIn(out).isEmpty());
    }

    // kill -9 in the middle of writing a pruned model leaves the run's folder (recognisably
    // npw-sweep-PID-…); the next sweep beside the same CSV removes it, and leaves a folder of a
    // process that still runs alone.
    void aKilledSweepsFolderIsRemovedByTheNext() {
        const QString out = dir_.filePath("killed");
        QVERIFY(QDir().mkpath(out));
        const QStringList args{"sweep", "demo:lm", "--methods", "flap", "--ratios", "0.3", "--seeds", "1", "--nsamples",
                               "4", "--seqlen", "32", "--calib", calib_, "--calib-ids", "--eval", "ids:" + eval_,
                               "--eval-seqlen", "32", "--max-windows", "4", "--layerwise", "--csv", out + "/rows.csv"};
        npw::test::killCliAt(npw_, args, "export-staged", npw::test::withPhysicalMemory({}));
        const QStringList left = workLeftIn(out);
        QVERIFY2(left.size() == 1 && left[0].startsWith("npw-sweep-"), qPrintable(left.join(", ")));
        // Its scratch file and half-written export are in it.
        QVERIFY(!QDir(out + "/" + left[0]).isEmpty());
        // A live process's folder (this test's PID) is not the next run's to remove.
        const QString live = out + "/npw-sweep-" + QString::number(QCoreApplication::applicationPid()) + "-1";
        QVERIFY(QDir().mkpath(live));
        const Run r = run(args);
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QCOMPARE(workLeftIn(out), QStringList{QFileInfo(live).fileName()});
        QVERIFY(QDir(live).removeRecursively());
    }

    // What needs the whole model in memory is refused by name, before any work, leaving nothing.
    void whatTheRoadCannotDoIsRefusedByName() {
        const QString out = dir_.filePath("refused");
        QVERIFY(QDir().mkpath(out));
        const QStringList base{"sweep", "demo:lm", "--ratios", "0.3", "--calib", calib_, "--calib-ids", "--eval",
                               "ids:" + eval_, "--csv", out + "/rows.csv"};
        struct Case { QStringList extra; QString named; };
        const Case cases[] = {
            {{"--methods", "flap,slicegpt"}, "method slicegpt prunes in its own structure"},
            {{"--methods", "llm-pruner"}, "method llm-pruner prunes in its own structure"},
            {{"--methods", "block-influence"}, "method block-influence prunes in its own structure"},
            {{"--methods", "numerical-lstar-kl"}, "method numerical-lstar-kl measures each site's damage"},
            {{"--methods", "flap", "--speed"}, "speed rows (--speed)"},
            {{"--methods", "flap", "--zeroshot", "piqa:" + eval_}, "--zeroshot scores"},
        };
        for (const Case& c : cases) {
            for (const QString& machine : {QString(), kSmallMachine}) {
                const QStringList flags = machine.isEmpty() ? QStringList{"--layerwise"} : QStringList{};
                const Run r = run(base + c.extra + flags, machine);
                QVERIFY2(r.rc == 1, qPrintable(c.named + ": " + r.err));
                QVERIFY2(r.err.contains(c.named) && r.err.contains("layer-by-layer road"), qPrintable(r.err));
                QVERIFY2(r.err.contains(machine.isEmpty() ? "(--layerwise)" : "more than half of this machine's"),
                         qPrintable(r.err));
                QVERIFY(workLeftIn(out).isEmpty());
                QVERIFY(!QFileInfo::exists(out + "/rows.csv"));
            }
        }
        // An image model's sweep has no such road.
        const Run image = run({"sweep", "demo:c2i", "--methods", "flap", "--ratios", "0.3", "--layerwise"});
        QVERIFY2(image.rc == 1 && image.err.contains("--layerwise is for language models"), qPrintable(image.err));
    }
};

QTEST_GUILESS_MAIN(TestCliSweepLayerwise)
#include "tst_cli_sweep_layerwise.moc"
