#include "core/train/c2i_trainer.h"
#include "core/text/json_output.h"
#include "core/models/llama_init.h"
#include "core/train/lm_trainer.h"
#include "core/train/training_checkpoint.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace npw {

namespace {

std::string runSignature(const C2iTrainOptions& o, int64_t n) {
    const LlamaConfig& t = o.config.transformer;
    nlohmann::json j = {{"dim", t.hidden_size},        {"layers", t.num_layers},   {"heads", t.num_heads},
                        {"ffn", t.intermediate_size},  {"vocab", t.vocab_size},    {"classes", o.config.num_classes},
                        {"grid", o.config.grid},       {"epochs", o.epochs},       {"batch", o.batchSize},
                        {"lr", o.learningRate},        {"dropout", o.classDropout}, {"seed", o.seed},
                        {"images", n}};
    return json_fields::dumpJson(j, -1, "the training recipe");
}

} // namespace

LlamaGenCheckpoint trainC2i(const at::Tensor& codes, const at::Tensor& labels, const C2iTrainOptions& o,
                            C2iTrainStatus& status, const ProgressFn& progress,
                            const std::function<void(const std::string&)>& log) {
    const LlamaGenConfig& c = o.config;
    c.validate("training options");
    const int64_t n = codes.size(0), T = c.blockSize();
    if (codes.dim() != 2 || codes.size(1) != T || labels.dim() != 1 || labels.size(0) != n)
        throw Error("trainC2i: expected codes [N, " + std::to_string(T) + "] and N labels");
    if (n < o.batchSize) throw Error("trainC2i: " + std::to_string(n) + " images, fewer than one batch");
    if (codes.min().item<int64_t>() < 0 || codes.max().item<int64_t>() >= c.transformer.vocab_size)
        throw Error("trainC2i: a code is outside the codebook of " + std::to_string(c.transformer.vocab_size));
    if (labels.min().item<int64_t>() < 0 || labels.max().item<int64_t>() >= c.num_classes)
        throw Error("trainC2i: a label is outside 0.." + std::to_string(c.num_classes - 1));
    const int64_t stepsPerEpoch = n / o.batchSize;
    const int64_t steps = stepsPerEpoch * o.epochs;
    status.steps = steps;

    LlamaGenCheckpoint model;
    model.config = c;
    model.weights = initLlamaWeights(c.transformer, o.seed);
    model.weights.lm_head.zero_();  // LlamaGen: nn.init.constant_(self.output.weight, 0)
    {
        at::Generator gen = at::detail::createCPUGenerator(o.seed + 1);
        model.classEmbedding = at::normal(0.0, 0.02, {c.num_classes + 1, c.transformer.hidden_size}, gen);
    }
    auto named = namedTensors(model.weights);
    named.emplace_back("cls_embedding", &model.classEmbedding);
    ResumableRun run(o.checkpointPath, runSignature(o, n), named, log);
    int64_t& step = run.state.step;
    auto saveCheckpoint = [&]() { run.save(); };

    AdamWSettings adamw;
    adamw.beta1 = o.beta1;
    adamw.beta2 = o.beta2;
    adamw.weightDecay = o.weightDecay;
    adamw.gradClip = o.gradClip;

    const auto started = std::chrono::steady_clock::now();
    const int64_t firstStep = step;
    EpochBatches batches(o.seed, n, o.batchSize);
    while (step < steps) {
        at::Tensor pick = batches.indices(step);
        at::Tensor x = codes.index_select(0, pick);
        at::Tensor y = labels.index_select(0, pick).clone();
        {  // class dropout: the draws of a step depend only on (seed, step)
            std::mt19937_64 rng(o.seed * 2654435761ULL + static_cast<uint64_t>(step));
            auto acc = y.accessor<int64_t, 1>();
            for (int64_t b = 0; b < o.batchSize; ++b)
                if (static_cast<double>(rng() >> 11) * 0x1.0p-53 < o.classDropout) acc[b] = c.num_classes;
        }
        at::Tensor logits = llamaGenForward(c, model.weights, model.classEmbedding, y, x.narrow(1, 0, T - 1));
        at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, c.transformer.vocab_size}), x.reshape({-1}));
        loss.backward();
        const double lossValue = loss.item<double>();
        if (!std::isfinite(lossValue))
            throw Error("c2i training diverged at step " + std::to_string(step) + "; lower the learning rate");
        run.state.smoothLoss = step == 0 ? lossValue : 0.98 * run.state.smoothLoss + 0.02 * lossValue;
        adamWStep(named, run.adam, step, warmupCosineRate(o.learningRate, o.minLrRatio, o.warmupSteps, step, steps),
                  adamw);
        ++step;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        status.step = step;
        status.loss = run.state.smoothLoss;
        status.tokensPerSecond = double(step - firstStep) * double(o.batchSize) * double(T) / std::max(elapsed, 1e-9);
        if (log && isLogStep(step, steps))
            log(stepLogLine(step, steps, stepsPerEpoch, run.state.smoothLoss) + " " +
                std::to_string(static_cast<int64_t>(status.tokensPerSecond)) + " tok/s");
        if (endTrainingStep(step, steps, o.checkpointEvery, elapsed, o.maxSeconds, saveCheckpoint, progress, "train c2i"))
            break;
    }
    status.finished = finishTraining(step, steps, named);
    return model;
}

} // namespace npw
