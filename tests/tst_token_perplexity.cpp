// The class-conditional token perplexity of held-out VQ codes (issue 15's c2i metric,
// core/eval/image_token_perplexity.h): against a brute-force reference that decodes one token at
// a time through the KV cache (another code path than the teacher-forced batch) with float64
// log-softmax; on demo:c2i against the uniform codebook; bad input named.
#include "core/data/fashion_mnist.h"
#include "core/eval/image_token_perplexity.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "llamagen_fixture.h"

#include <ATen/ATen.h>
#include <QtTest/QtTest>

#include <cmath>
#include <filesystem>

using namespace npw;

namespace {

LlamaGenCheckpoint fixtureModel() {
    LlamaGenLoadOptions o;
    o.config = npw::test::llamagenFixtureConfig();
    return loadLlamaGenCheckpoint(npw::test::llamagenDataFile("gpt_fsdp.pt"), o);
}

// Mean NLL of every code, one position at a time through the cache.
double bruteForceNll(const LlamaGenModel& model, const at::Tensor& codes, const at::Tensor& labels) {
    const int64_t n = codes.size(0), T = codes.size(1);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        KvCache cache;
        at::Tensor logits = model.logits(labels.narrow(0, i, 1), at::Tensor(), &cache);  // predicts code 0
        for (int64_t p = 0; p < T; ++p) {
            const at::Tensor logp = at::log_softmax(logits[0][logits.size(1) - 1].to(at::kDouble), 0);
            sum -= logp[codes[i][p].item<int64_t>()].item<double>();
            if (p + 1 < T) logits = model.logits(at::Tensor(), codes[i].narrow(0, p, 1).unsqueeze(0), &cache);
        }
    }
    return sum / double(n * T);
}

} // namespace

class TestTokenPerplexity : public QObject {
    Q_OBJECT

private slots:
    void matchesATokenByTokenDecode() {
        const LlamaGenModel model(fixtureModel(), Runtime{});
        const int64_t T = model.config().blockSize();
        at::manual_seed(7);
        HeldOutCodes held{at::randint(model.config().transformer.vocab_size, {5, T}, at::kLong),
                          at::tensor(std::vector<int64_t>{0, 3, 9, 3, 1}, at::kLong), "random codes"};
        const double expected = bruteForceNll(model, held.codes, held.labels);
        for (int64_t batch : {1, 2, 5}) {  // batching must not change the value
            const TokenPerplexity r = classConditionalTokenPerplexity(model, held, batch);
            QCOMPARE(r.tokens, 5 * T);
            QCOMPARE(r.sequences, int64_t{5});
            // float32 forward against float32 cached decode, sums in float64: 1e-5 relative.
            QVERIFY2(std::abs(r.nll - expected) <= 1e-5 * expected,
                     qPrintable(QString("%1 vs %2").arg(r.nll, 0, 'g', 10).arg(expected, 0, 'g', 10)));
            QVERIFY(std::abs(r.ppl - std::exp(expected)) <= 1e-4 * std::exp(expected));
        }
        // The class matters: another label gives another value (the class token is used).
        HeldOutCodes other = held;
        other.labels = (held.labels + 1) % model.config().num_classes;
        QVERIFY(std::abs(classConditionalTokenPerplexity(model, other).nll - expected) > 1e-6);
    }

    void badInputIsNamed() {
        const LlamaGenModel model(fixtureModel(), Runtime{});
        const int64_t T = model.config().blockSize();
        auto message = [&](const HeldOutCodes& h) -> QString {
            try {
                classConditionalTokenPerplexity(model, h);
            } catch (const Error& e) {
                return QString::fromStdString(e.what());
            }
            return {};
        };
        const at::Tensor labels = at::zeros({2}, at::kLong);
        QString m = message({at::zeros({2, T - 1}, at::kLong), labels, "short.codes"});
        QVERIFY2(m.contains("short.codes") && m.contains(QString("[N, %1]").arg(T)), qPrintable(m));
        m = message({at::full({2, T}, model.config().transformer.vocab_size, at::kLong), labels, "big.codes"});
        QVERIFY2(m.contains("big.codes") && m.contains("vocabulary"), qPrintable(m));
        m = message({at::zeros({2, T}, at::kLong), at::full({2}, model.config().num_classes, at::kLong), "bad.labels"});
        QVERIFY2(m.contains("bad.labels") && m.contains("labels"), qPrintable(m));
    }

    void demoModelBeatsTheUniformCodebook() {
        // demo:c2i on 1 000 Fashion-MNIST test images (README's figure uses all 10 000): finite and
        // well below the codebook size, the perplexity of a model that knows nothing.
        const std::string dir = resolveModelPath("demo:c2i");
        const auto vq = VqModel::load((std::filesystem::path(dir) / "vq").string());
        const LlamaGenModel model(loadLlamaGenCheckpoint("demo:c2i"), Runtime{});
        const LabelledImages test = loadFashionMnist("test");
        const HeldOutCodes held =
            encodeHeldOutImages(*vq, test.images.narrow(0, 0, 1000), test.labels.narrow(0, 0, 1000), "fashion-mnist-test");
        QCOMPARE(held.codes.size(1), model.config().blockSize());
        const TokenPerplexity r = classConditionalTokenPerplexity(model, held);
        QVERIFY(std::isfinite(r.ppl));
        QVERIFY2(r.ppl < 0.5 * double(vq->config().codebookSize), qPrintable(QString::number(r.ppl)));
        // The right class helps: shuffled labels cost likelihood.
        HeldOutCodes wrong = held;
        wrong.labels = (held.labels + 5) % model.config().num_classes;
        QVERIFY(classConditionalTokenPerplexity(model, wrong).ppl > r.ppl);
    }
};

QTEST_APPLESS_MAIN(TestTokenPerplexity)
#include "tst_token_perplexity.moc"
