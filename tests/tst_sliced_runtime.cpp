// The SliceGPT-sliced model as a language model npw runs (core/models/sliced_llama.h through
// CausalLm, llama.h), each check against an independent reference:
//  - the KV-cached path (a prefill, then one token at a time; batch 1 and 2, which take the
//    decode kernel's one- and two-row paths) gives at every position the logits of one forward
//    over the whole sequence (float32 rounding: 2e-5 of the largest logit; measured 2e-7 to
//    7e-7), on MHA and GQA, tied and untied embeddings, and a model with a layer that lost every
//    head and one that lost every channel;
//  - at 0 % slicing (a rotation only) greedy generation continues as the dense model does,
//    token for token, and prefill and step logits agree to float32 rounding (2e-5; measured
//    2e-7 to 5e-7);
//  - zero-shot on demo:lm sliced 0 %: every choice's log-likelihood equals the dense model's
//    (1e-4 nats + 1e-5 relative: a sum of float32 log-probabilities over a continuation's
//    tokens; measured 2.1e-5 nats at most), and so do acc and acc_norm.
#include "core/eval/generate.h"
#include "core/eval/zeroshot.h"
#include "core/models/language_model.h"
#include "core/models/runtime.h"
#include "core/models/sliced_llama.h"
#include "core/prune/slicegpt.h"
#include "core/util/atomic_file.h"
#include "core/util/paths.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <cmath>

using namespace npw;
using namespace npw::test;

namespace {

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

LlamaCheckpoint tinyOf(const QString& kind, bool tied) {
    LlamaCheckpoint c = kind == "gqa"       ? tinyLlama({4, 4, 4}, {2, 1, 2}, {16, 24, 16}, 61)
                        : kind == "pruned" ? tinyLlama({4, 0, 4}, {2, 0, 2}, {16, 24, 0}, 67)
                                           : tinyLlama({4, 4, 4}, {4, 4, 4}, {16, 24, 16}, 59);
    if (tied) {
        c.weights.lm_head = c.weights.embed;
        c.config.tie_word_embeddings = true;
    }
    return c;
}

} // namespace

class TestSlicedRuntime : public QObject {
    Q_OBJECT

private slots:
    void cachedDecodeEqualsTheWholeSequence_data() {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<bool>("tied");
        QTest::newRow("mha") << "mha" << false;
        QTest::newRow("mha tied") << "mha" << true;
        QTest::newRow("gqa") << "gqa" << false;
        QTest::newRow("gqa tied") << "gqa" << true;
        QTest::newRow("no heads, no channels") << "pruned" << false;
    }
    void cachedDecodeEqualsTheWholeSequence() {
        QFETCH(QString, kind);
        QFETCH(bool, tied);
        const LlamaCheckpoint ckpt = tinyOf(kind, tied);
        const LlamaModel dense(ckpt, chooseRuntime("cpu"));
        const CalibrationSet set = drawCalibrationSet(randomIds(2000, 40, 71), 8, 16, 72);
        const SlicedLlama sliced = sliceGpt(dense, set, 10);  // d 10 of D 16
        QCOMPARE(sliced.residualWidths().front(), int64_t(10));
        const CausalLm& model = sliced;
        for (int64_t batch : {1, 2}) {
            std::vector<std::vector<int32_t>> rows;
            for (int64_t b = 0; b < batch; ++b) rows.push_back(randomIds(24, 40, 80 + uint64_t(b)));
            const at::Tensor ids = idsTensor(rows);
            const at::Tensor whole = model.logits(ids);  // [B, 24, 40], one forward, no cache
            const double scale = whole.abs().max().item<double>();
            KvCache cache;
            const int64_t prompt = 5;
            const at::Tensor prefill = model.logits(ids.narrow(1, 0, prompt), &cache);
            double worst = maxAbsDiff(prefill, whole.narrow(1, 0, prompt));
            QCOMPARE(cache.length, prompt);
            for (int64_t t = prompt; t < ids.size(1); ++t) {
                const at::Tensor step = model.logits(ids.narrow(1, t, 1), &cache);
                QCOMPARE(step.sizes().vec(), (std::vector<int64_t>{batch, 1, 40}));
                worst = std::max(worst, maxAbsDiff(step, whole.narrow(1, t, 1)));
            }
            QCOMPARE(cache.length, ids.size(1));
            qInfo("batch %lld: largest difference %.3g of the largest logit", static_cast<long long>(batch), worst / scale);
            QVERIFY2(worst < 2e-5 * scale, qPrintable(QString("batch %1: max difference %2 (largest logit %3)")
                                                          .arg(batch).arg(worst).arg(scale)));
        }
    }

