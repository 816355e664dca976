// Exporting a pruned model: the directory reloads (loadLlamaCheckpoint) to the same logits,
// per-layer sizes and FLAP's biases included, also from llama2.c's rotary layout; the manifest
// records the run; the source and foreign directories are refused; score and statistics files.
#include "core/models/model_loader.h"
#include "core/io/safetensors.h"
#include "core/models/runtime.h"
#include "core/prune/export.h"
#include "core/prune/pruner.h"
#include "workbench_prune.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/output_guard.h"
#include "tiny_llama.h"
#include "error_of.h"

#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace npw;
using namespace npw::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json readJson(const std::string& path) { return json::parse(readTextFile(path)); }

struct Pruned {
    CalibrationSet set;
    PruneSettings settings;
    WorkbenchPrune run;
    std::shared_ptr<const ModelStats> stats;  // what the workbench calibrated
};

Pruned pruneTiny(const LlamaModel& model, PruneMethod method, double ratio) {
    Pruned p;
    p.set = drawCalibrationSet(randomIds(2000, 40, 3), 12, 32, 4, "ids.txt");
    p.set.sourceIsIds = true;
    p.settings.method = method;
    p.settings.ratio = ratio;
    p.run = pruneOnWindows(model, p.set, p.settings, &p.stats);
    return p;
}

} // namespace

class TestPruneExport : public QObject {
    Q_OBJECT
private slots:
    void exportReloadsToSameLogits_data() {
        QTest::addColumn<QString>("method");
        QTest::addColumn<bool>("llama2cRope");
        QTest::newRow("numerical, HF rotary layout") << "numerical" << false;
        QTest::newRow("numerical, llama2.c rotary layout") << "numerical" << true;
        QTest::newRow("flap (biases), llama2.c rotary layout") << "flap" << true;
    }
    void exportReloadsToSameLogits() {
        QFETCH(QString, method);
        QFETCH(bool, llama2cRope);
        LlamaCheckpoint dense = tinyLlama({4, 4, 4}, {2, 2, 2}, {24, 20, 16}, 5,
                                          llama2cRope ? RopeLayout::AdjacentPairs : RopeLayout::HalfSplit);
        dense.source = "tiny.bin";
        const LlamaModel model(dense, chooseRuntime("cpu"));
        Pruned p = pruneTiny(model, parsePruneMethod(method.toStdString()), 0.4);
        QTemporaryDir dir;
        const std::string out = dir.filePath("pruned").toStdString();
        savePrunedModel(p.run.pruned.checkpoint, out, pruneManifestJson(p.run.report, p.settings, CalibrationSummary::of(p.set), "tiny.bin"));

        const LlamaCheckpoint back = loadLlamaCheckpoint(out);
        QVERIFY(back.config.num_heads == p.run.pruned.checkpoint.config.num_heads);
        QVERIFY(back.config.num_kv_heads == p.run.pruned.checkpoint.config.num_kv_heads);
        QVERIFY(back.config.intermediate_size == p.run.pruned.checkpoint.config.intermediate_size);
        QVERIFY(!back.config.isUniform());
        if (method == "flap") QVERIFY(back.weights.layers[0].wo_bias.defined() || back.weights.layers[0].w_down_bias.defined());
        const at::Tensor ids = idsTensor({randomIds(48, 40, 8), randomIds(48, 40, 9)});
        const at::Tensor expected = LlamaModel(p.run.pruned.checkpoint, chooseRuntime("cpu")).logits(ids);
        const at::Tensor actual = LlamaModel(back, chooseRuntime("cpu")).logits(ids);
        QVERIFY2((actual - expected).abs().max().item<double>() <= 1e-5 * expected.abs().max().item<double>(),
                 qPrintable(QString::number((actual - expected).abs().max().item<double>())));

        // Per-layer lists in config.json, and nothing left behind but the export itself.
        const json config = readJson(out + "/config.json");
        QVERIFY(config["num_attention_heads"].is_array());
        QVERIFY(config["intermediate_size"].is_array());
        QCOMPARE(config["npw_pruned"]["manifest"].get<std::string>(), std::string("npw-manifest.json"));
        int entries = 0;
        for (const auto& e : fs::directory_iterator(dir.path().toStdString())) {
            ++entries;
            QCOMPARE(e.path().filename().string(), std::string("pruned"));
        }
        QCOMPARE(entries, 1);
    }

