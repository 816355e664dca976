// The baselines in their own structure (core/prune/baselines.h) on small random LLaMAs, each
// against an independent reference:
//  - block influence: the scores against a brute-force loop (one window, one token at a time,
//    float64 dot products); removing 0 blocks is the identity; the fewest lowest blocks reach ρ;
//    the export reloads with fewer layers and the same logits.
//  - LLM-Pruner: the checkpointed per-block gradients against one plain autograd pass over the
//    whole model (tolerance 1e-5 relative to the largest gradient) and against central finite
//    differences of the loss (float64 weights, h = 1e-3; npw's RMSNorm and softmax run in float32,
//    hence a tolerance of 1e-3 of the largest gradient; measured 1.6e-4); group importances
//    against element loops; the
//    uniform per-layer ratio that reaches ρ; ρ = 0 is the identity.
//  - SliceGPT: the PCA basis is orthonormal and sorted; slicing 0 % (a rotation only) leaves the
//    logits of the dense model unchanged up to float32 rounding (5e-6 of the largest logit;
//    measured 4e-7 to 6e-7; MHA, GQA, a tied embedding);
//    the analytic parameter count equals the model's; the ratio solved for is reached; save and
//    load give the same logits; a damaged file is an npw::Error naming file and tensor.
#include "core/models/model_loader.h"
#include "core/models/parameter_count.h"
#include "core/models/runtime.h"
#include "core/models/sliced_llama.h"
#include "core/prune/baseline_pruner.h"
#include "core/prune/block_influence.h"
#include "core/prune/export.h"
#include "core/prune/llm_pruner.h"
#include "core/prune/slicegpt.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"
#include "error_of.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard (LibTorch 2.x's ATen.h no longer includes it)
#include <c10/core/InferenceMode.h>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>

using namespace npw;
using namespace npw::test;

