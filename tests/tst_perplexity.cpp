// The perplexity protocol (windows, batching, KL, bits per byte) against a brute-force
// computation that scores each window alone, one prediction at a time, in float64.
#include "core/eval/generate.h"
#include "core/eval/perplexity.h"
#include "core/models/llama_init.h"
#include "core/text/token_ids.h"
#include "core/train/lm_trainer.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <fstream>

using namespace npw;

namespace {

LlamaConfig smallConfig() {
    LlamaConfig c;
    c.vocab_size = 23;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.head_dim = 4;
    c.num_heads = {4, 2};
    c.num_kv_heads = {2, 1};
    c.intermediate_size = {20, 12};
    c.max_position_embeddings = 64;
    c.tie_word_embeddings = false;
    return c;
}

LlamaModel randomModel(uint64_t seed) {
    LlamaCheckpoint ck;
    ck.config = smallConfig();
    ck.weights = initLlamaWeights(ck.config, seed);
    // Larger weights than the trainer's init, so the model is far from uniform.
    for (auto& [name, t] : namedTensors(ck.weights))
        if (t->dim() == 2) t->mul_(20);
    return LlamaModel(ck, chooseRuntime("cpu"));
}

std::vector<int32_t> randomIds(int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 23);
    return ids;
}

} // namespace

class TestPerplexity : public QObject {
    Q_OBJECT
private slots:
    void matchesBruteForce_data() {
        QTest::addColumn<int>("seqlen");
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("maxWindows");
        QTest::newRow("seqlen 16, batch 1") << 16 << 1 << 0;
        QTest::newRow("seqlen 16, batch 3 (ragged last batch)") << 16 << 3 << 0;
        QTest::newRow("seqlen 7, two windows only") << 7 << 4 << 2;
    }
    void matchesBruteForce() {
        QFETCH(int, seqlen);
        QFETCH(int, batch);
        QFETCH(int, maxWindows);
        LlamaModel model = randomModel(1), reference = randomModel(2);
        const std::vector<int32_t> ids = randomIds(101, 3);  // 101 tokens: a partial window is dropped
        PerplexityOptions o;
        o.seqlen = seqlen;
        o.batchWindows = batch;
        o.maxWindows = maxWindows;
        PerplexityResult r = evaluatePerplexity(model, ids, o, &reference);

        int64_t windows = 101 / seqlen;
        if (maxWindows > 0) windows = std::min<int64_t>(windows, maxWindows);
        double nll = 0, kl = 0;
        int64_t count = 0;
        for (int64_t w = 0; w < windows; ++w) {
            std::vector<int64_t> win(ids.begin() + w * seqlen, ids.begin() + (w + 1) * seqlen);
            at::Tensor input = at::tensor(win, at::kLong).unsqueeze(0);
            at::Tensor lp = at::log_softmax(model.logits(input).to(at::kDouble), -1)[0];
            at::Tensor lq = at::log_softmax(reference.logits(input).to(at::kDouble), -1)[0];
            for (int64_t t = 0; t + 1 < seqlen; ++t) {
                nll -= lp[t][win[t + 1]].item<double>();
                for (int64_t v = 0; v < 23; ++v) {
                    const double q = std::exp(lq[t][v].item<double>());
                    kl += q * (lq[t][v].item<double>() - lp[t][v].item<double>());
                }
                ++count;
            }
        }
        QCOMPARE(r.windows, windows);
        QCOMPARE(r.tokens, count);
        // The forward runs in float32 and batched matmuls round differently from single
        // ones (BLAS blocking), so agreement is to float32 precision: 1e-6 relative.
        QVERIFY(std::abs(r.nll - nll / count) < 1e-6 * std::max(1.0, nll / count));
        QVERIFY(std::abs(r.ppl - std::exp(nll / count)) < 1e-6 * r.ppl);
        QVERIFY(std::abs(r.kl - kl / count) < 1e-6 * std::max(1.0, kl / count));
        QVERIFY(r.kl > 0.01);  // two different models
    }

    void klOfAModelWithItselfIsZero() {
        LlamaModel model = randomModel(1);
        PerplexityOptions o;
        o.seqlen = 16;
        PerplexityResult r = evaluatePerplexity(model, randomIds(64, 5), o, &model);
        QVERIFY(std::abs(r.kl) < 1e-12);
    }

