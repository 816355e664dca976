// The command line and the studio reach the same numbers through the same core workbench
// (core/experiments/language_workbench.h): `npw prune --json` and a StudioSession at the same
// calibration and knobs select the same mask (kept heads, KV heads and channels per layer, the
// same count of removed units) and report the same parameters and achieved ratios; and both
// follow the one rule for a calibration window longer than the model's context (capped at it,
// and said so). The baselines too (issue 19): `npw prune --method llm-pruner | block-influence`
// and the studio's Selection at the same ρ keep the same units and state the same ratios and
// native knob (demo:lm, and demo:lm-gqa: KV groups), and the studio's SliceGPT export is the
// model `npw prune --method slicegpt` writes (the same width and report; logits equal to 1e-5 of
// the largest — the same float64 PCA, but two processes whose thread pools may split the float32
// matmuls differently). Runs the npw binary of this build tree.
#include "app/studio/studiosession.h"
#include "core/experiments/language_workbench.h"
#include "core/models/runtime.h"
#include "core/models/sliced_llama.h"
#include "core/util/atomic_file.h"
#include "core/util/paths.h"
#include "studio_session_helpers.h"

#include <ATen/ATen.h>
#include <QCoreApplication>
#include <QFileInfo>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

using namespace studio_test;
using Json = nlohmann::json;

class TestStudioParity : public QObject {
    Q_OBJECT

    QString npw_;

    Json prune(const QStringList& extra, QString* err = nullptr, const QString& model = QStringLiteral("demo:lm")) {
        QProcess p;
        p.start(npw_, QStringList{"prune", model, "--calib", QString::fromStdString(studio::defaultCalibrationSource())} +
                          extra + QStringList{"--json"});
        p.waitForFinished(600000);
        const QString stderrText = QString::fromUtf8(p.readAllStandardError());
        if (err) *err = stderrText;
        if (p.exitCode() != 0) {
            qWarning("npw prune failed: %s", qPrintable(stderrText));
            return nullptr;
        }
        return Json::parse(p.readAllStandardOutput().toStdString());
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
    }

    void cliAndStudioSelectTheSameMask_data() {
        QTest::addColumn<QString>("method");
        QTest::addColumn<double>("ratio");
        QTest::newRow("numerical 0.3") << "numerical" << 0.3;
        QTest::newRow("flap 0.2") << "flap" << 0.2;
        QTest::newRow("wanda-sp 0.25") << "wanda-sp" << 0.25;
    }

