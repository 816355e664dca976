// `npw bench --suite scale` at a shape CI can afford (tiny): it writes the checkpoint, prunes it
// with numerical and FLAP, evaluates the dense model and each export layer by layer, each step in
// its own process, and reports per step the time, the peak memory and the bytes on disk (the
// 7B/8B figures in README come from the same command). The folder it works in is removed at the
// end, and an existing folder is refused, untouched.
#include "cli_run.h"

#include <nlohmann/json.hpp>

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

using Json = nlohmann::json;

class TestCliBenchScale : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        QVERIFY(dir_.isValid());
    }

    void tinyScaleSuite() {
        const QString folder = dir_.filePath("scale");
        const npw::test::CliRun r = npw::test::runCli(
            npw_, {"bench", "--suite", "scale", "--synthetic", "tiny", "--nsamples", "2", "--seqlen", "32",
                   "--eval-windows", "2", "--threads", "1", "--layerwise", "--out", folder, "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        QCOMPARE(j["size"].get<std::string>(), std::string("tiny"));
        QVERIFY(j["write"]["checkpoint_bytes"].get<uint64_t>() > 0);
        auto measured = [](const Json& step) {
            return step["wall_s"].get<double>() > 0 && step["peak_rss_anon_mib"].get<double>() > 0 &&
                   step["peak_vm_hwm_mib"].get<double>() >= step["peak_rss_anon_mib"].get<double>();
        };
        QVERIFY(measured(j["write"]));
        QVERIFY(measured(j["dense_eval"]));
        QVERIFY(std::isfinite(j["dense_eval"]["ppl"].get<double>()));
        QCOMPARE(j["prunes"].size(), size_t(2));
        for (const Json& p : j["prunes"]) {
            QVERIFY(measured(p));
            QVERIFY(p["road"]["layerwise"].get<bool>());
            QVERIFY(p["road"].contains("statistics_scratch"));
            QVERIFY(p["timings"]["calibrate_s"].get<double>() > 0);
            QVERIFY(p["export_bytes"].get<uint64_t>() > 0);
            QVERIFY(measured(p["eval"]));
            QVERIFY(std::isfinite(p["eval"]["ppl"].get<double>()));
            QVERIFY(p["achieved_ratio"].get<double>() > 0);
        }
        QCOMPARE(j["prunes"][0]["method"].get<std::string>(), std::string("numerical"));
        QCOMPARE(j["prunes"][1]["method"].get<std::string>(), std::string("flap"));
        QVERIFY(!QFile::exists(folder));  // removed at the end
    }

    void refusesAnExistingFolder() {
        const QString folder = dir_.filePath("mine");
        QVERIFY(QDir().mkpath(folder));
        QFile keep(folder + "/keep.txt");
        QVERIFY(keep.open(QIODevice::WriteOnly));
        keep.write("mine");
        keep.close();
        const npw::test::CliRun r =
            npw::test::runCli(npw_, {"bench", "--suite", "scale", "--synthetic", "tiny", "--out", folder, "--json"});
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("exists"), qPrintable(r.err));
        QVERIFY(QFile::exists(folder + "/keep.txt"));
    }

    // Absurd sizes are refused by name before anything is written.
    void refusesAbsurdSizes() {
        const QString folder = dir_.filePath("absurd");
        const npw::test::CliRun longer = npw::test::runCli(
            npw_, {"bench", "--suite", "scale", "--synthetic", "tiny", "--seqlen", "4096", "--out", folder});
        QCOMPARE(longer.rc, 1);
        QVERIFY2(longer.err.contains("--seqlen 4096") && longer.err.contains("context"), qPrintable(longer.err));
        const npw::test::CliRun huge = npw::test::runCli(
            npw_, {"bench", "--suite", "scale", "--synthetic", "tiny", "--nsamples", "1000000", "--seqlen", "2048", "--out", folder});
        QCOMPARE(huge.rc, 1);
        QVERIFY2(huge.err.contains("--nsamples 1000000"), qPrintable(huge.err));
        QVERIFY(!QFile::exists(folder));
    }
};

QTEST_GUILESS_MAIN(TestCliBenchScale)
#include "tst_cli_bench_scale_slow.moc"
