// The runtime benchmark's pieces that are not timings (no timed pass/fail here): the llama2.c
// .bin writer read back by npw's own llama2.c loader (every tensor equal, same logits), what
// the format refuses, and the roofline's byte count against a count by hand.
#include "core/experiments/image_runtime_bench.h"
#include "core/experiments/runtime_bench.h"
#include "core/models/llama.h"
#include "core/models/llama_init.h"
#include "core/models/model_loader.h"
#include "error_of.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>

using namespace npw;

namespace {

LlamaCheckpoint smallModel(int64_t kvHeads) {
    LlamaCheckpoint ck;
    LlamaConfig& c = ck.config;
    c.vocab_size = 300;  // the tokenizer.bin needs ≥ 259 pieces for its byte tokens
    c.hidden_size = 32;
    c.head_dim = 8;
    c.num_layers = 3;
    c.num_heads.assign(3, 4);
    c.num_kv_heads.assign(3, kvHeads);
    c.intermediate_size.assign(3, 40);
    c.max_position_embeddings = 64;
    c.rope_layout = RopeLayout::AdjacentPairs;
    c.tie_word_embeddings = false;
    ck.weights = initLlamaWeights(c, 11);
    return ck;
}

} // namespace

class TestRuntimeBench : public QObject {
    Q_OBJECT
private slots:
    void llama2cRoundTrip_data() {
        QTest::addColumn<int>("kv");
        QTest::newRow("multi-head") << 4;
        QTest::newRow("grouped-query") << 2;
    }
    void llama2cRoundTrip() {
        QFETCH(int, kv);
        QTemporaryDir dir;
        const LlamaCheckpoint ck = smallModel(kv);
        const std::string path = (dir.path() + "/m.bin").toStdString();
        writeLlama2cCheckpoint(ck, path);
        QVERIFY(QFile::exists(dir.path() + "/m.tokenizer.bin"));
        const LlamaCheckpoint back = loadLlama2cCheckpoint(path);
        QCOMPARE(back.config.num_layers, ck.config.num_layers);
        QCOMPARE(back.config.num_kv_heads, ck.config.num_kv_heads);
        QCOMPARE(back.config.intermediate_size, ck.config.intermediate_size);
        QVERIFY(back.config.rope_layout == RopeLayout::AdjacentPairs);
        QVERIFY(at::equal(back.weights.embed, ck.weights.embed));
        QVERIFY(at::equal(back.weights.lm_head, ck.weights.lm_head));
        for (int64_t l = 0; l < ck.config.num_layers; ++l) {
            const LlamaLayerWeights &a = ck.weights.layers[l], &b = back.weights.layers[l];
            for (auto [x, y] : {std::pair{a.wq, b.wq}, {a.wk, b.wk}, {a.wv, b.wv}, {a.wo, b.wo}, {a.w_gate, b.w_gate},
                                {a.w_up, b.w_up}, {a.w_down, b.w_down}, {a.attn_norm, b.attn_norm}})
                QVERIFY(at::equal(x, y));
        }
        const at::Tensor ids = at::arange(0, 20, at::kLong).unsqueeze(0) * 7 % 300;
        QVERIFY(at::equal(LlamaModel(ck, Runtime{}).logits(ids), LlamaModel(back, Runtime{}).logits(ids)));
    }

    void llama2cRefuses() {
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/m.bin").toStdString();
        LlamaCheckpoint ck = smallModel(4);
        ck.config.intermediate_size[1] = 20;
        QVERIFY(test::errorOf([&] { writeLlama2cCheckpoint(ck, path); }).contains("same heads, KV heads and MLP width"));
        ck = smallModel(4);
        ck.config.rope_layout = RopeLayout::HalfSplit;
        QVERIFY(test::errorOf([&] { writeLlama2cCheckpoint(ck, path); }).contains("adjacent pairs"));
        ck = smallModel(4);
        ck.weights.layers[0].wq_bias = at::zeros({32});
        QVERIFY(test::errorOf([&] { writeLlama2cCheckpoint(ck, path); }).contains("no biases"));
        QVERIFY(!QFile::exists(dir.path() + "/m.bin"));
    }

    // Per token: 3 layers × (q, k, v, o: 32·(32 + 16 + 16 + 32); MLP 3·32·40; norms 2·32;
    // K and V of 10 positions: 2·16·10) + lm_head 300·32, float32 (GQA, 2 KV heads of 8).
    void decodeBytes() {
        const LlamaConfig c = smallModel(2).config;
        const double perLayer = 32.0 * (32 + 16 + 16 + 32) + 3.0 * 32 * 40 + 2 * 32 + 2.0 * 16 * 10;
        QCOMPARE(decodeBytesPerToken(c, 10), 4.0 * (3 * perLayer + 300.0 * 32));
        // 16-bit weights: two bytes per weight, the norms and the cache float32 as before.
        const double weights = 3 * (32.0 * (32 + 16 + 16 + 32) + 3.0 * 32 * 40) + 300.0 * 32;
        const double float32Part = 3 * (2 * 32 + 2.0 * 16 * 10);
        QCOMPARE(decodeBytesPerToken(c, 10, 2), 2.0 * weights + 4.0 * float32Part);
    }

