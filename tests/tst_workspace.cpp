// core/experiments/workspace.h and run_settings.h without the studio: the workspace file round
// trips every field it holds (and loadWorkspace recomputes the same scores from the saved
// statistics), a damaged file is refused with an npw::Error naming the file and the field, the
// run settings' JSON round trips, and the session's decisions (settings at the knobs, why a
// recompute is needed) come out as the studio shows them. On demo:lm with a small calibration.
#include "core/experiments/run_settings.h"
#include "core/experiments/workspace.h"
#include "core/prune/select.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include "error_of.h"

#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <functional>

using namespace npw;

namespace {

CalibrationSettings smallCalibration() {
    CalibrationSettings c;
    c.samples = 4;
    c.seqlen = 32;
    c.seed = 3;
    return c;
}

// demo:lm calibrated on smallCalibration() with the given score sets kept.
LanguagePruningWorkbench calibratedDemo(const std::vector<PruneSettings>& methods) {
    LanguagePruningWorkbench wb(openLanguageModel("demo:lm", chooseRuntime("cpu")));
    wb.setCalibration(LanguagePruningWorkbench::calibrate(wb.model(), calibrationRequest(smallCalibration())));
    for (const PruneSettings& s : methods) wb.scoreAndKeep(s);
    return wb;
}

PruneSettings method(PruneMethod m) {
    PruneSettings s;
    s.method = m;
    return s;
}

SweepRow speedRow() {
    SweepRow r;
    r.method = "flap";
    r.ratio = 0.2;
    r.evalSet = kSpeedEvalSet;
    r.parameters = 123;
    r.weightsMiB = 1.5;
    r.kvCacheMiB = 0.25;
    r.decodeTokensPerSecond = 400;
    r.prefillTokensPerSecond = 900;
    return r;
}


} // namespace

class TestWorkspace : public QObject {
    Q_OBJECT
private slots:
    void runSettingsRoundTrip();
    void runSettingsErrorsNameTheField();
    void settingsAtTheKnobs();
    void settingsWrittenBeforeTheSplitLoad();
    void workspaceRoundTripsEveryField();
    void loadWorkspaceRecomputesTheSameScores();
    void damagedWorkspacesNameFileAndField_data();
    void damagedWorkspacesNameFileAndField();
    void writeRefusesASourceAndWritesNothing();
    void savedMaskIsCompared();
    void recomputeReasons();
    void unitLabels();
};

void TestWorkspace::runSettingsRoundTrip() {
    RunSettings s;
    s.calibration = smallCalibration();
    s.calibration.source = "/data/corpus.ids";
    s.calibration.sourceIsIds = true;
    s.prune.method = PruneMethod::Numerical;
    s.prune.damp = 0.05;
    s.prune.boxConstrained = true;
    const RunSettings back = runSettingsFromJson(nlohmann::json::parse(toJson(s).dump()));
    QVERIFY(back.calibration == s.calibration);
    QCOMPARE(toJson(back.prune).dump(), toJson(s.prune).dump());

    SelectionKnobs k;
    k.rho = 0.45;
    k.mode = AlphaMode::Paper;
    k.lambda = 2.5;
    QVERIFY(knobsFromJson(nlohmann::json::parse(toJson(k).dump())) == k);  // α NaN written as null
    k.alpha = 0.7;
    QVERIFY(knobsFromJson(nlohmann::json::parse(toJson(k).dump())) == k);
    QVERIFY(!(knobsFromJson(toJson(SelectionKnobs{})) == k));
}

