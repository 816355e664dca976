// The studio on a model whose pruning takes the layer-by-layer road (a 7B on a workstation),
// tried on demo:lm with the RAM pretended small (NPW_PHYSICAL_MEMORY_BYTES), against the same
// session in RAM:
//  - opening shows the architecture from the headers (headersRead) before the model is there;
//  - Run calibrates one block at a time into a scratch file and scores from it: the same masks
//    at every ρ and the same scores (to float64 rounding) as in RAM, re-selection at other ρ/λ
//    without a job;
//  - Export writes the selection layer by layer from the statistics the session holds, through
//    `npw prune --layerwise`'s apply+write pass: every tensor bit for bit what that command writes
//    with the same settings and calibration (f32 demo:lm, and a bf16 copy in bf16), the same
//    config and report; progress per layer; a cancel or a refused folder leaves nothing behind;
//  - the Sweep tab runs `npw sweep --layerwise`'s road and gives the command line's rows; the
//    baselines, lstar-kl, a zero-shot task are refused with the reason; the Text tab continues the
//    dense model alone and says why;
//  - the scratch file goes with a new calibration, another model and the session.
#include "studio_session_helpers.h"
#include "app/studio/sweeppage.h"
#include "app/studio/textsession.h"
#include "bf16_checkpoint_copy.h"
#include "core/io/safetensors.h"
#include "core/models/model_loader.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <QCheckBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

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

nlohmann::json readJson(const std::string& file) {
    std::ifstream in(file);
    return nlohmann::json::parse(in);
}

// Every tensor of the export in `dir` (one model.safetensors or shards), by name, as stored.
std::map<std::string, at::Tensor> exportedTensors(const std::string& dir) {
    std::map<std::string, at::Tensor> out;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() != ".safetensors") continue;
        const auto file = npw::SafeTensorsFile::open(entry.path().string());
        for (const std::string& tensor : file->names()) out[tensor] = file->load(tensor);
    }
    return out;
}

