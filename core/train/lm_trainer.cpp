#include "core/train/lm_trainer.h"
#include "core/text/json_output.h"
#include "core/train/training_checkpoint.h"
#include "core/io/safetensors.h"
#include "core/models/llama.h"
#include "core/models/llama_init.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace npw {

namespace {

// The options that must not change between a run and its resumption.
std::string runSignature(const LmTrainOptions& o) {
    nlohmann::json j;
    j["vocab"] = o.config.vocab_size;
    j["hidden"] = o.config.hidden_size;
    j["layers"] = o.config.num_layers;
    j["heads"] = o.config.num_heads;
    j["kv_heads"] = o.config.num_kv_heads;
    j["intermediate"] = o.config.intermediate_size;
    j["seqlen"] = o.seqlen;
    j["batch"] = o.batchSize;
    j["steps"] = o.steps;
    j["lr"] = o.learningRate;
    j["seed"] = o.seed;
    return json_fields::dumpJson(j, -1, "the training recipe");
}

double learningRateAt(const LmTrainOptions& o, int64_t step) {
    return warmupCosineRate(o.learningRate, o.minLrRatio, o.warmupSteps, step, o.steps);
}

// The batch of step `step` depends only on (seed, step): a resumed run sees the same data.
at::Tensor batchAt(const std::vector<int32_t>& corpus, const LmTrainOptions& o, int64_t step) {
    std::mt19937_64 rng(o.seed * 1000003ULL + static_cast<uint64_t>(step));
    const int64_t span = o.seqlen + 1;
    std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(corpus.size()) - span);
    at::Tensor batch = at::empty({o.batchSize, span}, at::kLong);
    auto acc = batch.accessor<int64_t, 2>();
    for (int64_t b = 0; b < o.batchSize; ++b) {
        const int64_t start = pick(rng);
        for (int64_t t = 0; t < span; ++t) acc[b][t] = corpus[start + t];
    }
    return batch;
}

} // namespace


LlamaWeights trainLlama(const std::vector<int32_t>& corpus, const LmTrainOptions& o, LmTrainStatus& status,
                        const ProgressFn& progress, const std::function<void(const std::string&)>& log) {
    o.config.validate("training options");
    if (static_cast<int64_t>(corpus.size()) < o.seqlen + 2)
        throw Error("training corpus has " + std::to_string(corpus.size()) + " tokens; at least one window of " +
                    std::to_string(o.seqlen + 1) + " is needed");
    for (int32_t id : corpus)
        if (id < 0 || id >= o.config.vocab_size)
            throw Error("training corpus holds token id " + std::to_string(id) + " outside the vocabulary of " +
                        std::to_string(o.config.vocab_size));

    LlamaWeights w = initLlamaWeights(o.config, o.seed);
    auto named = namedTensors(w);
    ResumableRun run(o.checkpointPath, runSignature(o), named, log);
    int64_t& step = run.state.step;
    double& smoothLoss = run.state.smoothLoss;
    if (o.config.tie_word_embeddings) w.lm_head = w.embed;

    auto saveCheckpoint = [&]() { run.save(); };

    const auto started = std::chrono::steady_clock::now();
    const int64_t firstStep = step;
    while (step < o.steps) {
        at::Tensor batch = batchAt(corpus, o, step);
        at::Tensor inputs = batch.narrow(1, 0, o.seqlen), targets = batch.narrow(1, 1, o.seqlen);
        at::Tensor logits = llamaForward(o.config, w, inputs);
        at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, o.config.vocab_size}), targets.reshape({-1}));
        loss.backward();
        const double lossValue = loss.item<double>();
        if (!std::isfinite(lossValue))
            throw Error("training diverged at step " + std::to_string(step) + " (loss " + std::to_string(lossValue) +
                        "); lower the learning rate");
        smoothLoss = (step == 0) ? lossValue : 0.98 * smoothLoss + 0.02 * lossValue;
        AdamWSettings adamw;
        adamw.beta1 = o.beta1;
        adamw.beta2 = o.beta2;
        adamw.eps = o.adamEps;
        adamw.weightDecay = o.weightDecay;
        adamw.gradClip = o.gradClip;
        adamWStep(named, run.adam, step, learningRateAt(o, step), adamw);
        ++step;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        status.step = step;
        status.loss = smoothLoss;
        status.tokensPerSecond = static_cast<double>((step - firstStep) * o.batchSize * o.seqlen) / std::max(elapsed, 1e-9);
        if (log && (step % 25 == 0 || step == o.steps)) {
            std::ostringstream line;
            line << "step " << step << "/" << o.steps << " loss " << smoothLoss << " lr " << learningRateAt(o, step - 1)
                 << " " << static_cast<int64_t>(status.tokensPerSecond) << " tok/s";
            log(line.str());
        }
        if (endTrainingStep(step, o.steps, o.checkpointEvery, elapsed, o.maxSeconds, saveCheckpoint, progress, "train"))
            break;
    }
    status.finished = finishTraining(step, o.steps, named);
    return w;
}

} // namespace npw
