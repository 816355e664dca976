// `npw generate` / `npw info` on image models, run as a user runs them (the npw binary of this
// build tree), and the PNG/grid writer they use. The model is the GPT fixture exported as an
// npw directory with the LlamaGen-layout VQ fixture beside it (MODEL/vq), and the same GPT as
// LlamaGen's raw .pt with --vq.
#include "core/experiments/image_workbench.h"
#include "core/io/image_png.h"
#include "core/io/safetensors.h"
#include "core/models/llamagen.h"
#include "core/models/vq_model.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ATen/Parallel.h>
#include "llamagen_fixture.h"
#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <stb/stb_image.h>

using namespace npw;

namespace {

std::string dataFile(const std::string& name) { return npw::test::llamagenDataFile(name); }
LlamaGenConfig fixtureConfig() { return npw::test::llamagenFixtureConfig(/*downsample=*/2); }

struct Png {
    int w = 0, h = 0, channels = 0;
    std::vector<unsigned char> pixels;
};

Png readPng(const QString& path) {
    Png p;
    unsigned char* data = stbi_load(path.toUtf8().constData(), &p.w, &p.h, &p.channels, 0);
    if (data) {
        p.pixels.assign(data, data + p.w * p.h * p.channels);
        stbi_image_free(data);
    }
    return p;
}

} // namespace