void TestWorkspace::runSettingsErrorsNameTheField() {
    QVERIFY(test::errorOf([] { runSettingsFromJson(nlohmann::json{{"prune", nlohmann::json::object()}}); })
                .contains(QStringLiteral("'calibration'")));
    QVERIFY(test::errorOf([] { calibrationFromJson(nlohmann::json{{"samples", "many"}}); })
                .contains(QStringLiteral("samples")));
    QVERIFY(test::errorOf([] { calibrationFromJson(nlohmann::json{{"seed", -1}}); }).contains(QStringLiteral("'seed'")));
    QVERIFY(test::errorOf([] { pruneSettingsFromJson(nlohmann::json{{"method", "pruneall"}}); })
                .contains(QStringLiteral("pruneall")));
    QVERIFY(test::errorOf([] { pruneSettingsFromJson(nlohmann::json{{"ranking", "sideways"}}); })
                .contains(QStringLiteral("'ranking'")));
    QVERIFY(test::errorOf([] { knobsFromJson(nlohmann::json{{"rho", 1.5}}); }).contains(QStringLiteral("'rho'")));
    QVERIFY(test::errorOf([] { knobsFromJson(nlohmann::json{{"lambda_rel", 0}}); }).contains(QStringLiteral("'lambda_rel'")));
}

void TestWorkspace::settingsAtTheKnobs() {
    SelectionKnobs k;
    k.rho = 0.35;
    k.alpha = 0.6;
    k.mode = AlphaMode::Paper;
    k.lambda = 7;
    PruneSettings given = method(PruneMethod::Numerical);
    given.lambda = 1e-3;  // an absolute λ: the knob's λ_rel replaces it
    given.damp = 0.2;
    const PruneSettings s = scoredAtKnobs(given, k);
    QCOMPARE(s.ratio, 0.35);  // what a solve at ρ reads (the box, Algorithm 1)
    QVERIFY(std::isnan(s.lambda));
    QCOMPARE(s.lambdaRel, 7.0);
    // α and its reading are the selection's: never scored, so never written into the score's settings.
    QVERIFY(std::isnan(s.alpha));
    QVERIFY(s.alphaMode == AlphaMode::Budget);
    QCOMPARE(s.damp, 0.2);  // what the knobs do not hold stays

    QCOMPARE(calibrationRequest(CalibrationSettings{}).source, defaultCalibrationSource());
    const CalibrationRequest r = calibrationRequest(smallCalibration());
    QCOMPARE(r.samples, int64_t(4));
    QCOMPARE(r.seqlen, int64_t(32));
    QCOMPARE(r.seed, uint64_t(3));
}

// The settings JSON as the studio and the workspace file wrote it before PruneSettings was split
// into its score, selection and compensation parts (and the knobs beside it): it loads to the
// same values and is written back unchanged.
void TestWorkspace::settingsWrittenBeforeTheSplitLoad() {
    const char* const written = R"({"calibration": {"samples": 4, "seed": 3, "seqlen": 32, "source": "/data/corpus.txt",
                                                    "source_is_ids": false},
                                    "prune": {"box_constrained": false, "compensation": "none", "damp": 0.05,
                                              "iters": 3, "lambda": 0.002, "lambda_rel": 2.5, "method": "numerical",
                                              "ranking": "z", "ratio": 0.35, "seed": 7, "standardised_global": true,
                                              "unit": "query-slot"}})";
    const nlohmann::json j = nlohmann::json::parse(written);
    const RunSettings s = runSettingsFromJson(j);
    const PruneSettings& p = s.prune;
    QVERIFY(p.method == PruneMethod::Numerical);
    QCOMPARE(p.ratio, 0.35);
    QCOMPARE(p.lambda, 0.002);
    QCOMPARE(p.lambdaRel, 2.5);
    QVERIFY(p.crossLayer == CrossLayerRanking::Relaxed);
    QCOMPARE(p.iters, 3);
    QCOMPARE(p.damp, 0.05);
    QVERIFY(p.compensation == CompensationKind::None);
    QCOMPARE(p.seed, uint64_t(7));
    QVERIFY(p.attentionUnit == AttentionUnitKind::QuerySlot);
    QVERIFY(p.standardisedGlobal);
    QVERIFY(!p.boxConstrained);
    // What the JSON does not hold keeps the defaults.
    QVERIFY(std::isnan(p.alpha) && p.alphaMode == AlphaMode::Budget && p.scope == SelectionScope::AttentionAndMlp &&
            p.protectedLayers.empty() && p.z0 == 1.0);
    QCOMPARE(s.calibration.samples, int64_t(4));
    QCOMPARE(s.calibration.source, std::string("/data/corpus.txt"));
    QCOMPARE(toJson(s).dump(), j.dump());  // written back as it was
    const nlohmann::json knobs =
        nlohmann::json::parse(R"({"alpha": null, "alpha_mode": "paper", "lambda_rel": 7.0, "rho": 0.45})");
    const SelectionKnobs k = knobsFromJson(knobs);
    QVERIFY(k.rho == 0.45 && std::isnan(k.alpha) && k.mode == AlphaMode::Paper && k.lambda == 7.0);
    QCOMPARE(toJson(k).dump(), knobs.dump());
}

