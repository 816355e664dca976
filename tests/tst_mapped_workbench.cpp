// Pruning a model opened memory-mapped (openLanguageModel keeps a safetensors file's weights as
// read-only views in its dtype; no float32 copy of the model) and the studio's layer-by-layer
// road (core/experiments/layerwise_workbench.h), on demo:lm and its bfloat16 copy:
//  - openLanguageModel keeps the views (no copy) in the file's dtype;
//  - calibration, scores, selection and the pruned model of the mapped float32 file equal, bit for
//    bit, those of an owned float32 copy (what every pruning command worked on before); of the
//    bfloat16 file, those of the owned float32 widening of its values within float32 rounding of
//    differently blocked GEMMs (same masks), and the pruned model is float32 as before;
//  - LayerwiseStatistics (one block at a time, Gram triangles in a scratch file) gives the same
//    masks and the in-RAM scores to float64 rounding, removes its scratch file, and removes the
//    files of dead processes;
//  - openLanguageModelInSteps hands over the headers before any weight is checked, then reports
//    "check weights" to the end, and names a NaN's tensor.
#include "core/experiments/layerwise_workbench.h"
#include "core/experiments/run_settings.h"
#include "core/io/safetensors.h"
#include "bf16_checkpoint_copy.h"
#include "core/models/model_loader.h"
#include "core/prune/export.h"
#include "core/prune/select.h"

#include "error_of.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace npw;
namespace fs = std::filesystem;

namespace {

using npw::test::saveAs;

// The model as every pruning command held it before: an owned float32 copy.
LanguageModel ownedCopy(const std::string& path) {
    LanguageModel lm;
    lm.name = path;
    LlamaCheckpoint ck = loadLlamaCheckpoint(path, WeightStorage::Copy);
    lm.tokenizer = openTokenizerOf(ck);
    lm.model = std::make_shared<LlamaModel>(std::move(ck), chooseRuntime("cpu"));
    return lm;
}

CalibrationRequest smallRequest() {
    CalibrationSettings c;
    c.samples = 8;
    c.seqlen = 64;
    c.seed = 5;
    return calibrationRequest(c);
}

PruneSettings settingsOf(PruneMethod m) {
    PruneSettings s;
    s.method = m;
    return s;
}

double maxAbs(const at::Tensor& t) { return t.abs().max().item<double>(); }
double relativeGap(const at::Tensor& a, const at::Tensor& b) {
    const double scale = maxAbs(b.to(at::kDouble));
    return scale == 0 ? maxAbs(a.to(at::kDouble)) : maxAbs(a.to(at::kDouble) - b.to(at::kDouble)) / scale;
}

// Every channel score of two score sets, as the largest relative gap.
double scoreGap(const ScoreSet& a, const ScoreSet& b) {
    double gap = 0;
    for (size_t l = 0; l < a.attentionChannels.size(); ++l) {
        if (a.attentionChannels[l].defined()) gap = std::max(gap, relativeGap(a.attentionChannels[l], b.attentionChannels[l]));
        if (a.mlpChannels[l].defined()) gap = std::max(gap, relativeGap(a.mlpChannels[l], b.mlpChannels[l]));
    }
    return gap;
}

bool sameMask(const Mask& a, const Mask& b) { return a.keepHeads == b.keepHeads && a.keepChannels == b.keepChannels; }

} // namespace

