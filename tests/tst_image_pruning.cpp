// The pieces of demo:c2i and of pruning image models, against independent references:
//  - image calibration statistics equal XᵀX of the o_proj / down_proj inputs taken from a
//    float64 forward of the same sequences (class token + all but the last image token);
//  - the pruned image model (ImagePruningWorkbench's prune) reloads from its export with the
//    in-memory pruned model's logits;
//  - the VQ and c2i trainers learn (loss falls on data with structure) and resume exactly.
#include "core/eval/image_generate.h"
#include "core/io/safetensors.h"
#include "core/models/llamagen.h"
#include "core/models/vq_model.h"
#include "core/experiments/image_calibration.h"
#include "core/experiments/image_workbench.h"
#include "core/train/c2i_trainer.h"
#include "core/train/vq_trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include "error_of.h"
#include "llamagen_fixture.h"
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <filesystem>

using namespace npw;
using npw::test::normalisedError;

namespace {

LlamaGenCheckpoint fixtureModel() {
    LlamaGenLoadOptions o;
    o.config = npw::test::llamagenFixtureConfig();
    return loadLlamaGenCheckpoint(npw::test::llamagenDataFile("gpt_fsdp.pt"), o);
}

// The fixture's weights in float64 (a reference forward independent of float32 rounding).
LlamaWeights toDouble(const LlamaWeights& w) {
    LlamaWeights d = w;
    auto cast = [](at::Tensor& t) {
        if (t.defined()) t = t.to(at::kDouble);
    };
    cast(d.embed);
    cast(d.final_norm);
    cast(d.lm_head);
    for (auto& L : d.layers)
        for (at::Tensor* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down})
            cast(*t);
    return d;
}

// Images with structure: a bright square at a position that depends on the image.
at::Tensor squares(int64_t n, int64_t size) {
    at::Tensor x = at::zeros({n, 1, size, size});
    for (int64_t i = 0; i < n; ++i) {
        const int64_t r = (i * 3) % (size - 3), c = (i * 5) % (size - 3);
        x[i][0].narrow(0, r, 3).narrow(1, c, 3).fill_(1.0);
    }
    return x;
}

VqConfig tinyVq() {
    VqConfig c;
    c.codebookSize = 16;
    c.embedDim = 4;
    c.zChannels = 8;
    c.inChannels = c.outChannels = 1;
    c.encoderCh = 8;
    c.encoderChannels = {8, 8};
    c.decoderChannels = {8, 8};
    c.encoderResBlocks = 1;
    c.decoderResBlocks = 1;
    c.normGroups = 4;
    return c;
}

} // namespace