void TestWorkspace::workspaceRoundTripsEveryField() {
    QTemporaryDir dir;
    const std::string path = dir.filePath(QStringLiteral("all.npw.json")).toStdString();
    WorkspaceFile w;
    w.model = "demo:lm";
    w.device = "cpu";
    w.calibration = smallCalibration();
    w.prune = method(PruneMethod::Flap);
    w.knobs.rho = 0.25;
    w.knobs.lambda = 3;
    // A baseline with options other than its defaults beside two PruneMethods.
    ScoreRequest llmp;
    llmp.baseline = BaselineMethod::LlmPruner;
    llmp.baselineOptions.llmPrunerGlobal = true;
    llmp.baselineOptions.taylor = TaylorKind::ParamMix;
    llmp.baselineOptions.layerStart = 1;
    llmp.baselineOptions.layerEnd = 3;
    w.scored = {method(PruneMethod::Flap), method(PruneMethod::Numerical), llmp};
    ScoreRequest blocks;
    blocks.baseline = BaselineMethod::BlockInfluence;
    w.runBaseline = blocks;
    w.currentMethod = "numerical";
    Mask shape;
    shape.keepHeads = {{true, true, true, true}, {true, true, true, true}};
    shape.keepChannels = {{true, true, true}, {true, true, true}};
    Mask mask = shape;
    mask.keepHeads[1][2] = false;
    mask.keepChannels[0][0] = false;
    w.mask = maskToJson(mask);
    SweepRow ppl;
    ppl.method = "numerical";
    ppl.ratio = 0.2;
    ppl.evalSet = "kjv-nt";
    ppl.ppl = 61.5;
    ppl.nll = std::log(61.5);
    ppl.achievedRatio = 0.199;
    w.sweepRows = {ppl, speedRow()};
    w.images = {{"model", "demo:c2i"}};
    w.text = {{"prompts", {"In the beginning"}}};
    writeWorkspace(path, w, nullptr);
    QVERIFY(!std::filesystem::exists(workspaceStatsPath(path)));  // no statistics: none written

    const WorkspaceFile back = readWorkspace(path);
    QCOMPARE(back.model, w.model);
    QCOMPARE(back.device, w.device);
    QVERIFY(back.calibration == w.calibration);
    QCOMPARE(toJson(back.prune).dump(), toJson(w.prune).dump());
    QVERIFY(back.knobs == w.knobs);
    QCOMPARE(back.scored.size(), size_t(3));
    for (size_t i = 0; i < w.scored.size(); ++i) {
        QCOMPARE(toJson(back.scored[i]).dump(), toJson(w.scored[i]).dump());
        QCOMPARE(scoreSetName(back.scored[i]), scoreSetName(w.scored[i]));
    }
    QVERIFY(back.scored[2].baseline == BaselineMethod::LlmPruner);
    QVERIFY(back.scored[2].baselineOptions.taylor == TaylorKind::ParamMix);
    QCOMPARE(back.scored[2].baselineOptions.layerEnd, int64_t(3));
    QVERIFY(back.runBaseline && back.runBaseline->baseline == BaselineMethod::BlockInfluence);
    QCOMPARE(back.currentMethod, w.currentMethod);
    QVERIFY(!back.statsCalibration);
    QVERIFY(maskFromJson(back.mask, shape).keepHeads == mask.keepHeads);
    QVERIFY(maskFromJson(back.mask, shape).keepChannels == mask.keepChannels);
    QCOMPARE(back.sweepRows.size(), size_t(2));
    QCOMPARE(back.sweepRows[0].ppl, 61.5);
    QVERIFY(std::isnan(back.sweepRows[0].acc));
    QVERIFY(back.sweepRows[1].isSpeedRow());
    QCOMPARE(back.sweepRows[1].decodeTokensPerSecond, 400.0);
    QCOMPARE(back.sweepRows[1].parameters, int64_t(123));
    QCOMPARE(back.images, w.images);
    QCOMPARE(back.text, w.text);
    QCOMPARE(workspaceStatsPath("/a/x.npw.json"), std::string("/a/x.npw.stats.safetensors"));
}

