// npw sweep's pruning (core/experiments/sweep.h, runSweep) runs through LanguagePruningWorkbench,
// the one in-RAM road of npw prune and the studio: score once per method (the box-constrained z
// once per ρ), select and apply per ratio. The reference here is core's steps called one by one
// (calibrate, computeScores, MaskSelector, applyMask, countPrunedParameters, evaluatePerplexity)
// on the windows the sweep draws: every row's achieved ratios, λ and perplexity must be theirs.
#include "core/eval/perplexity.h"
#include "core/experiments/image_sweep.h"
#include "core/experiments/image_workbench.h"
#include "core/experiments/sweep.h"
#include "core/experiments/sweep_method.h"
#include "core/models/runtime.h"
#include "core/prune/apply.h"
#include "core/prune/calibration.h"
#include "core/prune/report.h"
#include "core/prune/score.h"
#include "core/prune/select.h"
#include "tiny_llama.h"
#include "error_of.h"

#include <QtTest>
#include <cmath>
#include <map>

using namespace npw;
using namespace npw::test;

class TestSweepEngine : public QObject {
    Q_OBJECT
private slots:
    void rowsAreTheEngineStepsOnTheSweepsWindows() {
        LanguageModel lm;
        lm.model = std::make_shared<LlamaModel>(tinyLlama({4, 4, 4}, {2, 2, 2}, {24, 20, 16}, 21), chooseRuntime("cpu"));
        lm.name = "tiny";
        const LlamaModel& model = *lm.model;
        SweepSpec spec;
        spec.methods = {"numerical", "flap", "wanda-sp", "numerical-box"};
        spec.ratios = {0.2, 0.4};
        spec.calibSamples = {16};
        spec.calibSeqlens = {32};
        spec.calibStream = randomIds(3000, 40, 8);
        spec.calibSource = "random ids";
        SweepEvalSet eval;
        eval.name = "held-out ids";
        eval.ids = randomIds(640, 40, 9);
        spec.evalSets = {eval};
        const std::vector<SweepRow> rows = runSweep(lm, spec);
        QCOMPARE(rows.size(), size_t(1 + spec.methods.size() * spec.ratios.size()));

        // The sweep's windows (seed 0) and their statistics.
        const CalibrationSet set = drawCalibrationSet(spec.calibStream, 16, 32, 0, spec.calibSource);
        const ModelStats stats = calibrate(model, set);
        const PerplexityOptions protocol = perplexityOptions(spec.evaluation, model.config());
        size_t checked = 0;
        for (const SweepRow& row : rows) {
            if (row.method == "dense") continue;
            PruneSettings settings;
            settings.method = row.method == "flap" ? PruneMethod::Flap : row.method == "wanda-sp" ? PruneMethod::WandaSp
                                                                                                 : PruneMethod::Numerical;
            settings.boxConstrained = row.method == "numerical-box";
            settings.ratio = row.ratio;  // the box's z is solved for ρ; the others do not depend on it
            const ScoreSet scores = computeScores(model.checkpoint(), stats, settings);
            const SelectionResult chosen = MaskSelector(scores).select(row.ratio, std::nan(""), AlphaMode::Budget);
            QVERIFY(chosen.removedHeads + chosen.removedChannels > 0);
            const PrunedModel pruned = applyMask(model.checkpoint(), stats, chosen.mask, settings);
            const PruneCounts counts = countPrunedParameters(model.checkpoint(), pruned.checkpoint);
            const QString where = QString::fromStdString(row.method) + " at " + QString::number(row.ratio);
            QVERIFY2(row.achievedRatio == counts.achievedRatio, qPrintable(where));
            QVERIFY2(row.achievedRatioModel == counts.achievedRatioModel, qPrintable(where));
            QCOMPARE(row.calibSeqlen, int64_t(32));
            if (settings.method == PruneMethod::Numerical) {
                QVERIFY2(row.lambdaUsed == scores.settings.lambda, qPrintable(where));
                QCOMPARE(row.lambdaRel, spec.lambdaRel);
            }
            const LlamaModel prunedModel(pruned.checkpoint, chooseRuntime("cpu"));
            const double ppl = evaluatePerplexity(prunedModel, eval.ids, protocol).ppl;
            // The same float32 forwards in one process: equal up to summation order (1e-9).
            QVERIFY2(std::isfinite(row.ppl) && std::abs(row.ppl - ppl) <= 1e-9 * ppl,
                     qPrintable(where + QString(": ppl %1 vs %2").arg(row.ppl, 0, 'g', 17).arg(ppl, 0, 'g', 17)));
            ++checked;
        }
        QCOMPARE(checked, spec.methods.size() * spec.ratios.size());
    }