    void manifestRecordsTheRun() {
        LlamaCheckpoint dense = tinyLlama({4, 4}, {4, 4}, {24, 20});
        const LlamaModel model(dense, chooseRuntime("cpu"));
        Pruned p = pruneTiny(model, PruneMethod::Numerical, 0.3);
        const json m = json::parse(pruneManifestJson(p.run.report, p.settings, CalibrationSummary::of(p.set), "demo:tiny"));
        QCOMPARE(m["format"].get<std::string>(), std::string("npw-pruned-model"));
        QVERIFY(!m["npw_version"].get<std::string>().empty());
        QCOMPARE(m["source_model"].get<std::string>(), std::string("demo:tiny"));
        QCOMPARE(m["method"].get<std::string>(), std::string("numerical"));
        QCOMPARE(m["ratio"].get<double>(), 0.3);
        QCOMPARE(m["alpha"].get<double>(), 4.0 * 4 / 3);
        QCOMPARE(m["alpha_mode"].get<std::string>(), std::string("budget"));
        // The default λ is relative: the manifest records λ_rel, the median c it was measured
        // against and the absolute λ used (λ_rel / median c), and the cross-layer ranking.
        QCOMPARE(m["lambda_given"].get<std::string>(), std::string("relative"));
        QVERIFY(std::abs(m["lambda_rel"].get<double>() - kDefaultLambdaRel) < 1e-9 * kDefaultLambdaRel);
        QVERIFY(m["median_c"].get<double>() > 0);
        QVERIFY(std::abs(m["lambda"].get<double>() * m["median_c"].get<double>() - kDefaultLambdaRel) < 1e-9 * kDefaultLambdaRel);
        QCOMPARE(m["cross_layer_ranking"].get<std::string>(), crossLayerRankingName(kDefaultCrossLayerRanking));
        QCOMPARE(m["iters"].get<int>(), 0);
        QCOMPARE(m["damp"].get<double>(), 0.01);
        QCOMPARE(m["compensation"].get<std::string>(), std::string("theorem3"));
        QVERIFY(m["normalisation"].get<std::string>().find("per-token") != std::string::npos);
        QCOMPARE(m["calibration"]["source"].get<std::string>(), std::string("ids.txt"));
        QCOMPARE(m["calibration"]["samples"].get<int>(), 12);
        QCOMPARE(m["calibration"]["seqlen"].get<int>(), 32);
        QCOMPARE(m["calibration"]["seed"].get<int>(), 4);
        QCOMPARE(m["calibration"]["kind"].get<std::string>(), std::string("token ids"));
        QCOMPARE(m["achieved_ratio"].get<double>(), p.run.report.achievedRatio);
        QCOMPARE(m["achieved_ratio_model"].get<double>(), p.run.report.achievedRatioModel);
        QCOMPARE(m["params_before"].get<int64_t>(), p.run.report.paramsBefore);
        QCOMPARE(m["params_after"].get<int64_t>(), p.run.report.paramsAfter);
        QCOMPARE(m["layers"].size(), size_t(2));
        QCOMPARE(m["layers"][1]["channels"].get<int64_t>(), p.run.pruned.checkpoint.config.intermediate_size[1]);
        QVERIFY(m["layers"][0].contains("attn_loss"));
        QVERIFY(!m.contains("timings"));  // a manifest describes the model, not one machine's speed
    }

    void refusesSourceAndForeignDirectories() {
        QTemporaryDir dir;
        const std::string source = dir.filePath("source").toStdString();
        LlamaCheckpoint dense = tinyLlama({2}, {2}, {8});
        saveHfLlamaDirectory(dense, source);
        const LlamaModel model(loadLlamaCheckpoint(source), chooseRuntime("cpu"));
        Pruned p = pruneTiny(model, PruneMethod::Numerical, 0.3);
        const std::string manifest = pruneManifestJson(p.run.report, p.settings, CalibrationSummary::of(p.set), source);
        const LlamaCheckpoint& pruned = p.run.pruned.checkpoint;

        const QString same = errorOf([&] { savePrunedModel(pruned, source, manifest); });
        QVERIFY2(same.contains("source model") && same.contains(QString::fromStdString(source)), qPrintable(same));
        QVERIFY(errorOf([&] { savePrunedModel(pruned, source + "/", manifest); }).contains("source model"));
        QVERIFY(errorOf([&] { savePrunedModel(pruned, source + "/sub", manifest); }).contains("inside the source model"));
        // The source is untouched.
        QVERIFY(at::equal(loadLlamaCheckpoint(source).weights.layers[0].wo, dense.weights.layers[0].wo));

        const std::string foreign = dir.filePath("foreign").toStdString();
        fs::create_directories(foreign);
        std::ofstream(foreign + "/notes.txt") << "mine";
        QVERIFY(errorOf([&] { savePrunedModel(pruned, foreign, manifest); }).contains("not an npw export"));
        QVERIFY(fs::exists(foreign + "/notes.txt"));

        // A new directory, then replacing that earlier export, both work.
        const std::string out = dir.filePath("out").toStdString();
        savePrunedModel(pruned, out, manifest);
        savePrunedModel(pruned, out, manifest);
        QVERIFY(fs::is_regular_file(out + "/npw-manifest.json"));
        QCOMPARE(loadLlamaCheckpoint(out).config.intermediate_size, pruned.config.intermediate_size);
    }

