// `npw prune` takes the layer-by-layer road (core/prune/layerwise_prune.h) by itself when the
// model in float32 and its statistics exceed half of the (pretended, NPW_PHYSICAL_MEMORY_BYTES)
// RAM, or with --layerwise, and says which road on stderr and in --json. On a small model the
// two roads agree: the same masks (every sliced tensor — q, k, v, gate, up — bit for bit, and the
// same sizes per layer) and pruned logits within 1e-5 of the largest logit, for numerical
// (defaults), FLAP and Wanda-sp. The float32 scratch triangle's effect is measured and bounded.
// A bfloat16 checkpoint comes out in bfloat16, through several shards and an index that the
// loader reads back. kill -9 mid-calibration, then the same command, resumes from the work folder
// and writes the same bytes. Refusals: lstar-kl and --stats/--save-stats on the layer-wise road.
#include "core/models/llama.h"
#include "core/models/model_loader.h"
#include "core/models/runtime.h"
#include "bf16_checkpoint_copy.h"
#include "cli_run.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>

using Json = nlohmann::json;
namespace fs = std::filesystem;
using namespace npw;

namespace {

using Run = npw::test::CliRun;

at::Tensor logitsOf(const std::string& dir, const at::Tensor& ids) {
    LlamaModel model(loadLlamaCheckpoint(dir), chooseRuntime("cpu"));
    return model.logits(ids);
}

// max |a − b| / max |a|
double relativeDifference(const at::Tensor& a, const at::Tensor& b) {
    return (a - b).abs().max().item<double>() / a.abs().max().item<double>();
}

} // namespace

