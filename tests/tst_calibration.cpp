// Calibration: seeded window drawing, the statistics against a brute-force accumulation of
// the tapped inputs (one window per forward pass, everything summed in float64 at the end),
// the statistics file round trip, and the errors a user can cause. Layer-wise calibration
// against the whole-model pass (same numbers, the file saveModelStats writes), its
// memory-mapped statistics against in-RAM ones through scoring, compensation and the pruned
// model, and its atomicity when cancelled.
#include "core/experiments/language_workbench.h"
#include "core/experiments/synthetic_checkpoint.h"
#include "core/io/safetensors.h"
#include "core/models/runtime.h"
#include "core/prune/calibration.h"
#include "core/prune/layerwise_prune.h"
#include "core/prune/pruner.h"
#include "core/util/error.h"
#include "tiny_llama.h"
#include "error_of.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <set>
#include <filesystem>

Q_DECLARE_METATYPE(std::vector<int64_t>)

using namespace npw;
using namespace npw::test;

namespace {

double relativeError(const at::Tensor& a, const at::Tensor& b) {
    return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-300);
}

QByteArray fileBytes(const std::string& path) {
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

const LayerStats& siteOf(const ModelStats& stats, size_t layer, TapSite site) {
    return (site == TapSite::AttentionOutputInput ? stats.attn : stats.mlp)[layer];
}

// Largest relative difference over every statistic of every layer (tokens must match exactly).
double maxRelativeDifference(const ModelStats& a, const ModelStats& b) {
    double worst = 0;
    for (size_t l = 0; l < a.attn.size(); ++l)
        for (TapSite site : {TapSite::AttentionOutputInput, TapSite::MlpDownInput}) {
            const LayerStats &x = siteOf(a, l, site), &y = siteOf(b, l, site);
            if (x.channels() != y.channels() || x.tokens != y.tokens) return INFINITY;
            if (x.channels() == 0) continue;
            worst = std::max({worst, relativeError(x.gram, y.gram), relativeError(x.sum, y.sum),
                              relativeError(x.sumSq, y.sumSq)});
        }
    return worst;
}

uint64_t headerBytes(const QByteArray& file) {
    uint64_t n = 0;
    if (file.size() >= 8) std::memcpy(&n, file.constData(), 8);
    return n;
}

// Files in `dir` (hidden ones too): what a cancelled run may have left behind.
QStringList filesIn(const QTemporaryDir& dir) {
    return QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot);
}

} // namespace