    // The 16-bit rounds' folders: every tensor in the asked dtype, the values the float32 model's
    // rounded (read back mapped, in place, and with Copy: the same logits as the float32 model of
    // the rounded weights).
    void halfPrecisionFolders_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("bf16") << int(at::kBFloat16);
        QTest::newRow("f16") << int(at::kHalf);
    }
    void halfPrecisionFolders() {
        QFETCH(int, dtype);
        QTemporaryDir dir;
        const LlamaCheckpoint ck = smallModel(2);
        const std::string path = (dir.path() + "/m").toStdString();
        writeHfCheckpointIn(ck, path, at::ScalarType(dtype));
        const LlamaCheckpoint mapped = loadLlamaCheckpoint(path, WeightStorage::Mapped);
        QCOMPARE(mapped.weights.layers.at(1).w_up.scalar_type(), at::ScalarType(dtype));
        QCOMPARE(mapped.weights.final_norm.scalar_type(), at::ScalarType(dtype));
        QVERIFY(at::equal(mapped.weights.layers.at(1).w_up, ck.weights.layers.at(1).w_up.to(at::ScalarType(dtype))));
        QVERIFY(at::equal(mapped.weights.lm_head, ck.weights.lm_head.to(at::ScalarType(dtype))));
        const at::Tensor ids = at::arange(0, 12, at::kLong).unsqueeze(0) * 7 % 300;
        QVERIFY(at::equal(LlamaModel(mapped, Runtime{}).logits(ids), LlamaModel(loadLlamaCheckpoint(path), Runtime{}).logits(ids)));
        // Nothing left beside the two files (the stream writer's temporary file was renamed).
        QCOMPARE(QDir(QString::fromStdString(path)).entryList(QDir::Files | QDir::Hidden).size(), 2);
    }

    // The image suite's step cost, by hand: a c2i GPT of dim 32, 2 layers × 4 heads of 8, SwiGLU
    // 40, codebook 50, 3×3 grid. Per layer q, k, v, o 4·32·32 and MLP 3·32·40 weights, 2 norms of
    // 32; the classifier 50·32 and the final norm. K and V: 2·32 per position per layer per row;
    // attention FLOPs 4·32 per position per layer per row.
    void imageStepCost() {
        LlamaGenSizes sizes;
        sizes.dim = 32, sizes.layers = 2, sizes.heads = 4, sizes.grid = 3, sizes.vocab = 50, sizes.classes = 5;
        sizes.ffnHidden = 40;
        const LlamaGenConfig c = llamaGenCustomConfig(sizes);
        const double weights = 2 * (4.0 * 32 * 32 + 3.0 * 32 * 40) + 50.0 * 32, norms = 2 * 2 * 32 + 32;
        const StepCost s = npw::imageStepCost(c.transformer, 6, 5);
        QCOMPARE(s.bytes, 4.0 * (weights + norms + 6 * 2 * (2.0 * 32 * 5)));
        QCOMPARE(s.flops, 6 * (2.0 * weights + 2 * (4.0 * 32 * 5)));
        // The bounds: 9 forwards (contexts 1..9) of 2 rows for one guided image. With a GEMM rate
        // far above the bandwidth's the roofline is the bandwidth bound, and the other way round.
        double bytes = 0, flops = 0;
        for (int64_t ctx = 1; ctx <= 9; ++ctx) {
            bytes += npw::imageStepCost(c.transformer, 2, ctx).bytes;
            flops += npw::imageStepCost(c.transformer, 2, ctx).flops;
        }
        const ImageBounds memoryBound = imageGenerationBounds(c, 1, true, 10.0, 1e9);
        QVERIFY(std::abs(memoryBound.bandwidth - 10e9 / bytes) <= 1e-9 * memoryBound.bandwidth);
        QVERIFY(std::abs(memoryBound.roofline - memoryBound.bandwidth) <= 1e-6 * memoryBound.bandwidth);
        const ImageBounds computeBound = imageGenerationBounds(c, 1, true, 1e9, 10.0);
        QVERIFY(std::abs(computeBound.gemm - 10e9 / flops) <= 1e-9 * computeBound.gemm);
        QVERIFY(std::abs(computeBound.roofline - computeBound.gemm) <= 1e-6 * computeBound.gemm);
        // Between the two the roofline lies below both bounds; without guidance a batch is half the rows.
        const ImageBounds mixed = imageGenerationBounds(c, 4, true, 1.0, 1.0);
        QVERIFY(mixed.roofline <= std::min(mixed.bandwidth, mixed.gemm) * (1 + 1e-12));
        QVERIFY(std::abs(imageGenerationBounds(c, 4, false, 1.0, 1.0).gemm - imageGenerationBounds(c, 2, true, 1.0, 1.0).gemm * 2) <=
                1e-9 * mixed.gemm);
    }

    // The random GPT has the named size's shape and its class embedding's null row.
    void syntheticLlamaGenShape() {
        const LlamaGenConfig c = llamaGenNamedConfig("B", 256);
        QCOMPARE(c.transformer.intermediate_size[0], int64_t{2048});  // find_multiple(int(2·4·768/3), 256)
        LlamaGenSizes sizes;
        sizes.dim = 16, sizes.layers = 1, sizes.heads = 2, sizes.grid = 2, sizes.vocab = 10, sizes.classes = 3;
        const LlamaGenCheckpoint ck = syntheticLlamaGen(llamaGenCustomConfig(sizes), 1);
        QCOMPARE(ck.classEmbedding.sizes().vec(), (std::vector<int64_t>{4, 16}));
        QCOMPARE(ck.weights.layers.at(0).wq.sizes().vec(), (std::vector<int64_t>{16, 16}));
        QVERIFY(at::equal(ck.classEmbedding, syntheticLlamaGen(llamaGenCustomConfig(sizes), 1).classEmbedding));
    }
};

QTEST_GUILESS_MAIN(TestRuntimeBench)
#include "tst_runtime_bench.moc"