class TestCliPruneLayerwise : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;
    QString ids_;
    at::Tensor evalIds_;

    Run run(const QStringList& args, const QString& physicalBytes = {}) {
        return npw::test::runCli(npw_, args, npw::test::withPhysicalMemory(physicalBytes));
    }

    // Starts npw with NPW_TEST_STALL=point (no pretended machine size), kills it there (SIGKILL).
    void killAt(const QStringList& args, const QString& point) {
        npw::test::killCliAt(npw_, args, point, npw::test::withPhysicalMemory({}));
    }

    QStringList pruneArgs(const QString& model, const QString& out, const QStringList& extra = {}) const {
        return QStringList{"prune", model, "--calib", ids_, "--calib-ids", "--nsamples", "12", "--seqlen", "32",
                           "--ratio", "0.3", "--out", out, "--json"} +
               extra;
    }

    // Both roads on `model` with `extra` flags: masks equal, logits within `tolerance`.
    void compareRoads(const QString& model, const QStringList& extra, double tolerance, bool sameSlices) {
        const QString inRam = dir_.filePath("ram-" + QString::number(qHash(extra.join(' ') + model)));
        const QString layerwise = dir_.filePath("lw-" + QString::number(qHash(extra.join(' ') + model)));
        const Run a = run(pruneArgs(model, inRam, extra));
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        QCOMPARE(a.json()["road"]["layerwise"].get<bool>(), false);
        QVERIFY(!a.err.contains("layer by layer"));
        // demo:lm: 2.8M float32 parameters and ~1 MB of statistics: a pretended 16 MB machine is too small.
        const Run b = run(pruneArgs(model, layerwise, extra), "16000000");
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QCOMPARE(b.json()["road"]["layerwise"].get<bool>(), true);
        QVERIFY2(b.err.contains("pruning layer by layer") && b.err.contains("NPW_PHYSICAL_MEMORY_BYTES"), qPrintable(b.err));
        QCOMPARE(b.json()["road"]["statistics_scratch"]["precision"].get<std::string>(), std::string("float64"));
        QVERIFY(b.json()["road"]["statistics_scratch"]["bytes"].get<int64_t>() <=
                b.json()["road"]["statistics_scratch"]["bound_bytes"].get<int64_t>());
        // The same selection: the same counts, and every tensor that is only sliced, bit for bit.
        QCOMPARE(a.json()["params_after"], b.json()["params_after"]);
        QCOMPARE(a.json()["removed_attention_units"], b.json()["removed_attention_units"]);
        const LlamaCheckpoint x = loadLlamaCheckpoint(inRam.toStdString());
        const LlamaCheckpoint y = loadLlamaCheckpoint(layerwise.toStdString());
        QCOMPARE(x.config.num_heads, y.config.num_heads);
        QCOMPARE(x.config.intermediate_size, y.config.intermediate_size);
        if (sameSlices)
            for (size_t l = 0; l < x.weights.layers.size(); ++l)
                for (auto part : {&LlamaLayerWeights::wq, &LlamaLayerWeights::wk, &LlamaLayerWeights::wv,
                                  &LlamaLayerWeights::w_gate, &LlamaLayerWeights::w_up})
                    QVERIFY(at::equal((x.weights.layers[l].*part).to(at::kFloat), (y.weights.layers[l].*part).to(at::kFloat)));
        const double d = relativeDifference(logitsOf(inRam.toStdString(), evalIds_), logitsOf(layerwise.toStdString(), evalIds_));
        qInfo("%s %s: max|logit difference| / max|logit| = %.3g", qPrintable(model), qPrintable(extra.join(' ')), d);
        QVERIFY2(d <= tolerance, qPrintable(QString::number(d)));
        // Nothing left beside the export: no scratch file, no staging folder.
        for (const auto& entry : fs::directory_iterator(dir_.path().toStdString()))
            QVERIFY2(entry.path().filename().string().find(".npw-") == std::string::npos, entry.path().c_str());
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QVERIFY(dir_.isValid());
        ids_ = dir_.filePath("ids.txt");
        std::ofstream out(ids_.toStdString());
        std::mt19937_64 rng(4);
        for (int i = 0; i < 2000; ++i) out << rng() % 200 << ' ';
        evalIds_ = at::randint(0, 200, {2, 24}, at::TensorOptions().dtype(at::kLong));
    }

    void numericalDefaultsAgreeWithTheInRamRoad() { compareRoads("demo:lm", {}, 1e-5, true); }
    void flapAgreesWithTheInRamRoad() { compareRoads("demo:lm", {"--method", "flap"}, 1e-5, true); }
    void wandaSpAgreesWithTheInRamRoad() { compareRoads("demo:lm", {"--method", "wanda-sp"}, 1e-5, true); }
    void forcedByTheFlag() {
        const Run b = run(pruneArgs("demo:lm", dir_.filePath("forced"), {"--layerwise", "--method", "wanda-sp"}));
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QCOMPARE(b.json()["road"]["forced"].get<bool>(), true);
        QVERIFY(b.err.contains("--layerwise"));
    }

    // --json reports each stage against its bound as the in-RAM road does (stage_bounds.h), with
    // the scratch file's writing and reading as stages of their own: every stage's time finite and
    // ≥ 0, each stage with arithmetic or bytes (calibration, Gram updates, scores, the L* curves,
    // compensation, the scratch and the export written) a positive bound and ratio, the rates
    // measured, and the calibration's stages adding up to its time.
    void stageBoundsOnTheLayerwiseRoad() {
        const Run r = run(pruneArgs("demo:lm", dir_.filePath("bounds"), {"--layerwise"}));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        QVERIFY2(j.contains("stage_bounds"), qPrintable(r.out));
        std::map<std::string, Json> stages;
        for (const Json& s : j["stage_bounds"]["stages"]) {
            const double seconds = s["seconds"].get<double>();
            QVERIFY2(std::isfinite(seconds) && seconds >= 0, s.dump().c_str());
            stages[s["stage"].get<std::string>()] = s;
        }
        for (const char* name : {"calibration_forward", "gram_accumulation", "scratch_writing", "resume_records", "scores",
                                 "cross_layer_ranking", "compensation", "writing"}) {
            QVERIFY2(stages.count(name), name);
            const Json& s = stages[name];
            QVERIFY2(!s["work"].empty(), s.dump().c_str());
            for (const auto& [kind, amount] : s["work"].items()) QVERIFY2(amount.get<double>() > 0, s.dump().c_str());
            QVERIFY2(s.contains("bound_s") && s["bound_s"].get<double>() > 0 && std::isfinite(s["bound_s"].get<double>()),
                     s.dump().c_str());
            QVERIFY2(s.contains("ratio") && s["ratio"].get<double>() > 0 && std::isfinite(s["ratio"].get<double>()),
                     s.dump().c_str());
        }
        for (const char* name : {"scratch_reading", "score_bookkeeping", "selection", "slicing"})
            QVERIFY2(stages.count(name), name);
        for (const char* rate : {"float32_gemm_flop_per_s", "float64_gemm_flop_per_s", "float64_cholesky_flop_per_s",
                                 "disk_write_bytes_per_s"})
            QVERIFY2(j["stage_bounds"]["rates"][rate].get<double>() > 0, rate);
        const double calibrate = j["timings"]["calibrate_s"].get<double>();
        const double parts = stages["calibration_forward"]["seconds"].get<double>() +
                             stages["gram_accumulation"]["seconds"].get<double>() +
                             stages["scratch_writing"]["seconds"].get<double>();
        QVERIFY2(std::abs(parts - calibrate) <= 1e-6 * calibrate + 1e-9, qPrintable(QString("%1 vs %2").arg(parts).arg(calibrate)));
        // The export's bytes are what was written.
        double bytes = 0;
        for (const auto& entry : fs::recursive_directory_iterator(dir_.filePath("bounds").toStdString()))
            if (entry.is_regular_file()) bytes += static_cast<double>(entry.file_size());
        QCOMPARE(stages["writing"]["work"]["bytes_written"].get<double>(), bytes);
    }

    // The float32 triangle rounds each G entry by ≤ 2⁻²⁴ relative: measured here against float64.
    void float32ScratchStaysCloseToFloat64() {
        const QString a = dir_.filePath("f64"), b = dir_.filePath("f32");
        const Run x = run(pruneArgs("demo:lm", a, {"--layerwise"}));
        QVERIFY2(x.rc == 0, qPrintable(x.err));
        const Run y = run(pruneArgs("demo:lm", b, {"--layerwise", "--stats-precision", "float32"}));
        QVERIFY2(y.rc == 0, qPrintable(y.err));
        QCOMPARE(y.json()["road"]["statistics_scratch"]["precision"].get<std::string>(), std::string("float32"));
        QCOMPARE(y.json()["road"]["statistics_scratch"]["bytes"].get<int64_t>() * 2,
                 x.json()["road"]["statistics_scratch"]["bytes"].get<int64_t>());
        QCOMPARE(x.json()["removed_attention_units"], y.json()["removed_attention_units"]);
        const double d = relativeDifference(logitsOf(a.toStdString(), evalIds_), logitsOf(b.toStdString(), evalIds_));
        qInfo("float32 scratch vs float64: max|logit difference| / max|logit| = %.3g", d);
        QVERIFY2(d <= 1e-4, qPrintable(QString::number(d)));
    }

    // A bfloat16 checkpoint in three shards: the layer-wise export is bfloat16 again, sharded, and
    // agrees with the in-RAM road (float32 export) to bfloat16's rounding of the compensated weights.
    void bfloat16CheckpointStaysBfloat16() {
        LlamaCheckpoint dense = loadLlamaCheckpoint("demo:lm");
        const std::string source = dir_.filePath("bf16-model").toStdString();
        npw::test::saveBf16Shards(dense, source);
        QVERIFY(fs::exists(source + "/model.safetensors.index.json"));
        QVERIFY(fs::exists(source + "/model-00002-of-00003.safetensors") || fs::exists(source + "/model-00002-of-00004.safetensors"));
        const LlamaCheckpoint back = loadLlamaCheckpoint(source);
        for (size_t l = 0; l < back.weights.layers.size(); ++l)
            QVERIFY(at::equal(back.weights.layers[l].w_down, dense.weights.layers[l].w_down.to(at::kBFloat16).to(at::kFloat)));

        compareRoads(QString::fromStdString(source), {}, 2e-2, false);
        const LlamaCheckpoint out = loadLlamaCheckpoint(
            dir_.filePath("lw-" + QString::number(qHash(QString() + QString::fromStdString(source)))).toStdString(),
            WeightStorage::Mapped);
        QCOMPARE(out.weights.layers[0].w_down.scalar_type(), at::kBFloat16);
    }

    // kill -9 after layer 1 is calibrated, then the same command: it resumes at layer 2 from the
    // work folder beside --out and writes the export an uninterrupted run writes, byte for byte;
    // the folder is gone afterwards. A rerun with another calibration removes the folder, saying so.
    void resumesAfterKill() {
        const QString whole = dir_.filePath("uninterrupted"), out = dir_.filePath("resumed");
        const QStringList extra = {"--layerwise", "--method", "flap"};
        const Run a = run(pruneArgs("demo:lm", whole, extra));
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        QCOMPARE(a.json()["road"]["resumed_at_layer"].get<int64_t>(), int64_t(-1));
        const std::string work = dir_.filePath(".resumed.npw-work").toStdString();
        killAt(pruneArgs("demo:lm", out, extra), "layerwise-calibrated-layer-1");
        QVERIFY(fs::exists(work + "/state.json"));
        QVERIFY(!fs::exists(out.toStdString()));
        const Run b = run(pruneArgs("demo:lm", out, extra));
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QVERIFY2(b.err.contains("resuming an interrupted run"), qPrintable(b.err));
        QCOMPARE(b.json()["road"]["resumed_at_layer"].get<int64_t>(), int64_t(2));
        QVERIFY(!fs::exists(work));
        auto bytes = [](const QString& dir) {
            QFile f(dir + "/model.safetensors");
            return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
        };
        QVERIFY(!bytes(whole).isEmpty());
        QVERIFY(bytes(whole) == bytes(out));

        killAt(pruneArgs("demo:lm", out, extra), "layerwise-calibrated-layer-1");
        QVERIFY(fs::exists(work));
        const Run c = run(pruneArgs("demo:lm", out, extra + QStringList{"--seed", "9"}));
        QVERIFY2(c.rc == 0, qPrintable(c.err));
        QVERIFY2(c.err.contains("removed the work folder"), qPrintable(c.err));
        QCOMPARE(c.json()["road"]["resumed_at_layer"].get<int64_t>(), int64_t(-1));
        QVERIFY(!fs::exists(work));
    }

    // Large hidden states are not written after every layer (at most a tenth of the calibration's
    // time goes to them): a kill then loses the layers after the last write, and the rerun
    // calibrates them again into the same export, byte for byte. NPW_TEST_HIDDEN_EVERY_LAYER_BYTES=0
    // applies that rule to demo:lm; the first layer always writes them.
    void resumesWhereTheHiddenStatesWereLastWritten() {
        const QString whole = dir_.filePath("uninterrupted-timed"), out = dir_.filePath("resumed-timed");
        const QStringList extra = {"--layerwise"};
        QProcessEnvironment env = npw::test::withPhysicalMemory({});
        env.insert("NPW_TEST_HIDDEN_EVERY_LAYER_BYTES", "0");
        const npw::test::CliRun a = npw::test::runCli(npw_, pruneArgs("demo:lm", whole, extra), env);
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        const std::string work = dir_.filePath(".resumed-timed.npw-work").toStdString();
        npw::test::killCliAt(npw_, pruneArgs("demo:lm", out, extra), "layerwise-calibrated-layer-1", env);
        const int64_t finished = stateOf(work).value("finished_layers", int64_t{-1});
        QVERIFY2(finished == 1 || finished == 2, qPrintable(QString::number(finished)));
        const npw::test::CliRun b = npw::test::runCli(npw_, pruneArgs("demo:lm", out, extra), env);
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QCOMPARE(b.json()["road"]["resumed_at_layer"].get<int64_t>(), finished);
        QVERIFY(!fs::exists(work));
        compareExports(whole, out);
    }

    // Every file of two exports, byte for byte (the manifest too: it holds no timings).
    static void compareExports(const QString& a, const QString& b) {
        std::map<std::string, QByteArray> x, y;
        for (const auto& [dir, files] : {std::pair{&a, &x}, std::pair{&b, &y}})
            for (const auto& entry : fs::directory_iterator(dir->toStdString())) {
                QFile f(QString::fromStdString(entry.path().string()));
                QVERIFY(f.open(QIODevice::ReadOnly));
                (*files)[entry.path().filename().string()] = f.readAll();
            }
        QVERIFY(x.size() >= 3);
        QCOMPARE(x.size(), y.size());
        for (const auto& [name, bytes] : x) {
            QVERIFY2(y.count(name), name.c_str());
            QVERIFY2(y[name] == bytes, name.c_str());
        }
    }

    static Json stateOf(const std::string& work) {
        std::ifstream in(work + "/state.json");
        return Json::parse(in);
    }

    // kill -9 in the middle of scoring (after a step of each pass that numerical makes: the
    // relative λ's solves, the scores, the L* ranking; and the random method, whose generator
    // state is part of a step), then the same command: it takes the recorded steps from the work
    // folder, computes from the first unrecorded one and writes the export an uninterrupted run
    // writes, every file byte for byte. A damaged record is computed again, not trusted.
    void resumesScoringAfterKill() {
        struct Case {
            QStringList extra;
            QString point;
            int64_t stepsRecorded;  // demo:lm: 6 layers; passes solve (0-5), score (6-11), ranking (12-17)
            int64_t stepsTaken;     // the recorded steps of the passes the method makes
        };
        const std::vector<Case> cases = {{{"--layerwise"}, "layerwise-scored-solve-layer-1", 2, 2},
                                         {{"--layerwise"}, "layerwise-scored-score-layer-0", 7, 7},
                                         {{"--layerwise"}, "layerwise-scored-ranking-layer-2", 15, 15},
                                         {{"--layerwise", "--method", "random"}, "layerwise-scored-score-layer-2", 9, 3}};
        std::map<QString, QString> whole;
        int n = 0;
        std::string work;
        QString out;
        for (const Case& c : cases) {
            out = dir_.filePath(QString("scored-%1").arg(++n));
            work = dir_.filePath(QString(".scored-%1.npw-work").arg(n)).toStdString();
            const QString key = c.extra.join(' ');
            if (!whole.count(key)) {
                whole[key] = dir_.filePath("scored-whole-" + QString::number(whole.size()));
                const Run a = run(pruneArgs("demo:lm", whole[key], c.extra));
                QVERIFY2(a.rc == 0, qPrintable(a.err));
                QCOMPARE(a.json()["road"]["resumed_score_steps"].get<int64_t>(), int64_t(0));
            }
            killAt(pruneArgs("demo:lm", out, c.extra), c.point);
            QCOMPARE(stateOf(work)["score_steps"].get<int64_t>(), c.stepsRecorded);
            QVERIFY(!fs::exists(out.toStdString()));
            const Run b = run(pruneArgs("demo:lm", out, c.extra));
            QVERIFY2(b.rc == 0, qPrintable(b.err));
            QVERIFY2(b.err.contains("resuming the scoring"), qPrintable(b.err));
            QCOMPARE(b.json()["road"]["resumed_score_steps"].get<int64_t>(), c.stepsTaken);
            QVERIFY(!fs::exists(work));
            compareExports(whole[key], out);
        }
        // A damaged record: scoring resumes before it, and the export is still the same.
        killAt(pruneArgs("demo:lm", out, {"--layerwise"}), "layerwise-scored-ranking-layer-2");
        fs::resize_file(work + "/scores/score-3.safetensors", 100);
        const Run d = run(pruneArgs("demo:lm", out, {"--layerwise"}));
        QVERIFY2(d.rc == 0, qPrintable(d.err));
        QVERIFY2(d.err.contains("scoring again from a damaged record"), qPrintable(d.err));
        QCOMPARE(d.json()["road"]["resumed_score_steps"].get<int64_t>(), int64_t(9));  // solve 0-5, score 0-2
        compareExports(whole["--layerwise"], out);
    }

    // kill -9 during the export (shards of 1 MiB: whole layers, one or more each): with a
    // shard half written (its temporary file in the work folder), and right after a shard was
    // finished; then the same command keeps the finished shards, writes from the first layer not
    // in one and produces the uninterrupted run's export, every file byte for byte. A finished
    // shard changed since is written again; other settings remove the scores and the shards
    // (naming the folder) and keep the calibration.
    void resumesExportAfterKill() {
        const std::string work = dir_.filePath(".exported.npw-work").toStdString();
        const QString whole = dir_.filePath("exported-whole"), out = dir_.filePath("exported");
        const QStringList extra = {"--layerwise", "--shard-mib", "1"};
        const Run a = run(pruneArgs("demo:lm", whole, extra));
        QVERIFY2(a.rc == 0, qPrintable(a.err));
        QCOMPARE(a.json()["road"]["resumed_export_at_layer"].get<int64_t>(), int64_t(-1));
        // The shards' layers, from the uninterrupted export's index (shard number → layers).
        std::map<int, std::set<int>> layersOf;
        {
            std::ifstream in(whole.toStdString() + "/model.safetensors.index.json");
            QVERIFY(in.good());
            const Json index = Json::parse(in);
            for (const auto& [name, file] : index["weight_map"].items()) {
                const int shard = std::stoi(file.get<std::string>().substr(6, 5));
                if (name.rfind("model.layers.", 0) == 0) layersOf[shard].insert(std::stoi(name.substr(13)));
                else layersOf[shard];
            }
        }
        QVERIFY(layersOf.size() >= 4);
        std::map<int, int> shardOf;  // layer → shard
        for (const auto& [shard, layers] : layersOf)
            for (int l : layers) shardOf[l] = shard;
        QCOMPARE(shardOf.size(), size_t(6));
        auto shardFile = [&](int shard) {
            char name[64];
            std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard, int(layersOf.size()));
            return work + "/export/" + name;
        };
        QString layout;
        for (const auto& [shard, layers] : layersOf) {
            layout += QString(" %1:").arg(shard);
            for (int l : layers) layout += QString(" %1").arg(l);
        }
        qInfo("shards and their layers:%s", qPrintable(layout));
        // At layer 3's stall, layer 2's shard is written but not finished (a shard is finished
        // when the next one starts): a temporary file only.
        const int wide = shardOf[2];
        const int first = *layersOf[wide].begin();

        killAt(pruneArgs("demo:lm", out, extra), "layerwise-applied-layer-3");
        QCOMPARE(stateOf(work)["shards"].size(), size_t(wide - 1));
        bool partial = false;
        for (const auto& entry : fs::directory_iterator(work + "/export"))
            partial = partial || entry.path().filename().string().find(".npw-tmp-") != std::string::npos;
        QVERIFY(partial);
        QVERIFY(!fs::exists(shardFile(wide)));
        Run b = run(pruneArgs("demo:lm", out, extra));
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QVERIFY2(b.err.contains("resuming the export") && b.err.contains(QString("writing from layer %1").arg(first)),
                 qPrintable(b.err));
        QCOMPARE(b.json()["road"]["resumed_export_at_layer"].get<int64_t>(), int64_t(first));
        QVERIFY(!fs::exists(work));
        compareExports(whole, out);

        // Right after layer 2's shard was finished: the export resumes after its last layer.
        const int after = *layersOf[wide].rbegin() + 1;
        killAt(pruneArgs("demo:lm", out, extra), QString("layerwise-exported-shard-%1").arg(wide));
        b = run(pruneArgs("demo:lm", out, extra));
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QCOMPARE(b.json()["road"]["resumed_export_at_layer"].get<int64_t>(), int64_t(after));
        compareExports(whole, out);

        // A finished shard that changed since (its size): it and the later ones are written again.
        killAt(pruneArgs("demo:lm", out, extra), QString("layerwise-exported-shard-%1").arg(wide));
        const int changed = shardOf[1];
        fs::resize_file(shardFile(changed), fs::file_size(shardFile(changed)) - 8);
        b = run(pruneArgs("demo:lm", out, extra));
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QCOMPARE(b.json()["road"]["resumed_export_at_layer"].get<int64_t>(), int64_t(*layersOf[changed].begin()));
        compareExports(whole, out);

        // Other settings: the scores and the shards go, the calibration stays.
        killAt(pruneArgs("demo:lm", out, extra), QString("layerwise-exported-shard-%1").arg(wide));
        b = run(pruneArgs("demo:lm", out, {"--layerwise", "--shard-mib", "1", "--ratio", "0.2"}));
        QVERIFY2(b.rc == 0, qPrintable(b.err));
        QVERIFY2(b.err.contains("removed the scores and the export") && b.err.contains(QString::fromStdString(work)),
                 qPrintable(b.err));
        QCOMPARE(b.json()["road"]["resumed_at_layer"].get<int64_t>(), int64_t(6));
        QCOMPARE(b.json()["road"]["resumed_score_steps"].get<int64_t>(), int64_t(0));
        QCOMPARE(b.json()["road"]["resumed_export_at_layer"].get<int64_t>(), int64_t(-1));
        QVERIFY(!fs::exists(work));
    }

    void refusals() {
        const Run kl = run(pruneArgs("demo:lm", dir_.filePath("kl"), {"--layerwise", "--ranking", "lstar-kl"}));
        QCOMPARE(kl.rc, 1);
        QVERIFY2(kl.err.contains("lstar-kl") && kl.err.contains("2L + 1"), qPrintable(kl.err));
        const Run save = run(pruneArgs("demo:lm", dir_.filePath("save"), {"--layerwise", "--save-stats", dir_.filePath("s.st")}));
        QCOMPARE(save.rc, 1);
        QVERIFY2(save.err.contains("--save-stats"), qPrintable(save.err));
        QVERIFY(!fs::exists(dir_.filePath("kl").toStdString()));
        QVERIFY(!fs::exists(dir_.filePath("save").toStdString()));
    }
};

QTEST_GUILESS_MAIN(TestCliPruneLayerwise)
#include "tst_cli_prune_layerwise.moc"
