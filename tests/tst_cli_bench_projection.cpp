// `npw bench --suite projection`: the work it projects for each stage is the work the stage does.
// A tiny checkpoint is pruned on the layer-wise road (`npw prune --layerwise --json`), and the
// work meter's counts in its stage_bounds (what the kernels were asked to do, dense_kernels.h) are
// compared with projectedStageWork for the same shape, calibration and removed channels — an
// independent count from the shape alone. Then the projection of that very run reproduces its
// bounded stages' seconds (work / rate / efficiency = the seconds measured), and bad input (a
// file that is not a prune report, a malformed calibration, an unknown shape) is refused by name.
#include "cli_run.h"

#include "core/experiments/scale_projection.h"
#include "core/experiments/synthetic_checkpoint.h"

#include <nlohmann/json.hpp>

#include <QCoreApplication>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <map>

using Json = nlohmann::json;

namespace {

double relativeGap(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

} // namespace

class TestCliBenchProjection : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;
    QString model_, ids_, report_;
    Json prune_;
    static constexpr int64_t kWindows = 3, kSeqlen = 48;

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        QVERIFY(dir_.isValid());
        model_ = dir_.filePath("tiny");
        const npw::test::CliRun w = npw::test::runCli(npw_, {"bench", "--write-synthetic", "tiny", "--out", model_, "--json"});
        QVERIFY2(w.rc == 0, qPrintable(w.err));
        ids_ = dir_.filePath("ids.txt");
        QFile f(ids_);
        QVERIFY(f.open(QIODevice::WriteOnly));
        for (int i = 0; i < 2000; ++i) f.write(QByteArray::number((i * 7919 + 13) % 509 + 1) + " ");
        f.close();
        const npw::test::CliRun p = npw::test::runCli(
            npw_, {"prune", model_, "--layerwise", "--calib", ids_, "--calib-ids", "--nsamples", QString::number(kWindows),
                   "--seqlen", QString::number(kSeqlen), "--ratio", "0.3", "--out", dir_.filePath("pruned"), "--json"});
        QVERIFY2(p.rc == 0, qPrintable(p.err));
        prune_ = p.json();
        report_ = dir_.filePath("prune.json");
        QFile r(report_);
        QVERIFY(r.open(QIODevice::WriteOnly));
        r.write(p.out.toUtf8());
    }

    // Forward, Gram updates, scores, L* curves and Theorem 3: the same flops as the meter counted
    // (exact: the same integers in double); the export and the scratch file's bytes within 2 %
    // (their headers, config.json and the manifest are not modelled).
    void projectedWorkIsTheMeasuredWork() {
        const npw::LlamaConfig config = npw::syntheticCheckpointConfig("tiny");
        npw::RemovedChannels removed;
        for (const Json& layer : prune_["layers"]) {
            removed.attention.push_back((layer["heads_before"].get<int64_t>() - layer["heads"].get<int64_t>()) * config.head_dim);
            removed.mlp.push_back(layer["channels_before"].get<int64_t>() - layer["channels"].get<int64_t>());
        }
        QCOMPARE(removed.mlp.size(), size_t(config.num_layers));
        const std::string precision = prune_["road"]["statistics_scratch"]["precision"].get<std::string>();
        const std::vector<npw::StageMeasure> projected =
            npw::projectedStageWork(config, kWindows, kSeqlen, removed, 2 /* bf16, as the checkpoint */,
                                    precision == "float64" ? 8 : 4);
        std::map<std::string, Json> measured;
        for (const Json& s : prune_["stage_bounds"]["stages"]) measured[s["stage"].get<std::string>()] = s["work"];
        int compared = 0;
        for (const npw::StageMeasure& s : projected) {
            QVERIFY2(measured.count(s.stage), s.stage.c_str());
            const Json& w = measured[s.stage];
            auto field = [&](const char* key) { return w.contains(key) ? w[key].get<double>() : 0.0; };
            const std::string where = s.stage;
            if (s.stage == "writing" || s.stage == "scratch_writing") {
                // bytes: the model's tensors (or triangles, sums, hidden states) without the files' headers
                QVERIFY2(relativeGap(s.bytes, field("bytes_written")) < 0.02,
                         qPrintable(QString::fromStdString(where) + ": projected " + QString::number(s.bytes) + ", written " +
                                    QString::number(field("bytes_written"))));
                ++compared;
                continue;
            }
            QVERIFY2(s.gemm32Flops == field("float32_gemm_flop"),
                     qPrintable(QString::fromStdString(where) + " float32 flops " + QString::number(s.gemm32Flops) + " vs " +
                                QString::number(field("float32_gemm_flop"))));
            QVERIFY2(s.gemm64Flops == field("float64_gemm_flop"),
                     qPrintable(QString::fromStdString(where) + " float64 flops " + QString::number(s.gemm64Flops) + " vs " +
                                QString::number(field("float64_gemm_flop"))));
            QVERIFY2(std::abs(s.choleskyFlops - field("float64_cholesky_flop")) <= 1e-9 * s.choleskyFlops,
                     qPrintable(QString::fromStdString(where) + " Cholesky flops " + QString::number(s.choleskyFlops) + " vs " +
                                QString::number(field("float64_cholesky_flop"))));
            ++compared;
        }
        QCOMPARE(compared, 7);
    }

    // Projected back onto itself, the run's bounded stages take the seconds they took.
    void projectionOfTheRunItselfReproducesItsSeconds() {
        const npw::test::CliRun r = npw::test::runCli(
            npw_, {"bench", "--suite", "projection", "--from", report_, "--shapes", "tiny", "--calibrations",
                   QString::number(kWindows) + "x" + QString::number(kSeqlen), "--ratio", "0.3", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        QCOMPARE(j["projections"].size(), size_t(1));
        const Json& p = j["projections"][0];
        std::map<std::string, double> seconds;
        for (const Json& s : prune_["stage_bounds"]["stages"]) seconds[s["stage"].get<std::string>()] = s["seconds"].get<double>();
        for (const Json& s : p["stages"]) {
            const std::string stage = s["stage"].get<std::string>();
            QVERIFY(std::isfinite(s["seconds_here"].get<double>()) && std::isfinite(s["seconds_gpu"].get<double>()));
            // Uniform ρ removes what a global ranking removes only on average: the compensation's
            // and the export's work differ; the others depend on the shape and tokens alone.
            if (stage == "compensation" || stage == "writing" || stage == "scratch_writing") continue;
            QVERIFY2(relativeGap(s["seconds_here"].get<double>(), seconds.at(stage)) < 1e-9,
                     qPrintable(QString::fromStdString(stage) + ": " + QString::number(s["seconds_here"].get<double>()) +
                                " projected, " + QString::number(seconds.at(stage)) + " measured"));
        }
        QVERIFY(p["total_here_s"].get<double>() > 0);
        QVERIFY(p["footprint"]["peak_rss_anon_bytes"].get<int64_t>() > 0);
        // Every requested shape and calibration, 13B and 70B included.
        const npw::test::CliRun big = npw::test::runCli(
            npw_, {"bench", "--suite", "projection", "--from", report_, "--shapes", "13b,70b", "--json"});
        QVERIFY2(big.rc == 0, qPrintable(big.err));
        QCOMPARE(big.json()["projections"].size(), size_t(4));
        for (const Json& row : big.json()["projections"]) QVERIFY(std::isfinite(row["total_gpu_s"].get<double>()));
    }

    void refusesWhatItCannotProject() {
        QFile other(dir_.filePath("other.json"));
        QVERIFY(other.open(QIODevice::WriteOnly));
        other.write("{\"ppl\": 3.5}");
        other.close();
        const npw::test::CliRun notReport =
            npw::test::runCli(npw_, {"bench", "--suite", "projection", "--from", other.fileName()});
        QCOMPARE(notReport.rc, 1);
        QVERIFY2(notReport.err.contains("other.json") && notReport.err.contains("stage_bounds"), qPrintable(notReport.err));
        const npw::test::CliRun noFrom = npw::test::runCli(npw_, {"bench", "--suite", "projection"});
        QCOMPARE(noFrom.rc, 1);
        QVERIFY2(noFrom.err.contains("--from"), qPrintable(noFrom.err));
        const npw::test::CliRun badCalibration = npw::test::runCli(
            npw_, {"bench", "--suite", "projection", "--from", report_, "--calibrations", "16by512"});
        QCOMPARE(badCalibration.rc, 1);
        QVERIFY2(badCalibration.err.contains("16by512") && badCalibration.err.contains("WINDOWSxSEQLEN"),
                 qPrintable(badCalibration.err));
        // A rate the run did not measure (0) has nothing to project with: refused, naming it.
        Json zeroRate = prune_;
        zeroRate["stage_bounds"]["rates"]["float64_gemm_flop_per_s"] = 0;
        QFile z(dir_.filePath("zero-rate.json"));
        QVERIFY(z.open(QIODevice::WriteOnly));
        z.write(QByteArray::fromStdString(zeroRate.dump()));
        z.close();
        const npw::test::CliRun noRate = npw::test::runCli(npw_, {"bench", "--suite", "projection", "--from", z.fileName()});
        QCOMPARE(noRate.rc, 1);
        QVERIFY2(noRate.err.contains("zero-rate.json") && noRate.err.contains("float64_gemm_flop_per_s"), qPrintable(noRate.err));
        const npw::test::CliRun noShapes =
            npw::test::runCli(npw_, {"bench", "--suite", "projection", "--from", report_, "--shapes", ","});
        QCOMPARE(noShapes.rc, 1);
        QVERIFY2(noShapes.err.contains("--shapes"), qPrintable(noShapes.err));
        const npw::test::CliRun noCalibrations =
            npw::test::runCli(npw_, {"bench", "--suite", "projection", "--from", report_, "--calibrations", ","});
        QCOMPARE(noCalibrations.rc, 1);
        QVERIFY2(noCalibrations.err.contains("--calibrations"), qPrintable(noCalibrations.err));
        // A negative rate as well as 0: nothing to project with.
        zeroRate["stage_bounds"]["rates"]["float64_gemm_flop_per_s"] = -1e9;
        QVERIFY(z.open(QIODevice::WriteOnly | QIODevice::Truncate));
        z.write(QByteArray::fromStdString(zeroRate.dump()));
        z.close();
        const npw::test::CliRun negativeRate = npw::test::runCli(npw_, {"bench", "--suite", "projection", "--from", z.fileName()});
        QCOMPARE(negativeRate.rc, 1);
        QVERIFY2(negativeRate.err.contains("float64_gemm_flop_per_s"), qPrintable(negativeRate.err));
        const npw::test::CliRun badShape =
            npw::test::runCli(npw_, {"bench", "--suite", "projection", "--from", report_, "--shapes", "30b"});
        QCOMPARE(badShape.rc, 1);
        QVERIFY2(badShape.err.contains("30b") && badShape.err.contains("70b"), qPrintable(badShape.err));
    }
};

QTEST_GUILESS_MAIN(TestCliBenchProjection)
#include "tst_cli_bench_projection.moc"