    void cliAndStudioSelectTheSameMask() {
        QFETCH(QString, method);
        QFETCH(double, ratio);
        QTemporaryDir dir;
        const Json cli = prune({"--method", method, "--ratio", QString::number(ratio), "--nsamples", "16", "--seqlen",
                                "64", "--out", dir.filePath("pruned")});
        QVERIFY(!cli.is_null());

        StudioSession session;
        QVERIFY(session.openModel(QStringLiteral("demo:lm")));
        QVERIFY(waitIdle(session));
        studio::RunSettings s = smallSettings(npw::parsePruneMethod(method.toStdString()));  // 16 × 64, seed 0
        session.setSettings(s);
        studio::SelectionKnobs knobs;  // α default, budget reading, λ_rel default: the CLI's defaults
        knobs.rho = ratio;
        session.setKnobs(knobs);
        QVERIFY(session.runScoring());
        QVERIFY(waitIdle(session));
        QVERIFY(session.selection().has_value());
        QVERIFY(session.workbenchSelection());

        // The calibration both saw.
        QCOMPARE(cli["calibration"]["samples"].get<int64_t>(), int64_t(16));
        QCOMPARE(cli["calibration"]["seqlen"].get<int64_t>(), int64_t(64));
        QCOMPARE(session.workbench().calibration().summary.tokens, cli["calibration"]["tokens"].get<int64_t>());

        // The same mask: kept counts per layer, exactly.
        const SelectionView& view = *session.selection();
        const Json& layers = cli["layers"];
        QCOMPARE(layers.size(), view.kept.size());
        int64_t keptUnitsCli = 0, keptUnitsStudio = 0;
        for (size_t l = 0; l < view.kept.size(); ++l) {
            // demo:lm has one KV head per head: an attention unit is a head and a KV group.
            QCOMPARE(view.kept[l].keptChannels, layers[l]["channels"].get<int64_t>());
            QCOMPARE(view.kept[l].keptHeads, layers[l]["kv_heads"].get<int64_t>());
            QCOMPARE(view.kept[l].keptHeads, layers[l]["heads"].get<int64_t>());
            keptUnitsCli += layers[l]["heads"].get<int64_t>() + layers[l]["channels"].get<int64_t>();
            keptUnitsStudio += view.kept[l].keptHeads + view.kept[l].keptChannels;
        }
        QCOMPARE(keptUnitsStudio, keptUnitsCli);
        QCOMPARE(view.selection.removedHeads, cli["removed_attention_units"].get<int64_t>());
        QCOMPARE(view.selection.removedChannels, cli["removed_mlp_channels"].get<int64_t>());
        // The achieved ratios are the same function of the same mask and costs: equal to the
        // printed precision of JSON (17 significant digits round-trip a double).
        QCOMPARE(view.achievedRatio, cli["achieved_ratio"].get<double>());
        QCOMPARE(view.achievedRatioModel, cli["achieved_ratio_model"].get<double>());

        // The report the studio's export writes: the same parameters and ratios.
        const npw::WorkbenchPrune run = npw::LanguagePruningWorkbench::applySelection(
            *session.model().model, *session.stats(), *session.workbenchSelection(), s.prune);
        QCOMPARE(run.report.paramsBefore, cli["params_before"].get<int64_t>());
        QCOMPARE(run.report.paramsAfter, cli["params_after"].get<int64_t>());
        QCOMPARE(run.report.achievedRatio, cli["achieved_ratio"].get<double>());
        QCOMPARE(run.report.alpha, cli["alpha"].get<double>());
        // Losses: the same windows, but the studio calibrates in smaller batches (a prompter
        // cancel), so its float64 sums add in another order: equal to 1e-9 relative.
        for (size_t l = 0; l < run.report.layers.size(); ++l)
            for (const char* key : {"attn_loss", "mlp_loss"}) {
                const double a = std::string(key) == "attn_loss" ? run.report.layers[l].attentionLoss
                                                                  : run.report.layers[l].mlpLoss;
                const double b = layers[l][key].get<double>();
                QVERIFY2(std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)),
                         qPrintable(QStringLiteral("layer %1 %2: studio %3, CLI %4").arg(l).arg(key).arg(a).arg(b)));
            }
    }

    void cliAndStudioSelectTheSameBaseline_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("method");
        QTest::addColumn<double>("ratio");
        QTest::newRow("llm-pruner 0.3") << "demo:lm" << "llm-pruner" << 0.3;
        QTest::newRow("llm-pruner-global 0.2") << "demo:lm" << "llm-pruner-global" << 0.2;
        QTest::newRow("block-influence 0.3") << "demo:lm" << "block-influence" << 0.3;
        QTest::newRow("GQA llm-pruner 0.3") << "demo:lm-gqa" << "llm-pruner" << 0.3;  // KV groups
    }

    void cliAndStudioSelectTheSameBaseline() {
        QFETCH(QString, model);
        QFETCH(QString, method);
        QFETCH(double, ratio);
        const bool global = method == QLatin1String("llm-pruner-global");
        QTemporaryDir dir;
        QStringList flags{"--method", global ? QStringLiteral("llm-pruner") : method, "--ratio", QString::number(ratio),
                          "--nsamples", "16", "--seqlen", "64", "--out", dir.filePath("pruned")};
        if (global) flags << "--llm-pruner-global";
        const Json cli = prune(flags, nullptr, model);
        QVERIFY(!cli.is_null());

        StudioSession session;
        QVERIFY(session.openModel(model));
        QVERIFY(waitIdle(session));
        studio::RunSettings s = smallSettings();  // 16 × 64, seed 0
        s.baseline = *npw::parseBaselineMethod(global ? "llm-pruner" : method.toStdString());
        s.llmPrunerGlobal = global;
        session.setSettings(s);
        studio::SelectionKnobs knobs;
        knobs.rho = 0.45;  // scored elsewhere first: the selection at ρ is a re-selection
        session.setKnobs(knobs);
        QVERIFY(session.runScoring());
        QVERIFY(waitIdle(session));
        knobs.rho = ratio;
        session.setKnobs(knobs);
        QVERIFY(!session.jobs()->isRunning());
        QVERIFY(session.selection().has_value());
        const SelectionView& view = *session.selection();
        QCOMPARE(QString::fromStdString(view.method), method);
        QVERIFY(view.baseline && view.perUnitScores());
        QCOMPARE(session.workbench().calibration().summary.tokens, cli["calibration"]["tokens"].get<int64_t>());

        const Json& layers = cli["layers"];
        QCOMPARE(layers.size(), view.kept.size());
        for (size_t l = 0; l < view.kept.size(); ++l) {
            QCOMPARE(view.kept[l].keptChannels, layers[l]["channels"].get<int64_t>());
            QCOMPARE(view.kept[l].keptHeads, layers[l]["kv_heads"].get<int64_t>());
        }
        QCOMPARE(view.achievedRatio, cli["achieved_ratio"].get<double>());
        QCOMPARE(view.achievedRatioModel, cli["achieved_ratio_model"].get<double>());
        const Json& native = session.workbenchSelection()->native;
        const std::string knob = cli["native"]["knob"].get<std::string>();
        QCOMPARE(native["knob"].get<std::string>(), knob);
        QCOMPARE(native[knob].dump(), cli["native"][knob].dump());
        if (method == QLatin1String("block-influence"))
            QCOMPARE(native["removed_blocks"].dump(), cli["native"]["removed_blocks"].dump());
    }

    void studioSliceGptExportIsTheCliModel() {
        QTemporaryDir dir;
        const double ratio = 0.3;
        const Json cli = prune({"--method", "slicegpt", "--ratio", QString::number(ratio), "--nsamples", "16", "--seqlen",
                                "64", "--out", dir.filePath("cli")});
        QVERIFY(!cli.is_null());

        StudioSession session;
        QVERIFY(session.openModel(QStringLiteral("demo:lm")));
        QVERIFY(waitIdle(session));
        studio::RunSettings s = smallSettings();
        s.baseline = npw::BaselineMethod::SliceGpt;
        session.setSettings(s);
        studio::SelectionKnobs knobs;
        knobs.rho = ratio;
        session.setKnobs(knobs);
        QVERIFY(session.runScoring());
        QVERIFY(waitIdle(session));
        const SelectionView& view = *session.selection();
        QVERIFY(view.baseline && !view.perUnitScores());
        QVERIFY(QString::fromStdString(view.description).contains(QStringLiteral("no per-unit scores")));
        // Stated before slicing: the width and ratios the export then reaches.
        QCOMPARE(session.workbenchSelection()->native["width"].get<int64_t>(), cli["native"]["width"].get<int64_t>());
        QCOMPARE(view.achievedRatio, cli["achieved_ratio"].get<double>());
        QCOMPARE(view.achievedRatioModel, cli["achieved_ratio_model"].get<double>());

        QVERIFY(session.exportPrunedModel(dir.filePath("studio")));
        QVERIFY(waitIdle(session));
        const Json manifest = Json::parse(npw::readTextFile(dir.filePath("studio/npw-manifest.json").toStdString()));
        const Json cliManifest = Json::parse(npw::readTextFile(dir.filePath("cli/npw-manifest.json").toStdString()));
        QCOMPARE(manifest["format"].get<std::string>(), std::string(npw::kSlicedModelFormat));
        for (const char* key : {"params_before", "params_after", "achieved_ratio", "achieved_ratio_model"})
            QCOMPARE(manifest[key].dump(), cliManifest[key].dump());
        QCOMPARE(manifest["native"]["width"].dump(), cliManifest["native"]["width"].dump());
        QCOMPARE(manifest["native"]["residual_widths"].dump(), cliManifest["native"]["residual_widths"].dump());

        const npw::Runtime cpu = npw::chooseRuntime("cpu");
        const npw::SlicedLlama a = npw::SlicedLlama::load(dir.filePath("studio").toStdString(), cpu);
        const npw::SlicedLlama b = npw::SlicedLlama::load(dir.filePath("cli").toStdString(), cpu);
        const at::Tensor ids = at::arange(1, 65, at::kLong).view({1, 64});
        const at::Tensor la = a.logits(ids), lb = b.logits(ids);
        const double diff = (la - lb).abs().max().item<double>(), scale = lb.abs().max().item<double>();
        QVERIFY2(diff <= 1e-5 * scale, qPrintable(QStringLiteral("logits differ by %1 (largest %2)").arg(diff).arg(scale)));
    }

    void workbenchPruneIsTheCoreSteps() {
        // The workbench adds no numbers of its own. Its prune() is the one road of npw prune,
        // sweep, bench and the studio, so no second orchestrator is left to compare it with: the
        // reference is core's steps called one by one here (scoreModel, MaskSelector,
        // applySelectionAndReport — the steps the engine's tests check against the Python
        // references). What the workbench adds (kept score sets, λ_rel re-scored in closed form,
        // the settings it applies with) must change no mask, weight or report, for a relative
        // and an absolute λ. The CLI against the studio: cliAndStudioSelectTheSameMask.
        const npw::LanguageModel lm = npw::openLanguageModel("demo:lm", npw::chooseRuntime("cpu"));
        npw::LanguagePruningWorkbench workbench(lm);
        npw::CalibrationRequest request;
        request.source = studio::defaultCalibrationSource();
        request.samples = 8;
        request.seqlen = 64;
        workbench.setCalibration(npw::LanguagePruningWorkbench::calibrate(lm, request));
        QCOMPARE(workbench.calibration().summary.tokens, int64_t(8 * 64));
        const npw::ModelStats& stats = *workbench.calibration().stats;
        for (const double absoluteLambda : {std::nan(""), 1e-4}) {
            npw::PruneSettings settings;
            settings.ratio = 0.25;
            settings.lambda = absoluteLambda;
            const npw::WorkbenchPrune mine = workbench.prune(settings);
            const npw::ScoreSet scores = npw::scoreModel(*lm.model, stats, settings);
            const npw::MaskSelector selector(scores);
            const npw::SelectionResult chosen = selector.select(settings.ratio, settings.alpha, settings.alphaMode);
            const npw::AppliedSelection engine = npw::applySelectionAndReport(
                lm.model->checkpoint(), stats, scores, chosen, settings, selector.defaultAlpha());
            QVERIFY(mine.selection.mask.keepHeads == chosen.mask.keepHeads);
            QVERIFY(mine.selection.mask.keepChannels == chosen.mask.keepChannels);
            QVERIFY(chosen.removedHeads > 0 && chosen.removedChannels > 0);
            // The studio's re-selection of the kept set at the same knobs.
            const npw::WorkbenchSelection selected =
                workbench.select(workbench.scoreSetNames().back(), settings.ratio, settings.alpha, settings.alphaMode,
                                 std::isnan(absoluteLambda) ? settings.lambdaRel : std::nan(""));
            QVERIFY(selected.selection.mask.keepHeads == chosen.mask.keepHeads);
            QVERIFY(selected.selection.mask.keepChannels == chosen.mask.keepChannels);
            const auto& a = mine.pruned.checkpoint.weights.layers;
            const auto& b = engine.pruned.checkpoint.weights.layers;
            QCOMPARE(a.size(), b.size());
            for (size_t l = 0; l < a.size(); ++l)
                for (const auto& [x, y] : {std::pair<at::Tensor, at::Tensor>{a[l].wo, b[l].wo}, {a[l].w_down, b[l].w_down},
                                           {a[l].wq, b[l].wq}, {a[l].w_up, b[l].w_up}})
                    QVERIFY2(x.defined() == y.defined() && (!x.defined() || at::equal(x, y)), qPrintable(QString::number(l)));
            Json ja = npw::pruneReportJson(mine.report), jb = npw::pruneReportJson(engine.report);
            ja.erase("timings");
            jb.erase("timings");
            QCOMPARE(QString::fromStdString(ja.dump()), QString::fromStdString(jb.dump()));
        }
    }

    void seqlenBeyondTheContextIsCappedAndSaid() {
        // demo:lm's context is 512 tokens: both ask for 1000.
        QTemporaryDir dir;
        QString err;
        const Json cli = prune({"--method", "numerical", "--ratio", "0.2", "--nsamples", "4", "--seqlen", "1000", "--out",
                                dir.filePath("pruned")},
                               &err);
        QVERIFY(!cli.is_null());
        QCOMPARE(cli["calibration"]["seqlen"].get<int64_t>(), int64_t(512));
        const std::string note = cli["calibration"]["note"].get<std::string>();
        QCOMPARE(note, std::string("seqlen 1000 capped at the model's context of 512"));
        QVERIFY2(err.contains(QString::fromStdString(note)), qPrintable(err));

        StudioSession session;
        QSignalSpy log(&session, &StudioSession::logMessage);
        QVERIFY(session.openModel(QStringLiteral("demo:lm")));
        QVERIFY(waitIdle(session));
        studio::RunSettings s = smallSettings();
        s.calibration.samples = 4;
        s.calibration.seqlen = 1000;
        session.setSettings(s);
        QVERIFY(session.runScoring());
        QVERIFY(waitIdle(session));
        QCOMPARE(session.workbench().calibration().summary.seqlen, int64_t(512));
        QCOMPARE(session.workbench().calibration().note, note);
        bool said = false;
        for (const QList<QVariant>& args : log) said = said || args.at(0).toString().contains(QString::fromStdString(note));
        QVERIFY2(said, "the studio's log says the window was capped");

        // The builder itself: 0 takes the context (at most 2048), a length within it stays.
        std::string builderNote = "stale";
        QCOMPARE(npw::calibrationSeqlen(0, session.model().model->config(), &builderNote), int64_t(512));
        QVERIFY(builderNote.empty());
        QCOMPARE(npw::calibrationSeqlen(64, session.model().model->config(), &builderNote), int64_t(64));
        QVERIFY(builderNote.empty());
    }
};

QTEST_MAIN(TestStudioParity)
#include "tst_studio_parity.moc"
