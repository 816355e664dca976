// The studio on a model whose pruning takes the layer-by-layer road (a 7B on a workstation),
// tried on demo:lm with the RAM pretended small (NPW_PHYSICAL_MEMORY_BYTES), against the same
// session in RAM:
//  - opening shows the architecture from the headers (headersRead) before the model is there;
//  - Run calibrates one block at a time into a scratch file and scores from it: the same masks
//    at every ρ and the same scores (to float64 rounding) as in RAM, re-selection at other ρ/λ
//    without a job;
//  - export, sweep, the baselines and lstar-kl are refused with the reason; the Text tab
//    continues the dense model alone and says why;
//  - the scratch file goes with a new calibration, another model and the session.
#include "studio_session_helpers.h"
#include "app/studio/textsession.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace {

// The RAM demo:lm's in-RAM road needs ~40 MB of: 1 MB sends it layer by layer.
struct PretendSmallRam {
    PretendSmallRam() { qputenv("NPW_PHYSICAL_MEMORY_BYTES", "1000000"); }
    ~PretendSmallRam() { qunsetenv("NPW_PHYSICAL_MEMORY_BYTES"); }
};

double relativeGap(const std::vector<npw::LayerScores>& a, const std::vector<npw::LayerScores>& b) {
    double gap = 0, scale = 0;
    for (size_t l = 0; l < b.size(); ++l) {
        for (size_t i = 0; i < b[l].heads.size(); ++i) {
            gap = std::max(gap, std::abs(a[l].heads[i] - b[l].heads[i]));
            scale = std::max(scale, std::abs(b[l].heads[i]));
        }
        for (size_t i = 0; i < b[l].channels.size(); ++i) {
            gap = std::max(gap, std::abs(a[l].channels[i] - b[l].channels[i]));
            scale = std::max(scale, std::abs(b[l].channels[i]));
        }
    }
    return scale > 0 ? gap / scale : gap;
}

bool sameMask(const npw::Mask& a, const npw::Mask& b) { return a.keepHeads == b.keepHeads && a.keepChannels == b.keepChannels; }

} // namespace

class TestStudioLayerwise : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