class TestMappedWorkbench : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string bf16_;

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        bf16_ = saveAs(loadLlamaCheckpoint("demo:lm"), dir_.filePath("lm-bf16").toStdString(), at::kBFloat16);
    }

    void openKeepsTheFileDtype() {
        const LanguageModel lm = openLanguageModel(bf16_, chooseRuntime("cpu"));
        const LlamaCheckpoint& ck = lm.model->checkpoint();
        QVERIFY(ck.weightsMapped);
        QCOMPARE(ck.weights.layers.at(1).w_up.scalar_type(), at::kBFloat16);
        QCOMPARE(ck.weights.embed.scalar_type(), at::kBFloat16);
        // The runtime uses the views themselves: no copy anywhere.
        QCOMPARE(lm.model->deviceWeights().layers.at(1).w_up.data_ptr(), ck.weights.layers.at(1).w_up.data_ptr());
        QVERIFY(lm.tokenizer != nullptr);
        const LanguageModel f32 = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        QVERIFY(f32.model->checkpoint().weightsMapped);
        QCOMPARE(f32.model->checkpoint().weights.layers.at(0).wq.scalar_type(), at::kFloat);
    }

    // The float32 file: mapped or copied, the same numbers through every step, bit for bit.
    void mappedFloat32EqualsOwnedCopy_data() {
        QTest::addColumn<int>("method");
        QTest::newRow("numerical") << int(PruneMethod::Numerical);
        QTest::newRow("flap") << int(PruneMethod::Flap);
        QTest::newRow("wanda-sp") << int(PruneMethod::WandaSp);
    }
    void mappedFloat32EqualsOwnedCopy() {
        QFETCH(int, method);
        const std::string path = loadLlamaCheckpoint("demo:lm", WeightStorage::Mapped).source;
        const LanguageModel mapped = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        const LanguageModel owned = ownedCopy(path);
        QVERIFY(!owned.model->checkpoint().weightsMapped);
        LanguagePruningWorkbench a(mapped), b(owned);
        a.setCalibration(LanguagePruningWorkbench::calibrate(mapped, smallRequest()));
        b.setCalibration(LanguagePruningWorkbench::calibrate(owned, smallRequest()));
        for (size_t l = 0; l < a.calibration().stats->mlp.size(); ++l)
            QVERIFY(at::equal(a.calibration().stats->mlp[l].gram, b.calibration().stats->mlp[l].gram));
        const std::string name = a.scoreAndKeep(settingsOf(PruneMethod(method)));
        b.scoreAndKeep(settingsOf(PruneMethod(method)));
        QCOMPARE(scoreGap(*a.computedScores(name), *b.computedScores(name)), 0.0);
        const WorkbenchSelection sa = a.select(name, 0.3, std::nan(""), AlphaMode::Budget);
        const WorkbenchSelection sb = b.select(name, 0.3, std::nan(""), AlphaMode::Budget);
        QVERIFY(sameMask(sa.selection.mask, sb.selection.mask));
        const WorkbenchPrune pa = LanguagePruningWorkbench::applySelection(*mapped.model, *a.calibration().stats, sa, PruneSettings{});
        const WorkbenchPrune pb = LanguagePruningWorkbench::applySelection(*owned.model, *b.calibration().stats, sb, PruneSettings{});
        LlamaWeights wa = pa.pruned.checkpoint.weights, wb = pb.pruned.checkpoint.weights;
        const auto na = namedTensors(wa), nb = namedTensors(wb);
        QCOMPARE(na.size(), nb.size());
        for (size_t i = 0; i < na.size(); ++i) {
            QCOMPARE(na[i].second->scalar_type(), at::kFloat);
            QVERIFY2(at::equal(*na[i].second, *nb[i].second), na[i].first.c_str());
        }
    }

    // The bfloat16 file mapped against the owned float32 widening of its values: the calibration's
    // GEMMs read bf16 blocks widened (float32 rounding of other blocking, ≤ 1e-5 relative in the
    // logits: tst_bf16_runtime), so the statistics and scores agree to that, the masks exactly,
    // and the pruned model is float32 throughout, as it was.
    void mappedBf16EqualsItsFloat32Widening() {
        const LanguageModel mapped = openLanguageModel(bf16_, chooseRuntime("cpu"));
        const LanguageModel owned = ownedCopy(bf16_);
        LanguagePruningWorkbench a(mapped), b(owned);
        a.setCalibration(LanguagePruningWorkbench::calibrate(mapped, smallRequest()));
        b.setCalibration(LanguagePruningWorkbench::calibrate(owned, smallRequest()));
        double statsGap = 0;
        for (size_t l = 0; l < a.calibration().stats->mlp.size(); ++l)
            statsGap = std::max(statsGap, relativeGap(a.calibration().stats->mlp[l].gram, b.calibration().stats->mlp[l].gram));
        qInfo("statistics: %.2e relative", statsGap);
        QVERIFY(statsGap <= 1e-4);
        for (PruneMethod m : {PruneMethod::Numerical, PruneMethod::Flap}) {
            const std::string name = a.scoreAndKeep(settingsOf(m));
            b.scoreAndKeep(settingsOf(m));
            const double gap = scoreGap(*a.computedScores(name), *b.computedScores(name));
            qInfo("%s scores: %.2e relative", name.c_str(), gap);
            QVERIFY(gap <= 1e-3);
            const WorkbenchSelection sa = a.select(name, 0.3, std::nan(""), AlphaMode::Budget);
            const WorkbenchSelection sb = b.select(name, 0.3, std::nan(""), AlphaMode::Budget);
            QVERIFY(sameMask(sa.selection.mask, sb.selection.mask));
            const WorkbenchPrune pa =
                LanguagePruningWorkbench::applySelection(*mapped.model, *a.calibration().stats, sa, PruneSettings{});
            const WorkbenchPrune pb =
                LanguagePruningWorkbench::applySelection(*owned.model, *b.calibration().stats, sb, PruneSettings{});
            LlamaWeights wa = pa.pruned.checkpoint.weights, wb = pb.pruned.checkpoint.weights;
            const auto na = namedTensors(wa), nb = namedTensors(wb);
            for (size_t i = 0; i < na.size(); ++i) {
                QCOMPARE(na[i].second->scalar_type(), at::kFloat);
                QVERIFY2(relativeGap(*na[i].second, *nb[i].second) <= 1e-3, na[i].first.c_str());
            }
            // The untouched tensors are the file's values, widened exactly.
            QVERIFY(at::equal(wa.embed, wb.embed));
        }
    }

    // One block at a time into the scratch file, against calibrate + computeScores in RAM.
    void layerwiseScoresEqualInRam_data() { mappedFloat32EqualsOwnedCopy_data(); }
    void layerwiseScoresEqualInRam() {
        QFETCH(int, method);
        const LanguageModel lm = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        LanguagePruningWorkbench inRam(lm);
        inRam.setCalibration(LanguagePruningWorkbench::calibrate(lm, smallRequest()));
        const std::string name = inRam.scoreAndKeep(settingsOf(PruneMethod(method)));
        QTemporaryDir scratch;
        std::string file;
        {
            std::vector<std::string> stages;
            const auto stats = LayerwiseStatistics::calibrate(
                lm, smallRequest(), scratch.path().toStdString(), [&](const Progress& p) {
                    if (stages.empty() || stages.back() != p.stage) stages.push_back(p.stage);
                    return true;
                });
            file = stats->file();
            QVERIFY(fs::exists(file));
            QCOMPARE(stats->precision(), std::string("float64"));  // demo:lm's triangles fit its own size
            QCOMPARE(stats->summary().tokens, inRam.calibration().summary.tokens);
            QCOMPARE(stats->summary().sourceHash, inRam.calibration().summary.sourceHash);
            QVERIFY(!stages.empty() && stages.front() == "calibrate");
            const ScoreSet layerwise = stats->score(*lm.model, settingsOf(PruneMethod(method)));
            const double gap = scoreGap(layerwise, *inRam.computedScores(name));
            qInfo("layer-wise against in RAM: %.2e relative", gap);
            QVERIFY(gap <= 1e-9);
            for (double rho : {0.1, 0.3, 0.6}) {
                const SelectionResult a = MaskSelector(layerwise).select(rho, std::nan(""), AlphaMode::Budget);
                const SelectionResult b = MaskSelector(*inRam.computedScores(name)).select(rho, std::nan(""), AlphaMode::Budget);
                QVERIFY2(sameMask(a.mask, b.mask), qPrintable(QString("ρ = %1").arg(rho)));
            }
        }
        QVERIFY2(!fs::exists(file), "the scratch file is removed with the statistics");
    }

    void layerwiseRefusesLstarKl() {
        const LanguageModel lm = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        QTemporaryDir scratch;
        const auto stats = LayerwiseStatistics::calibrate(lm, smallRequest(), scratch.path().toStdString());
        PruneSettings s = settingsOf(PruneMethod::Numerical);
        s.crossLayer = CrossLayerRanking::MeasuredDamage;
        QVERIFY(test::errorOf([&] { stats->score(*lm.model, s); }).contains("2L + 1 whole-model forward passes"));
    }

    // A scratch file of a process that no longer runs is removed when the next one is made; a
    // cancelled calibration leaves none.
    void orphanedAndCancelledScratchFilesGo() {
        QTemporaryDir scratch;
        // A process that ran and ended: its pid names no process (pids are not reused this soon).
        QProcess q;
        q.start("sleep", {"0.2"});
        QVERIFY(q.waitForStarted());
        const qint64 pid = q.processId();
        QVERIFY(q.waitForFinished());
        const fs::path orphan = fs::path(scratch.path().toStdString()) / ("npw-studio-grams-" + std::to_string(pid) + "-1.bin");
        const fs::path mine = fs::path(scratch.path().toStdString()) / ("npw-studio-grams-" + std::to_string(::getppid()) + "-1.bin");
        std::ofstream(orphan) << "x";
        std::ofstream(mine) << "x";  // a running process's (our parent's): kept
        const LanguageModel lm = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        QVERIFY(test::errorOf([&] {
                    try {
                        LayerwiseStatistics::calibrate(lm, smallRequest(), scratch.path().toStdString(),
                                                       [](const Progress& p) { return p.total <= 0 || p.done < 0.3 * p.total; });
                    } catch (const Cancelled&) {
                        throw Error("cancelled");
                    }
                }) == "cancelled");
        QVERIFY(!fs::exists(orphan));
        QVERIFY(fs::exists(mine));
        int left = 0;
        for (const auto& e : fs::directory_iterator(scratch.path().toStdString())) left += e.path() != mine;
        QCOMPARE(left, 0);  // the cancelled calibration's file is gone too
    }

    void openInStepsShowsHeadersFirst() {
        std::vector<std::string> events;
        int64_t layers = 0;
        double last = 0;
        const LanguageModel lm = openLanguageModelInSteps(
            bf16_, chooseRuntime("cpu"),
            [&](const LlamaCheckpoint& ck) {
                events.emplace_back("headers");
                layers = ck.config.num_layers;
                QVERIFY(!ck.valuesChecked);
            },
            [&](const Progress& p) {
                if (events.empty() || events.back() != p.stage) events.push_back(p.stage);
                last = p.done / p.total;
                return true;
            });
        QCOMPARE(events, (std::vector<std::string>{"headers", "check weights"}));
        QCOMPARE(last, 1.0);
        QCOMPARE(layers, lm.model->config().num_layers);
        QCOMPARE(lm.model->checkpoint().weights.layers.at(0).wq.scalar_type(), at::kBFloat16);
        QVERIFY(lm.tokenizer != nullptr);
    }

    void openInStepsNamesANaN() {
        LlamaCheckpoint ck = loadLlamaCheckpoint("demo:lm");
        ck.weights.layers.at(2).w_gate[3][5] = std::nanf("");
        const std::string dir = saveAs(ck, dir_.filePath("lm-nan").toStdString(), at::kBFloat16);
        int headers = 0;
        const QString message = test::errorOf([&] {
            openLanguageModelInSteps(dir, chooseRuntime("cpu"), [&](const LlamaCheckpoint&) { ++headers; });
        });
        QCOMPARE(headers, 1);
        QVERIFY2(message.contains("model.layers.2.mlp.gate_proj.weight") && message.contains("NaN"), qPrintable(message));
    }
};

QTEST_GUILESS_MAIN(TestMappedWorkbench)
#include "tst_mapped_workbench.moc"
