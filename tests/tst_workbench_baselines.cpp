// The baselines kept on the language workbench (core/experiments/language_workbench.h), as the
// studio and `npw prune --method …` use them, against a fresh runBaseline (core/prune/baselines.h,
// tested against its own references in tst_baselines) and a brute force, on small random LLaMAs:
//  - llm-pruner: the importances are computed once; re-selecting at two ρ (uniform and global)
//    needs no new gradients and gives, applied, exactly the model, report and native knob of a
//    fresh runBaseline at each ρ; the unit scores shown are the importances (NaN outside the range).
//  - block-influence: the selection at ρ is the brute-force rule — of every subset of blocks that
//    holds every block of lower influence than its members (the later block first on ties), the
//    smallest whose attention + MLP parameters reach ρ — and equals runBaseline's blocks, ratio
//    and model.
//  - slicegpt: no per-unit scores (empty unit scores and mask); the width and achieved ratios the
//    selection states before slicing are those of runBaseline's report, and applying slices to
//    the same model (logits equal).
#include "core/experiments/language_workbench.h"
#include "core/models/parameter_count.h"
#include "core/models/runtime.h"
#include "core/models/sliced_llama.h"
#include "core/prune/report.h"
#include "core/util/error.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <cmath>

using namespace npw;
using namespace npw::test;

namespace {

LanguageModel tinyLm(LlamaCheckpoint checkpoint) {
    LanguageModel lm;
    lm.model = std::make_shared<LlamaModel>(std::move(checkpoint), chooseRuntime("cpu"));
    lm.name = "tiny";
    return lm;
}

LanguagePruningWorkbench workbenchWithWindows(const LanguageModel& lm, uint64_t seed) {
    LanguagePruningWorkbench workbench(lm);
    workbench.setCalibration(
        LanguagePruningWorkbench::windowsOnly(drawCalibrationSet(randomIds(2000, 40, seed), 4, 16, seed + 1)));
    return workbench;
}

at::Tensor logitsOf(const BaselineRun& run, const at::Tensor& ids) {
    return run.sliced ? run.sliced->logits(ids) : LlamaModel(run.pruned, chooseRuntime("cpu")).logits(ids);
}

// The report as `npw prune --json` prints it, less the timings.
std::string reportText(const PruneReport& r) {
    nlohmann::json j = pruneReportJson(r);
    j.erase("timings");
    return j.dump();
}

// The same model, report and native knob (the timings aside).
void compareRuns(const BaselineRun& mine, const BaselineRun& fresh, const at::Tensor& ids) {
    QCOMPARE(mine.method, fresh.method);
    QCOMPARE(QString::fromStdString(reportText(mine.report)), QString::fromStdString(reportText(fresh.report)));
    QCOMPARE(QString::fromStdString(mine.native.dump()), QString::fromStdString(fresh.native.dump()));
    QVERIFY((logitsOf(mine, ids) - logitsOf(fresh, ids)).abs().max().item<double>() == 0);
}

} // namespace