class TestCalibration : public QObject {
    Q_OBJECT
private slots:
    void perSequenceWindowsAreSequenceStarts() {
        std::vector<std::vector<int32_t>> sequences;
        sequences.reserve(10);
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

    // Layer by layer, every block sees the batches the whole-model pass gives it, as the same
    // float32 activations, and each G is summed in the same order: the statistics agree to
    // rounding (measured: bitwise, 0 relative difference, on this CPU), and the file is the
    // one saveModelStats writes for the whole-model statistics.
    void layerwiseEqualsWholeModel_data() {
        QTest::addColumn<std::vector<int64_t>>("heads");
        QTest::addColumn<std::vector<int64_t>>("kvHeads");
        QTest::addColumn<std::vector<int64_t>>("inter");
        QTest::addColumn<int>("batchTokens");
        QTest::newRow("MHA, one window per batch") << std::vector<int64_t>{4, 4, 4} << std::vector<int64_t>{4, 4, 4}
                                                 << std::vector<int64_t>{20, 20, 20} << 24;
        QTest::newRow("GQA, ragged batches") << std::vector<int64_t>{4, 4} << std::vector<int64_t>{2, 1}
                                             << std::vector<int64_t>{20, 12} << 72;
        QTest::newRow("non-uniform, 0 heads, 0 channels") << std::vector<int64_t>{4, 0, 2, 3}
                                                          << std::vector<int64_t>{2, 0, 2, 3}
                                                          << std::vector<int64_t>{20, 12, 0, 8} << 72;
        QTest::newRow("non-uniform, all in one batch") << std::vector<int64_t>{0, 2, 4} << std::vector<int64_t>{0, 1, 4}
                                                       << std::vector<int64_t>{6, 0, 20} << 8192;
    }
    void layerwiseEqualsWholeModel() {
        QFETCH(std::vector<int64_t>, heads);
        QFETCH(std::vector<int64_t>, kvHeads);
        QFETCH(std::vector<int64_t>, inter);
        QFETCH(int, batchTokens);
        const LlamaModel model(tinyLlama(heads, kvHeads, inter), chooseRuntime("cpu"));
        CalibrationSet set = drawCalibrationSet(randomIds(400, 40, 2), 7, 24, 3, "ids.txt");
        set.sourceIsIds = true;
        CalibrationOptions options;
        options.batchTokens = batchTokens;
        const ModelStats whole = calibrate(model, set, nullptr, options);

        QTemporaryDir dir;
        const std::string path = dir.filePath("layerwise.safetensors").toStdString();
        std::map<std::string, std::string> metadata = CalibrationSummary::of(set).toMetadata();
        metadata["model"] = "tiny";
        std::vector<double> progress;
        const ModelStats layerwise = calibrateLayerwise(model, set, path, metadata, [&](const Progress& p) {
            progress.push_back(p.done / p.total);
            return true;
        }, options);
        QCOMPARE(progress.front(), 0.0);
        QCOMPARE(progress.back(), 1.0);
        QVERIFY(std::is_sorted(progress.begin(), progress.end()));

        const double difference = maxRelativeDifference(layerwise, whole);
        qInfo("layer-wise vs whole-model statistics: max relative difference %.3g", difference);
        QVERIFY2(difference <= 1e-12, qPrintable(QString::number(difference)));
        for (size_t l = 0; l < heads.size(); ++l) {
            QCOMPARE(layerwise.attn[l].channels(), heads[l] * 4);
            QCOMPARE(layerwise.mlp[l].channels(), inter[l]);
        }
        // Also against the independent reference: one window per forward, summed at the end.
        for (size_t l = 0; l < heads.size(); ++l)
            for (TapSite site : {TapSite::AttentionOutputInput, TapSite::MlpDownInput}) {
                const LayerStats& s = siteOf(layerwise, l, site);
                if (s.channels() == 0) continue;
                const at::Tensor x = tappedInputs(model, set, int64_t(l), site);
                QCOMPARE(s.tokens, x.size(0));
                QVERIFY(relativeError(s.gram, at::matmul(x.t(), x)) < 1e-5);
                QVERIFY(relativeError(s.sumSq, x.square().sum(0)) < 1e-5);
            }

        // Exactly saveModelStats's layout: the same header (names, order, offsets, metadata), and
        // since the sums agree bit for bit, the same bytes.
        const std::string saved = dir.filePath("saved.safetensors").toStdString();
        saveModelStats(whole, saved, metadata);
        const QByteArray a = fileBytes(path), b = fileBytes(saved);
        QCOMPARE(a.size(), b.size());
        QCOMPARE(headerBytes(a), headerBytes(b));
        QCOMPARE(headerBytes(a) % 8, uint64_t(0));
        QCOMPARE(a.left(int(8 + headerBytes(a))), b.left(int(8 + headerBytes(b))));
        if (difference == 0) QVERIFY(a == b);
        QCOMPARE(filesIn(dir).size(), 2);  // no temporary file left
    }

    // The returned statistics are views of the mapped file, not copies: each tensor lies where
    // the header puts it, relative to the others, and is aligned to its 8-byte elements.
    void layerwiseStatsAreViewsOfTheFile() {
        const LlamaModel model(tinyLlama({4, 2}, {2, 2}, {20, 0}), chooseRuntime("cpu"));
        const CalibrationSet set = drawCalibrationSet(randomIds(400, 40, 2), 5, 24, 3);
        QTemporaryDir dir;
        const std::string path = dir.filePath("s.safetensors").toStdString();
        const ModelStats mapped = calibrateLayerwise(model, set, path);
        const ModelStats copied = loadModelStats(path, 2, nullptr, StatsStorage::Copy);
        const ModelStats loadedMapped = loadModelStats(path, 2, nullptr, StatsStorage::Mapped);
        auto file = SafeTensorsFile::open(path);
        auto address = [](const at::Tensor& t) { return reinterpret_cast<intptr_t>(t.data_ptr()); };
        const intptr_t base = address(mapped.attn[0].gram) - intptr_t(file->info("layers.0.attn.gram").begin);
        for (const auto& [stats, mappedKind] : {std::pair<const ModelStats*, bool>{&mapped, true}, {&loadedMapped, true},
                                                {&copied, false}}) {
            const intptr_t statsBase = address(stats->attn[0].gram) - intptr_t(file->info("layers.0.attn.gram").begin);
            bool inPlace = true;
            for (const char* site : {"attn", "mlp"})
                for (int l = 0; l < 2; ++l) {
                    const LayerStats& s = std::string(site) == "attn" ? stats->attn[size_t(l)] : stats->mlp[size_t(l)];
                    if (s.channels() == 0) continue;
                    const std::string prefix = "layers." + std::to_string(l) + "." + site + ".";
                    for (const auto& [field, tensor] : {std::pair<const char*, at::Tensor>{"gram", s.gram}, {"sum", s.sum},
                                                        {"sum_sq", s.sumSq}}) {
                        QCOMPARE(address(tensor) % 8, intptr_t(0));
                        QCOMPARE(tensor.scalar_type(), at::kDouble);
                        inPlace &= address(tensor) - statsBase == intptr_t(file->info(prefix + field).begin);
                    }
                }
            QCOMPARE(inPlace, mappedKind);
        }
        Q_UNUSED(base);
        QVERIFY(maxRelativeDifference(mapped, copied) == 0);
        // The views keep the mapping alive after the file object and even the file are gone.
        file.reset();
        std::filesystem::remove(path);
        QVERIFY(at::equal(mapped.attn[0].gram, copied.attn[0].gram));
        QVERIFY(at::equal(loadedMapped.mlp[0].sumSq, copied.mlp[0].sumSq));
    }

    // Statistics mapped from disk (layer-wise, and --stats FILE) drive the engine exactly as the
    // in-RAM ones: the same scores, the same mask, the same pruned weights and logits. Each
    // comes through the workbench's own calibration of that road (npw prune --stats-on-disk,
    // --save-stats then --stats, and the default), and is pruned by its prune().
    void mappedStatsPruneLikeInRam_data() {
        QTest::addColumn<int>("method");
        QTest::newRow("numerical + Theorem 3") << int(PruneMethod::Numerical);
        QTest::newRow("flap + bias") << int(PruneMethod::Flap);
        QTest::newRow("wanda-sp") << int(PruneMethod::WandaSp);
    }
    void mappedStatsPruneLikeInRam() {
        using Calibration = LanguagePruningWorkbench::Calibration;
        QFETCH(int, method);
        LanguageModel lm;
        lm.model = std::make_shared<LlamaModel>(tinyLlama({4, 4, 0}, {2, 2, 0}, {24, 16, 12}), chooseRuntime("cpu"));
        lm.name = "tiny";
        const CalibrationSet set = drawCalibrationSet(randomIds(3000, 40, 8), 16, 32, 9);
        const Calibration inRam = LanguagePruningWorkbench::calibrate(lm, set);
        QTemporaryDir dir;
        const std::string layerwisePath = dir.filePath("layerwise.safetensors").toStdString();
        const std::string savedPath = dir.filePath("saved.safetensors").toStdString();
        const Calibration layerwise = LanguagePruningWorkbench::calibrateToFile(lm, set, layerwisePath, "tiny");
        saveModelStats(*inRam.stats, savedPath, inRam.summary.toMetadata());
        const Calibration reloaded = LanguagePruningWorkbench::calibrationFromFile(savedPath, 3);
        QVERIFY(reloaded.windows == nullptr && reloaded.summary.tokens == set.tokens());

        PruneSettings settings;
        settings.method = static_cast<PruneMethod>(method);
        settings.ratio = 0.35;
        auto pruneWith = [&](const Calibration& calibration) {
            LanguagePruningWorkbench workbench(lm);
            workbench.setCalibration(calibration);
            return workbench.prune(settings);
        };
        const WorkbenchPrune reference = pruneWith(inRam);
        const at::Tensor ids = idsTensor({randomIds(32, 40, 11)});
        const at::Tensor referenceLogits =
            LlamaModel(reference.pruned.checkpoint, chooseRuntime("cpu")).logits(ids);
        for (const Calibration* calibration : {&layerwise, &reloaded}) {
            const WorkbenchPrune run = pruneWith(*calibration);
            for (size_t l = 0; l < 3; ++l) {
                for (const auto& [a, b] : {std::pair<at::Tensor, at::Tensor>{run.scores->attentionChannels[l],
                                                                             reference.scores->attentionChannels[l]},
                                           {run.scores->mlpChannels[l], reference.scores->mlpChannels[l]}}) {
                    QCOMPARE(a.defined(), b.defined());
                    if (a.defined()) QVERIFY2(relativeError(a, b) <= 1e-12, qPrintable(QString::number(relativeError(a, b))));
                }
            }
            QVERIFY(run.selection.mask.keepHeads == reference.selection.mask.keepHeads);
            QVERIFY(run.selection.mask.keepChannels == reference.selection.mask.keepChannels);
            QVERIFY(reference.selection.removedChannels > 0);
            const at::Tensor logits = LlamaModel(run.pruned.checkpoint, chooseRuntime("cpu")).logits(ids);
            const double difference = relativeError(logits.to(at::kDouble), referenceLogits.to(at::kDouble));
            QVERIFY2(difference <= 1e-6, qPrintable(QString::number(difference)));
            if (calibration == &reloaded) QVERIFY(at::equal(logits, referenceLogits));  // the very same numbers
            for (size_t l = 0; l < 3; ++l) {
                QCOMPARE(run.report.layers[l].mlpLoss, reference.report.layers[l].mlpLoss);
                QCOMPARE(run.report.layers[l].attentionLoss, reference.report.layers[l].attentionLoss);
            }
        }
    }

    // A cancel (or an error) mid-run leaves the target as it was: an earlier file keeps its
    // bytes, a new target does not appear, and no temporary file stays behind.
    void cancelledLayerwiseLeavesNoFile() {
        const LlamaModel model(tinyLlama({2, 2, 2}, {2, 2, 2}, {8, 8, 8}), chooseRuntime("cpu"));
        const CalibrationSet set = drawCalibrationSet(randomIds(100, 40, 2), 4, 16, 3);
        QTemporaryDir dir;
        const std::string fresh = dir.filePath("fresh.safetensors").toStdString();
        const std::string existing = dir.filePath("existing.safetensors").toStdString();
        {
            QFile f(QString::fromStdString(existing));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("earlier statistics");
        }
        int calls = 0;
        auto stopInLayer1 = [&](const Progress& p) { ++calls; return p.done < 1.5 * 4; };
        QVERIFY_THROWS_EXCEPTION(Cancelled, calibrateLayerwise(model, set, fresh, {}, stopInLayer1));
        QVERIFY(calls > 2);  // it did run, into the second layer
        QVERIFY_THROWS_EXCEPTION(Cancelled, calibrateLayerwise(model, set, existing, {}, stopInLayer1));
        QVERIFY(!QFile::exists(QString::fromStdString(fresh)));
        QCOMPARE(fileBytes(existing), QByteArray("earlier statistics"));
        QCOMPARE(filesIn(dir), QStringList{"existing.safetensors"});
        // A bad window is an error before anything is written.
        QVERIFY(!errorOf([&] { calibrateLayerwise(model, drawCalibrationSet(randomIds(100, 90, 1), 2, 30, 0), fresh); })
                     .isEmpty());
        QCOMPARE(filesIn(dir), QStringList{"existing.safetensors"});
        // A finished run replaces the earlier file.
        calibrateLayerwise(model, set, existing);
        QCOMPARE(filesIn(dir), QStringList{"existing.safetensors"});
        QVERIFY(loadModelStats(existing, 3).tokens() == set.tokens());
    }

    // A statistics file cut short (a full disk, a copy interrupted) is refused with the file and
    // the tensor that runs past its end, in both storage modes, before any view is made.
    void truncatedStatsFileIsAnError() {
        const LlamaModel model(tinyLlama({2, 2}, {2, 2}, {8, 8}), chooseRuntime("cpu"));
        QTemporaryDir dir;
        const std::string path = dir.filePath("cut.safetensors").toStdString();
        calibrateLayerwise(model, drawCalibrationSet(randomIds(100, 40, 2), 2, 16, 3), path);
        auto file = SafeTensorsFile::open(path);
        std::string last;
        uint64_t lastEnd = 0;
        for (const std::string& name : file->names())
            if (file->info(name).end > lastEnd) lastEnd = file->info(name).end, last = name;
        file.reset();
        std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
        for (StatsStorage storage : {StatsStorage::Copy, StatsStorage::Mapped}) {
            const QString message = errorOf([&] { loadModelStats(path, 2, nullptr, storage); });
            QVERIFY2(message.contains(QString::fromStdString(path)) &&
                         message.contains(QString::fromStdString("tensor '" + last + "'")) && message.contains("truncated"),
                     qPrintable(message));
        }
    }

    // CalibrationOptions::blockRuntime (the GPU path of the layer-wise road: weights stay where the
    // model holds them, each block copied to the compute runtime for its pass) gives what the
    // model's own runtime gives: here the CPU in float32 on both sides, so the copy path runs and
    // the statistics and hidden states must agree bit for bit with calibrate()'s. (CUDA against
    // the CPU: packaging/gpu_check.py, with its tolerances.)
    void blocksCopiedToTheComputeRuntimeCalibrateTheSame() {
        const LlamaModel model(tinyLlama({4, 2, 4}, {2, 2, 1}, {20, 0, 12}), chooseRuntime("cpu"));
        CalibrationSet set = drawCalibrationSet(randomIds(400, 40, 2), 6, 24, 3, "ids.txt");
        set.sourceIsIds = true;
        CalibrationOptions plain;
        plain.batchTokens = 48;  // 2 windows a batch: 3 batches
        CalibrationOptions copied = plain;
        copied.blockRuntime = Runtime{};
        const ModelStats whole = calibrate(model, set, nullptr, plain);
        std::vector<at::Tensor> lastHiddenPlain, lastHiddenCopied;
        for (auto [options, hiddenOut] : {std::pair{&plain, &lastHiddenPlain}, std::pair{&copied, &lastHiddenCopied}}) {
            ModelStats each;
            each.attn.resize(3);
            each.mlp.resize(3);
            calibrateEachLayer(model, set, [&, hiddenOut = hiddenOut](size_t l, const LayerStats& a, const LayerStats& m,
                                                                      const std::vector<at::Tensor>& hidden) {
                each.attn[l] = a;
                each.mlp[l] = m;
                hiddenOut->clear();
                for (const at::Tensor& h : hidden) hiddenOut->push_back(h.clone());
            }, nullptr, *options);
            QCOMPARE(maxRelativeDifference(each, whole), 0.0);
        }
        QCOMPARE(lastHiddenCopied.size(), size_t(3));
        for (size_t b = 0; b < lastHiddenPlain.size(); ++b) QVERIFY(at::equal(lastHiddenPlain[b], lastHiddenCopied[b]));
    }

    // calibrate() on the CPU runs layer by layer while the hidden states of all windows are at
    // most an eighth of the statistics (here: wide MLPs, few tokens): the statistics must be what
    // the whole model's forward per batch gives (calibrateWithForward over logits, the same
    // batches) — in float32, and with the block matrices held in bfloat16 (widened once per layer
    // there, in every product of every batch here).
    void inRamLayerByLayerEqualsTheWholeModelForward_data() {
        QTest::addColumn<bool>("bf16");
        QTest::newRow("float32") << false;
        QTest::newRow("bfloat16 blocks") << true;
    }
    void inRamLayerByLayerEqualsTheWholeModelForward() {
        QFETCH(bool, bf16);
        LlamaCheckpoint checkpoint = tinyLlama({4, 4}, {2, 2}, {96, 96});
        if (bf16)
            for (LlamaLayerWeights& L : checkpoint.weights.layers)
                for (at::Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) *t = t->to(at::kBFloat16);
        const LlamaModel model(std::move(checkpoint), chooseRuntime("cpu"));
        CalibrationSet set = drawCalibrationSet(randomIds(400, 40, 2), 6, 16, 3, "ids.txt");
        set.sourceIsIds = true;
        QVERIFY(layerwiseHiddenBytes(model, set) <= modelStatsBytes(model.config()) / 8);
        CalibrationOptions options;
        options.batchTokens = 32;  // 2 windows a batch: 3 batches
        std::vector<double> progress;
        const ModelStats layered = calibrate(model, set, [&](const Progress& p) {
            progress.push_back(p.done / p.total);
            return true;
        }, options);
        QCOMPARE(progress.back(), 1.0);
        QVERIFY(std::is_sorted(progress.begin(), progress.end()));
        const ModelStats whole = calibrateWithForward(
            model.config(), c10::Device(c10::kCPU), 6, 2, [&](int64_t first, int64_t count, const ActivationTap& tap) {
                at::Tensor ids = at::empty({count, set.seqlen}, at::kLong);
                for (int64_t b = 0; b < count; ++b)
                    for (int64_t t = 0; t < set.seqlen; ++t) ids[b][t] = set.windows[size_t(first + b)][size_t(t)];
                model.logits(ids, nullptr, true, tap);
            });
        const double difference = maxRelativeDifference(layered, whole);
        qInfo("layer by layer vs the whole model's forward: max relative difference %.3g", difference);
        QCOMPARE(difference, 0.0);
    }

    // The road of `npw prune` on a GPU (choosePruneRoad): in RAM only while the model in the
    // runtime's dtype and every statistic in float64 fit 3/4 of the GPU's memory; the RAM rule
    // still applies. Llama-2-7B's shape: 6.74 G parameters (13.5 GB in bfloat16), 35 GB of statistics.
    void pruneRoadOnAGpu() {
        const LlamaConfig c = syntheticCheckpointConfig("7b");
        const int64_t gib = int64_t{1} << 30;
        const int64_t inGpu = inGpuPruneBytes(c, 2);
        QCOMPARE(inGpu, 2 * c.parameterCount() + modelStatsBytes(c));
        QVERIFY(inGpu > 45 * gib && inGpu < 46 * gib);
        // A 24 GB card on a 128 GiB machine: the RAM would do, the GPU would not.
        const PruneRoad small = choosePruneRoad(c, 128 * gib, false, 24 * gib, 2);
        QVERIFY(small.layerwise);
        QVERIFY2(QString::fromStdString(small.reason).contains("GPU"), small.reason.c_str());
        QCOMPARE(small.deviceBytes, 24 * gib);
        // An 80 GB H100 on the same machine holds it.
        const PruneRoad big = choosePruneRoad(c, 128 * gib, false, 80 * gib, 2);
        QVERIFY2(!big.layerwise, big.reason.c_str());
        QVERIFY2(QString::fromStdString(big.reason).contains("on the GPU"), big.reason.c_str());
        // A workstation's 24 GiB of RAM decides first, whatever the GPU.
        const PruneRoad ram = choosePruneRoad(c, 24 * gib, false, 80 * gib, 2);
        QVERIFY(ram.layerwise);
        QVERIFY2(QString::fromStdString(ram.reason).contains("RAM"), ram.reason.c_str());
        // The CPU: no GPU bound, the RAM rule alone (as before).
        const PruneRoad cpu = choosePruneRoad(c, 128 * gib, false);
        QVERIFY(!cpu.layerwise);
        QCOMPARE(cpu.inGpuBytes, int64_t(0));
        // Llama-3-8B's shape: 16 GB + 57 GB, too much for an H100, not for an H200's 141 GB.
        const LlamaConfig c8 = syntheticCheckpointConfig("8b");
        QVERIFY(choosePruneRoad(c8, 256 * gib, false, 80 * gib, 2).layerwise);
        QVERIFY(!choosePruneRoad(c8, 256 * gib, false, 141 * gib, 2).layerwise);
    }

    void statsSizeAndTheDiskChoice() {
        LlamaConfig c = tinyLlama({4, 0}, {2, 0}, {0, 12}).config;
        // attention of layer 0: D = 16; MLP of layer 1: 12; G + Σx + Σx² + N in 8-byte words.
        QCOMPARE(modelStatsBytes(c), int64_t((16 * 16 + 2 * 16 + 1 + 12 * 12 + 2 * 12 + 1) * 8));
        QVERIFY(!statsBelongOnDisk(c, 4 * modelStatsBytes(c)));
        QVERIFY(!statsBelongOnDisk(c, 2 * modelStatsBytes(c)));  // exactly half: still in RAM
        QVERIFY(statsBelongOnDisk(c, 2 * modelStatsBytes(c) - 1));
        QVERIFY(!statsBelongOnDisk(c, 0));  // unknown RAM: never forced
        QVERIFY(physicalMemoryBytes() > 0);
    }
};

QTEST_GUILESS_MAIN(TestCalibration)
#include "tst_calibration.moc"
