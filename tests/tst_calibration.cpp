// Calibration: seeded window drawing, the statistics against a brute-force accumulation of
// the tapped inputs (one window per forward pass, everything summed in float64 at the end),
// the statistics file round trip, and the errors a user can cause.
#include "core/models/runtime.h"
#include "core/prune/calibration.h"
#include "core/util/error.h"
#include "tiny_llama.h"
#include "error_of.h"

#include <QTemporaryDir>
#include <QtTest>
#include <set>

using namespace npw;
using namespace npw::test;

namespace {

double relativeError(const at::Tensor& a, const at::Tensor& b) {
    return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-300);
}

} // namespace

class TestCalibration : public QObject {
    Q_OBJECT
private slots:
    void perSequenceWindowsAreSequenceStarts() {
        std::vector<std::vector<int32_t>> sequences;
        for (int i = 0; i < 10; ++i) sequences.push_back(randomIds(i == 3 ? 5 : 40, 40, uint64_t(i)));  // #3 too short
        const CalibrationSet a = drawCalibrationSetFromSequences(sequences, 6, 16, 2, "ids.txt");
        const CalibrationSet b = drawCalibrationSetFromSequences(sequences, 6, 16, 2);
        QCOMPARE(a.windows, b.windows);
        QVERIFY(a.windows != drawCalibrationSetFromSequences(sequences, 6, 16, 3).windows);
        std::set<size_t> used;
        for (const auto& w : a.windows) {
            QCOMPARE(w.size(), size_t(16));
            size_t hit = sequences.size();
            for (size_t i = 0; i < sequences.size(); ++i)
                if (sequences[i].size() >= 16 && std::equal(w.begin(), w.end(), sequences[i].begin())) hit = i;
            QVERIFY(hit < sequences.size() && hit != 3);
            QVERIFY(used.insert(hit).second);  // distinct sequences
        }
        QVERIFY(a.sourceIsIds);
        const QString m = errorOf([&] { drawCalibrationSetFromSequences(sequences, 10, 16, 0, "ids.txt"); });
        QVERIFY2(m.contains("ids.txt") && m.contains("9 sequences of at least 16"), qPrintable(m));
    }

    void windowsAreSeededSubstreams() {
        const std::vector<int32_t> stream = randomIds(500, 40, 1);
        const CalibrationSet a = drawCalibrationSet(stream, 20, 32, 5, "corpus.txt");
        const CalibrationSet b = drawCalibrationSet(stream, 20, 32, 5);
        const CalibrationSet c = drawCalibrationSet(stream, 20, 32, 6);
        QCOMPARE(a.windows.size(), size_t(20));
        QCOMPARE(a.tokens(), int64_t(640));
        QCOMPARE(a.streamTokens, int64_t(500));
        QCOMPARE(a.source, std::string("corpus.txt"));
        QVERIFY(a.windows == b.windows);  // the seed alone decides
        QVERIFY(a.windows != c.windows);
        for (const auto& w : a.windows) {
            QCOMPARE(w.size(), size_t(32));
            // Each window is a run of consecutive stream tokens.
            bool found = false;
            for (size_t start = 0; start + 32 <= stream.size() && !found; ++start)
                found = std::equal(w.begin(), w.end(), stream.begin() + long(start));
            QVERIFY(found);
        }
        // A stream of exactly one window yields that window every time.
        const std::vector<int32_t> exact(stream.begin(), stream.begin() + 32);
        for (const auto& w : drawCalibrationSet(exact, 3, 32, 9).windows) QVERIFY(w == exact);
    }

    void shortStreamIsAnError() {
        const QString message = errorOf([] { drawCalibrationSet(randomIds(31, 40, 1), 4, 32, 0, "tiny.ids"); });
        QVERIFY2(message.contains("tiny.ids") && message.contains("31 tokens") &&
                     message.contains("fewer than one calibration window of 32"),
                 qPrintable(message));
        QVERIFY(!errorOf([] { drawCalibrationSet(randomIds(100, 40, 1), 0, 32, 0); }).isEmpty());
        QVERIFY(!errorOf([] { drawCalibrationSet(randomIds(100, 40, 1), 4, 0, 0); }).isEmpty());
    }