void TestWorkspace::loadWorkspaceRecomputesTheSameScores() {
    QTemporaryDir dir;
    const std::string path = dir.filePath(QStringLiteral("scored.npw.json")).toStdString();
    const std::vector<PruneSettings> methods = {method(PruneMethod::Flap), method(PruneMethod::Numerical)};
    const LanguagePruningWorkbench wb = calibratedDemo(methods);
    WorkspaceFile w;
    w.model = "demo:lm";
    w.device = "cpu";
    w.calibration = smallCalibration();
    for (const std::string& name : wb.scoreSetNames()) w.scored.push_back(wb.requestOf(name));
    w.statsCalibration = wb.calibration().summary;
    w.currentMethod = "flap";
    writeWorkspace(path, w, wb.calibration().stats.get(), {wb.model().model->checkpoint().source});
    QVERIFY(std::filesystem::exists(workspaceStatsPath(path)));

    const LoadedWorkspace loaded = loadWorkspace(path);
    QVERIFY(loaded.model.model);
    QVERIFY(loaded.file.statsCalibration);
    QVERIFY(loaded.file.calibration == smallCalibration());  // the statistics' settings
    QCOMPARE(loaded.calibration.stats->tokens(), wb.calibration().stats->tokens());
    QCOMPARE(loaded.scoreSets.size(), size_t(2));
    // Recomputed from the saved (float64) statistics: the same scores, bit for bit.
    for (size_t i = 0; i < loaded.scoreSets.size(); ++i) {
        const ScoreSet& a = *wb.computedScores(wb.scoreSetNames()[i]);
        QVERIFY(loaded.scoreSets[i].scores);
        const ScoreSet& b = *loaded.scoreSets[i].scores;
        QCOMPARE(scoreSetName(b.settings), wb.scoreSetNames()[i]);
        QCOMPARE(b.ranking.size(), a.ranking.size());
        for (size_t l = 0; l < a.attentionChannels.size(); ++l) {
            if (!a.mlpChannels[l].defined()) continue;
            QVERIFY2(at::equal(a.mlpChannels[l], b.mlpChannels[l]), qPrintable(QString("layer %1").arg(l)));
        }
    }

    // Only the Images tab's part: no model is opened.
    const std::string images = dir.filePath(QStringLiteral("images.npw.json")).toStdString();
    WorkspaceFile onlyImages;
    onlyImages.images = {{"model", "demo:c2i"}};
    writeWorkspace(images, onlyImages, nullptr);
    const LoadedWorkspace imageOnly = loadWorkspace(images);
    QVERIFY(!imageOnly.model.model);
    QVERIFY(imageOnly.scoreSets.empty());
}