// Whatever besides `keep` is in `dir` (staging or aside folders an export left).
QStringList leftoversIn(const QString& dir, const QStringList& keep) {
    QStringList left;
    for (const auto& entry : fs::directory_iterator(dir.toStdString())) {
        const QString name = QString::fromStdString(entry.path().filename().string());
        if (!keep.contains(name)) left << name;
    }
    return left;
}

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
            const double gap = relativeGap(layerwise.selection()->unitScores, inRam.selection()->unitScores);
            QVERIFY2(gap <= 1e-9, qPrintable(QString::number(gap)));
        }
        if (npw::PruneMethod(method) == npw::PruneMethod::Numerical) {
            studio::SelectionKnobs k = inRam.knobs();
            k.lambda = k.lambda * 4;  // λ_rel: a closed-form re-score on both roads
            inRam.setKnobs(k);
            layerwise.setKnobs(k);
            QVERIFY(sameMask(layerwise.selection()->selection.mask, inRam.selection()->selection.mask));
        }

        // What needs the whole model is refused with the reason (the export and the sweep are
        // not: they write layer by layer, exportMatchesTheCommandLine, sweepMatchesTheCommandLine).
        QSignalSpy refused(&layerwise, &StudioSession::refused);
        SweepRequest withBaseline;
        withBaseline.methods = {"flap", "slicegpt"};
        QVERIFY(!layerwise.runSweep(withBaseline));
        QVERIFY(!layerwise.jobs()->isRunning());
        QCOMPARE(refused.count(), 1);
        QVERIFY2(refused.back()[1].toString().contains("method slicegpt prunes in its own structure") &&
                     refused.back()[1].toString().contains("layer-by-layer road") &&
                     refused.back()[1].toString().contains("more than half of this machine's"),
                 qPrintable(refused.back()[1].toString()));
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
        QCOMPARE(refused.count(), 2);
        QVERIFY(refused.back()[1].toString().contains("whole-model passes"));
        s.baseline.reset();
        s.prune.method = npw::PruneMethod::Numerical;  // lstar-kl is the numerical score's ranking
        s.prune.crossLayer = npw::CrossLayerRanking::MeasuredDamage;
        layerwise.setSettings(s);
        QVERIFY(!layerwise.runScoring());
        QCOMPARE(refused.count(), 3);
        // The sweep's lstar-kl and a zero-shot task: refused too, by name.
        SweepRequest measured;
        measured.methods = {"numerical-lstar-kl"};
        QVERIFY(!layerwise.runSweep(measured));
        QCOMPARE(refused.count(), 4);
        QVERIFY2(refused.back()[1].toString().contains("numerical-lstar-kl measures each site's damage"),
                 qPrintable(refused.back()[1].toString()));
        SweepRequest zeroShot;
        zeroShot.zeroShotTask = studio::defaultZeroShotTask();
        QVERIFY(!layerwise.runSweep(zeroShot));
        QCOMPARE(refused.count(), 5);
        QVERIFY2(refused.back()[1].toString().contains("zero-shot"), qPrintable(refused.back()[1].toString()));
        QVERIFY(!layerwise.jobs()->isRunning());

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

    // The studio's export on the layer-wise road against `npw prune --layerwise` with the same
    // settings and calibration: the studio writes from the statistics and selection it holds
    // (no new calibration), the command line calibrates, scores and selects again, and both write
    // through the same apply+write pass. Bit for bit the same tensors, in the source's dtype.
    void exportMatchesTheCommandLine_data() {
        QTest::addColumn<int>("method");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<double>("rho");
        QTest::newRow("numerical, demo:lm (f32)") << int(npw::PruneMethod::Numerical) << false << 0.3;
        QTest::newRow("flap, demo:lm in bf16 shards") << int(npw::PruneMethod::Flap) << true << 0.25;
    }
    void exportMatchesTheCommandLine() {
        QFETCH(int, method);
        QFETCH(bool, bf16);
        QFETCH(double, rho);
        const QString npw = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw)) QSKIP("the npw binary is not built in this tree");
        QTemporaryDir work;
        QVERIFY(work.isValid());
        QString model = QStringLiteral("demo:lm");
        if (bf16) {
            model = work.filePath("bf16-model");
            npw::test::saveBf16Shards(npw::loadLlamaCheckpoint("demo:lm"), model.toStdString());
        }

        PretendSmallRam small;
        StudioSession session;
        QVERIFY(session.openModel(model));
        QVERIFY(studio_test::waitIdle(session));
        QVERIFY(session.pruneRoad().layerwise);
        studio_test::openAndScore(session, npw::PruneMethod(method));  // 16 windows of 64 tokens, seed 0
        QVERIFY(session.layerwiseStatistics() != nullptr);
        const std::string scratch = session.layerwiseStatistics()->file();
        studio::SelectionKnobs knobs = session.knobs();  // α, its reading and λ_rel: the CLI's defaults
        knobs.rho = rho;
        session.setKnobs(knobs);
        QVERIFY(session.selection().has_value());

        QSignalSpy progress(session.jobs(), &JobRunner::progressed);
        QSignalSpy logged(&session, &StudioSession::logMessage);
        QSignalSpy failed(session.jobs(), &JobRunner::failed);
        const QString studioOut = work.filePath("studio-export");
        QVERIFY(session.exportPrunedModel(studioOut));
        QVERIFY(studio_test::waitIdle(session));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.back()[1].toString()));
        // Progress by layers (the stage "apply", fractions that only grow, reaching 1; the runner
        // passes at most one report per 50 ms on to the window).
        int applyReports = 0;
        double applied = -1;
        for (const QList<QVariant>& p : progress) {
            if (p[0].toString() != "apply") continue;
            QVERIFY(p[1].toDouble() >= applied);
            applied = p[1].toDouble();
            ++applyReports;
        }
        QVERIFY2(applyReports >= 2 && applied == 1.0, qPrintable(QString("%1 reports, last %2").arg(applyReports).arg(applied)));
        QVERIFY(std::any_of(logged.begin(), logged.end(),
                            [](const QList<QVariant>& m) { return m[0].toString().startsWith("Exported"); }));
        // The statistics were reused: the same scratch file, still there.
        QCOMPARE(session.layerwiseStatistics()->file(), scratch);
        QVERIFY(fs::exists(scratch));

        const QString cliOut = work.filePath("cli-export");
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove("NPW_PHYSICAL_MEMORY_BYTES");  // --layerwise forces the road
        p.setProcessEnvironment(env);
        p.start(npw, {"prune", model, "--layerwise", "--calib", QString::fromStdString(studio::defaultCalibrationSource()),
                      "--nsamples", "16", "--seqlen", "64", "--method",
                      QString::fromStdString(npw::methodName(npw::PruneMethod(method))), "--ratio", QString::number(rho),
                      "--out", cliOut, "--json"});
        QVERIFY(p.waitForFinished(600000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());

        // Every tensor: the same names, dtype, shape and bits.
        const auto fromStudio = exportedTensors(studioOut.toStdString());
        const auto fromCli = exportedTensors(cliOut.toStdString());
        QCOMPARE(fromStudio.size(), fromCli.size());
        QVERIFY(!fromStudio.empty());
        const at::ScalarType sourceDtype = bf16 ? at::kBFloat16 : at::kFloat;
        for (const auto& [name, cli] : fromCli) {
            QVERIFY2(fromStudio.count(name), name.c_str());
            const at::Tensor& studioTensor = fromStudio.at(name);
            QCOMPARE(studioTensor.scalar_type(), sourceDtype);
            QCOMPARE(cli.scalar_type(), sourceDtype);
            QVERIFY2(studioTensor.sizes() == cli.sizes(), name.c_str());
            QVERIFY2(at::equal(studioTensor, cli),
                     qPrintable(QString("%1: max |difference| %2").arg(QString::fromStdString(name))
                                    .arg((studioTensor.to(at::kDouble) - cli.to(at::kDouble)).abs().max().item<double>())));
        }
        // Something was pruned, and the same layout was written.
        QVERIFY(session.selection()->selection.removedChannels > 0);
        QCOMPARE(readJson(studioOut.toStdString() + "/config.json"), readJson(cliOut.toStdString() + "/config.json"));
        // The same manifest: report (parameters, per-layer sizes and losses: the same arithmetic on
        // the same statistics), settings, calibration, scratch file, files.
        const nlohmann::json a = readJson(studioOut.toStdString() + "/npw-manifest.json");
        const nlohmann::json b = readJson(cliOut.toStdString() + "/npw-manifest.json");
        QCOMPARE(a.at("road"), nlohmann::json("layer-wise"));
        QStringList differ;
        for (const auto& [key, value] : b.items())
            if (!a.contains(key) || a.at(key) != value)
                differ << QString("%1: studio %2, CLI %3").arg(QString::fromStdString(key),
                                                             QString::fromStdString(a.value(key, nlohmann::json()).dump()),
                                                             QString::fromStdString(value.dump()));
        for (const auto& [key, value] : a.items())
            if (!b.contains(key)) differ << QString::fromStdString(key) + ": the studio's only";
        QVERIFY2(differ.isEmpty(), qPrintable(differ.join("\n")));
        // The per-layer losses came with the export: the session's table holds the manifest's.
        const nlohmann::json& layers = b.at("layers");
        QCOMPARE(session.layerReports().size(), layers.size());
        for (size_t l = 0; l < layers.size(); ++l) {
            QCOMPARE(session.layerReports()[l].mlpLoss, layers[l].at("mlp_loss").get<double>());
            QCOMPARE(session.layerReports()[l].attentionLoss, layers[l].at("attn_loss").get<double>());
        }
        // Nothing beside the two exports (no staging folder, no work folder left).
        QVERIFY2(leftoversIn(work.path(), {"bf16-model", "studio-export", "cli-export"}).isEmpty(),
                 qPrintable(leftoversIn(work.path(), {"bf16-model", "studio-export", "cli-export"}).join(", ")));
    }

    // The export's guards and a cancel, as the command line's: a folder npw did not write is never
    // replaced; an export cancelled mid-way leaves no folder (and no staging folder); an export
    // may replace an earlier export of npw's.
    void exportIsGuardedAndAtomic() {
        PretendSmallRam small;
        StudioSession session;
        studio_test::openAndScore(session);
        QVERIFY(session.pruneRoad().layerwise);
        QTemporaryDir work;
        QSignalSpy failed(session.jobs(), &JobRunner::failed);
        QSignalSpy cancelled(session.jobs(), &JobRunner::cancelled);

        // Someone's folder: refused, untouched.
        const QString theirs = work.filePath("theirs");
        QVERIFY(QDir().mkpath(theirs));
        {
            QFile f(theirs + "/notes.txt");
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("mine");
        }
        QVERIFY(session.exportPrunedModel(theirs));
        QVERIFY(studio_test::waitIdle(session));
        QCOMPARE(failed.count(), 1);
        QVERIFY2(failed.back()[1].toString().contains("theirs"), qPrintable(failed.back()[1].toString()));
        QCOMPARE(leftoversIn(theirs, {}), QStringList{"notes.txt"});

        // Cancelled as it starts: the job stops at its first layer's progress report, after the
        // staging folder and the first shard's temporary file are made: nothing at the target,
        // nothing beside it.
        const QString target = work.filePath("pruned");
        QVERIFY(session.exportPrunedModel(target));
        session.cancel();
        QVERIFY(studio_test::waitIdle(session));
        QCOMPARE(cancelled.count(), 1);
        QVERIFY(!fs::exists(target.toStdString()));
        QCOMPARE(leftoversIn(work.path(), {"theirs"}), QStringList{});

        // Then whole, and again over its own earlier export.
        for (int round = 0; round < 2; ++round) {
            QVERIFY(session.exportPrunedModel(target));
            QVERIFY(studio_test::waitIdle(session));
            QCOMPARE(failed.count(), 1);
            QVERIFY(fs::exists(target.toStdString() + "/npw-manifest.json"));
            QVERIFY(fs::exists(target.toStdString() + "/model.safetensors"));
            QCOMPARE(leftoversIn(work.path(), {"theirs", "pruned"}), QStringList{});
        }
        // Never into the model's own files, nor over the statistics it reads.
        const QString source = QString::fromStdString(session.model().model->checkpoint().source);
        QVERIFY(session.exportPrunedModel(source));
        QVERIFY(studio_test::waitIdle(session));
        QCOMPARE(failed.count(), 2);
        const std::string scratch = session.layerwiseStatistics()->file();
        const auto scratchBytes = fs::file_size(scratch);
        QVERIFY(session.exportPrunedModel(QString::fromStdString(scratch)));
        QVERIFY(studio_test::waitIdle(session));
        QCOMPARE(failed.count(), 3);
        QVERIFY2(failed.back()[1].toString().contains("statistics scratch file"), qPrintable(failed.back()[1].toString()));
        QCOMPARE(fs::file_size(scratch), scratchBytes);
    }

    // The Sweep tab on the layer-wise road: the page says the road and takes out what it cannot
    // run; the session runs `npw sweep --layerwise`'s road (runSweepLayerwise) on its worker with
    // progress, and its rows are the command line's for the same model, texts and settings: the
    // same methods, ratios, achieved ratios, windows and tokens, perplexities, nll and bits per byte
    // within 1e-6 relative (the same code with the same options in another process; measured: 0).
    // A cancel leaves no work folder.
    void sweepMatchesTheCommandLine() {
        const QString npw = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw)) QSKIP("the npw binary is not built in this tree");
        PretendSmallRam small;
        StudioSession session;
        QVERIFY(session.openModel(QStringLiteral("demo:lm")));
        QVERIFY(studio_test::waitIdle(session));
        QVERIFY(session.pruneRoad().layerwise);

        SweepPage page(&session);
        page.methodsField()->setText(QStringLiteral("numerical,slicegpt,flap,numerical-lstar-kl"));
        page.speedBox()->setChecked(true);
        page.setModelDefaults(session.modelDefaults());  // as the window does when a model opens
        QCOMPARE(page.methodsField()->text(), QStringLiteral("numerical,flap"));
        QVERIFY(!page.zeroShotBox()->isEnabled() && !page.zeroShotBox()->isChecked());
        QVERIFY(!page.speedBox()->isEnabled() && !page.speedBox()->isChecked());
        const QString said = page.roadLabel()->text();
        QVERIFY2(said.contains("sweeps layer by layer") && said.contains("llm-pruner, slicegpt, block-influence") &&
                     said.contains("numerical-lstar-kl") && said.contains("Taken out of Methods: slicegpt, numerical-lstar-kl"),
                 qPrintable(said));
        QVERIFY(page.methodsField()->toolTip().contains("Not offered"));

        SweepRequest request = page.sweepRequest();
        request.ratios = {0.2, 0.45};
        request.seeds = 1;
        request.calibSamples = {8};
        request.calibSeqlens = {32};
        request.evaluation.seqlen = 64;
        request.evaluation.maxWindows = 6;
        const std::string evalText = studio::defaultEvaluationSource();
        request.evalSources = {"text:" + evalText};

        // Cancelled as it starts: no work folder left in TMPDIR.
        QSignalSpy cancelled(session.jobs(), &JobRunner::cancelled);
        QVERIFY(session.runSweep(request));
        session.cancel();
        QVERIFY(studio_test::waitIdle(session));
        QCOMPARE(cancelled.count(), 1);
        auto sweepFolders = [this] {
            QStringList left;
            for (const auto& entry : fs::directory_iterator(tmp_.path().toStdString()))
                if (entry.path().filename().string().rfind("npw-sweep-", 0) == 0)
                    left << QString::fromStdString(entry.path().filename().string());
            return left;
        };
        QVERIFY2(sweepFolders().isEmpty(), qPrintable(sweepFolders().join(", ")));

        QSignalSpy progress(session.jobs(), &JobRunner::progressed);
        QSignalSpy failed(session.jobs(), &JobRunner::failed);
        QSignalSpy logged(&session, &StudioSession::logMessage);
        QVERIFY(session.runSweep(request));
        QVERIFY(studio_test::waitIdle(session));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.back()[1].toString()));
        QVERIFY(std::any_of(logged.begin(), logged.end(),
                            [](const QList<QVariant>& m) { return m[0].toString().startsWith("Sweeping layer by layer"); }));
        // Progress through the sweep's 5 steps (the dense model, 2 methods × 2 ratios; the runner
        // passes at most one report per 50 ms on, and always the last): within a step each stage
        // (calibrate, score, write, evaluate) starts again at the step's beginning, so a fraction
        // never falls below the step it is in; it reaches 1.
        QVERIFY(progress.count() >= 2);
        double fraction = -1, highest = 0;
        for (const QList<QVariant>& p : progress) {
            QVERIFY2(p[0].toString().startsWith("sweep"), qPrintable(p[0].toString()));
            fraction = p[1].toDouble();
            QVERIFY2(fraction >= std::floor(highest * 5 + 1e-9) / 5 - 1e-9 && fraction <= 1,
                     qPrintable(QString("%1 after %2 (%3)").arg(fraction).arg(highest).arg(p[0].toString())));
            highest = std::max(highest, fraction);
        }
        QCOMPARE(fraction, 1.0);
        QVERIFY2(sweepFolders().isEmpty(), qPrintable(sweepFolders().join(", ")));
        const std::vector<npw::SweepRow>& rows = session.sweepRows();
        QCOMPARE(rows.size(), size_t(1 + 2 * 2));  // dense + 2 methods × 2 ratios, one text

        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove("NPW_PHYSICAL_MEMORY_BYTES");  // --layerwise forces the road
        p.setProcessEnvironment(env);
        p.start(npw, {"sweep", "demo:lm", "--layerwise", "--methods", "numerical,flap", "--ratios", "0.2,0.45", "--seeds",
                      "1", "--nsamples", "8", "--seqlen", "32", "--calib",
                      QString::fromStdString(studio::defaultCalibrationSource()), "--eval",
                      QString::fromStdString("text:" + evalText), "--eval-seqlen", "64", "--max-windows", "6", "--json"});
        QVERIFY(p.waitForFinished(600000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const nlohmann::json cli = nlohmann::json::parse(p.readAllStandardOutput().toStdString());
        QCOMPARE(cli.at("road").at("layerwise").get<bool>(), true);
        const nlohmann::json& cliRows = cli.at("rows");
        QCOMPARE(cliRows.size(), rows.size());
        double worst = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            const nlohmann::json mine = npw::sweepRowJson(rows[i]);
            const QString what = QString::fromStdString(mine.dump() + "\n" + cliRows[i].dump());
            for (const char* same : {"method", "ratio", "seed", "eval", "calib_samples", "calib_seqlen", "calib_hash",
                                     "achieved_ratio", "achieved_ratio_model", "eval_tokens", "eval_windows",
                                     "eval_seqlen", "eval_hash", "lambda_rel"})
                QVERIFY2(mine.at(same) == cliRows[i].at(same), qPrintable(QString(same) + "\n" + what));
            for (const char* close : {"ppl", "nll", "bits_per_byte"}) {
                const double a = mine.at(close).get<double>(), b = cliRows[i].at(close).get<double>();
                QVERIFY2(std::isfinite(a), qPrintable(what));
                worst = std::max(worst, std::abs(a - b) / std::abs(b));
            }
        }
        qInfo("largest relative difference between the studio's layer-wise sweep and npw sweep --layerwise: %.3g", worst);
        QVERIFY2(worst <= 1e-6, qPrintable(QString::number(worst)));
        QVERIFY(rows[1].ppl != rows[0].ppl);  // pruned models, not the dense one again
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
