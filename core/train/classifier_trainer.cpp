#include "core/train/classifier_trainer.h"
#include "core/text/json_output.h"
#include "core/train/training_checkpoint.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

namespace npw {

namespace {

std::string runSignature(const ClassifierTrainOptions& o, int64_t n) {
    nlohmann::json j = {{"config", nlohmann::json::parse(o.config.toJson())},
                        {"epochs", o.epochs},
                        {"batch", o.batchSize},
                        {"lr", o.learningRate},
                        {"weight_decay", o.weightDecay},
                        {"seed", o.seed},
                        {"images", n}};
    return json_fields::dumpJson(j, -1, "the training recipe");
}

double learningRateAt(const ClassifierTrainOptions& o, int64_t step, int64_t steps) {
    return warmupCosineRate(o.learningRate, o.minLrRatio, o.warmupSteps, step, steps);
}

} // namespace

ImageClassifierWeights trainClassifier(const at::Tensor& images, const at::Tensor& labels,
                                       const ClassifierTrainOptions& o, ClassifierTrainStatus& status,
                                       const ProgressFn& progress,
                                       const std::function<void(const std::string&)>& log) {
    const int64_t n = images.size(0);
    if (images.dim() != 4 || labels.dim() != 1 || labels.size(0) != n)
        throw Error("trainClassifier: expected images N×C×H×W and N labels");
    if (n < o.batchSize) throw Error("trainClassifier: " + std::to_string(n) + " images, fewer than one batch");
    const int64_t stepsPerEpoch = n / o.batchSize;
    const int64_t steps = stepsPerEpoch * o.epochs;
    status.steps = steps;

    ImageClassifierWeights w = initClassifierWeights(o.config, o.seed);
    auto named = w.named();
    ResumableRun run(o.checkpointPath, runSignature(o, n), named, log);
    int64_t& step = run.state.step;
    double& smoothLoss = run.state.smoothLoss;
    auto saveCheckpoint = [&]() { run.save(); };

    const auto started = std::chrono::steady_clock::now();
    const int64_t firstStep = step;
    EpochBatches batches(o.seed, n, o.batchSize);
    while (step < steps) {
        at::Tensor pick = batches.indices(step);
        at::Tensor x = images.index_select(0, pick), y = labels.index_select(0, pick);
        at::Tensor logits = classifierForward(o.config, w, x).logits;
        at::Tensor loss = at::cross_entropy_loss(logits, y);
        loss.backward();
        const double lossValue = loss.item<double>();
        if (!std::isfinite(lossValue))
            throw Error("classifier training diverged at step " + std::to_string(step) + "; lower the learning rate");
        smoothLoss = step == 0 ? lossValue : 0.98 * smoothLoss + 0.02 * lossValue;
        AdamWSettings adamw;
        adamw.beta1 = o.beta1;
        adamw.beta2 = o.beta2;
        adamw.eps = o.adamEps;
        adamw.weightDecay = o.weightDecay;
        adamWStep(named, run.adam, step, learningRateAt(o, step, steps), adamw);
        ++step;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        status.step = step;
        status.loss = smoothLoss;
        status.imagesPerSecond = static_cast<double>((step - firstStep) * o.batchSize) / std::max(elapsed, 1e-9);
        if (log && isLogStep(step, steps)) {
            std::ostringstream figures;
            figures << " lr " << learningRateAt(o, step - 1, steps) << " " << static_cast<int64_t>(status.imagesPerSecond)
                    << " img/s";
            log(stepLogLine(step, steps, stepsPerEpoch, smoothLoss) + figures.str());
        }
        if (endTrainingStep(step, steps, o.checkpointEvery, elapsed, o.maxSeconds, saveCheckpoint, progress, "train classifier"))
            break;
    }
    status.finished = finishTraining(step, steps, named);
    return w;
}

} // namespace npw