    void bitsPerByteCountsTheScoredBytes() {
        LlamaModel model = randomModel(1);
        PerplexityOptions o;
        o.seqlen = 10;
        // A decoder where token i is i+1 bytes long: the scored bytes are known exactly.
        DecodeFn decode = [](const std::vector<int32_t>& v) {
            std::string s;
            for (int32_t id : v) s += std::string(id + 1, 'x');
            return s;
        };
        const auto ids = randomIds(30, 9);
        PerplexityResult r = evaluatePerplexity(model, ids, o, nullptr, decode);
        int64_t bytes = 0;
        for (int w = 0; w < 3; ++w)
            for (int t = 1; t < 10; ++t) bytes += ids[w * 10 + t] + 1;
        QCOMPARE(r.bytes, bytes);
        QVERIFY(std::abs(r.bitsPerByte - r.totalNll / std::log(2.0) / bytes) < 1e-12);
    }

    void clearErrors() {
        LlamaModel model = randomModel(1);
        PerplexityOptions o;
        o.seqlen = 16;
        auto expectError = [&](const std::vector<int32_t>& ids, const PerplexityOptions& opt, const QString& needle) {
            try {
                evaluatePerplexity(model, ids, opt);
                QFAIL("expected an error");
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).contains(needle), e.what());
            }
        };
        expectError(randomIds(10, 1), o, "fewer than one window");
        expectError({}, o, "fewer than one window");
        std::vector<int32_t> bad = randomIds(32, 1);
        bad[5] = 99;
        expectError(bad, o, "outside the vocabulary");
        PerplexityOptions tooLong;
        tooLong.seqlen = 65;
        expectError(randomIds(200, 1), tooLong, "exceeds the model's context");
    }

    void tokenIdFiles() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("ids.txt").toStdString();
        std::ofstream(path) << "1 2\n3\t4  5\n";
        QCOMPARE(readTokenIdFile(path, 10), (std::vector<int32_t>{1, 2, 3, 4, 5}));
        std::ofstream(path) << "1 2 x3\n";
        QVERIFY_THROWS_EXCEPTION(Error, readTokenIdFile(path, 10));
        std::ofstream(path) << "1 12\n";
        try {
            readTokenIdFile(path, 10);
            QFAIL("expected an error");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("ids.txt") && QString(e.what()).contains("12"));
        }
        std::ofstream(path) << "  \n";
        QVERIFY_THROWS_EXCEPTION(Error, readTokenIdFile(path, 10));
    }

    void sampling() {
        // p = (0.5, 0.3, 0.2, 0): greedy picks 0; top-p 0.6 keeps {0, 1} in ratio 5:3.
        at::Tensor logits = at::log(at::tensor({0.5, 0.3, 0.2, 1e-300}, at::kDouble)).to(at::kFloat);
        std::mt19937_64 rng(7);
        SamplingOptions greedy;
        QCOMPARE(sampleToken(logits, greedy, rng), 0);
        SamplingOptions nucleus;
        nucleus.temperature = 1.0;
        nucleus.topP = 0.6;
        int counts[4] = {0, 0, 0, 0};
        const int n = 20000;
        for (int i = 0; i < n; ++i) counts[sampleToken(logits, nucleus, rng)]++;
        QCOMPARE(counts[2] + counts[3], 0);
        // Binomial standard error at n=20000 is 0.0034; allow 5 of them.
        QVERIFY(std::abs(counts[0] / double(n) - 0.625) < 0.017);
    }

    void generationIsSeededAndCacheConsistent() {
        LlamaModel model = randomModel(4);
        SamplingOptions o;
        o.temperature = 1.0;
        o.seed = 11;
        o.maxNewTokens = 12;
        auto a = generate(model, {1, 2, 3}, o).tokens, b = generate(model, {1, 2, 3}, o).tokens;
        QCOMPARE(a, b);
        QCOMPARE(a.size(), size_t(12));
        // Greedy with the cache equals greedy by re-running the whole sequence each step.
        SamplingOptions g;
        g.maxNewTokens = 10;
        auto cached = generate(model, {5, 6}, g).tokens;
        std::vector<int64_t> seq = {5, 6};
        for (int i = 0; i < 10; ++i) {
            at::Tensor l = model.logits(at::tensor(seq, at::kLong).unsqueeze(0));
            seq.push_back(l[0][-1].argmax().item<int64_t>());
        }
        for (int i = 0; i < 10; ++i) QCOMPARE(int64_t(cached[i]), seq[2 + i]);
    }
};

QTEST_GUILESS_MAIN(TestPerplexity)
#include "tst_perplexity.moc"
