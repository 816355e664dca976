// The demo trainer: learning happens, and a run stopped and resumed from its checkpoint
// ends with exactly the weights of an uninterrupted run (a background job can be killed).
#include "core/io/safetensors.h"
#include "core/models/llama.h"
#include "core/train/demo_presets.h"
#include "core/train/lm_trainer.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>

using namespace npw;

namespace {

LmTrainOptions tinyOptions() {
    LmTrainOptions o;
    o.config.vocab_size = 17;
    o.config.hidden_size = 16;
    o.config.num_layers = 2;
    o.config.head_dim = 4;
    o.config.num_heads = {4, 4};
    o.config.num_kv_heads = {2, 2};
    o.config.intermediate_size = {24, 24};
    o.config.max_position_embeddings = 32;
    o.config.tie_word_embeddings = true;
    o.seqlen = 16;
    o.batchSize = 4;
    o.steps = 200;
    o.warmupSteps = 5;
    o.learningRate = 1e-2;
    o.checkpointEvery = 10;
    return o;
}

// A periodic token stream: easy to learn, so the loss must fall well below uniform.
std::vector<int32_t> periodicCorpus() {
    std::vector<int32_t> ids;
    ids.reserve(2000);
    for (int i = 0; i < 2000; ++i) ids.push_back((i * 7 + (i / 5)) % 17);
    return ids;
}

double maxDifference(LlamaWeights& a, LlamaWeights& b) {
    auto na = namedTensors(a), nb = namedTensors(b);
    double worst = 0;
    for (size_t i = 0; i < na.size(); ++i)
        worst = std::max(worst, (*na[i].second - *nb[i].second).abs().max().item<double>());
    return worst;
}

} // namespace

class TestTrainer : public QObject {
    Q_OBJECT
private slots:
    void lossFalls() {
        LmTrainOptions o = tinyOptions();
        LmTrainStatus status;
        trainLlama(periodicCorpus(), o, status);
        QVERIFY(status.finished);
        // Uniform guessing costs log(17) = 2.83 nats; the pattern is nearly deterministic.
        QVERIFY2(status.loss < 1.5, qPrintable(QString("smoothed loss %1").arg(status.loss)));
    }

    void resumeGivesTheSameWeights() {
        QTemporaryDir dir;
        LmTrainOptions whole = tinyOptions();
        whole.steps = 30;
        LmTrainStatus s1;
        LlamaWeights uninterrupted = trainLlama(periodicCorpus(), whole, s1);

        LmTrainOptions chunked = whole;
        chunked.checkpointPath = dir.filePath("ck.safetensors").toStdString();
        // First call stops after ~1 checkpoint interval by throwing from the progress callback.
        LmTrainStatus s2;
        try {
            trainLlama(periodicCorpus(), chunked, s2, [](const Progress& p) { return p.done < 10; });
            QFAIL("the progress callback should have cancelled the run");
        } catch (const Cancelled&) {
        }
        QCOMPARE(s2.step, int64_t(10));
        LmTrainStatus s3;
        LlamaWeights resumed = trainLlama(periodicCorpus(), chunked, s3);
        QVERIFY(s3.finished);
        QCOMPARE(s3.step, int64_t(30));
        const double diff = maxDifference(uninterrupted, resumed);
        QVERIFY2(diff < 1e-6, qPrintable(QString("max weight difference %1").arg(diff)));
    }

    void checkpointOfAnotherRunIsRefused() {
        QTemporaryDir dir;
        LmTrainOptions o = tinyOptions();
        o.steps = 10;
        o.checkpointPath = dir.filePath("ck.safetensors").toStdString();
        LmTrainStatus s;
        trainLlama(periodicCorpus(), o, s);
        o.seed = 99;
        try {
            trainLlama(periodicCorpus(), o, s);
            QFAIL("expected an error");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).contains("another run"));
        }
    }

    void demoPresetsAreUnderThreeMillionParameters() {
        for (const auto& preset : demoLmPresets()) {
            const auto n = demoLmConfig(preset, 2048).parameterCount();
            QVERIFY2(n > 2'000'000 && n < 3'000'000, qPrintable(QString("%1: %2").arg(preset.c_str()).arg(n)));
        }
    }
};

QTEST_GUILESS_MAIN(TestTrainer)
#include "tst_trainer.moc"
