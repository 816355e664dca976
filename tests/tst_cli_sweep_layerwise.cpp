// `npw sweep` takes npw prune's road rule (layerwise_prune.h: choosePruneRoad): in RAM while the
// model in float32 and its statistics fit in half of the (pretended, NPW_PHYSICAL_MEMORY_BYTES) RAM,
// else — or with --layerwise — layer by layer (runSweepLayerwise: calibrate into a scratch file,
// score from it, write each pruned model layer by layer into a work folder and evaluate it one block
// at a time). On a small float32 model both roads give the same rows: the same achieved ratios and
// λ, perplexities within 1e-6 relative (the same float32 arithmetic in another order), the same CSV
// columns; the work folder is gone afterwards, and a killed sweep's folder is removed by the next
// run while a live process's is left alone. What the road cannot do is refused by name. A sweep
// with --csv, on either road, resumes after kill -9 from its work folder beside the CSV.
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
        // Its own folder and the resumable sweep's record of the dense model (aKilledSweepResumes).
        QStringList left = workLeftIn(out);
        left.sort();
        QVERIFY2(left.size() == 2 && left[0] == ".rows.csv.npw-work" && left[1].startsWith("npw-sweep-"),
                 qPrintable(left.join(", ")));
        // Its scratch file and half-written export are in it.
        QVERIFY(!QDir(out + "/" + left[1]).isEmpty());
        // A live process's folder (this test's PID) is not the next run's to remove.
        const QString live = out + "/npw-sweep-" + QString::number(QCoreApplication::applicationPid()) + "-1";
        QVERIFY(QDir().mkpath(live));
        const Run r = run(args);
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QCOMPARE(workLeftIn(out), QStringList{QFileInfo(live).fileName()});
        QVERIFY(QDir(live).removeRecursively());
    }

    // A sweep with --csv is resumable, on either road: kill -9 once three models' rows are recorded
    // (the dense model, then numerical at 0.2 and 0.45), then the same command again: it takes those
    // rows from the work folder beside the CSV (said on stderr, and per row: "(resumed)" in the
    // table, "resumed": true in JSON), measures the rest, and every row equals a clean run's (the
    // same settings and ids; perplexity, nll, bits per byte within 1e-9 relative: recorded rows are
    // the killed run's numbers, read back exactly). The work folder is gone afterwards. A rerun with
    // other settings removes a folder it cannot resume from, naming it.
    void aKilledSweepResumes_data() {
        QTest::addColumn<bool>("layerwise");
        QTest::newRow("in RAM") << false;
        QTest::newRow("layer by layer") << true;
    }
    void aKilledSweepResumes() {
        QFETCH(bool, layerwise);
        const QString tag = layerwise ? "lw" : "ram";
        auto args = [&](const QString& dir, const QString& ratios = "0.2,0.45") {
            QStringList a{"sweep", "demo:lm", "--methods", "numerical,flap", "--ratios", ratios, "--seeds", "1",
                          "--nsamples", "8", "--seqlen", "32", "--calib", calib_, "--calib-ids", "--eval",
                          "ids:" + eval_ + ",text:" + eval_, "--eval-seqlen", "32", "--max-windows", "10", "--csv",
                          dir + "/rows.csv"};
            if (layerwise) a << "--layerwise";
            return a;
        };
        auto readAll = [](const QString& file) {
            QFile f(file);
            return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
        };
        const QString cleanDir = dir_.filePath("resume-clean-" + tag);
        QVERIFY(QDir().mkpath(cleanDir));
        const Run clean = run(args(cleanDir) << "--json");
        QVERIFY2(clean.rc == 0, qPrintable(clean.err));
        const Json cleanRows = clean.json()["rows"];
        QCOMPARE(cleanRows.size(), size_t(2 * (1 + 2 * 2)));  // (dense + 2 methods × 2 ratios) × 2 sets
        for (const Json& row : cleanRows) QCOMPARE(row["resumed"].get<bool>(), false);
        QVERIFY(!clean.err.contains("resuming"));

        // --json: the rows say which were resumed.
        const QString jsonDir = dir_.filePath("resume-json-" + tag);
        QVERIFY(QDir().mkpath(jsonDir));
        npw::test::killCliAt(npw_, args(jsonDir) << "--json", "sweep-recorded-model-3", npw::test::withPhysicalMemory({}));
        const QString work = jsonDir + "/.rows.csv.npw-work";
        QVERIFY(QFileInfo::exists(work + "/fingerprint.json"));
        QVERIFY(QFileInfo::exists(work + "/model-3.json"));
        QVERIFY(!QFileInfo::exists(jsonDir + "/rows.csv"));  // nothing that looks finished
        const Run resumed = run(args(jsonDir) << "--json");
        QVERIFY2(resumed.rc == 0, qPrintable(resumed.err));
        QVERIFY2(resumed.err.contains("note: resuming the sweep from the work folder " + work +
                                      ": 3 model(s) measured by an interrupted run are taken from it"),
                 qPrintable(resumed.err));
        const Json rows = resumed.json()["rows"];
        QCOMPARE(rows.size(), cleanRows.size());
        double worst = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            const QString what = QString::fromStdString(rows[i].dump() + "\n" + cleanRows[i].dump());
            QCOMPARE(rows[i]["resumed"].get<bool>(), i < 6);  // 3 models × 2 sets
            for (const char* same : {"method", "ratio", "seed", "eval", "calib_samples", "calib_seqlen", "calib_hash",
                                     "achieved_ratio", "achieved_ratio_model", "eval_tokens", "eval_windows", "eval_hash",
                                     "lambda_rel"})
                QVERIFY2(rows[i][same] == cleanRows[i][same], qPrintable(QString(same) + "\n" + what));
            for (const char* close : {"ppl", "nll", "bits_per_byte", "lambda_used"}) {
                if (cleanRows[i][close].is_null()) {
                    QVERIFY2(rows[i][close].is_null(), qPrintable(what));
                    continue;
                }
                const double a = rows[i][close].get<double>(), b = cleanRows[i][close].get<double>();
                worst = std::max(worst, std::abs(a - b) / std::abs(b));
            }
        }
        qInfo("largest relative difference between a resumed sweep's rows and a clean run's: %.3g", worst);
        QVERIFY2(worst <= 1e-9, qPrintable(QString::number(worst)));
        QVERIFY2(workLeftIn(jsonDir).isEmpty(), qPrintable(workLeftIn(jsonDir).join(", ")));
        QVERIFY(!readAll(jsonDir + "/rows.csv").isEmpty());

        // The table says it per row; the CSV is the clean run's, byte for byte.
        const QString textDir = dir_.filePath("resume-text-" + tag);
        QVERIFY(QDir().mkpath(textDir));
        npw::test::killCliAt(npw_, args(textDir), "sweep-recorded-model-3", npw::test::withPhysicalMemory({}));
        const Run text = run(args(textDir));
        QVERIFY2(text.rc == 0, qPrintable(text.err));
        QStringList table = text.out.split('\n').mid(1, int(cleanRows.size()));  // after the header
        for (int i = 0; i < table.size(); ++i)
            QVERIFY2(table[i].endsWith("  (resumed)") == (i < 6), qPrintable(text.out));
        QCOMPARE(readAll(textDir + "/rows.csv"), readAll(cleanDir + "/rows.csv"));
        QVERIFY(workLeftIn(textDir).isEmpty());

        // Other settings: the interrupted run's folder is removed, named, and nothing is resumed.
        const QString otherDir = dir_.filePath("resume-other-" + tag);
        QVERIFY(QDir().mkpath(otherDir));
        npw::test::killCliAt(npw_, args(otherDir), "sweep-recorded-model-2", npw::test::withPhysicalMemory({}));
        QVERIFY(QFileInfo::exists(otherDir + "/.rows.csv.npw-work/model-2.json"));
        const Run other = run(args(otherDir, "0.3") << "--json");
        QVERIFY2(other.rc == 0, qPrintable(other.err));
        QVERIFY2(other.err.contains("note: removed the work folder " + otherDir +
                                    "/.rows.csv.npw-work of an interrupted run with another model, other texts or "
                                    "other settings"),
                 qPrintable(other.err));
        QVERIFY(!other.err.contains("resuming"));
        for (const Json& row : other.json()["rows"]) QCOMPARE(row["resumed"].get<bool>(), false);
        QVERIFY(workLeftIn(otherDir).isEmpty());
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
