// The real llama2.c checkpoint in ../shared/fixtures: npw must reproduce llama2.c's own
// greedy output (run.c, temperature 0, from BOS), which pins the loader, adjacent-pair RoPE,
// grouped-query attention (8 query / 4 KV heads) and the KV cache on real weights.
#include "core/eval/generate.h"
#include "core/models/model_loader.h"

#include <QFile>
#include <QtTest>

using namespace npw;

class TestStories260K : public QObject {
    Q_OBJECT
private slots:
    void greedyMatchesLlama2c() {
        const QString path = QStringLiteral(NPW_SHARED_FIXTURES) + "/stories260K.bin";
        if (!QFile::exists(path)) QSKIP("../shared/fixtures/stories260K.bin is not present");
        LlamaModel model(loadLlamaCheckpoint(path.toStdString()), chooseRuntime("cpu"));
        QCOMPARE(model.config().num_heads[0], int64_t(8));
        QCOMPARE(model.config().num_kv_heads[0], int64_t(4));
        SamplingOptions greedy;
        greedy.maxNewTokens = 23;
        const std::vector<int32_t> expected = {461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299,
                                               362, 409, 283, 264, 283, 452, 288, 13,  431, 431, 431};
        QCOMPARE(generate(model, {1}, greedy).tokens, expected);
    }
};

QTEST_GUILESS_MAIN(TestStories260K)
#include "tst_stories260k.moc"
