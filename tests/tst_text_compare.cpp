// Dense-versus-pruned text comparison (core/eval/compare) against a brute-force reference: each
// prefix scored alone (no KV cache), log-softmax, KL and NLL summed by hand in float64.
#include "core/eval/compare.h"
#include "core/eval/generate.h"
#include "core/models/llama_init.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <cmath>

using namespace npw;

namespace {

LlamaCheckpoint smallCheckpoint(uint64_t seed) {
    LlamaCheckpoint ck;
    LlamaConfig& c = ck.config;
    c.vocab_size = 23;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.head_dim = 4;
    c.num_heads = {4, 2};
    c.num_kv_heads = {2, 1};
    c.intermediate_size = {20, 12};
    c.max_position_embeddings = 40;
    c.tie_word_embeddings = false;
    ck.weights = initLlamaWeights(c, seed);
    // Far from uniform, so greedy continuations are not ties and pruning visibly moves them.
    for (auto& [name, t] : namedTensors(ck.weights))
        if (t->dim() == 2) t->mul_(20);
    return ck;
}

// "Pruned": half of layer 0's MLP channels and one query head of layer 1 zeroed.
LlamaCheckpoint pruned(LlamaCheckpoint ck, int64_t channels) {
    auto& L0 = ck.weights.layers[0];
    L0.w_down = L0.w_down.clone();
    L0.w_down.slice(1, 0, channels).zero_();
    auto& L1 = ck.weights.layers[1];
    L1.wo = L1.wo.clone();
    L1.wo.slice(1, 0, 4).zero_();
    return ck;
}

// log p(· | ids[0..t]) for every prefix, one uncached forward each, float64 [vocab].
std::vector<double> prefixLogProbs(const LlamaModel& m, const std::vector<int32_t>& ids) {
    at::Tensor t = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0);
    at::Tensor row = at::log_softmax(m.logits(t).select(1, -1).squeeze(0).to(at::kDouble), -1).contiguous();
    return {row.data_ptr<double>(), row.data_ptr<double>() + row.numel()};
}

struct Reference {
    double kl = 0, nll = 0;
    std::vector<double> denseLogProbs;
};

Reference bruteForce(const LlamaModel& dense, const LlamaModel& other, const std::vector<int32_t>& prompt,
                     const std::vector<int32_t>& continuation) {
    Reference r;
    std::vector<int32_t> prefix = prompt;
    for (int32_t tok : continuation) {
        const std::vector<double> p = prefixLogProbs(dense, prefix), q = prefixLogProbs(other, prefix);
        double kl = 0;
        for (size_t v = 0; v < p.size(); ++v) kl += std::exp(p[v]) * (p[v] - q[v]);
        r.kl += kl;
        r.nll -= q[size_t(tok)];
        r.denseLogProbs.push_back(q[size_t(tok)]);
        prefix.push_back(tok);
    }
    r.kl /= double(continuation.size());
    r.nll /= double(continuation.size());
    return r;
}

} // namespace

class TestTextCompare : public QObject {
    Q_OBJECT

private slots:
    void selfComparisonHasNoDrift() {
        LlamaModel m(smallCheckpoint(3), chooseRuntime("cpu"));
        SamplingOptions o;
        o.maxNewTokens = 12;
        // A decoder writing "<id>" per token: the streamed text is the tokens so far.
        const TokenDecodeFn decode = [](const std::vector<int32_t>& ids) {
            std::string s;
            for (int32_t id : ids) s += "<" + std::to_string(id) + ">";
            return s;
        };
        std::vector<TokenStep> steps;
        TextComparison c = compareContinuations({"dense", &m}, {{"same", &m}}, {1, 5, 7}, o,
                                                [&](const TokenStep& s) {
                                                    steps.push_back(s);
                                                    return true;
                                                },
                                                decode);
        QCOMPARE(steps.size(), c.models[0].tokens.size());
        std::string expected;
        for (int32_t id : c.models[0].tokens) expected += "<" + std::to_string(id) + ">";
        QCOMPARE(steps.back().models[1].text, expected);
        QCOMPARE(steps.back().models[1].piece, "<" + std::to_string(c.models[0].tokens.back()) + ">");
        QVERIFY(steps.back().models[0].stopped);
        QCOMPARE(c.models.size(), size_t(2));
        QCOMPARE(c.models[1].tokens, c.models[0].tokens);
        QCOMPARE(c.models[1].divergence, int64_t(-1));
        QCOMPARE(c.models[0].kl, 0.0);
        QVERIFY(std::abs(c.models[1].kl) < 1e-12);  // the same float32 logits twice
        QCOMPARE(c.models[1].nll, c.models[0].nll);
    }