private slots:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        // The scratch files go to the temporary folder: this test's own.
        qputenv("TMPDIR", tmp_.path().toUtf8());
    }

    void sameSelectionsOnBothRoads_data() {
        QTest::addColumn<int>("method");
        QTest::newRow("numerical") << int(npw::PruneMethod::Numerical);
        QTest::newRow("flap") << int(npw::PruneMethod::Flap);
    }
    void sameSelectionsOnBothRoads() {
        QFETCH(int, method);
        StudioSession inRam;
        studio_test::openAndScore(inRam, npw::PruneMethod(method));
        QVERIFY(!inRam.pruneRoad().layerwise);
        QVERIFY(inRam.selection().has_value());

        PretendSmallRam small;
        StudioSession layerwise;
        QSignalSpy headers(&layerwise, &StudioSession::headersRead);
        QSignalSpy changed(&layerwise, &StudioSession::modelChanged);
        QSignalSpy progress(layerwise.jobs(), &JobRunner::progressed);
        QVERIFY(layerwise.openModel(QStringLiteral("demo:lm")));
        QVERIFY(studio_test::waitIdle(layerwise));
        QCOMPARE(headers.count(), 1);
        QCOMPARE(changed.count(), 1);
        QVERIFY(layerwise.hasModel());
        QVERIFY(!layerwise.openingHeaders());
        QVERIFY(layerwise.pruneRoad().layerwise);
        QVERIFY(layerwise.pruneRoadText().startsWith("layer by layer"));
        progress.clear();
        studio_test::openAndScore(layerwise, npw::PruneMethod(method));
        QVERIFY(layerwise.layerwiseStatistics() != nullptr);
        QVERIFY(layerwise.stats() == nullptr);  // nothing of the in-RAM statistics
        QVERIFY(!layerwise.calibrationStale());
        const std::string file = layerwise.layerwiseStatistics()->file();
        QVERIFY(fs::exists(file));
        QVERIFY(QString::fromStdString(file).startsWith(tmp_.path()));
        // The progress bar followed the calibration block by block (its time estimate is
        // JobRunner's EtaEstimator, tested in tst_studio_session): fractions that only grow.
        QStringList stages;
        double calibrated = -1;
        int calibrateReports = 0;
        for (const QList<QVariant>& p : progress) {
            if (stages.isEmpty() || stages.back() != p[0].toString()) stages << p[0].toString();
            if (p[0].toString() != "calibrate") continue;
            QVERIFY(p[1].toDouble() >= calibrated);
            calibrated = p[1].toDouble();
            ++calibrateReports;
        }
        QVERIFY2(stages.contains("calibrate") && calibrateReports >= 2, qPrintable(stages.join(",")));

        QVERIFY(layerwise.selection().has_value());
        for (double rho : {0.2, 0.45}) {
            studio::SelectionKnobs k = inRam.knobs();
            k.rho = rho;
            inRam.setKnobs(k);
            layerwise.setKnobs(k);
            QVERIFY(!layerwise.jobs()->isRunning());  // re-selection needs no job
            QVERIFY2(sameMask(layerwise.selection()->selection.mask, inRam.selection()->selection.mask),
                     qPrintable(QString("ρ = %1").arg(rho)));
            const double gap = relativeGap(layerwise.selection()->scores, inRam.selection()->scores);
            QVERIFY2(gap <= 1e-9, qPrintable(QString::number(gap)));
        }
        if (npw::PruneMethod(method) == npw::PruneMethod::Numerical) {
            studio::SelectionKnobs k = inRam.knobs();
            k.lambda = k.lambda * 4;  // λ_rel: a closed-form re-score on both roads
            inRam.setKnobs(k);
            layerwise.setKnobs(k);
            QVERIFY(sameMask(layerwise.selection()->selection.mask, inRam.selection()->selection.mask));
        }

        // What needs the whole model is refused with the reason.
        QSignalSpy refused(&layerwise, &StudioSession::refused);
        QVERIFY(!layerwise.exportPrunedModel(tmp_.filePath("out")));
        QCOMPARE(refused.count(), 1);
        QVERIFY(refused.back()[1].toString().contains("layer by layer"));
        QVERIFY(refused.back()[1].toString().contains("npw prune demo:lm"));
        QVERIFY(!fs::exists(tmp_.filePath("out").toStdString()));
        QVERIFY(!layerwise.runSweep(SweepRequest{}));
        QCOMPARE(refused.count(), 2);
        {
            // The Text tab continues the dense model alone, and says why.
            TextSession text(&layerwise);
            QSignalSpy said(&text, &TextSession::logMessage);
            TextRequest request;
            request.prompts = {QStringLiteral("And Jesus said unto them")};
            request.tokens = 4;
            QVERIFY(text.run(request));
            QVERIFY(studio_test::waitIdle(layerwise));
            QVERIFY(text.hasResult());
            QCOMPARE(text.results().at(0).models.size(), size_t(1));
            QCOMPARE(said.count(), 1);
            QVERIFY(said.back()[0].toString().contains("layer by layer"));
        }
        studio::RunSettings s = layerwise.settings();
        s.baseline = npw::BaselineMethod::BlockInfluence;
        layerwise.setSettings(s);
        QVERIFY(!layerwise.runScoring());
        QCOMPARE(refused.count(), 3);
        QVERIFY(refused.back()[1].toString().contains("whole-model passes"));
        s.baseline.reset();
        s.prune.method = npw::PruneMethod::Numerical;  // lstar-kl is the numerical score's ranking
        s.prune.crossLayer = npw::CrossLayerRanking::MeasuredDamage;
        layerwise.setSettings(s);
        QVERIFY(!layerwise.runScoring());
        QCOMPARE(refused.count(), 4);

        // A new calibration replaces the file; opening another model removes it.
        s.prune.crossLayer = npw::PruneSettings{}.crossLayer;
        s.prune.method = npw::PruneMethod(method);
        s.calibration.seed += 1;
        layerwise.setSettings(s);
        QVERIFY(layerwise.calibrationStale());
        QVERIFY(layerwise.runScoring());
        QVERIFY(studio_test::waitIdle(layerwise));
        QVERIFY(layerwise.layerwiseStatistics() != nullptr);
        QVERIFY(!fs::exists(file));
        const std::string second = layerwise.layerwiseStatistics()->file();
        QVERIFY(fs::exists(second));
        QVERIFY(layerwise.openModel(QStringLiteral("demo:lm-gqa")));
        QVERIFY(studio_test::waitIdle(layerwise));
        QVERIFY(layerwise.layerwiseStatistics() == nullptr);
        QVERIFY(!fs::exists(second));
    }

    // The scratch file goes with the session.
    void scratchFileGoesWithTheSession() {
        PretendSmallRam small;
        std::string file;
        {
            StudioSession session;
            studio_test::openAndScore(session);
            QVERIFY(session.layerwiseStatistics() != nullptr);
            file = session.layerwiseStatistics()->file();
            QVERIFY(fs::exists(file));
        }
        QVERIFY(!fs::exists(file));
    }
};

QTEST_MAIN(TestStudioLayerwise)
#include "tst_studio_layerwise.moc"