    // The one "is this a file of a source model?" check every writer calls (issue 16: the
    // scores file was written over MODEL/model.safetensors and the command exited 0).
    void outputPathsNeverHitASource() {
        QTemporaryDir dir;
        const std::string model = dir.filePath("model").toStdString();
        saveHfLlamaDirectory(tinyLlama({2}, {2}, {8}), model);
        const std::string bin = dir.filePath("stories.bin").toStdString();
        std::ofstream(bin) << "x";
        auto refused = [&](const std::string& out) {
            return errorOf([&] { checkOutputPath({model, bin}, out, "--save-scores"); });
        };
        for (const std::string& out : {model, model + "/", model + "/model.safetensors", model + "/config.json",
                                       model + "/tokenizer.json", model + "/sub/../model.safetensors", bin,
                                       dir.path().toStdString()}) {
            const QString e = refused(out);
            QVERIFY2(e.contains("refusing to write --save-scores") && e.contains("source model"),
                     qPrintable(QString::fromStdString(out) + ": " + e));
        }
        // Through a symlink, and a hard link, to the weights.
        const std::string link = dir.filePath("link.safetensors").toStdString(), hard = dir.filePath("hard").toStdString();
        fs::create_symlink(model + "/model.safetensors", link);
        fs::create_hard_link(model + "/model.safetensors", hard);
        QVERIFY(refused(link).contains("refusing"));
        QVERIFY(refused(hard).contains("refusing"));
        // A new file beside the weights, or anywhere else, is fine.
        QVERIFY(refused(model + "/scores.safetensors").isEmpty());
        QVERIFY(refused(dir.filePath("elsewhere/scores.safetensors").toStdString()).isEmpty());
        checkOutputPath({"", model}, dir.filePath("x").toStdString());
    }

    // The one path rule (normalisedPath + isWithin, core/util/output_guard.h) that the output
    // guard and the export's target check share: a symlink to the source, ".." and a folder
    // that does not exist yet name the same place as the plain path.
    void onePathRuleForGuardAndExport() {
        QTemporaryDir dir;
        const std::string root = dir.path().toStdString();
        const std::string source = root + "/source";
        saveHfLlamaDirectory(tinyLlama({2}, {2}, {8}), source);
        const std::string link = root + "/link";
        fs::create_symlink(source, link);

        QVERIFY(normalisedPath(source + "/") == normalisedPath(source));
        QVERIFY(normalisedPath(link) == normalisedPath(source));
        QVERIFY(normalisedPath(root + "/new/deeper/../../source/x") == normalisedPath(source + "/x"));
        QVERIFY(isWithin(normalisedPath(link + "/new/sub"), normalisedPath(source)));
        QVERIFY(isWithin(normalisedPath(source), normalisedPath(source)));
        QVERIFY(!isWithin(normalisedPath(root + "/sourcex"), normalisedPath(source)));  // a sibling with a longer name
        QVERIFY(!isWithin(normalisedPath(root), normalisedPath(source)));

        // The export refuses each spelling of a folder inside the source, none of which exists.
        for (const std::string& inside : {source + "/sub", link + "/sub/new", root + "/new/../source/sub",
                                          root + "/link/../source/sub"}) {
            const QString e = errorOf([&] { checkExportTarget(source, inside); });
            QVERIFY2(e.contains("inside the source model"), qPrintable(QString::fromStdString(inside) + ": " + e));
        }
        const QString viaLink = errorOf([&] { checkExportTarget(source, link); });
        QVERIFY2(viaLink.contains("source model"), qPrintable(viaLink));
        // A sibling whose name starts with the source's is elsewhere.
        QVERIFY(errorOf([&] { checkExportTarget(source, root + "/source-pruned"); }).isEmpty());
    }

    void scoreAndStatisticsFiles() {
        const LlamaModel model(tinyLlama({4, 4}, {2, 2}, {24, 20}), chooseRuntime("cpu"));
        Pruned p = pruneTiny(model, PruneMethod::Numerical, 0.3);
        QTemporaryDir dir;
        const std::string scores = dir.filePath("scores.safetensors").toStdString();
        saveScoreSet(*p.run.scores, 0.3, scores);
        auto file = SafeTensorsFile::open(scores);
        QCOMPARE(file->metadata().at("method"), std::string("numerical"));
        const at::Tensor z = file->load("layers.1.mlp.channel_scores");
        QVERIFY(at::allclose(z, p.run.scores->mlpChannelScoresAt(1, 0.3)));
        QCOMPARE(file->load("layers.0.attn.unit_scores").numel(), int64_t(2));  // two KV groups
        QVERIFY(file->has("layers.0.attn.ainv1") && file->has("layers.0.mlp.c"));
        // z = 1 − ρ·λD·A⁻¹1/(1 + λc), from the file alone.
        // The λ the scores used (the default is relative: resolved from median c by computeScores).
        const double c = file->load("layers.1.mlp.c").item<double>(), lambda = p.run.scores->settings.lambda;
        const at::Tensor fromFile = 1 - 0.3 * lambda * 20 * file->load("layers.1.mlp.ainv1") / (1 + lambda * c);
        QVERIFY(at::allclose(fromFile, z));

        const std::string stats = dir.filePath("stats.safetensors").toStdString();
        saveModelStats(*p.stats, stats);
        QVERIFY(at::equal(loadModelStats(stats, 2).mlp[0].gram, p.stats->mlp[0].gram));
    }
};

QTEST_GUILESS_MAIN(TestPruneExport)
#include "tst_prune_export.moc"