void TestWorkspace::damagedWorkspacesNameFileAndField_data() {
    QTest::addColumn<QString>("edit");
    QTest::addColumn<QString>("expected");
    // Each row: a JSON-pointer-ish edit applied to a good file, and the field its error names.
    QTest::newRow("not a workspace") << "format=other" << "not an npw workspace";
    QTest::newRow("newer version") << "version=99" << "newer";
    QTest::newRow("no model field") << "-model" << "model";
    QTest::newRow("knobs rho out of range") << "knobs.rho=1.5" << "'rho'";
    QTest::newRow("calibration samples a string") << "calibration.samples=\"many\"" << "samples";
    QTest::newRow("unknown method") << "prune.method=\"pruneall\"" << "pruneall";
    QTest::newRow("scored not a list") << "scored=7" << "";
    QTest::newRow("run_baseline not a baseline") << "run_baseline={\"method\":\"flap\"}" << "run_baseline";
    QTest::newRow("baseline layers not a pair") << "run_baseline={\"method\":\"llm-pruner\",\"llm_pruner_layers\":[1]}"
                                               << "llm_pruner_layers";
    QTest::newRow("baseline layer ratio 1") << "run_baseline={\"method\":\"llm-pruner\",\"layer_ratio\":1}"
                                           << "layer_ratio";
    QTest::newRow("baseline taylor unknown") << "run_baseline={\"method\":\"llm-pruner\",\"taylor\":\"hessian\"}"
                                            << "hessian";
    QTest::newRow("mask units strings") << "mask.pruned_units=[[\"x\"]]" << "mask.pruned_units[0]";
    QTest::newRow("mask not an object") << "mask=3" << "'mask'";
    QTest::newRow("sweep row without method") << "sweep_rows=[{}]" << "method";
    QTest::newRow("neither model") << "model=\"\"" << "neither a language model nor an image model";
}

void TestWorkspace::damagedWorkspacesNameFileAndField() {
    QFETCH(QString, edit);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const std::string path = dir.filePath(QStringLiteral("damaged.npw.json")).toStdString();
    WorkspaceFile w;
    w.model = "demo:lm";
    w.scored = {method(PruneMethod::Flap)};
    Mask shape;
    shape.keepHeads = {{true, true}};
    shape.keepChannels = {{true, true}};
    w.mask = maskToJson(shape);
    writeWorkspace(path, w, nullptr);
    nlohmann::json j = nlohmann::json::parse(readTextFile(path));
    QVERIFY(readWorkspace(path).model == "demo:lm");  // the file before the edit is good

    const std::string e = edit.toStdString();
    if (e[0] == '-') {
        j.erase(e.substr(1));
    } else {
        const auto eq = e.find('=');
        const std::string field = e.substr(0, eq);
        nlohmann::json value = nlohmann::json::parse(e.substr(eq + 1), nullptr, false);
        if (value.is_discarded()) value = e.substr(eq + 1);  // a bare word: a string
        const auto dot = field.find('.');
        if (dot == std::string::npos) j[field] = value;
        else j[field.substr(0, dot)][field.substr(dot + 1)] = value;
    }
    writeTextAtomically(path, j.dump());
    const QString error = test::errorOf([&] { readWorkspace(path); });
    QVERIFY2(error.contains(QString::fromStdString(path)), qPrintable(error));
    QVERIFY2(error.contains(expected), qPrintable(error));
}

void TestWorkspace::writeRefusesASourceAndWritesNothing() {
    QTemporaryDir dir;
    const std::string source = dir.filePath(QStringLiteral("model.safetensors")).toStdString();
    writeTextAtomically(source, "weights");
    WorkspaceFile w;
    w.model = source;
    QVERIFY(test::errorOf([&] { writeWorkspace(source, w, nullptr, {source}); }).contains(QStringLiteral("refusing")));
    QCOMPARE(readTextFile(source), std::string("weights"));
    QCOMPARE(std::distance(std::filesystem::directory_iterator(dir.path().toStdString()),
                           std::filesystem::directory_iterator{}),
             std::ptrdiff_t(1));
}