    void matchesBruteForceGreedyAndSampled_data() {
        QTest::addColumn<double>("temperature");
        QTest::addColumn<double>("topP");
        QTest::newRow("greedy") << 0.0 << 1.0;
        QTest::newRow("T=1.0 top-p 0.9") << 1.0 << 0.9;
        QTest::newRow("T=0.7") << 0.7 << 1.0;
    }
    void matchesBruteForceGreedyAndSampled() {
        QFETCH(double, temperature);
        QFETCH(double, topP);
        const LlamaCheckpoint base = smallCheckpoint(11);
        LlamaModel dense(base, chooseRuntime("cpu"));
        LlamaModel a(pruned(base, 10), chooseRuntime("cpu")), b(pruned(base, 18), chooseRuntime("cpu"));
        SamplingOptions o;
        o.maxNewTokens = 16;
        o.temperature = temperature;
        o.topP = topP;
        o.seed = 42;
        const std::vector<int32_t> prompt{1, 4, 9, 2};
        std::vector<std::pair<size_t, int32_t>> streamed;
        int64_t steps = 0;
        TextComparison c = compareContinuations({"dense", &dense}, {{"a", &a}, {"b", &b}}, prompt, o,
                                                [&](const TokenStep& step) {
                                                    if (step.index != steps++) return false;
                                                    for (size_t k = 0; k < step.models.size(); ++k)
                                                        if (step.models[k].token >= 0)
                                                            streamed.emplace_back(k, step.models[k].token);
                                                    return true;
                                                });
        QCOMPARE(c.models.size(), size_t(3));
        const LlamaModel* models[] = {&dense, &a, &b};
        size_t seen = 0;
        bool anyDiverged = false;
        for (size_t k = 0; k < 3; ++k) {
            const ComparedContinuation& m = c.models[k];
            // The same tokens generate() gives (same sampler, same seed).
            QCOMPARE(m.tokens, generate(*models[k], prompt, o).tokens);
            // Streamed in lockstep, every token: the i-th token of model k in step i.
            std::vector<int32_t> mine;
            for (const auto& [model, tok] : streamed)
                if (model == k) mine.push_back(tok);
            QCOMPARE(mine, m.tokens);
            seen += mine.size();
            // Own log-probabilities against uncached forwards (float32 logits: 1e-4).
            std::vector<int32_t> prefix = prompt;
            for (size_t i = 0; i < m.tokens.size(); ++i) {
                const double expected = prefixLogProbs(*models[k], prefix)[size_t(m.tokens[i])];
                QVERIFY2(std::abs(m.logProbs[i] - expected) < 1e-4, qPrintable(QString::number(i)));
                prefix.push_back(m.tokens[i]);
            }
            // Divergence by a plain scan.
            int64_t div = -1;
            for (size_t i = 0; i < std::max(m.tokens.size(), c.models[0].tokens.size()); ++i)
                if (i >= m.tokens.size() || i >= c.models[0].tokens.size() || m.tokens[i] != c.models[0].tokens[i]) {
                    div = int64_t(i);
                    break;
                }
            QCOMPARE(m.divergence, k == 0 ? int64_t(-1) : div);
            anyDiverged = anyDiverged || m.divergence >= 0;
            // KL and NLL along the dense continuation, teacher-forced.
            const Reference ref = bruteForce(dense, *models[k], prompt, c.models[0].tokens);
            QVERIFY2(std::abs(m.kl - ref.kl) < 1e-4 * std::max(1.0, ref.kl),
                     qPrintable(QString("kl %1 vs %2").arg(m.kl).arg(ref.kl)));
            QVERIFY2(std::abs(m.nll - ref.nll) < 1e-4 * std::max(1.0, ref.nll),
                     qPrintable(QString("nll %1 vs %2").arg(m.nll).arg(ref.nll)));
            QCOMPARE(m.denseLogProbs.size(), ref.denseLogProbs.size());
            for (size_t i = 0; i < ref.denseLogProbs.size(); ++i)
                QVERIFY(std::abs(m.denseLogProbs[i] - ref.denseLogProbs[i]) < 1e-4);
            if (k > 0) QVERIFY2(m.kl > 1e-3, "a pruned model drifts");
        }
        QCOMPARE(seen, streamed.size());
        QVERIFY2(anyDiverged, "the fixture is meant to have a pruned continuation leave the dense one");
        // More pruning, more drift (b zeroes more of the same MLP).
        QVERIFY(c.models[2].kl > c.models[1].kl);
    }

    void firstDivergenceCases() {
        QCOMPARE(firstDivergence({1, 2, 3}, {1, 2, 3}), int64_t(-1));
        QCOMPARE(firstDivergence({1, 2, 3}, {1, 5, 3}), int64_t(1));
        QCOMPARE(firstDivergence({1, 2, 3}, {1, 2}), int64_t(2));
        QCOMPARE(firstDivergence({}, {4}), int64_t(0));
    }

    void stopsWhenAsked() {
        LlamaModel m(smallCheckpoint(3), chooseRuntime("cpu"));
        SamplingOptions o;
        o.maxNewTokens = 10;
        int calls = 0;
        QVERIFY_THROWS_EXCEPTION(Cancelled, compareContinuations({"dense", &m}, {{"p", &m}}, {1}, o,
                                                                 [&](const TokenStep&) {
                                                                     return ++calls < 3;
                                                                 }));
        QCOMPARE(calls, 3);
    }

    void rejectsMismatchedVocabularies() {
        LlamaModel m(smallCheckpoint(3), chooseRuntime("cpu"));
        LlamaCheckpoint other = smallCheckpoint(4);
        other.config.vocab_size = 22;
        other.weights.embed = other.weights.embed.slice(0, 0, 22).clone();
        other.weights.lm_head = other.weights.lm_head.slice(0, 0, 22).clone();
        LlamaModel n(other, chooseRuntime("cpu"));
        try {
            compareContinuations({"dense", &m}, {{"small", &n}}, {1}, SamplingOptions{});
            QFAIL("expected an error");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("'small'") && QString(e.what()).contains("22"), e.what());
        }
        try {
            compareContinuations({"dense", &m}, {}, {}, SamplingOptions{});
            QFAIL("expected an error");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("prompt"));
        }
    }
};

QTEST_GUILESS_MAIN(TestTextCompare)
#include "tst_text_compare.moc"