class TestLlamaGenCli : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        at::set_num_threads(2);
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        QVERIFY(dir_.isValid());
        model_ = dir_.path() + "/c2i";
        LlamaGenLoadOptions o;
        o.config = fixtureConfig();
        LlamaGenCheckpoint ck = loadLlamaGenCheckpoint(dataFile("gpt_fsdp.pt"), o);
        saveLlamaGenDirectory(ck, model_.toStdString());
        VqModel::load(dataFile("vq_ddp.pt"))->save((model_ + "/vq").toStdString());
    }

    void pngRoundTrip() {
        // encodePng rounds like torchvision's save_image: x·255 + 0.5, truncated.
        at::Tensor img = at::zeros({3, 2, 3});
        img[0][0][0] = 1.0;
        img[1][1][2] = 0.5;
        img[2][0][1] = -3.0;  // clamped
        QTemporaryDir d;
        const QString path = d.path() + "/a.png";
        writePng(path.toStdString(), img);
        Png p = readPng(path);
        QCOMPARE(p.w, 3);
        QCOMPARE(p.h, 2);
        QCOMPARE(p.channels, 3);
        QCOMPARE(int(p.pixels[0]), 255);                   // (0,0) red
        QCOMPARE(int(p.pixels[(1 * 3 + 2) * 3 + 1]), 128);  // (1,2) green 0.5 → 128
        QCOMPARE(int(p.pixels[(0 * 3 + 1) * 3 + 2]), 0);
        QVERIFY(QString::fromStdString([&] {
                    try {
                        encodePng(at::zeros({2, 4, 4}));
                    } catch (const Error& e) {
                        return std::string(e.what());
                    }
                    return std::string();
                }()).contains("[2, 4, 4]"));
    }

    void gridLayoutAndLabels() {
        at::Tensor images = at::zeros({3, 1, 8, 8});  // black tiles
        GridOptions o;
        o.columns = 2;
        o.padding = 2;
        o.minTileSize = 16;  // enlarged ×2
        at::Tensor g = imageGrid(images, {"class 1", "class 2", "x"}, o);
        // 2 columns of 16 px + 3 paddings; 2 rows of (12 label + 16 tile + 2) + 2.
        QCOMPARE(g.size(0), int64_t(3));
        QCOMPARE(g.size(2), int64_t(2 + 2 * (16 + 2)));
        QCOMPARE(g.size(1), int64_t(2 + 2 * (12 + 16 + 2)));
        // The tile is where it should be (black), the label strip has black text on white.
        QCOMPARE(g[0][2 + 12 + 5][2 + 5].item<float>(), 0.0f);
        at::Tensor label = g.narrow(1, 2, 12).narrow(2, 2, 16);
        QVERIFY(label.min().item<float>() == 0.0f && label.max().item<float>() == 1.0f);
        // Without labels there is no strip.
        QCOMPARE(imageGrid(images, {}, o).size(1), int64_t(2 + 2 * (16 + 2)));
    }

    void titledPanelsCarryTheirTitles() {
        // Two flat panels of different sizes: each lands at its column under a strip with ink.
        const at::Tensor a = at::full({3, 10, 100}, 0.5), b = at::full({1, 20, 40}, 0.25);
        const at::Tensor t = titledPanels({a, b}, {"dense", "numerical ρ=0.30"}, 5);
        const int64_t strip = 28;
        QCOMPARE(t.size(1), strip + 20);
        // "numerical rho=0.30" (ρ spelled out) is wider than panel b, so its column widens.
        QVERIFY(t.size(2) > 100 + 5 + 40);
        QVERIFY(at::allclose(t.narrow(1, strip, 10).narrow(2, 0, 100), a));
        QVERIFY(at::allclose(t.narrow(1, strip, 20).narrow(2, 105, 40), b.expand({3, 20, 40})));
        QVERIFY(at::allclose(t.narrow(1, strip + 10, 10).narrow(2, 0, 100), at::ones({3, 10, 100})));  // top-aligned
        // Ink (black) in each title strip above each panel, none elsewhere in the strip's gap.
        QVERIFY(t.narrow(1, 0, strip).narrow(2, 0, 100).min().item<float>() == 0.0f);
        QVERIFY(t.narrow(1, 0, strip).narrow(2, 105, t.size(2) - 105).min().item<float>() == 0.0f);
        QVERIFY(t.narrow(1, 0, strip).narrow(2, 100, 5).min().item<float>() == 1.0f);
        // Without the title it is the panel's strip of white only.
        const at::Tensor u = titledPanels({a}, {""}, 0);
        QVERIFY(u.narrow(1, 0, strip).min().item<float>() == 1.0f);
        QVERIFY_THROWS_EXCEPTION(Error, titledPanels({a, b}, {"one"}, 5));
        QCOMPARE(withTitle(a, "x").size(1), strip + 10);
    }

    void generateGridAndInfo() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        const QString out = dir_.path() + "/grid.png";
        QProcess p;
        p.start(npw_, {"generate", model_, "--class", "3,7", "--n", "2", "--cfg", "2.0", "--seed", "5", "--top-k", "8",
                       "--out", out, "--json"});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        QCOMPARE(j["images"].toInt(), 4);
        QCOMPARE(j["classes"].toArray().size(), 4);
        QCOMPARE(j["tokens_per_image"].toInt(), 16);
        QCOMPARE(j["image_size"].toInt(), 8);
        QVERIFY(j["tokens_per_s"].toDouble() > 0);
        Png png = readPng(out);
        QCOMPARE(png.channels, 3);
        // 8 px tiles enlarged to 64 (×8), 2 per row, labels above each row, under a title strip
        // (28 px) naming the model; a title wider than the grid widens the picture.
        QVERIFY(png.w >= 2 + 2 * (64 + 2));
        QCOMPARE(png.h, 28 + 2 + 2 * (12 + 64 + 2));

        QProcess info;
        info.start(npw_, {"info", model_, "--json"});
        QVERIFY(info.waitForFinished(60000));
        QCOMPARE(info.exitCode(), 0);
        const QJsonObject i = QJsonDocument::fromJson(info.readAllStandardOutput()).object();
        QCOMPARE(i["model_type"].toString(), QString("llamagen-c2i"));
        QCOMPARE(i["grid"].toInt(), 4);
        QCOMPARE(i["num_classes"].toInt(), 10);
        // 11·16 + 16·16 + 2·(48·16 + 16·16 + 3·48·16 + 32) + 16 + 16·16
        QCOMPARE(i["params"].toInt(), 11 * 16 + 16 * 16 + 2 * (48 * 16 + 16 * 16 + 3 * 48 * 16 + 32) + 16 + 16 * 16);
    }

    void singleImageIsReproducible() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        auto run = [&](const QString& out, const QStringList& extra) {
            QProcess p;
            p.start(npw_, QStringList{"generate", model_, "--class", "4", "--seed", "11", "--out", out} + extra);
            p.waitForFinished(120000);
            return p.exitCode();
        };
        const QString a = dir_.path() + "/a.png", b = dir_.path() + "/b.png";
        QCOMPARE(run(a, {}), 0);
        QCOMPARE(run(b, {"--vq", dir_.path() + "/c2i/vq"}), 0);
        Png pa = readPng(a), pb = readPng(b);
        QCOMPARE(pa.w, 8);
        QCOMPARE(pa.h, 8);
        QVERIFY(pa.pixels == pb.pixels);
    }

    void pruneImageModelAndReload() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        const QString out = dir_.path() + "/pruned";
        for (const char* method : {"numerical", "flap"}) {
            QProcess p;
            p.start(npw_, {"prune", model_, "--method", method, "--ratio", "0.3", "--calib", "generated", "--per-class",
                           "2", "--cfg", "1.5", "--out", out, "--json"});
            QVERIFY(p.waitForFinished(120000));
            QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
            const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
            // Budget reading: at least 30% of attention+MLP parameters, at most one unit more.
            QVERIFY2(j["achieved_ratio"].toDouble() >= 0.3 && j["achieved_ratio"].toDouble() < 0.45,
                     qPrintable(QString::number(j["achieved_ratio"].toDouble())));
            QCOMPARE(j["calibration"].toObject()["samples"].toInt(), 20);  // 2 per class, 10 classes
            // Each stage against its bound, as for language models: the forward, the Gram updates
            // and the writing (and numerical's scores and compensation, float64 work) have a
            // positive ratio.
            QJsonObject stages;
            for (const QJsonValue v : j["stage_bounds"].toObject()["stages"].toArray())
                stages[v.toObject()["stage"].toString()] = v;
            QStringList bounded = {"calibration_forward", "gram_accumulation", "writing"};
            if (QString(method) == "numerical") bounded << "scores" << "compensation";
            for (const QString& stage : bounded) {
                const QJsonObject s = stages[stage].toObject();
                QVERIFY2(s["ratio"].toDouble() > 0 && std::isfinite(s["ratio"].toDouble()), qPrintable(stage));
                QVERIFY2(s["seconds"].toDouble() >= 0, qPrintable(stage));
            }
            QCOMPARE(j["calibration"].toObject()["tokens"].toInt(), 20 * 16);
            // The export reloads with its per-layer sizes, keeps the class table and its tokenizer.
            LlamaGenCheckpoint ck = loadLlamaGenCheckpoint((out + "").toStdString());
            const QJsonArray layers = j["layers"].toArray();
            QCOMPARE(layers.size(), 2);
            for (int l = 0; l < 2; ++l) {
                const QJsonObject L = layers[l].toObject();
                QCOMPARE(ck.config.transformer.num_heads[l], int64_t(L["heads"].toInt()));
                QCOMPARE(ck.config.transformer.intermediate_size[l], int64_t(L["channels"].toInt()));
            }
            QCOMPARE(ck.classEmbedding.size(0), int64_t(11));
            QVERIFY(QFileInfo::exists(out + "/vq/model.safetensors"));
            QVERIFY(QFileInfo::exists(out + "/npw-manifest.json"));
            QProcess g;
            g.start(npw_, {"generate", out, "--class", "3", "--seed", "5", "--out", dir_.path() + "/pruned.png"});
            QVERIFY(g.waitForFinished(120000));
            QVERIFY2(g.exitCode() == 0, g.readAllStandardError().constData());
            QCOMPARE(readPng(dir_.path() + "/pruned.png").w, 8);
        }
        // Image models calibrate on their own samples; the source is never overwritten.
        auto stderrOf = [&](const QStringList& args) {
            QProcess p;
            p.start(npw_, args);
            p.waitForFinished(60000);
            return std::make_pair(p.exitCode(), QString::fromUtf8(p.readAllStandardError()));
        };
        auto [rc1, e1] = stderrOf({"prune", model_, "--calib", "some.txt", "--out", dir_.path() + "/p2"});
        QCOMPARE(rc1, 1);
        QVERIFY2(e1.contains("--calib generated"), qPrintable(e1));
        auto [rc2, e2] = stderrOf({"prune", model_, "--calib", "generated", "--per-class", "1", "--out", model_});
        QCOMPARE(rc2, 1);
        QVERIFY2(!e2.isEmpty(), qPrintable(e2));
        QVERIFY(QFileInfo::exists(model_ + "/model.safetensors"));
    }

    // npw prune IMAGE_MODEL is ImagePruningWorkbench::prune: the CLI's export holds the very
    // transformer the workbench prunes in this process from the same flags (the same samples, the
    // same statistics, scores, selection and compensation), tensor by tensor, for numerical (with
    // a ranking and a damping the sweep's names cannot express) and FLAP. A CLI that assembled its own
    // steps, or read a flag differently, would differ here.
    void pruneIsTheWorkbenchPrune() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        std::shared_ptr<const VqModel> vq = VqModel::load((model_ + "/vq").toStdString());
        ImagePruningWorkbench bench(loadLlamaGenCheckpoint(model_.toStdString()), vq, chooseRuntime("cpu"));
        ImageSamplingOptions sampling;
        sampling.cfgScale = 1.5;
        sampling.seed = 7;
        sampling.topK = 0;
        bench.calibrate(2, sampling);
        struct Case {
            QStringList flags;
            PruneSettings settings;
        };
        PruneSettings numerical;
        numerical.ratio = 0.3;
        numerical.crossLayer = CrossLayerRanking::CompensatedError;
        numerical.damp = 0.02;
        PruneSettings flap;
        flap.method = PruneMethod::Flap;
        flap.ratio = 0.25;
        const std::vector<Case> cases = {
            {{"--method", "numerical", "--ratio", "0.3", "--ranking", "lstar", "--damp", "0.02"}, numerical},
            {{"--method", "flap", "--ratio", "0.25"}, flap}};
        for (const Case& c : cases) {
            const QString out = dir_.path() + "/as-workbench";
            QProcess p;
            p.start(npw_, QStringList{"prune", model_, "--calib", "generated", "--per-class", "2", "--cfg", "1.5", "--seed",
                                      "7", "--top-k", "0", "--out", out, "--json"} +
                              c.flags);
            QVERIFY(p.waitForFinished(120000));
            QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
            const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
            const ImageWorkbenchPrune mine = bench.prune(c.settings);
            QCOMPARE(j["params_after"].toDouble(), double(mine.report.paramsAfter));
            QCOMPARE(j["achieved_ratio"].toDouble(), mine.report.achievedRatio);
            const LlamaCheckpoint cli = loadLlamaGenCheckpoint(out.toStdString()).transformer();
            const LlamaCheckpoint& wb = mine.pruned.checkpoint;
            QCOMPARE(cli.config.num_heads, wb.config.num_heads);
            QCOMPARE(cli.config.num_kv_heads, wb.config.num_kv_heads);
            QCOMPARE(cli.config.intermediate_size, wb.config.intermediate_size);
            LlamaWeights a = cli.weights, b = wb.weights;
            const auto x = namedTensors(a), y = namedTensors(b);
            QCOMPARE(x.size(), y.size());
            // Equal up to the BLAS kernels' rounding: the CLI generates its calibration images in
            // batches of --batch, the workbench here in other batches, and OpenBLAS's AVX-512 kernels
            // (small-matrix paths) sum a product in an order that depends on its shape. A flag read
            // differently (--damp 0.01 for 0.02) moves the compensated weights by ~1e-2 of their size.
            double worst = 0;
            for (size_t i = 0; i < x.size(); ++i) {
                QCOMPARE(x[i].first, y[i].first);
                QCOMPARE(x[i].second->defined(), y[i].second->defined());
                if (!x[i].second->defined()) continue;
                const at::Tensor u = x[i].second->to(at::kDouble), v = y[i].second->to(at::kDouble);
                QCOMPARE(u.sizes(), v.sizes());
                const double scale = std::max(v.abs().max().item<double>(), 1e-30);
                const double d = (u - v).abs().max().item<double>() / scale;
                worst = std::max(worst, d);
                QVERIFY2(d <= 1e-5, qPrintable(QString::fromStdString(x[i].first) + ": " + QString::number(d)));
            }
            qInfo("%s: CLI against workbench, largest max|Δ|/max|w| over the tensors: %.3g", qPrintable(c.flags.join(' ')), worst);
        }
    }

    // npw bench --write-synthetic-image: a random LlamaGen GPT as an image-model folder that
    // info and prune take without a VQ tokenizer (calibration is the GPT's own tokens). The
    // weights are checked against the stated initialisation, the parameter count against
    // LlamaGen's published shape (GPT-B: 111M), and the folder rules of --write-synthetic hold.
    void syntheticImageModelWritesLoadsAndPrunes() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        namespace fs = std::filesystem;
        auto run = [&](const QStringList& args) {
            QProcess p;
            p.start(npw_, args);
            p.waitForFinished(300000);
            return std::make_tuple(p.exitCode(), QJsonDocument::fromJson(p.readAllStandardOutput()).object(),
                                   QString::fromUtf8(p.readAllStandardError()));
        };
        const QString model = dir_.path() + "/synthetic-tiny";
        // A leftover of a killed run (it has the marker) is cleared and the write starts over.
        fs::create_directories((model + ".npw-partial").toStdString());
        std::ofstream((model + ".npw-partial/.npw-synthetic-partial").toStdString()) << "in progress\n";
        std::ofstream((model + ".npw-partial/model.safetensors.tmp").toStdString()) << "half";
        auto [rc, w, err] = run({"bench", "--write-synthetic-image", "tiny", "--num-classes", "3", "--seed", "4", "--out",
                                 model, "--json"});
        QVERIFY2(rc == 0, qPrintable(err));
        QVERIFY(!fs::exists((model + ".npw-partial").toStdString()));
        QVERIFY(!fs::exists((model + "/.npw-synthetic-partial").toStdString()));
        // tiny: dim 64, 2 layers of 4 heads, FFN 192 (LlamaGen's rule, multiple of 32), codebook
        // 512, 8×8 tokens; the class table has 3 + 1 rows.
        const int64_t D = 64, F = 192, V = 512;
        const int64_t tinyParams = 4 * D + 2 * V * D + 2 * (4 * D * D + 3 * D * F + 2 * D) + D;
        QCOMPARE(int64_t(w["parameters"].toDouble()), tinyParams);
        QCOMPARE(w["tensors"].toInt(), 2 + 2 * 7 + 2);
        QCOMPARE(w["num_classes"].toInt(), 3);
        QVERIFY(!fs::exists((model + "/vq").toStdString()));
        {
            const auto file = SafeTensorsFile::open((model + "/model.safetensors").toStdString());
            QCOMPARE(int64_t(file->names().size()), int64_t(w["tensors"].toInt()));
            for (const std::string& n : file->names()) QCOMPARE(file->info(n).dtype, std::string("BF16"));
        }
        auto [irc, info, ierr] = run({"info", model, "--json"});
        QVERIFY2(irc == 0, qPrintable(ierr));
        QCOMPARE(info["model_type"].toString(), QString("llamagen-c2i"));
        QCOMPARE(int64_t(info["params"].toDouble()), tinyParams);
        QCOMPARE(info["grid"].toInt(), 8);
        QCOMPARE(info["num_classes"].toInt(), 3);

        // The initialisation: N(0, 0.02²), wo and w2 scaled by 1/sqrt(2·layers), norms 1. Within
        // 4 standard errors of n draws (std: σ/sqrt(2n), mean: σ/sqrt(n)) plus bf16's 2⁻⁸: from
        // 17 % (the 256-value class table) to 2 %, each far from a wrong scale's factor 2.
        const LlamaGenCheckpoint ck = loadLlamaGenCheckpoint(model.toStdString());
        auto near = [](const at::Tensor& t, double stdev) {
            const double s = t.std().item<double>(), m = t.mean().item<double>(), n = double(t.numel());
            return std::abs(s - stdev) < (4 / std::sqrt(2 * n) + 1.0 / 256) * stdev && std::abs(m) < 4 * stdev / std::sqrt(n);
        };
        QVERIFY(near(ck.weights.embed, 0.02));
        QVERIFY(near(ck.weights.lm_head, 0.02));
        QVERIFY(near(ck.classEmbedding, 0.02));
        QVERIFY(near(at::cat({ck.weights.layers[1].wq, ck.weights.layers[1].wk, ck.weights.layers[1].wv}), 0.02));
        QVERIFY(near(ck.weights.layers[0].w_gate, 0.02));
        QVERIFY(near(ck.weights.layers[1].wo, 0.01));
        QVERIFY(near(ck.weights.layers[0].w_down, 0.01));
        QVERIFY(at::equal(ck.weights.layers[1].ffn_norm, at::ones({D})));
        QVERIFY(!at::equal(ck.weights.layers[0].w_up, ck.weights.layers[1].w_up));  // a generator per tensor

        // Pruned as any image model, calibrated on 1 generated sample per class (3 × 64 tokens):
        // every stage of the report is finite, the bounded ones against a positive bound.
        const QString out = dir_.path() + "/synthetic-tiny-pruned";
        auto [prc, j, perr] = run({"prune", model, "--method", "numerical", "--ratio", "0.2", "--calib", "generated",
                                   "--per-class", "1", "--out", out, "--json"});
        QVERIFY2(prc == 0, qPrintable(perr));
        QCOMPARE(j["calibration"].toObject()["samples"].toInt(), 3);
        QCOMPARE(j["calibration"].toObject()["tokens"].toInt(), 3 * 64);
        QVERIFY(j["achieved_ratio"].toDouble() >= 0.2 && j["achieved_ratio"].toDouble() < 0.35);
        const QJsonArray stages = j["stage_bounds"].toObject()["stages"].toArray();
        QVERIFY(stages.size() >= 5);
        QStringList named;
        for (const QJsonValue v : stages) {
            const QJsonObject st = v.toObject();
            named << st["stage"].toString();
            QVERIFY2(std::isfinite(st["seconds"].toDouble()) && st["seconds"].toDouble() >= 0,
                     qPrintable(st["stage"].toString()));
            if (st.contains("bound_s"))
                QVERIFY2(st["bound_s"].toDouble() > 0 && std::isfinite(st["ratio"].toDouble()) && st["ratio"].toDouble() > 0,
                         qPrintable(st["stage"].toString()));
        }
        for (const char* stage : {"calibration_forward", "gram_accumulation", "scores", "compensation", "writing"})
            QVERIFY2(named.contains(stage), qPrintable(named.join(",")));
        QCOMPARE(loadLlamaGenCheckpoint(out.toStdString()).classEmbedding.size(0), int64_t(4));

        // The same seed writes the same bytes; another seed other weights.
        const QString again = dir_.path() + "/synthetic-tiny-again", other = dir_.path() + "/synthetic-tiny-seed5";
        QCOMPARE(std::get<0>(run({"bench", "--write-synthetic-image", "tiny", "--num-classes", "3", "--seed", "4", "--out", again})), 0);
        QCOMPARE(std::get<0>(run({"bench", "--write-synthetic-image", "tiny", "--num-classes", "3", "--seed", "5", "--out", other})), 0);
        auto bytes = [](const QString& dir) {
            QFile f(dir + "/model.safetensors");
            return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
        };
        QVERIFY(!bytes(model).isEmpty() && bytes(again) == bytes(model));
        QVERIFY(bytes(other).size() == bytes(model).size() && bytes(other) != bytes(model));

        // Refusals: an existing folder (left as it was), an unknown size (the sizes listed), a
        // partial folder npw did not leave, no --out, and a MODEL argument.
        const QByteArray before = bytes(model);
        auto [e1rc, e1j, e1] = run({"bench", "--write-synthetic-image", "tiny", "--out", model});
        QVERIFY2(e1rc == 1 && e1.contains("already exists"), qPrintable(e1));
        QVERIFY(bytes(model) == before);
        auto [e2rc, e2j, e2] = run({"bench", "--write-synthetic-image", "XXXL", "--out", dir_.path() + "/x"});
        QVERIFY2(e2rc == 1 && e2.contains("'XXXL'") && e2.contains("B, L, XL, XXL, 3B or tiny"), qPrintable(e2));
        const QString foreign = dir_.path() + "/foreign";
        fs::create_directories((foreign + ".npw-partial").toStdString());
        std::ofstream((foreign + ".npw-partial/mine.txt").toStdString()) << "not npw's";
        auto [e3rc, e3j, e3] = run({"bench", "--write-synthetic-image", "tiny", "--out", foreign});
        QVERIFY2(e3rc == 1 && e3.contains("was not left by an interrupted 'npw bench --write-synthetic-image'"), qPrintable(e3));
        QVERIFY(fs::exists((foreign + ".npw-partial/mine.txt").toStdString()) && !fs::exists(foreign.toStdString()));
        auto [e4rc, e4j, e4] = run({"bench", "--write-synthetic-image", "tiny"});
        QVERIFY2(e4rc == 1 && e4.contains("--out DIR"), qPrintable(e4));
        auto [e5rc, e5j, e5] = run({"bench", model, "--write-synthetic-image", "tiny", "--out", dir_.path() + "/y"});
        QVERIFY2(e5rc == 1 && e5.contains("takes no MODEL"), qPrintable(e5));

        // GPT-B, LlamaGen's published 111M: 12 layers, dim 768, 12 heads, FFN 2048, codebook
        // 16384, 1000 classes + the null class.
        const QString b = dir_.path() + "/synthetic-b";
        auto [brc, bw, berr] = run({"bench", "--write-synthetic-image", "gpt-b", "--out", b, "--json"});
        QVERIFY2(brc == 0, qPrintable(berr));
        const int64_t BD = 768, BF = 2048, BV = 16384, BL = 12;
        const int64_t bParams = 1001 * BD + 2 * BV * BD + BL * (4 * BD * BD + 3 * BD * BF + 2 * BD) + BD;
        QCOMPARE(bParams, int64_t(110888448));
        QCOMPARE(int64_t(bw["parameters"].toDouble()), bParams);
        QCOMPARE(bw["name"].toString(), QString("GPT-B"));
        auto [birc, bi, bierr] = run({"info", b, "--json"});
        QVERIFY2(birc == 0, qPrintable(bierr));
        QCOMPARE(int64_t(bi["params"].toDouble()), bParams);
        QCOMPARE(bi["grid"].toInt(), 16);
        fs::remove_all(b.toStdString());
    }

    void userErrors() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        auto stderrOf = [&](const QStringList& args) {
            QProcess p;
            p.start(npw_, args);
            p.waitForFinished(60000);
            return std::make_pair(p.exitCode(), QString::fromUtf8(p.readAllStandardError()));
        };
        auto [rc1, e1] = stderrOf({"generate", QString::fromStdString(dataFile("gpt_fsdp.pt")), "--class", "1",
                                   "--vq", QString::fromStdString(dataFile("vq_ddp.pt")), "--out", dir_.path() + "/x.png"});
        QCOMPARE(rc1, 1);
        QVERIFY2(e1.contains("--gpt-model") && e1.contains("--image-size"), qPrintable(e1));
        auto [rc2, e2] = stderrOf({"generate", QString::fromStdString(dataFile("gpt_fsdp.pt")), "--class", "1", "--vq",
                                   QString::fromStdString(dataFile("vq_ddp.pt")), "--gpt-model", "B", "--out",
                                   dir_.path() + "/x.png"});
        QCOMPARE(rc2, 1);
        QVERIFY2(e2.contains("GPT-B") && e2.contains("[11, 768]"), qPrintable(e2));
        auto [rc3, e3] = stderrOf({"generate", model_, "--class", "12", "--out", dir_.path() + "/x.png"});
        QCOMPARE(rc3, 1);
        QVERIFY2(e3.contains("class 12"), qPrintable(e3));
        auto [rc4, e4] = stderrOf({"generate", model_, "--class", "1"});
        QCOMPARE(rc4, 1);
        QVERIFY2(e4.contains("--out"), qPrintable(e4));
        auto [rc5, e5] = stderrOf({"generate", model_, "--class", "1", "--vq", QString::fromStdString(dataFile("vq_npw")),
                                   "--out", dir_.path() + "/x.png"});
        QCOMPARE(rc5, 1);  // the npw VQ fixture downsamples by 4: its 8×8 grid would not be the model's
        QVERIFY2(e5.contains("downsamples by 4") && e5.contains("by 2"), qPrintable(e5));
    }

private:
    QTemporaryDir dir_;
    QString npw_, model_;
};

QTEST_GUILESS_MAIN(TestLlamaGenCli)
#include "tst_llamagen_cli.moc"