class TestWorkbenchBaselines : public QObject {
    Q_OBJECT

private slots:
    void llmPrunerReselectsWithoutNewGradients() {
        // GQA in some layers, different MLP widths: the rounding and the costs differ per layer.
        const LanguageModel lm = tinyLm(tinyLlama({4, 4, 4, 2, 4, 4, 4, 4}, {2, 2, 4, 2, 2, 1, 2, 2},
                                                  {16, 24, 16, 12, 16, 20, 16, 16}, 31));
        for (const bool global : {false, true}) {
            LanguagePruningWorkbench workbench = workbenchWithWindows(lm, 5);
            ScoreRequest request;
            request.baseline = BaselineMethod::LlmPruner;
            request.baselineOptions.llmPrunerGlobal = global;
            const std::string name =
                workbench.addScores(LanguagePruningWorkbench::score(lm, workbench.calibration(), request));
            QCOMPARE(name, std::string(global ? "llm-pruner-global" : "llm-pruner"));
            QVERIFY(workbench.requestOf(name).baseline == BaselineMethod::LlmPruner);
            QCOMPARE(workbench.requestOf(name).baselineOptions.llmPrunerGlobal, global);
            QVERIFY(workbench.computedScores(name) == nullptr);
            const auto kept = workbench.baselineScores(name);
            QVERIFY(kept && kept->llmPruner);
            const LlmPrunerScores& scores = *kept->llmPruner;
            const at::Tensor ids = idsTensor(kept->windows->windows);
            for (const double rho : {0.2, 0.4}) {
                const WorkbenchSelection sel = workbench.select(name, rho, std::nan(""), AlphaMode::Budget);
                QVERIFY(sel.baseline == kept);  // the same importances: no new gradients
                QVERIFY(sel.scores == nullptr);
                BaselineOptions o;
                o.ratio = rho;
                o.llmPrunerGlobal = global;
                const BaselineRun fresh = runBaseline(BaselineMethod::LlmPruner, *lm.model, *kept->windows, o);
                compareRuns(LanguagePruningWorkbench::applyBaseline(*lm.model, sel), fresh, ids);
                // What the views show: the kept counts and ratios of that model, the importances.
                QCOMPARE(sel.kept.size(), fresh.report.layers.size());
                for (size_t l = 0; l < sel.kept.size(); ++l) {
                    QCOMPARE(sel.kept[l].keptHeads, fresh.report.layers[l].kvHeadsAfter);
                    QCOMPARE(sel.kept[l].keptChannels, fresh.report.layers[l].channelsAfter);
                    const bool scored = int64_t(l) >= scores.start && int64_t(l) < scores.end;
                    for (size_t u = 0; u < sel.unitScores[l].heads.size(); ++u)
                        QVERIFY(scored ? sel.unitScores[l].heads[u] == scores.importance.heads[l][u]
                                       : std::isnan(sel.unitScores[l].heads[u]));
                    QCOMPARE(sel.unitScores[l].channels.size(), size_t(lm.model->config().intermediate_size[l]));
                }
                QCOMPARE(sel.achievedRatio, fresh.report.achievedRatio);
                QCOMPARE(sel.achievedRatioModel, fresh.report.achievedRatioModel);
                QCOMPARE(sel.native[sel.native["knob"].get<std::string>()].get<double>(),
                         fresh.native[fresh.native["knob"].get<std::string>()].get<double>());
                QCOMPARE(sel.selection.removedHeads, fresh.report.removedUnits);
                QCOMPARE(sel.selection.removedChannels, fresh.report.removedChannels);
                QVERIFY(!sel.description.empty());
            }
            // The CLI's path (pruneBaseline) is the same select + apply.
            BaselineOptions o;
            o.ratio = 0.3;
            o.llmPrunerGlobal = global;
            compareRuns(workbench.pruneBaseline(BaselineMethod::LlmPruner, o),
                        runBaseline(BaselineMethod::LlmPruner, *lm.model, *kept->windows, o), ids);
        }
    }

    void blockInfluenceSelectsTheBruteForceBlocks() {
        // Blocks of different sizes: how many must go depends on which.
        const std::vector<int64_t> heads{4, 2, 4, 4, 2, 4}, kv{4, 2, 2, 4, 2, 4}, inter{16, 8, 24, 12, 32, 16};
        const LanguageModel lm = tinyLm(tinyLlama(heads, kv, inter, 41));
        const LlamaConfig& cfg = lm.model->config();
        LanguagePruningWorkbench workbench = workbenchWithWindows(lm, 9);
        ScoreRequest request;
        request.baseline = BaselineMethod::BlockInfluence;
        const std::string name = workbench.addScores(LanguagePruningWorkbench::score(lm, workbench.calibration(), request));
        QCOMPARE(name, std::string("block-influence"));
        const std::vector<double> bi = workbench.baselineScores(name)->blocks->influence;
        const auto L = static_cast<int>(cfg.num_layers);
        auto blockParams = [&](int l) {
            return cfg.hidden_size * (2 * heads[l] * cfg.head_dim + 2 * kv[l] * cfg.head_dim + 3 * inter[l]);
        };
        const double total = double(prunableParameters(cfg));
        // i goes before j: lower influence, or equal and later.
        auto before = [&](int i, int j) { return bi[i] < bi[j] || (bi[i] == bi[j] && i > j); };
        const at::Tensor ids = idsTensor(workbench.calibration().windows->windows);
        for (const double rho : {0.0, 0.1, 0.3, 0.45, 0.6}) {
            int bestMask = -1;
            for (int m = 0; m < (1 << L); ++m) {
                double params = 0;
                bool closed = true;
                for (int i = 0; i < L; ++i) {
                    if (!(m >> i & 1)) continue;
                    params += double(blockParams(i));
                    for (int j = 0; j < L; ++j)
                        if (before(j, i) && !(m >> j & 1)) closed = false;
                }
                if (!closed || params < rho * total || m == (1 << L) - 1) continue;
                if (bestMask < 0 || __builtin_popcount(m) < __builtin_popcount(bestMask)) bestMask = m;
            }
            QVERIFY(bestMask >= 0);
            const WorkbenchSelection sel = workbench.select(name, rho, std::nan(""), AlphaMode::Budget);
            std::vector<int64_t> expected;
            for (int i = 0; i < L; ++i) {
                const bool gone = bestMask >> i & 1;
                if (gone) expected.push_back(i);
                // The whole block goes or stays; every unit shows the block's one score.
                QCOMPARE(sel.kept[i].keptHeads, gone ? 0 : kv[i]);
                QCOMPARE(sel.kept[i].keptChannels, gone ? 0 : inter[i]);
                for (double s : sel.unitScores[i].heads) QCOMPARE(s, bi[i]);
                for (double s : sel.unitScores[i].channels) QCOMPARE(s, bi[i]);
            }
            QCOMPARE(sel.native["removed_blocks"].get<std::vector<int64_t>>(), expected);
            BaselineOptions o;
            o.ratio = rho;
            const BaselineRun fresh = runBaseline(BaselineMethod::BlockInfluence, *lm.model, *workbench.calibration().windows, o);
            QCOMPARE(fresh.native["removed_blocks"].get<std::vector<int64_t>>(), expected);
            QCOMPARE(sel.achievedRatio, fresh.report.achievedRatio);
            QCOMPARE(sel.achievedRatioModel, fresh.report.achievedRatioModel);
            compareRuns(LanguagePruningWorkbench::applyBaseline(*lm.model, sel), fresh, ids);
        }
        // Reaching ρ would remove every block: said, not a crash.
        QVERIFY_THROWS_EXCEPTION(npw::Error, workbench.select(name, 0.95, std::nan(""), AlphaMode::Budget));
    }