void TestWorkspace::savedMaskIsCompared() {
    Mask shape;
    shape.keepHeads = {{true, true, true}, {true, true, true}};
    shape.keepChannels = {{true, true}, {true, true}};
    Mask a = shape;
    a.keepHeads[0][1] = false;
    QVERIFY(savedMaskMatches(maskToJson(a), a));
    Mask b = a;
    b.keepChannels[1][0] = false;
    QVERIFY(!savedMaskMatches(maskToJson(a), b));
    nlohmann::json other = maskToJson(a);
    other["pruned_units"].push_back(nlohmann::json::array());  // three layers on a two-layer model
    QVERIFY(test::errorOf([&] { savedMaskMatches(other, a); }).contains(QStringLiteral("pruned_units")));
    nlohmann::json beyond = maskToJson(a);
    beyond["pruned_channels"][0] = {9};
    QVERIFY(test::errorOf([&] { savedMaskMatches(beyond, a); }).contains(QStringLiteral("no unit 9")));
}

void TestWorkspace::recomputeReasons() {
    PruneSettings box = method(PruneMethod::Numerical);
    box.boxConstrained = true;
    box.ratio = 0.3;
    LanguagePruningWorkbench empty;
    QVERIFY(recomputeReason(empty, "", std::nullopt, {}, {}).empty());  // nothing open

    LanguagePruningWorkbench wb = calibratedDemo({method(PruneMethod::Flap), scoredAtKnobs(box, SelectionKnobs{})});
    const std::string boxName = wb.scoreSetNames()[1];
    SelectionKnobs knobs;  // ρ 0.3, λ_rel default: what the box set was solved at
    const CalibrationSettings asked = smallCalibration();
    QVERIFY(recomputeReason(wb, "flap", asked, asked, knobs).empty());
    QVERIFY(recomputeReason(wb, boxName, asked, asked, knobs).empty());

    knobs.rho = 0.45;  // re-ranking moves; only the box-constrained set needs a new solve
    QVERIFY(recomputeReason(wb, "flap", asked, asked, knobs).empty());
    const std::string moved = recomputeReason(wb, boxName, asked, asked, knobs);
    QVERIFY2(moved.find("box-constrained") != std::string::npos, moved.c_str());
    QVERIFY2(moved.find("ρ = 0.45") != std::string::npos, moved.c_str());
    knobs.rho = 0.3;
    knobs.lambda = 2 * kDefaultLambdaRel;
    QVERIFY(!recomputeReason(wb, boxName, asked, asked, knobs).empty());

    CalibrationSettings other = asked;
    other.samples = 16;
    const std::string recalibrate = recomputeReason(wb, "flap", asked, other, SelectionKnobs{});
    QVERIFY2(recalibrate.find("4 windows × 32 tokens (seed 3)") != std::string::npos, recalibrate.c_str());
    QVERIFY2(recalibrate.find("16 × 32 tokens") != std::string::npos, recalibrate.c_str());
    QVERIFY(recomputeReason(wb, "flap", std::nullopt, other, SelectionKnobs{}).empty());  // origin unknown
}

void TestWorkspace::unitLabels() {
    LlamaConfig mha;
    mha.num_layers = 2;
    mha.num_heads = {4, 4};
    mha.num_kv_heads = {4, 4};
    QCOMPARE(attentionUnitLabel(mha, AttentionUnitKind::KvGroup), std::string("head"));
    LlamaConfig gqa = mha;
    gqa.num_kv_heads = {4, 2};
    QCOMPARE(attentionUnitLabel(gqa, AttentionUnitKind::KvGroup), std::string("KV group"));
    QCOMPARE(attentionUnitLabel(gqa, AttentionUnitKind::QuerySlot), std::string("query slot"));
}

QTEST_MAIN(TestWorkspace)
#include "tst_workspace.moc"