    // The one parser of sweep method names (sweep_method.h) for the language and the image
    // sweep: each name's settings as README's sweep section describes them, the same for both
    // models but lstar-kl, which an image model refuses (its site damage needs text windows).
    void oneMethodNameParserForBothSweeps() {
        struct Expected {
            const char* name;
            PruneMethod method;
            CompensationKind compensation;
            bool box;
            CrossLayerRanking ranking;
        };
        const CrossLayerRanking byDefault = CrossLayerRanking::RelativeCompensatedError;
        const Expected table[] = {
            {"numerical", PruneMethod::Numerical, CompensationKind::MethodDefault, false, byDefault},
            {"numerical-nocomp", PruneMethod::Numerical, CompensationKind::None, false, byDefault},
            {"numerical-box", PruneMethod::Numerical, CompensationKind::MethodDefault, true, byDefault},
            {"numerical-z", PruneMethod::Numerical, CompensationKind::MethodDefault, false, CrossLayerRanking::Relaxed},
            {"numerical-lstar", PruneMethod::Numerical, CompensationKind::MethodDefault, false,
             CrossLayerRanking::CompensatedError},
            {"numerical-lstar-rel", PruneMethod::Numerical, CompensationKind::MethodDefault, false, byDefault},
            {"numerical-lstar-kl", PruneMethod::Numerical, CompensationKind::MethodDefault, false,
             CrossLayerRanking::MeasuredDamage},
            {"flap", PruneMethod::Flap, CompensationKind::MethodDefault, false, byDefault},
            {"wanda-sp", PruneMethod::WandaSp, CompensationKind::MethodDefault, false, byDefault},
            {"magnitude", PruneMethod::Magnitude, CompensationKind::MethodDefault, false, byDefault},
            {"random", PruneMethod::Random, CompensationKind::MethodDefault, false, byDefault},
        };
        for (const Expected& e : table) {
            const SweepMethod m = parseSweepMethod(e.name);
            QVERIFY2(m.method == e.method && m.compensation == e.compensation && m.boxConstrained == e.box &&
                         m.crossLayer == e.ranking,
                     e.name);
            if (e.ranking == CrossLayerRanking::MeasuredDamage) continue;
            const PruneSettings image = sweepMethodSettings(e.name, 2e-4, AlphaMode::Paper, 1.5);
            QVERIFY2(image.method == e.method && image.compensation == e.compensation && image.boxConstrained == e.box &&
                         image.crossLayer == e.ranking && image.lambda == 2e-4 && image.alphaMode == AlphaMode::Paper &&
                         image.alpha == 1.5,
                     e.name);
        }
        const QString image = errorOf([] { sweepMethodSettings("numerical-lstar-kl", NAN, AlphaMode::Budget, NAN); });
        QVERIFY2(image.contains("lstar-kl") && image.contains("not available for image models"), qPrintable(image));
        // npw prune IMAGE_MODEL --ranking lstar-kl and the studio's Images tab say the same.
        PruneSettings kl;
        kl.crossLayer = CrossLayerRanking::MeasuredDamage;
        QCOMPARE(errorOf([&] { ImagePruningWorkbench::checkSettings(kl); }), image);
        const QString unknown = errorOf([] { parseSweepMethod("numerical-fast"); });
        QVERIFY2(unknown.contains("unknown pruning method 'numerical-fast'"), qPrintable(unknown));
        QVERIFY(errorOf([] { parseSweepMethod("numerical-fast", SweptModel::Image); }) == unknown);
    }

    // A sweep's spec is the sweep's edge: every method's settings at every ratio and λ are checked
    // (PruneSettings::validate) before anything is calibrated. The model given is none at all,
    // which the sweep would refuse next, so an error naming the setting proves the check came first.
    void sweepSpecSettingsAreCheckedBeforeAnyWork() {
        const auto specWith = [](const std::function<void(SweepSpec&)>& change) {
            SweepSpec spec;
            spec.methods = {"flap", "numerical"};
            spec.ratios = {0.2, 0.5};
            spec.calibStream = randomIds(400, 40, 8);
            SweepEvalSet eval;
            eval.name = "ids";
            eval.ids = randomIds(200, 40, 9);
            spec.evalSets = {eval};
            change(spec);
            return spec;
        };
        LanguageModel none;
        none.name = "no model";
        struct Case {
            const char* what;
            std::function<void(SweepSpec&)> change;
            const char* expected;
        };
        const Case cases[] = {
            {"α", [](SweepSpec& s) { s.alpha = -1; }, "sweep: flap: α must be a positive number, got -1"},
            {"λ_rel", [](SweepSpec& s) { s.lambdaRel = 0; }, "sweep: numerical: the relative λ"},
            {"λ", [](SweepSpec& s) { s.lambdas = {0.01, -2}; }, "sweep: numerical: λ must be a positive number, got -2"},
            {"ratio", [](SweepSpec& s) { s.ratios = {0.2, 1.0}; }, "sweep: ratio 1"},
        };
        for (const Case& c : cases) {
            const SweepSpec spec = specWith(c.change);
            const QString error = errorOf([&] { runSweep(none, spec); });
            QVERIFY2(error.startsWith(c.expected), qPrintable(QString(c.what) + ": " + error));
        }
        // The same spec with sound settings gets past the check to the next refusal.
        const QString sound = errorOf([&] { runSweep(none, specWith([](SweepSpec&) {})); });
        QVERIFY2(sound.contains("is no LLaMA"), qPrintable(sound));
    }
};

QTEST_GUILESS_MAIN(TestSweepEngine)
#include "tst_sweep_engine.moc"