    void sliceGptSaysItHasNoUnitScoresAndSlicesWhenApplied() {
        const LanguageModel lm = tinyLm(tinyLlama({4, 4, 4, 4}, {2, 2, 2, 2}, {16, 16, 16, 16}, 43));
        LanguagePruningWorkbench workbench = workbenchWithWindows(lm, 13);
        ScoreRequest request;
        request.baseline = BaselineMethod::SliceGpt;
        const std::string name = workbench.addScores(LanguagePruningWorkbench::score(lm, workbench.calibration(), request));
        QCOMPARE(name, std::string("slicegpt"));
        const at::Tensor ids = idsTensor(workbench.calibration().windows->windows);
        for (const double rho : {0.1, 0.3}) {
            const WorkbenchSelection sel = workbench.select(name, rho, std::nan(""), AlphaMode::Budget);
            QVERIFY(sel.unitScores.empty());
            QVERIFY(sel.selection.mask.keepHeads.empty() && sel.kept.empty());
            QVERIFY(sel.description.find("no per-unit scores") != std::string::npos);
            BaselineOptions o;
            o.ratio = rho;
            const BaselineRun fresh = runBaseline(BaselineMethod::SliceGpt, *lm.model, *workbench.calibration().windows, o);
            QCOMPARE(sel.native["width"].get<int64_t>(), fresh.native["width"].get<int64_t>());
            QCOMPARE(sel.native["slicing_fraction"].get<double>(), fresh.native["slicing_fraction"].get<double>());
            QCOMPARE(sel.achievedRatio, fresh.report.achievedRatio);
            QCOMPARE(sel.achievedRatioModel, fresh.report.achievedRatioModel);
            const BaselineRun mine = LanguagePruningWorkbench::applyBaseline(*lm.model, sel);
            QVERIFY(mine.sliced != nullptr);
            compareRuns(mine, fresh, ids);
        }
    }

    void baselinesNeedWindowsAndNameTheProblem() {
        const LanguageModel lm = tinyLm(tinyLlama({4, 4}, {4, 4}, {16, 16}, 47));
        LanguagePruningWorkbench::Calibration statsOnly;  // as a workspace reopens: no windows
        ScoreRequest request;
        request.baseline = BaselineMethod::LlmPruner;
        QVERIFY_THROWS_EXCEPTION(npw::Error, LanguagePruningWorkbench::score(lm, statsOnly, request));
        LanguagePruningWorkbench workbench = workbenchWithWindows(lm, 17);
        const std::string name = workbench.addScores(LanguagePruningWorkbench::score(lm, workbench.calibration(), request));
        QVERIFY_THROWS_EXCEPTION(npw::Error, workbench.select(name, 1.0, std::nan(""), AlphaMode::Budget));
        QVERIFY_THROWS_EXCEPTION(npw::Error, workbench.requestOf("nothing"));
        // A PruneMethod's selection is not applied as a baseline.
        WorkbenchSelection notBaseline;
        notBaseline.method = "numerical";
        QVERIFY_THROWS_EXCEPTION(npw::Error, LanguagePruningWorkbench::applyBaseline(*lm.model, notBaseline));
    }
};

QTEST_MAIN(TestWorkbenchBaselines)
#include "tst_workbench_baselines.moc"