namespace {

CalibrationSet calibrationFor(uint64_t seed, int64_t samples = 6, int64_t seqlen = 24) {
    return drawCalibrationSet(randomIds(2000, 40, seed), samples, seqlen, seed + 1);
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

at::Tensor logitsOf(const LlamaModel& m, const CalibrationSet& set) { return m.logits(idsTensor(set.windows)); }

// The mean over windows of each window's mean next-token NLL, as the gradients define the loss.
at::Tensor lmLoss(const LlamaConfig& cfg, const LlamaWeights& w, const CalibrationSet& set) {
    at::Tensor total = at::zeros({}, w.embed.options());
    for (const auto& window : set.windows) {
        const at::Tensor ids = idsTensor({window});
        const at::Tensor logits = llamaForward(cfg, w, ids);
        const int64_t T = ids.size(1);
        total = total + at::cross_entropy_loss(logits[0].narrow(0, 0, T - 1), ids[0].narrow(0, 1, T - 1));
    }
    return total / static_cast<double>(set.windows.size());
}

} // namespace

class TestBaselines : public QObject {
    Q_OBJECT

private slots:
    void blockInfluenceMatchesBruteForce() {
        LlamaModel model(tinyLlama({4, 4, 2, 4}, {4, 2, 2, 4}, {24, 16, 24, 8}, 11), chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(3, 5, 16);
        const BlockInfluence bi = blockInfluence(model, set);
        QCOMPARE(bi.tokens, int64_t(5 * 16));
        // Brute force: one window at a time, each token's cosine from explicit float64 sums.
        const LlamaConfig& cfg = model.config();
        std::vector<double> sum(size_t(cfg.num_layers), 0.0);
        at::NoGradGuard noGrad;
        for (const auto& window : set.windows) {
            at::Tensor x = at::embedding(model.deviceWeights().embed, idsTensor({window}));
            const LlamaPositionTables tables = llamaPositionTables(cfg, 0, set.seqlen, x.options());
            for (int64_t l = 0; l < cfg.num_layers; ++l) {
                const at::Tensor y = llamaBlockForward(cfg, model.deviceWeights().layers[size_t(l)], l, x, tables);
                const at::Tensor xc = x.contiguous(), yc = y.contiguous();
                auto a = xc.accessor<float, 3>();
                auto b = yc.accessor<float, 3>();
                for (int64_t t = 0; t < set.seqlen; ++t) {
                    double ab = 0, aa = 0, bb = 0;
                    for (int64_t k = 0; k < cfg.hidden_size; ++k) {
                        ab += double(a[0][t][k]) * double(b[0][t][k]);
                        aa += double(a[0][t][k]) * double(a[0][t][k]);
                        bb += double(b[0][t][k]) * double(b[0][t][k]);
                    }
                    sum[size_t(l)] += 1.0 - ab / std::sqrt(aa * bb);
                }
                x = y;
            }
        }
        for (size_t l = 0; l < sum.size(); ++l) {
            const double expected = sum[l] / double(bi.tokens);
            QVERIFY2(std::abs(bi.influence[l] - expected) < 1e-6 * std::max(1.0, std::abs(expected)),
                     qPrintable(QString("layer %1: %2 vs %3").arg(l).arg(bi.influence[l]).arg(expected)));
            QVERIFY(bi.influence[l] > 0);
        }
    }

    void blocksToRemoveTakesTheFewestLowest() {
        LlamaConfig c = tinyLlama({4, 4, 4, 4}, {4, 4, 4, 4}, {16, 16, 16, 16}).config;
        const std::vector<double> influence = {0.5, 0.1, 0.3, 0.2};
        QVERIFY(blocksToRemove(c, influence, 0.0).empty());
        QCOMPARE(blocksToRemove(c, influence, 0.25), std::vector<int64_t>({1}));         // exactly one block's share
        QCOMPARE(blocksToRemove(c, influence, 0.3), std::vector<int64_t>({1, 3}));       // one is not enough
        QCOMPARE(blocksToRemove(c, influence, 0.6), std::vector<int64_t>({1, 2, 3}));
        QVERIFY(errorOf([&] { blocksToRemove(c, influence, 0.9); }).contains("every block"));
        // Non-uniform: a small block counts for its own parameters.
        LlamaConfig u = tinyLlama({4, 1, 4}, {4, 1, 4}, {32, 4, 32}).config;
        const std::vector<double> low = {0.9, 0.1, 0.2};
        QCOMPARE(blocksToRemove(u, low, 0.2), std::vector<int64_t>({1, 2}));
    }

    void removingNoBlockIsTheIdentityAndExportsReload() {
        LlamaModel model(tinyLlama({4, 4, 4}, {2, 2, 2}, {16, 16, 16}, 5), chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(9);
        LlamaModel same(removeBlocks(model.checkpoint(), {}), chooseRuntime("cpu"));
        QCOMPARE(maxAbsDiff(logitsOf(model, set), logitsOf(same, set)), 0.0);

        BaselineOptions options;
        options.ratio = 0.3;
        const BaselineRun run = runBaseline(BaselineMethod::BlockInfluence, model, set, options);
        QCOMPARE(run.pruned.config.num_layers, int64_t(2));
        QVERIFY(run.report.achievedRatio >= 0.3);
        QCOMPARE(run.native.at("blocks_removed").get<int64_t>(), int64_t(1));
        // The reference: the dense stack with the removed block skipped by hand.
        const int64_t gone = run.native.at("removed_blocks").at(0).get<int64_t>();
        LlamaCheckpoint byHand = model.checkpoint();
        byHand.weights.layers.erase(byHand.weights.layers.begin() + gone);
        byHand.config.num_layers = 2;
        for (auto* list : {&byHand.config.num_heads, &byHand.config.num_kv_heads, &byHand.config.intermediate_size})
            list->erase(list->begin() + gone);
        LlamaModel expected(byHand, chooseRuntime("cpu"));
        LlamaModel pruned(run.pruned, chooseRuntime("cpu"));
        QCOMPARE(maxAbsDiff(logitsOf(expected, set), logitsOf(pruned, set)), 0.0);

        QTemporaryDir dir;
        const std::string out = (std::filesystem::path(dir.path().toStdString()) / "bi").string();
        savePrunedModel(run.pruned, out, baselineManifestJson(run, CalibrationSummary::of(set), "tiny"));
        LlamaModel reloaded(loadLlamaCheckpoint(out), chooseRuntime("cpu"));
        QCOMPARE(reloaded.config().num_layers, int64_t(2));
        QVERIFY(maxAbsDiff(logitsOf(reloaded, set), logitsOf(pruned, set)) < 1e-5);
    }

    void taylorGradientsMatchAutogradAndFiniteDifferences() {
        LlamaCheckpoint ckpt = tinyLlama({4, 2, 4}, {2, 2, 4}, {12, 16, 8}, 21);
        LlamaModel model(ckpt, chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(17, 3, 12);
        const TaylorGradients g = taylorGradients(model, set, 1, /*fisher=*/true);
        QCOMPARE(g.first, int64_t(1));
        QVERIFY(!g.grad[0].wq.defined());

        // One plain autograd pass over the whole model (no checkpointing).
        LlamaWeights w = ckpt.weights;
        for (auto& L : w.layers)
            for (at::Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
                *t = t->detach().clone().requires_grad_(true);
        at::Tensor loss = lmLoss(ckpt.config, w, set);
        loss.backward();
        QVERIFY(std::abs(loss.item<double>() - g.loss) < 1e-5);
        double scale = 0;
        for (size_t l = 1; l < 3; ++l) scale = std::max(scale, w.layers[l].wq.grad().abs().max().item<double>());
        // param_first's path (the leaves' .grad accumulates) and param_mix's (per-window gradients).
        const TaylorGradients plain = taylorGradients(model, set, 1, /*fisher=*/false);
        QVERIFY(plain.fisher.empty());
        for (const TaylorGradients* which : {&g, &plain})
        for (size_t l = 1; l < 3; ++l) {
            const LlamaLayerWeights& G = which->grad[l];
            const LlamaLayerWeights& A = w.layers[l];
            for (auto [mine, ref] : std::vector<std::pair<const at::Tensor*, const at::Tensor*>>{
                     {&G.wq, &A.wq}, {&G.wk, &A.wk}, {&G.wv, &A.wv}, {&G.wo, &A.wo}, {&G.w_gate, &A.w_gate},
                     {&G.w_up, &A.w_up}, {&G.w_down, &A.w_down}})
                QVERIFY2(maxAbsDiff(*mine, ref->grad()) < 1e-5 * scale + 1e-9,
                         qPrintable(QString("layer %1: %2").arg(l).arg(maxAbsDiff(*mine, ref->grad()))));
        }

        // Central finite differences of the loss in float64 weights for a few elements.
        LlamaWeights d = ckpt.weights;
        auto toDouble = [](at::Tensor& t) {
            if (t.defined()) t = t.to(at::kDouble);
        };
        toDouble(d.embed), toDouble(d.final_norm), toDouble(d.lm_head);
        for (auto& L : d.layers)
            for (at::Tensor* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down})
                toDouble(*t);
        at::NoGradGuard noGrad;
        const double h = 1e-3;
        double worst = 0, gradScale = 0;
        for (auto [layer, which, row, col] : std::vector<std::tuple<size_t, int, int64_t, int64_t>>{
                 {1, 0, 3, 5}, {1, 3, 7, 2}, {2, 1, 9, 0}, {2, 4, 5, 11}, {2, 6, 3, 6}, {1, 5, 15, 8}}) {
            LlamaLayerWeights& L = d.layers[layer];
            at::Tensor* t = std::vector<at::Tensor*>{&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}[size_t(which)];
            const LlamaLayerWeights& G = g.grad[layer];
            const at::Tensor* grad = std::vector<const at::Tensor*>{&G.wq, &G.wk, &G.wv, &G.wo, &G.w_gate, &G.w_up, &G.w_down}[size_t(which)];
            const double original = (*t)[row][col].item<double>();
            (*t)[row][col] = original + h;
            const double up = lmLoss(ckpt.config, d, set).item<double>();
            (*t)[row][col] = original - h;
            const double down = lmLoss(ckpt.config, d, set).item<double>();
            (*t)[row][col] = original;
            const double fd = (up - down) / (2 * h), mine = (*grad)[row][col].item<double>();
            worst = std::max(worst, std::abs(fd - mine));
            gradScale = std::max(gradScale, grad->abs().max().item<double>());
        }
        QVERIFY2(worst < 1e-3 * gradScale, qPrintable(QString("finite differences off by %1 (scale %2)").arg(worst).arg(gradScale)));
    }

    void gradientsWorkFromInsideInferenceMode() {
        // A model built inside InferenceMode (its weights are inference tensors) and a caller
        // still inside it: the gradients are those of a plain model.
        LlamaCheckpoint ckpt = tinyLlama({2, 2}, {2, 2}, {8, 8}, 61);
        const CalibrationSet set = calibrationFor(67, 2, 10);
        LlamaModel plain(ckpt, chooseRuntime("cpu"));
        const TaylorGradients expected = taylorGradients(plain, set, 0, false);
        c10::InferenceMode guard;
        LlamaCheckpoint copy = ckpt;
        for (auto& [name, t] : namedTensors(copy.weights, true))
            if (t->defined()) *t = t->clone();  // inference tensors
        QVERIFY(copy.weights.layers[1].w_up.is_inference());
        LlamaModel inference(copy, chooseRuntime("cpu"));
        const TaylorGradients g = taylorGradients(inference, set, 0, false);
        QVERIFY(maxAbsDiff(g.grad[1].w_up, expected.grad[1].w_up) < 1e-7);
    }

    void groupImportancesAreSumsOverTheGroup() {
        LlamaCheckpoint ckpt = tinyLlama({4, 4}, {2, 4}, {8, 12}, 31);
        LlamaModel model(ckpt, chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(41, 3, 12);
        const TaylorGradients g = taylorGradients(model, set, 0, true);
        const LlamaConfig& c = ckpt.config;
        for (TaylorKind kind : {TaylorKind::ParamFirst, TaylorKind::ParamMix, TaylorKind::Vectorize}) {
            const GroupImportance imp = llmPrunerImportance(model.deviceWeights(), c, g, kind, 0, 2);
            for (size_t l = 0; l < 2; ++l) {
                const LlamaLayerWeights& W = ckpt.weights.layers[l];
                const LlamaLayerWeights& G = g.grad[l];
                const LlamaLayerWeights& F = g.fisher[l];
                auto s = [&](const at::Tensor& w, const at::Tensor& gr, const at::Tensor& f, int64_t i, int64_t j) {
                    const double wv = w[i][j].item<double>(), gv = gr[i][j].item<double>();
                    return kind == TaylorKind::ParamMix ? wv * gv - 0.5 * wv * f[i][j].item<double>() * wv : wv * gv;
                };
                // A row (byRow) or column of one matrix: Σ|s| element-wise, |Σ s| for vectorize.
                auto line = [&](const at::Tensor& w, const at::Tensor& gr, const at::Tensor& f, int64_t k, bool byRow) {
                    double sum = 0, abs = 0;
                    const int64_t n = byRow ? w.size(1) : w.size(0);
                    for (int64_t e = 0; e < n; ++e) {
                        const double v = byRow ? s(w, gr, f, k, e) : s(w, gr, f, e, k);
                        sum += v;
                        abs += std::abs(v);
                    }
                    return kind == TaylorKind::Vectorize ? std::abs(sum) : abs;
                };
                const int64_t hd = c.head_dim, group = c.num_heads[l] / c.num_kv_heads[l];
                for (int64_t u = 0; u < c.num_kv_heads[l]; ++u) {
                    double expected = 0;
                    for (int64_t r = u * group * hd; r < (u + 1) * group * hd; ++r)
                        expected += line(W.wq, G.wq, F.wq, r, true) + line(W.wo, G.wo, F.wo, r, false);
                    for (int64_t r = u * hd; r < (u + 1) * hd; ++r)
                        expected += line(W.wk, G.wk, F.wk, r, true) + line(W.wv, G.wv, F.wv, r, true);
                    QVERIFY(std::abs(imp.heads[l][size_t(u)] - expected) <= 1e-9 * std::max(1e-12, std::abs(expected)) + 1e-15);
                }
                for (int64_t ch = 0; ch < c.intermediate_size[l]; ++ch) {
                    const double expected = line(W.w_gate, G.w_gate, F.w_gate, ch, true) +
                                            line(W.w_up, G.w_up, F.w_up, ch, true) +
                                            line(W.w_down, G.w_down, F.w_down, ch, false);
                    QVERIFY(std::abs(imp.channels[l][size_t(ch)] - expected) <= 1e-9 * std::abs(expected) + 1e-15);
                }
            }
        }
    }

    void llmPrunerReachesTheRatioUniformlyInItsRange() {
        QCOMPARE(llmPrunerDefaultLayers(32), std::make_pair(int64_t(4), int64_t(30)));
        QCOMPARE(llmPrunerDefaultLayers(6), std::make_pair(int64_t(1), int64_t(5)));
        QCOMPARE(llmPrunerRemoved(8, 0.25), int64_t(2));
        QCOMPARE(llmPrunerRemoved(8, 0.99), int64_t(7));  // one unit stays
        // Heads: channels first, then whole heads (6 heads of 32 at r 0.42: 192 − 111 = 81 → 2 heads).
        QCOMPARE(llmPrunerRemoved(6, 0.42, 32), int64_t(2));
        QCOMPARE(llmPrunerRemoved(6, 0.5, 32), int64_t(3));
        LlamaModel model(tinyLlama({4, 4, 4, 4, 4, 4, 4, 4, 4}, {4, 4, 4, 4, 4, 4, 4, 4, 4},
                                   {16, 16, 16, 16, 16, 16, 16, 16, 16}, 13),
                         chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(23, 3, 12);
        BaselineOptions o;
        o.ratio = 0;
        const BaselineRun none = runBaseline(BaselineMethod::LlmPruner, model, set, o);
        QCOMPARE(none.report.achievedRatio, 0.0);
        LlamaModel same(none.pruned, chooseRuntime("cpu"));
        QCOMPARE(maxAbsDiff(logitsOf(model, set), logitsOf(same, set)), 0.0);

        o.ratio = 0.3;
        const BaselineRun run = runBaseline(BaselineMethod::LlmPruner, model, set, o);
        QVERIFY(run.report.achievedRatio >= 0.3);
        // Layers 0 and 8 (⌈9/8⌉ = 2 first: 0, 1; ⌈9/16⌉ = 1 last: 8) untouched, the rest alike.
        const LlamaConfig& c = run.pruned.config;
        for (int64_t l : {0, 1, 8}) QCOMPARE(c.intermediate_size[size_t(l)], int64_t(16));
        for (int64_t l = 2; l < 8; ++l) {
            QCOMPARE(c.intermediate_size[size_t(l)], c.intermediate_size[2]);
            QCOMPARE(c.num_heads[size_t(l)], c.num_heads[2]);
        }
        QVERIFY(c.intermediate_size[2] < 16);
        // The smallest per-layer ratio that reaches ρ: a little less misses it.
        o.layerRatio = run.native.at("per_layer_ratio").get<double>() - 1e-3;
        const BaselineRun less = runBaseline(BaselineMethod::LlmPruner, model, set, o);
        QVERIFY(less.report.achievedRatio < 0.3);

        // Global (LLM-Pruner's --global_pruning): the removed units of the range are the least
        // important of all of them, whatever their layer or kind, and ρ is reached.
        BaselineOptions g;
        g.ratio = 0.3;
        g.llmPrunerGlobal = true;
        const BaselineRun global = runBaseline(BaselineMethod::LlmPruner, model, set, g);
        QVERIFY(global.report.achievedRatio >= 0.3);
        QCOMPARE(global.native.at("knob").get<std::string>(), std::string("global_unit_ratio"));
        const LlmPrunerScores scores = llmPrunerScores(model, set, g);
        double highestRemoved = -1, lowestKept = 1e300;
        for (int64_t l = scores.start; l < scores.end; ++l) {
            const auto i = size_t(l);
            const LayerPruneReport& p = global.report.layers[i];
            // Which units went: compare the kept counts with the importance order of that layer.
            std::vector<double> heads = scores.importance.heads[i], channels = scores.importance.channels[i];
            std::sort(heads.begin(), heads.end());
            std::sort(channels.begin(), channels.end());
            const auto goneHeads = size_t(p.kvHeadsBefore - p.kvHeadsAfter), goneChannels = size_t(p.channelsBefore - p.channelsAfter);
            if (goneHeads > 0) highestRemoved = std::max(highestRemoved, heads[goneHeads - 1]);
            if (goneHeads < heads.size()) lowestKept = std::min(lowestKept, heads[goneHeads]);
            if (goneChannels > 0) highestRemoved = std::max(highestRemoved, channels[goneChannels - 1]);
            if (goneChannels < channels.size()) lowestKept = std::min(lowestKept, channels[goneChannels]);
        }
        QVERIFY(highestRemoved >= 0);
        QVERIFY(highestRemoved <= lowestKept);
    }

    void reusedScoresGiveWhatAFreshRunGives() {
        LlamaModel model(tinyLlama({4, 4, 4, 4, 4, 4, 4, 4, 4}, {2, 2, 2, 2, 2, 2, 2, 2, 2},
                                   {16, 16, 16, 16, 16, 16, 16, 16, 16}, 53),
                         chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(59, 3, 12);
        for (BaselineMethod method : {BaselineMethod::BlockInfluence, BaselineMethod::LlmPruner, BaselineMethod::SliceGpt}) {
            BaselinePruner pruner(method, model, set, BaselineOptions{});
            for (double ratio : {0.0, 0.3, 0.1}) {
                BaselineOptions o;
                o.ratio = ratio;
                const BaselineRun fresh = runBaseline(method, model, set, o), reused = pruner.prune(ratio);
                QCOMPARE(reused.report.achievedRatio, fresh.report.achievedRatio);
                const at::Tensor ids = idsTensor(set.windows);
                const at::Tensor a = fresh.sliced ? fresh.sliced->logits(ids) : LlamaModel(fresh.pruned, chooseRuntime("cpu")).logits(ids);
                const at::Tensor b = reused.sliced ? reused.sliced->logits(ids) : LlamaModel(reused.pruned, chooseRuntime("cpu")).logits(ids);
                QVERIFY2(maxAbsDiff(a, b) == 0, baselineMethodName(method));
            }
        }
    }

    void slicegptBasisIsOrthonormalAndSorted() {
        at::manual_seed(3);
        const at::Tensor x = at::randn({50, 8}) * at::linspace(0.1, 3.0, 8);
        at::Tensor values;
        const at::Tensor Q = slicegptBasis({x.view({5, 10, 8})}, &values);
        QVERIFY(maxAbsDiff(at::matmul(Q.t(), Q), at::eye(8, at::kDouble)) < 1e-10);
        for (int64_t i = 1; i < 8; ++i) QVERIFY(values[i].item<double>() <= values[i - 1].item<double>());
        // The leading direction is the one of the largest variance (the last coordinate).
        QVERIFY(std::abs(Q[7][0].item<double>()) > 0.9);
    }

    void slicingNothingIsARotationOnly_data() {
        QTest::addColumn<bool>("gqa");
        QTest::addColumn<bool>("tied");
        QTest::newRow("mha") << false << false;
        QTest::newRow("gqa") << true << false;
        QTest::newRow("gqa tied") << true << true;
    }
    void slicingNothingIsARotationOnly() {
        QFETCH(bool, gqa);
        QFETCH(bool, tied);
        LlamaCheckpoint ckpt = tinyLlama({4, 4, 4}, gqa ? std::vector<int64_t>{2, 1, 2} : std::vector<int64_t>{4, 4, 4},
                                         {16, 24, 16}, 29);
        if (tied) {
            ckpt.weights.lm_head = ckpt.weights.embed;
            ckpt.config.tie_word_embeddings = true;
        }
        LlamaModel model(ckpt, chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(37, 8, 16);
        const SlicedLlama sliced = sliceGpt(model, set, ckpt.config.hidden_size);
        const at::Tensor dense = logitsOf(model, set), rotated = sliced.logits(idsTensor(set.windows));
        const double scale = dense.abs().max().item<double>();
        QVERIFY2(maxAbsDiff(dense, rotated) < 5e-6 * scale,
                 qPrintable(QString("max difference %1 (scale %2)").arg(maxAbsDiff(dense, rotated)).arg(scale)));
        QCOMPARE(sliced.prunableParameters(), slicedPrunableParameters(ckpt.config, ckpt.config.hidden_size));
        QCOMPARE(untyingExtraParameters(ckpt.config, 8), tied ? int64_t(40 * 8) : int64_t(0));
    }

    void slicegptReachesTheRatioAndRoundTrips() {
        LlamaCheckpoint ckpt = tinyLlama({4, 4}, {2, 2}, {64, 64}, 43);
        LlamaModel model(ckpt, chooseRuntime("cpu"));
        const CalibrationSet set = calibrationFor(47, 8, 16);
        BaselineOptions o;
        o.ratio = 0.2;
        o.roundInterval = 2;
        const BaselineRun run = runBaseline(BaselineMethod::SliceGpt, model, set, o);
        QVERIFY(run.sliced);
        QVERIFY(run.report.achievedRatio >= 0.2);
        const int64_t d = run.native.at("width").get<int64_t>();
        QVERIFY(d < 16 && d % 2 == 0);
        QCOMPARE(run.sliced->prunableParameters(), slicedPrunableParameters(ckpt.config, d));
        // One step wider misses ρ: d is the widest that reaches it.
        const double wider = 1.0 - double(slicedPrunableParameters(ckpt.config, d + 2)) / double(prunableParameters(ckpt.config));
        QVERIFY(wider < 0.2);
        // Sliced logits stay close to the dense model's (calibrated directions kept).
        const at::Tensor logits = run.sliced->logits(idsTensor(set.windows));
        QVERIFY(at::isfinite(logits).all().item<bool>());

        QTemporaryDir dir;
        const std::string out = (std::filesystem::path(dir.path().toStdString()) / "sliced").string();
        saveSlicedModel(*run.sliced, out, baselineManifestJson(run, CalibrationSummary::of(set), "tiny"), "");
        QVERIFY(SlicedLlama::isSlicedDirectory(out));
        const SlicedLlama back = SlicedLlama::load(out, chooseRuntime("cpu"));
        QCOMPARE(maxAbsDiff(back.logits(idsTensor(set.windows)), logits), 0.0);
        // The LLaMA loader (and so GGUF export) refuses it by name.
        QVERIFY(errorOf([&] { loadLlamaCheckpoint(out); }).contains("SliceGPT"));
        // A damaged file: the error names the file and the tensor.
        std::vector<std::pair<std::string, at::Tensor>> tensors;
        const auto file = SafeTensorsFile::open(out + "/npw-sliced.safetensors");
        for (const std::string& name : file->names())
            if (name != "layers.1.mlp_shortcut") tensors.emplace_back(name, file->loadFloat(name));
        writeSafeTensors(out + "/npw-sliced.safetensors", tensors);
        const QString e = errorOf([&] { SlicedLlama::load(out, chooseRuntime("cpu")); });
        QVERIFY2(e.contains("npw-sliced.safetensors") && e.contains("layers.1.mlp_shortcut"), qPrintable(e));
    }
};

QTEST_GUILESS_MAIN(TestBaselines)
#include "tst_baselines.moc"
