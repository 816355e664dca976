// The real llama2.c stories260K (GQA: 8 query heads on 4 KV heads, adjacent-pair RoPE, tied
// classifier) through the whole engine: calibrate on ids sampled from the model itself (its
// tokenizer is not available), prune numerically at ρ = 0.3, export, reload, same logits.
// Labelled slow (it runs a real checkpoint); a few seconds on one core.
#include "core/eval/generate.h"
#include "core/eval/perplexity.h"
#include "core/models/model_loader.h"
#include "core/models/runtime.h"
#include "core/prune/pruner.h"
#include "workbench_prune.h"
#include "tiny_llama.h"

#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <nlohmann/json.hpp>

using namespace npw;

namespace {

const std::string kStories = std::string(NPW_TEST_DATA) + "/stories260K/stories260K.bin";

// Samples at temperature 1 from BOS, as `npw generate --prompt-ids 1 --temperature 1` does.
std::vector<int32_t> sampledIds(const LlamaModel& model, int samples, int64_t tokens) {
    std::vector<int32_t> ids;
    for (int s = 0; s < samples; ++s) {
        SamplingOptions o;
        o.temperature = 1.0;
        o.seed = uint64_t(s) + 1;
        o.maxNewTokens = tokens;
        ids.push_back(1);
        const GenerationResult g = generate(model, {1}, o);
        ids.insert(ids.end(), g.tokens.begin(), g.tokens.end());
    }
    return ids;
}

} // namespace

class TestPruneStoriesSlow : public QObject {
    Q_OBJECT
private slots:
    void prunesExportsAndReloads() {
        QVERIFY2(std::filesystem::exists(kStories), "tests/data/stories260K/stories260K.bin is missing");
        const LlamaModel dense(loadLlamaCheckpoint(kStories), chooseRuntime("cpu"));
        const std::vector<int32_t> stream = sampledIds(dense, 6, 200);
        CalibrationSet set = drawCalibrationSet(stream, 16, 128, 0, "sampled ids");
        set.sourceIsIds = true;
        PruneSettings settings;
        settings.ratio = 0.3;
        const WorkbenchPrune run = test::pruneOnWindows(dense, set, settings);
        const PruneReport& r = run.report;
        // Budget reading: at least 30% of the attention+MLP parameters, at most one KV group more
        // ((2·2 + 2)·8·64 = 3072 of the 5·(2·64·64 + 2·32·64 + 3·64·172) = 226 560 prunable ones).
        QVERIFY2(r.achievedRatio >= 0.3 && r.achievedRatio < 0.3 + 3072.0 / r.prunableBefore,
                 qPrintable(QString::number(r.achievedRatio)));
        QCOMPARE(r.alpha, 16.0);  // (2g + 2)·D_h/3 with g = 2, D_h = 8
        for (const LayerPruneReport& layer : r.layers) {
            QCOMPARE(layer.headsAfter, 2 * layer.kvHeadsAfter);  // whole KV groups go
            if (layer.channelsAfter < layer.channelsBefore) QVERIFY(layer.mlpLoss < layer.mlpLossUncompensated);
        }

        QTemporaryDir dir;
        const std::string out = dir.filePath("stories-pruned").toStdString();
        savePrunedModel(run.pruned.checkpoint, out,
                        pruneManifestJson(r, settings, CalibrationSummary::of(set), kStories));
        const LlamaModel reloaded(loadLlamaCheckpoint(out), chooseRuntime("cpu"));
        QCOMPARE(reloaded.config().parameterCount(), r.paramsAfter);
        const at::Tensor ids = test::idsTensor({std::vector<int32_t>(stream.begin(), stream.begin() + 100)});
        const at::Tensor expected = LlamaModel(run.pruned.checkpoint, chooseRuntime("cpu")).logits(ids);
        QVERIFY((reloaded.logits(ids) - expected).abs().max().item<double>() < 1e-4);

        PerplexityOptions o;
        o.seqlen = 128;
        const PerplexityResult pruned = evaluatePerplexity(reloaded, stream, o, &dense);
        QVERIFY(std::isfinite(pruned.ppl) && std::isfinite(pruned.kl) && pruned.kl > 0);
    }
};

QTEST_GUILESS_MAIN(TestPruneStoriesSlow)
#include "tst_prune_stories_slow.moc"
