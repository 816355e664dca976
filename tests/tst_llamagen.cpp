// LlamaGen's class-conditional GPT against an independent reference: logits with and without
// the KV cache, greedy generation with classifier-free guidance (and its interval), loading
// LlamaGen's DDP and FSDP checkpoints, npw's own export, the named sizes, and the errors a
// user meets with a wrong checkpoint or size. Expectations: tests/fixtures/
// make_llamagen_fixtures.py (plain PyTorch, float64).
#include "core/eval/image_generate.h"
#include "core/io/safetensors.h"
#include "core/models/llamagen.h"
#include "core/prune/pruner.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include "error_of.h"
#include "llamagen_fixture.h"
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

using namespace npw;
using npw::test::errorOf;
using npw::test::normalisedError;

namespace {

// Logits: max|actual − expected| / max|expected|. The float32 runtime measures 6.8e-7 against
// the float64 reference (printed by the tests; the fixture's attention is deliberately sharp);
// a 1D instead of 2D rotary table, rotating the class token, swapping w1/w3 or the q/k/v order
// all give errors of 0.6 or more (tests/fixtures/README.md).
constexpr double kLogitTolerance = 1e-4;

QString dataDir() { return QStringLiteral(NPW_TEST_DATA "/llamagen_ref"); }
std::string dataFile(const char* name) { return (dataDir() + "/" + name).toStdString(); }

LlamaGenConfig fixtureConfig() { return npw::test::llamagenFixtureConfig(); }

LlamaGenCheckpoint loadFixture(const char* file) {
    LlamaGenLoadOptions o;
    o.config = fixtureConfig();
    return loadLlamaGenCheckpoint(dataFile(file), o);
}

} // namespace