class TestImagePruning : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { at::set_num_threads(1); }  // bitwise resume checks need one fixed order

    void calibrationIsGramOfGenerationInputs() {
        const LlamaGenCheckpoint ck = fixtureModel();
        const LlamaGenModel model(ck, Runtime{});
        ImageSamplingOptions sampling;
        sampling.cfgScale = 1.5;
        sampling.seed = 3;
        const ImageCalibrationSet set = generateImageCalibration(model, 2, sampling);
        QCOMPARE(int64_t(set.classes.size()), int64_t(20));
        QCOMPARE(set.tokens.size(1), int64_t(16));
        const ModelStats stats = calibrateImageModel(model, set, nullptr, /*batch=*/7);  // batches of 7, 7, 6

        // Reference: the same inputs through a float64 forward, activations collected by a tap.
        const LlamaGenConfig& c = ck.config;
        std::vector<std::vector<at::Tensor>> attn(2), mlp(2);
        const ActivationTap tap = [&](int64_t layer, TapSite site, const at::Tensor& x) {
            (site == TapSite::AttentionOutputInput ? attn : mlp)[size_t(layer)].push_back(x.reshape({-1, x.size(-1)}));
        };
        llamaGenForward(c, toDouble(ck.weights), ck.classEmbedding.to(at::kDouble), at::tensor(set.classes, at::kLong),
                        set.tokens.narrow(1, 0, 15), nullptr, tap);
        for (size_t l = 0; l < 2; ++l) {
            // A named array, not a braced list of make_pair temporaries (gcc 14: -Wdangling-reference).
            const std::pair<decltype(&stats.attn[l]), std::vector<at::Tensor>*> sites[] = {{&stats.attn[l], &attn[l]},
                                                                                           {&stats.mlp[l], &mlp[l]}};
            for (const auto& [site, rows] : sites) {
                const at::Tensor X = at::cat(*rows, 0);
                QCOMPARE(site->tokens, int64_t(20 * 16));
                const double err = normalisedError(site->gram, X.t().matmul(X));
                // float32 activations against float64: 1e-6 measured; a missing class token or
                // an off-by-one in the tokens fed would change G by far more than 1e-4.
                QVERIFY2(err < 1e-4, qPrintable(QString("layer %1: %2").arg(l).arg(err)));
                QVERIFY(normalisedError(site->sum, X.sum(0)) < 1e-4);
            }
        }
        // Generated with the model's own sampler: the same seeds give the same sequences.
        const ImageCalibrationSet again = generateImageCalibration(model, 2, sampling);
        QVERIFY(at::equal(set.tokens, again.tokens));
        QVERIFY(npw::test::errorOf([&] { generateImageCalibration(model, 0, sampling); }).contains("samples per class"));
    }

    void prunedExportReloadsWithTheSameLogits() {
        const LlamaGenCheckpoint ck = fixtureModel();
        // The one road of image pruning (npw prune IMAGE_MODEL, the studio's Images tab): the
        // workbench calibrates on the model's own samples and prunes. No VQ: nothing is decoded.
        ImagePruningWorkbench bench(ck, nullptr, Runtime{});
        ImageSamplingOptions sampling;
        sampling.seed = 1;
        bench.calibrate(3, sampling);
        const ImageCalibrationSet& set = bench.calibration();
        PruneSettings s;
        s.ratio = 0.3;
        const ImageWorkbenchPrune run = bench.prune(s);
        QVERIFY(run.report.achievedRatio >= 0.3);
        const LlamaGenCheckpoint pruned = ck.withTransformer(run.pruned.checkpoint);
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/pruned";
        saveLlamaGenDirectory(pruned, path);
        const LlamaGenCheckpoint reloaded = loadLlamaGenCheckpoint(path);
        QVERIFY(reloaded.config.transformer.num_heads == pruned.config.transformer.num_heads);
        QVERIFY(reloaded.config.transformer.intermediate_size == pruned.config.transformer.intermediate_size);
        const at::Tensor classes = at::tensor(std::vector<int64_t>{0, 4, 10}, at::kLong);
        const at::Tensor tokens = set.tokens.narrow(0, 0, 3).narrow(1, 0, 15);
        const at::Tensor a = LlamaGenModel(pruned, Runtime{}).logits(classes, tokens);
        const at::Tensor b = LlamaGenModel(reloaded, Runtime{}).logits(classes, tokens);
        QVERIFY(at::equal(a, b));
        // Compensation helps where it is defined: each pruned layer's output error is at most
        // the uncompensated one (Theorem 3 minimises it on these statistics).
        for (const LayerPruneReport& l : run.report.layers) {
            QVERIFY(l.attentionLoss <= l.attentionLossUncompensated * (1 + 1e-9) + 1e-12);
            QVERIFY(l.mlpLoss <= l.mlpLossUncompensated * (1 + 1e-9) + 1e-12);
        }
    }

    void vqTrainerLearnsAndResumesExactly() {
        const at::Tensor images = squares(64, 8);
        VqTrainOptions o;
        o.config = tinyVq();
        o.epochs = 6;  // 48 steps of 8
        o.batchSize = 8;
        o.warmupSteps = 5;
        o.learningRate = 3e-3;
        VqTrainStatus first;
        auto params = trainVq(images, o, first);
        QVERIFY(first.finished);
        auto vq = VqModel::fromTensors(params, "", Runtime{}, o.config.normGroups);
        const double mse = (vq->decode(vq->encode(images)) - images).pow(2).mean().item<double>();
        auto untrained = VqModel::fromTensors(initVqParameters(o.config, o.seed), "", Runtime{}, o.config.normGroups);
        const double mse0 = (untrained->decode(untrained->encode(images)) - images).pow(2).mean().item<double>();
        QVERIFY2(mse < 0.5 * mse0, qPrintable(QString("reconstruction MSE %1 after training, %2 before").arg(mse).arg(mse0)));

        // Stop after 20 steps (time limit 0 is "none", so stop by steps), resume, compare.
        QTemporaryDir dir;
        o.checkpointPath = dir.path().toStdString() + "/vq.safetensors";
        o.checkpointEvery = 1000;
        VqTrainOptions shortRun = o;
        shortRun.maxSeconds = 1e-9;  // stops after its first step, with a checkpoint
        VqTrainStatus s1, s2;
        trainVq(images, shortRun, s1);
        QCOMPARE(s1.step, int64_t(1));
        QVERIFY(!s1.finished);
        auto resumed = trainVq(images, o, s2);
        QVERIFY(s2.finished);
        for (const auto& [name, t] : params) QVERIFY2(at::equal(t, resumed.at(name)), name.c_str());
    }

    void c2iTrainerLearnsAndResumesExactly() {
        // Codes with class structure: class k's images are mostly code k, so a model that reads
        // its class token predicts them well; without it the loss would stay near log(classes).
        LlamaGenSizes sz;
        sz.dim = 16;
        sz.layers = 1;
        sz.heads = 2;
        sz.grid = 2;
        sz.vocab = 8;
        sz.classes = 4;
        sz.ffnHidden = 32;
        C2iTrainOptions o;
        o.config = llamaGenCustomConfig(sz);
        o.epochs = 40;  // 160 steps
        o.batchSize = 8;
        o.warmupSteps = 5;
        o.learningRate = 1e-2;
        o.classDropout = 0.1;
        const int64_t n = 32;
        at::Tensor labels = at::arange(n, at::kLong).remainder(4);
        at::Tensor codes = labels.unsqueeze(1).expand({n, 4}).clone();
        codes.select(1, 3).fill_(7);  // the last token is always 7
        C2iTrainStatus status;
        const LlamaGenCheckpoint trained = trainC2i(codes, labels, o, status);
        QVERIFY(status.finished);
        QVERIFY2(status.loss < 0.5, qPrintable(QString::number(status.loss)));
        const at::Tensor logits = LlamaGenModel(trained, Runtime{}).logits(at::tensor(std::vector<int64_t>{2}, at::kLong), {});
        QCOMPARE(logits.argmax(-1).item<int64_t>(), int64_t(2));  // the first token of class 2 is code 2

        QTemporaryDir dir;
        o.checkpointPath = dir.path().toStdString() + "/c2i.safetensors";
        C2iTrainOptions shortRun = o;
        shortRun.maxSeconds = 1e-9;
        C2iTrainStatus s1, s2;
        trainC2i(codes, labels, shortRun, s1);
        QCOMPARE(s1.step, int64_t(1));
        const LlamaGenCheckpoint resumed = trainC2i(codes, labels, o, s2);
        QVERIFY(at::equal(resumed.classEmbedding, trained.classEmbedding));
        QVERIFY(at::equal(resumed.weights.lm_head, trained.weights.lm_head));
        QVERIFY(at::equal(resumed.weights.layers[0].w_down, trained.weights.layers[0].w_down));
        QVERIFY(npw::test::errorOf([&] { trainC2i(codes + 8, labels, o, s2); }).contains("codebook"));
    }
};

QTEST_GUILESS_MAIN(TestImagePruning)
#include "tst_image_pruning.moc"