    void statsEqualBruteForce_data() {
        QTest::addColumn<int>("batchTokens");
        QTest::newRow("one window per batch") << 24;
        QTest::newRow("3 windows per batch, ragged last batch") << 72;
        QTest::newRow("all in one batch") << 8192;
    }
    void statsEqualBruteForce() {
        QFETCH(int, batchTokens);
        // GQA layer, a layer without heads, a layer without MLP channels.
        const LlamaModel model(tinyLlama({4, 0, 2}, {2, 0, 2}, {20, 12, 0}), chooseRuntime("cpu"));
        const CalibrationSet set = drawCalibrationSet(randomIds(400, 40, 2), 7, 24, 3);
        CalibrationOptions options;
        options.batchTokens = batchTokens;
        int progressCalls = 0;
        const ModelStats stats = calibrate(model, set, [&](const Progress&) { ++progressCalls; return true; }, options);
        QVERIFY(progressCalls >= 2);
        QCOMPARE(stats.tokens(), int64_t(7 * 24));
        QCOMPARE(stats.attn[1].channels(), int64_t(0));  // no heads: nothing tapped
        QCOMPARE(stats.mlp[2].channels(), int64_t(0));   // no MLP channels
        for (int64_t layer = 0; layer < 3; ++layer)
            for (TapSite site : {TapSite::AttentionOutputInput, TapSite::MlpDownInput}) {
                const LayerStats& s = (site == TapSite::AttentionOutputInput ? stats.attn : stats.mlp)[size_t(layer)];
                if (s.channels() == 0) continue;
                const at::Tensor x = tappedInputs(model, set, layer, site);
                QCOMPARE(s.tokens, x.size(0));
                // float32 activations computed in batches vs one window at a time: agreement to
                // float32 rounding; the sums themselves are float64.
                QVERIFY(relativeError(s.gram, at::matmul(x.t(), x)) < 1e-5);
                QVERIFY(relativeError(s.sum, x.sum(0)) < 1e-5);
                QVERIFY(relativeError(s.sumSq, x.square().sum(0)) < 1e-5);
                QVERIFY(relativeError(s.gramPerToken(), at::matmul(x.t(), x) / double(x.size(0))) < 1e-5);
            }
    }

    void cancelStopsCalibration() {
        const LlamaModel model(tinyLlama({2}, {2}, {8}), chooseRuntime("cpu"));
        const CalibrationSet set = drawCalibrationSet(randomIds(100, 40, 2), 4, 16, 3);
        QVERIFY_THROWS_EXCEPTION(Cancelled, calibrate(model, set, [](const Progress& p) { return p.done < 1; }));
    }

    void badWindowsAreErrors() {
        const LlamaModel model(tinyLlama({2}, {2}, {8}), chooseRuntime("cpu"));
        // Longer than the context of 64.
        const QString tooLong = errorOf([&] { calibrate(model, drawCalibrationSet(randomIds(200, 40, 1), 1, 65, 0)); });
        QVERIFY2(tooLong.contains("exceed the model's context of 64"), qPrintable(tooLong));
        // Token ids outside the vocabulary of 40.
        const QString outside = errorOf([&] { calibrate(model, drawCalibrationSet(randomIds(100, 90, 1), 2, 30, 0)); });
        QVERIFY2(outside.contains("outside the model's vocabulary of 40"), qPrintable(outside));
    }

    void statsFileRoundTrip() {
        const LlamaModel model(tinyLlama({4, 0}, {2, 0}, {0, 12}), chooseRuntime("cpu"));
        const ModelStats stats = calibrate(model, drawCalibrationSet(randomIds(200, 40, 4), 3, 20, 1));
        QTemporaryDir dir;
        const std::string path = dir.filePath("stats.safetensors").toStdString();
        saveModelStats(stats, path, {{"model", "tiny"}});
        const ModelStats back = loadModelStats(path, 2);
        QCOMPARE(back.attn[0].tokens, stats.attn[0].tokens);
        QVERIFY(at::equal(back.attn[0].gram, stats.attn[0].gram));
        QVERIFY(at::equal(back.mlp[1].sumSq, stats.mlp[1].sumSq));
        QCOMPARE(back.attn[1].channels(), int64_t(0));
        QCOMPARE(back.mlp[0].channels(), int64_t(0));
    }
};

QTEST_GUILESS_MAIN(TestCalibration)
#include "tst_calibration.moc"