class TestLlamaGen : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        at::set_num_threads(2);
        expected_ = SafeTensorsFile::open(dataFile("gpt_expected.safetensors"));
    }

    void namedSizes_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("dim");
        QTest::addColumn<int>("headDim");
        QTest::addColumn<int>("ffn");
        // reference.md §4 (LlamaGen's GPT_models and FeedForward).
        QTest::newRow("B") << "B" << 12 << 12 << 768 << 64 << 2048;
        QTest::newRow("L") << "GPT-L" << 24 << 16 << 1024 << 64 << 2816;
        QTest::newRow("XL") << "xl" << 36 << 20 << 1280 << 64 << 3584;
        QTest::newRow("XXL") << "XXL" << 48 << 24 << 1536 << 64 << 4096;
        QTest::newRow("3B") << "3B" << 24 << 32 << 3200 << 100 << 8704;
    }
    void namedSizes() {
        QFETCH(QString, name);
        QFETCH(int, layers);
        QFETCH(int, heads);
        QFETCH(int, dim);
        QFETCH(int, headDim);
        QFETCH(int, ffn);
        for (int image : {256, 384}) {
            const LlamaGenConfig c = llamaGenNamedConfig(name.toStdString(), image);
            QCOMPARE(c.transformer.num_layers, int64_t(layers));
            QCOMPARE(c.transformer.num_heads.at(0), int64_t(heads));
            QCOMPARE(c.transformer.hidden_size, int64_t(dim));
            QCOMPARE(c.transformer.head_dim, int64_t(headDim));
            QCOMPARE(c.transformer.intermediate_size.at(0), int64_t(ffn));
            QCOMPARE(c.transformer.vocab_size, int64_t(16384));
            QCOMPARE(c.num_classes, int64_t(1000));
            QCOMPARE(c.grid, int64_t(image == 256 ? 16 : 24));
            QCOMPARE(c.transformer.max_position_embeddings, 1 + c.grid * c.grid);
            // The pruning engine's default head scaling is α = 4·D_h/3 for these MHA models.
            QVERIFY(std::abs(defaultAlphaFor(c.transformer, AttentionUnitKind::KvGroup) - 4.0 * headDim / 3.0) < 1e-9);
        }
    }

    void unknownNameIsAnError() {
        const QString e = errorOf([] { llamaGenNamedConfig("GPT-XXXXL", 256); });
        QVERIFY2(e.contains("GPT-XXXXL") && e.contains("XXL") && e.contains("3B"), qPrintable(e));
        QVERIFY(errorOf([] { llamaGenNamedConfig("B", 250); }).contains("250"));
    }

    void ropeTablesKnownAnswer() {
        // head_dim 8: 4 pairs; pairs 0,1 rotate by the row with f = 1, 10000^(-1/2); pairs 2,3 by the column.
        const LlamaGenConfig c = fixtureConfig();
        auto [cos, sin] = llamaGenRopeTables(c, 0, 1 + 16, at::TensorOptions().dtype(at::kDouble));
        QCOMPARE(cos.sizes(), at::IntArrayRef({17, 4}));
        QCOMPARE(cos[0].abs().max().item<double>(), 0.0);  // class token: no rotation, zeroed q/k
        QCOMPARE(sin[0].abs().max().item<double>(), 0.0);
        const int64_t row = 1, col = 2, pos = 1 + row * 4 + col;
        const double angles[4] = {row * 1.0, row * 0.01, col * 1.0, col * 0.01};
        for (int j = 0; j < 4; ++j) {
            QVERIFY(std::abs(cos[pos][j].item<double>() - std::cos(angles[j])) < 1e-12);
            QVERIFY(std::abs(sin[pos][j].item<double>() - std::sin(angles[j])) < 1e-12);
        }
        // An offset window gives the same rows.
        auto [cos2, sin2] = llamaGenRopeTables(c, pos, 2, at::TensorOptions().dtype(at::kDouble));
        QVERIFY(at::allclose(cos2, cos.narrow(0, pos, 2)));
        QVERIFY(at::allclose(sin2, sin.narrow(0, pos, 2)));
    }

    void logitsMatchReference_data() {
        QTest::addColumn<QString>("file");
        QTest::newRow("ddp {model, optimizer, steps, args}") << "gpt_ddp.pt";
        QTest::newRow("fsdp raw state dict") << "gpt_fsdp.pt";
    }
    void logitsMatchReference() {
        QFETCH(QString, file);
        LlamaGenModel model(loadFixture(file.toUtf8().constData()), chooseRuntime("cpu", "float32"));
        const at::Tensor classes = expected_->load("classes"), tokens = expected_->load("tokens");
        const at::Tensor want = expected_->loadFloat("logits");
        const at::Tensor got = model.logits(classes, tokens);
        QCOMPARE(got.sizes(), want.sizes());
        const double err = normalisedError(got, want);
        qInfo("%s: normalised logit error %.2e (max abs %.2e)", qPrintable(file), err,
              (got - want).abs().max().item<double>());
        QVERIFY2(err <= kLogitTolerance, qPrintable(QString::number(err)));
    }

    void kvCacheMatchesFullForward() {
        LlamaGenModel model(loadFixture("gpt_ddp.pt"), chooseRuntime("cpu", "float32"));
        const at::Tensor classes = expected_->load("classes"), tokens = expected_->load("tokens");
        const at::Tensor want = expected_->loadFloat("logits");
        // One token at a time after the class token.
        KvCache cache;
        std::vector<at::Tensor> steps{model.logits(classes, at::Tensor(), &cache)};
        for (int64_t t = 0; t < tokens.size(1); ++t)
            steps.push_back(model.logits(at::Tensor(), tokens.narrow(1, t, 1), &cache));
        const double err = normalisedError(at::cat(steps, 1), want);
        qInfo("cached one token at a time: normalised error %.2e", err);
        QVERIFY2(err <= kLogitTolerance, qPrintable(QString::number(err)));
        QCOMPARE(cache.length, 1 + tokens.size(1));
        // Class token with a chunk, then the rest.
        KvCache chunked;
        at::Tensor a = model.logits(classes, tokens.narrow(1, 0, 5), &chunked);
        at::Tensor b = model.logits(at::Tensor(), tokens.narrow(1, 5, tokens.size(1) - 5), &chunked);
        QVERIFY(normalisedError(at::cat({a, b}, 1), want) <= kLogitTolerance);
        // The class token only starts a sequence.
        QVERIFY(errorOf([&] { model.logits(classes, at::Tensor(), &chunked); }).contains("cache"));
    }

    void greedyGuidedGenerationMatchesReference_data() {
        QTest::addColumn<double>("cfg");
        QTest::addColumn<int>("interval");
        QTest::addColumn<QString>("expectedName");
        QTest::newRow("cfg 2.0") << 2.0 << -1 << "greedy_cfg2";
        QTest::newRow("cfg 2.0, interval 4") << 2.0 << 4 << "greedy_cfg2_interval4";
        QTest::newRow("no guidance") << 1.0 << -1 << "greedy_nocfg";
    }
    void greedyGuidedGenerationMatchesReference() {
        QFETCH(double, cfg);
        QFETCH(int, interval);
        QFETCH(QString, expectedName);
        LlamaGenModel model(loadFixture("gpt_fsdp.pt"), chooseRuntime("cpu", "float32"));
        ImageSamplingOptions o;
        o.temperature = 0;
        o.cfgScale = cfg;
        o.cfgInterval = interval;
        const at::Tensor cls = expected_->load("greedy_classes");
        std::vector<int64_t> classes(cls.data_ptr<int64_t>(), cls.data_ptr<int64_t>() + cls.numel());
        ImageTokens out = generateImageTokens(model, classes, o);
        const at::Tensor want = expected_->load(expectedName.toStdString());
        QCOMPARE(out.tokens.sizes(), want.sizes());
        QVERIFY2(at::equal(out.tokens, want), qPrintable(expectedName));
    }

    void samplingIsPerSampleAndSeeded() {
        LlamaGenModel model(loadFixture("gpt_ddp.pt"), chooseRuntime("cpu", "float32"));
        ImageSamplingOptions o;
        o.temperature = 1.0;
        o.topK = 8;
        o.topP = 0.95;
        o.cfgScale = 1.5;
        o.seed = 42;
        const ImageTokens batch = generateImageTokens(model, {3, 7, 3}, o);
        // The same sample alone (as index 1) or in a batch of another size draws the same tokens.
        const ImageTokens alone = generateImageTokens(model, {7}, o, /*firstIndex=*/1);
        QVERIFY(at::equal(alone.tokens[0], batch.tokens[1]));
        o.batchSize = 1;
        QVERIFY(at::equal(generateImageTokens(model, {3, 7, 3}, o).tokens, batch.tokens));
        // Samples 0 and 2 share the class but not the generator.
        QVERIFY(!at::equal(batch.tokens[0], batch.tokens[2]));
        // Another seed, other images.
        o.seed = 43;
        QVERIFY(!at::equal(generateImageTokens(model, {3, 7, 3}, o).tokens, batch.tokens));
        QVERIFY(batch.tokensPerSecond > 0);
    }

    void sampleFilters() {
        ImageSamplingOptions o;
        std::mt19937_64 rng(1);
        // probabilities 0.5, 0.3, 0.2 at temperature 1
        const at::Tensor logits = at::log(at::tensor({0.2, 0.5, 0.3}, at::kDouble));
        o.topK = 1;
        for (int i = 0; i < 50; ++i) QCOMPARE(sampleImageToken(logits, o, rng), int64_t(1));
        o.topK = 0;
        o.topP = 0.6;  // Hugging Face's rule keeps the token that crosses p: {1, 2}
        int counts[3] = {0, 0, 0};
        for (int i = 0; i < 20000; ++i) ++counts[sampleImageToken(logits, o, rng)];
        QCOMPARE(counts[0], 0);
        QVERIFY(std::abs(counts[1] / 20000.0 - 0.625) < 0.015);
        o.topP = 1.0;
        o.topK = 2;
        counts[0] = counts[1] = counts[2] = 0;
        for (int i = 0; i < 20000; ++i) ++counts[sampleImageToken(logits, o, rng)];
        QCOMPARE(counts[0], 0);
        o.topK = 0;
        o.temperature = 0.5;  // p ∝ p_i², so 0.25, 0.09, 0.04 normalised
        counts[0] = counts[1] = counts[2] = 0;
        for (int i = 0; i < 20000; ++i) ++counts[sampleImageToken(logits, o, rng)];
        QVERIFY(std::abs(counts[1] / 20000.0 - 0.25 / 0.38) < 0.015);
        o.temperature = 0;
        QCOMPARE(sampleImageToken(logits, o, rng), int64_t(1));
    }

    void exportReloads() {
        LlamaGenCheckpoint ck = loadFixture("gpt_ddp.pt");
        QTemporaryDir dir;
        const std::string out = (dir.path() + "/export").toStdString();
        saveLlamaGenDirectory(ck, out);
        QVERIFY(isLlamaGenModel(out));
        QVERIFY(isLlamaGenModel(dataFile("gpt_fsdp.pt")));
        QVERIFY(!isLlamaGenModel(dataFile("vq_ddp.pt")));
        LlamaGenCheckpoint back = loadLlamaGenCheckpoint(out);  // the directory carries its size
        QCOMPARE(back.config.transformer.num_heads, ck.config.transformer.num_heads);
        LlamaGenModel a(ck, chooseRuntime("cpu", "float32")), b(back, chooseRuntime("cpu", "float32"));
        const at::Tensor classes = expected_->load("classes"), tokens = expected_->load("tokens");
        QVERIFY(at::equal(a.logits(classes, tokens), b.logits(classes, tokens)));
        // Writing over the source is refused.
        QVERIFY(!errorOf([&] { saveLlamaGenDirectory(back, out); }).isEmpty());
    }

    void prunedSizesExportAndReload() {
        // A pruned model (per-layer heads and FFN widths, a layer without heads) round-trips.
        LlamaGenCheckpoint ck = loadFixture("gpt_fsdp.pt");
        LlamaCheckpoint t = ck.transformer();
        const int64_t hd = t.config.head_dim;
        auto& L0 = t.weights.layers[0];
        L0.wq = L0.wq.narrow(0, hd, hd).contiguous();
        L0.wk = L0.wk.narrow(0, hd, hd).contiguous();
        L0.wv = L0.wv.narrow(0, hd, hd).contiguous();
        L0.wo = L0.wo.narrow(1, hd, hd).contiguous();
        L0.w_gate = L0.w_gate.narrow(0, 0, 20).contiguous();
        L0.w_up = L0.w_up.narrow(0, 0, 20).contiguous();
        L0.w_down = L0.w_down.narrow(1, 0, 20).contiguous();
        auto& L1 = t.weights.layers[1];
        for (at::Tensor* w : {&L1.wq, &L1.wk, &L1.wv}) *w = w->narrow(0, 0, 0).contiguous();
        L1.wo = L1.wo.narrow(1, 0, 0).contiguous();
        t.config.num_heads = {1, 0};
        t.config.num_kv_heads = {1, 0};
        t.config.intermediate_size = {20, 48};
        LlamaGenCheckpoint pruned = ck.withTransformer(t);
        QTemporaryDir dir;
        const std::string out = (dir.path() + "/pruned").toStdString();
        saveLlamaGenDirectory(pruned, out);
        LlamaGenCheckpoint back = loadLlamaGenCheckpoint(out);
        QCOMPARE(back.config.transformer.num_heads, (std::vector<int64_t>{1, 0}));
        QCOMPARE(back.config.transformer.intermediate_size, (std::vector<int64_t>{20, 48}));
        LlamaGenModel a(pruned, chooseRuntime("cpu", "float32")), b(back, chooseRuntime("cpu", "float32"));
        const at::Tensor classes = expected_->load("classes"), tokens = expected_->load("tokens");
        const at::Tensor la = a.logits(classes, tokens);
        QVERIFY(at::equal(la, b.logits(classes, tokens)));
        QVERIFY(normalisedError(la, expected_->loadFloat("logits")) > 1e-3);  // it is a different model
    }

    void argsNamespaceNamesTheSize() {
        // gpt_ddp.pt carries LlamaGen's training args (gpt_model GPT-B, image_size 256): without an
        // explicit size npw uses them, and the tiny weights then disagree with GPT-B.
        const QString e = errorOf([] { loadLlamaGenCheckpoint(dataFile("gpt_ddp.pt")); });
        QVERIFY2(e.contains("gpt_ddp.pt") && e.contains("GPT-B") && e.contains("[11, 16]") && e.contains("[11, 768]"),
                 qPrintable(e));
    }

    void rawCheckpointNeedsASize() {
        const QString e = errorOf([] { loadLlamaGenCheckpoint(dataFile("gpt_fsdp.pt")); });
        // The core names the settings; the CLI words them as its flags (tst_llamagen_cli, userErrors).
        QVERIFY2(e.contains("gpt_fsdp.pt") && e.contains("does not say its size") && e.contains("B, L, XL, XXL or 3B") &&
                     e.contains("image size"),
                 qPrintable(e));
        QVERIFY_THROWS_EXCEPTION(LlamaGenSizeUnknown, loadLlamaGenCheckpoint(dataFile("gpt_fsdp.pt")));
    }

    void namedSizeDisagreeing() {
        LlamaGenLoadOptions o;
        o.config = llamaGenNamedConfig("B", 256);
        const QString e = errorOf([&] { loadLlamaGenCheckpoint(dataFile("gpt_fsdp.pt"), o); });
        // The first tensor checked after the tables: the class embedding's width.
        QVERIFY2(e.contains("gpt_fsdp.pt") && e.contains("cls_embedding.embedding_table.weight") && e.contains("[11, 16]") &&
                     e.contains("[11, 768]") && e.contains("GPT-B"),
                 qPrintable(e));
        // More layers in the file than in the configuration.
        LlamaGenConfig oneLayer = fixtureConfig();
        oneLayer.transformer.num_layers = 1;
        oneLayer.transformer.num_heads.resize(1);
        oneLayer.transformer.num_kv_heads.resize(1);
        oneLayer.transformer.intermediate_size.resize(1);
        o.config = oneLayer;
        const QString e2 = errorOf([&] { loadLlamaGenCheckpoint(dataFile("gpt_fsdp.pt"), o); });
        QVERIFY2(e2.contains("layers.1.") && e2.contains("1 layers"), qPrintable(e2));
    }

    void missingAndMisshapenTensors() {
        LlamaGenCheckpoint ck = loadFixture("gpt_ddp.pt");
        QTemporaryDir dir;
        const std::string good = (dir.path() + "/good").toStdString();
        saveLlamaGenDirectory(ck, good);
        auto file = SafeTensorsFile::open(good + "/model.safetensors");
        auto rewrite = [&](const std::string& name, const std::function<std::vector<std::pair<std::string, at::Tensor>>(
                                                        const std::string&, const at::Tensor&)>& edit) {
            std::string out = (dir.path() + "/" + QString::fromStdString(name)).toStdString();
            std::filesystem::create_directories(out);
            std::filesystem::copy_file(good + "/config.json", out + "/config.json");
            std::vector<std::pair<std::string, at::Tensor>> tensors;
            for (const std::string& n : file->names())
                for (auto& item : edit(n, file->loadFloat(n))) tensors.push_back(item);
            writeSafeTensors(out + "/model.safetensors", tensors);
            return out;
        };
        const std::string missing = rewrite("missing", [](const std::string& n, const at::Tensor& t) {
            std::vector<std::pair<std::string, at::Tensor>> v;
            if (n != "layers.1.feed_forward.w3.weight") v.emplace_back(n, t);
            return v;
        });
        QString e = errorOf([&] { loadLlamaGenCheckpoint(missing); });
        QVERIFY2(e.contains("layers.1.feed_forward.w3.weight") && e.contains("missing") && e.contains("[48, 16]") &&
                     e.contains("model.safetensors"),
                 qPrintable(e));
        const std::string misshapen = rewrite("misshapen", [](const std::string& n, const at::Tensor& t) {
            std::vector<std::pair<std::string, at::Tensor>> v;
            v.emplace_back(n, n == "layers.0.attention.wqkv.weight" ? t.narrow(0, 0, 40).contiguous() : t);
            return v;
        });
        e = errorOf([&] { loadLlamaGenCheckpoint(misshapen); });
        QVERIFY2(e.contains("layers.0.attention.wqkv.weight") && e.contains("[40, 16]") && e.contains("[48, 16]"),
                 qPrintable(e));
        const std::string nan = rewrite("nan", [](const std::string& n, const at::Tensor& t) {
            std::vector<std::pair<std::string, at::Tensor>> v;
            v.emplace_back(n, n == "norm.weight" ? t.clone().fill_(NAN) : t);
            return v;
        });
        e = errorOf([&] { loadLlamaGenCheckpoint(nan); });
        QVERIFY2(e.contains("norm.weight") && e.contains("NaN"), qPrintable(e));
    }

    void badInputsToTheModel() {
        LlamaGenModel model(loadFixture("gpt_ddp.pt"), chooseRuntime("cpu", "float32"));
        QVERIFY(errorOf([&] { model.logits(at::tensor({11}, at::kLong), at::Tensor()); }).contains("11"));
        QVERIFY(errorOf([&] { model.logits(at::tensor({1}, at::kLong), at::full({1, 2}, 16, at::kLong)); })
                    .contains("codebook"));
        // The context is the class token + 16 image tokens: an 18th position is past it.
        KvCache cache;
        QVERIFY(errorOf([&] { model.logits(at::tensor({1}, at::kLong), at::zeros({1, 17}, at::kLong), &cache); })
                    .contains("context"));
        ImageSamplingOptions o;
        QVERIFY(errorOf([&] { generateImageTokens(model, {10}, o); }).contains("class 10"));
        o.topP = 0;
        QVERIFY(errorOf([&] { generateImageTokens(model, {1}, o); }).contains("top-p"));
    }

private:
    std::shared_ptr<SafeTensorsFile> expected_;
};

QTEST_GUILESS_MAIN(TestLlamaGen)
#include "tst_llamagen.moc"