    void greedyAtZeroSlicingContinuesAsTheDenseModel_data() {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<bool>("tied");
        QTest::newRow("mha") << "mha" << false;
        QTest::newRow("gqa tied") << "gqa" << true;
    }
    void greedyAtZeroSlicingContinuesAsTheDenseModel() {
        QFETCH(QString, kind);
        QFETCH(bool, tied);
        const LlamaCheckpoint ckpt = tinyOf(kind, tied);
        const LlamaModel dense(ckpt, chooseRuntime("cpu"));
        const SlicedLlama sliced =
            sliceGpt(dense, drawCalibrationSet(randomIds(2000, 40, 91), 8, 16, 92), ckpt.config.hidden_size);
        SamplingOptions greedy;
        greedy.maxNewTokens = 40;
        const std::vector<int32_t> prompt = randomIds(6, 40, 93);
        const GenerationResult a = generate(dense, prompt, greedy), b = generate(sliced, prompt, greedy);
        QCOMPARE(int64_t(a.tokens.size()), int64_t(40));
        QCOMPARE(b.tokens, a.tokens);
        // The same positions through both caches: the last step's logits agree to rounding.
        std::vector<int32_t> all = prompt;
        all.insert(all.end(), a.tokens.begin(), a.tokens.end() - 1);
        KvCache ca, cb;
        const at::Tensor ids = idsTensor({all});
        const at::Tensor la = dense.logits(ids, &ca), lb = sliced.logits(ids, &cb);
        const at::Tensor sa = dense.logits(idsTensor({{a.tokens.back()}}), &ca);
        const at::Tensor sb = sliced.logits(idsTensor({{a.tokens.back()}}), &cb);
        const double scale = la.abs().max().item<double>();
        qInfo("dense vs sliced 0 %%: prefill %.3g, step %.3g of the largest logit", maxAbsDiff(la, lb) / scale,
              maxAbsDiff(sa, sb) / scale);
        QVERIFY2(maxAbsDiff(la, lb) < 2e-5 * scale && maxAbsDiff(sa, sb) < 2e-5 * scale,
                 qPrintable(QString("prefill %1, step %2 (scale %3)").arg(maxAbsDiff(la, lb)).arg(maxAbsDiff(sa, sb)).arg(scale)));
    }

    void zeroShotAtZeroSlicingEqualsTheDenseModel() {
        const LanguageModel dense = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        const std::string ot = readTextFile(resourcesDir() + "/demo/data/kjv-ot.txt").substr(0, 200000);
        const CalibrationSet set = drawCalibrationSet(dense.encode(ot, true), 8, 64, 5);
        LanguageModel sliced = dense;
        sliced.model = nullptr;
        sliced.sliced = std::make_shared<SlicedLlama>(sliceGpt(*dense.model, set, dense.model->config().hidden_size));
        QCOMPARE(sliced.causal().structure(), std::string(kSlicedModelFormat));

        ZeroShotTask task;
        task.name = "verses";
        task.kind = "mc";
        for (const std::string& line : buildVerseEndingTask(readTextFile(resourcesDir() + "/demo/data/kjv-nt.txt"), 40, 3))
            task.items.push_back(parseZeroShotItem("mc", line));
        const auto a = scoreChoices(dense, task.items), b = scoreChoices(sliced, task.items);
        QCOMPARE(a.size(), task.items.size());
        double worst = 0;
        for (size_t i = 0; i < a.size(); ++i)
            for (size_t c = 0; c < a[i].size(); ++c) {
                const double diff = std::abs(a[i][c] - b[i][c]);
                worst = std::max(worst, diff);
                QVERIFY2(diff < 1e-4 + 1e-5 * std::abs(a[i][c]),
                         qPrintable(QString("item %1 choice %2: %3 vs %4").arg(i).arg(c).arg(a[i][c]).arg(b[i][c])));
            }
        qInfo("largest log-likelihood difference %.3g nats", worst);
        const ZeroShotResult ra = summariseZeroShot(task, a), rb = summariseZeroShot(task, b);
        QCOMPARE(rb.acc, ra.acc);
        QCOMPARE(rb.accNorm, ra.accNorm);
        QVERIFY(ra.acc > 0.25);  // the trained model beats chance (four choices): the scores mean something
    }
};

QTEST_GUILESS_MAIN(TestSlicedRuntime)
#include "tst_sliced_runtime.moc"
