// The real llama2.c checkpoint in tests/data/stories260K: npw must reproduce llama2.c's own
// greedy output (run.c, temperature 0, from BOS), which pins the loader, adjacent-pair RoPE,
// grouped-query attention (8 query / 4 KV heads) and the KV cache on real weights. babyllama
// (tests/data/babyllama) must continue a prompt as its README says.
#include "core/eval/generate.h"
#include "core/models/model_loader.h"

#include <QFile>
#include <QtTest>

using namespace npw;

class TestStories260K : public QObject {
    Q_OBJECT
private slots:
    void greedyMatchesLlama2c() {
        const QString path = QStringLiteral(NPW_TEST_DATA "/stories260K/stories260K.bin");
        QVERIFY2(QFile::exists(path), "tests/data/stories260K/stories260K.bin is missing");
        LlamaModel model(loadLlamaCheckpoint(path.toStdString()), chooseRuntime("cpu"));
        QCOMPARE(model.config().num_heads[0], int64_t(8));
        QCOMPARE(model.config().num_kv_heads[0], int64_t(4));
        SamplingOptions greedy;
        greedy.maxNewTokens = 23;
        const std::vector<int32_t> expected = {461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299,
                                               362, 409, 283, 264, 283, 452, 288, 13,  431, 431, 431};
        QCOMPARE(generate(model, {1}, greedy).tokens, expected);
    }

    // babyllama (tests/data/babyllama, trained by someone else on TinyStories): the continuation
    // its README gives for "Once upon a time", in tok105.model's ids (SentencePiece's own
    // encoding, python3-sentencepiece: the prompt with its dummy prefix, BOS first).
    void babyllamaContinuesAsPublished() {
        const QString path = QStringLiteral(NPW_TEST_DATA "/babyllama/model5000.bin");
        QVERIFY2(QFile::exists(path), "tests/data/babyllama/model5000.bin is missing");
        LlamaModel model(loadLlamaCheckpoint(path.toStdString()), chooseRuntime("cpu"));
        QCOMPARE(model.config().hidden_size, int64_t(128));
        QCOMPARE(model.config().num_kv_heads[0], int64_t(4));
        QCOMPARE(model.config().parameterCount(), int64_t(936448));
        const std::vector<int32_t> prompt = {1, 3, 34, 9, 22, 4, 3, 18, 20, 7, 9, 3, 5, 3, 6, 10, 16, 4};  // "Once upon a time"
        // ", there was a little girl named Lily."
        const std::vector<int32_t> expected = {25, 3, 6, 8, 4, 13, 4, 3, 17, 5, 12, 3, 5, 3, 14, 10, 6, 6, 14,
                                               4, 3, 21, 10, 13, 14, 3, 9, 5, 16, 4, 11, 3, 31, 10, 14, 15, 19};
        SamplingOptions greedy;
        greedy.maxNewTokens = static_cast<int64_t>(expected.size());
        QCOMPARE(generate(model, prompt, greedy).tokens, expected);
    }
};

QTEST_GUILESS_MAIN(TestStories260K)
#include "tst_stories260k.moc"
