#include "core/train/vq_trainer.h"
#include "core/text/json_output.h"
#include "core/train/training_checkpoint.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace npw {

namespace {

std::string runSignature(const VqTrainOptions& o, int64_t n) {
    nlohmann::json j = {{"codebook", o.config.codebookSize},   {"embed_dim", o.config.embedDim},
                        {"z", o.config.zChannels},            {"encoder", o.config.encoderChannels},
                        {"decoder", o.config.decoderChannels}, {"res", {o.config.encoderResBlocks, o.config.decoderResBlocks}},
                        {"groups", o.config.normGroups},       {"epochs", o.epochs},
                        {"batch", o.batchSize},               {"lr", o.learningRate},
                        {"seed", o.seed},                     {"images", n}};
    return json_fields::dumpJson(j, -1, "the training recipe");
}

at::Tensor l2Normalise(const at::Tensor& x) { return x / x.norm(2, {1}, true).clamp_min(1e-12); }

} // namespace

std::map<std::string, at::Tensor> initVqParameters(const VqConfig& config, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    std::map<std::string, at::Tensor> params;
    std::map<std::string, int64_t> fanIn;  // conv name → its kernel's fan-in, for the bias
    for (const auto& [name, shape] : vqTensorShapes(config)) {
        at::Tensor t;
        if (name == "quantize.embedding.weight") {
            const double bound = 1.0 / static_cast<double>(shape[0]);
            t = at::empty(shape, at::kFloat).uniform_(-bound, bound, gen);
            if (config.l2Norm) t = l2Normalise(t);
        } else if (name.find("norm") != std::string::npos) {
            t = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? at::ones(shape) : at::zeros(shape);
        } else if (shape.size() == 4) {
            const int64_t fan = shape[1] * shape[2] * shape[3];
            fanIn[name.substr(0, name.size() - 7)] = fan;
            const double bound = 1.0 / std::sqrt(static_cast<double>(fan));
            t = at::empty(shape, at::kFloat).uniform_(-bound, bound, gen);
        } else {  // a conv bias: its kernel comes first in vqTensorShapes
            const std::string conv = name.substr(0, name.size() - 5);
            const double bound = 1.0 / std::sqrt(static_cast<double>(fanIn.at(conv)));
            t = at::empty(shape, at::kFloat).uniform_(-bound, bound, gen);
        }
        params[name] = t.contiguous();
    }
    return params;
}

std::map<std::string, at::Tensor> trainVq(const at::Tensor& images, const VqTrainOptions& o, VqTrainStatus& status,
                                          const ProgressFn& progress,
                                          const std::function<void(const std::string&)>& log) {
    const VqConfig& c = o.config;
    if (images.dim() != 4 || images.size(1) != c.inChannels)
        throw Error("trainVq: expected images N×" + std::to_string(c.inChannels) + "×H×W in [0, 1]");
    const int64_t n = images.size(0);
    if (n < o.batchSize) throw Error("trainVq: " + std::to_string(n) + " images, fewer than one batch");
    const int64_t stepsPerEpoch = n / o.batchSize;
    const int64_t steps = stepsPerEpoch * o.epochs;
    status.steps = steps;

    std::map<std::string, at::Tensor> params = initVqParameters(c, o.seed);
    NamedParameters named;
    for (auto& [name, t] : params) named.emplace_back(name, &t);
    ResumableRun run(o.checkpointPath, runSignature(o, n), named, log);
    int64_t& step = run.state.step;
    auto saveCheckpoint = [&]() { run.save(); };
    const VqParameterFn get = [&params](const std::string& name) { return params.at(name); };

    AdamWSettings adamw;
    adamw.beta1 = o.beta1;
    adamw.beta2 = o.beta2;
    adamw.weightDecay = o.weightDecay;
    adamw.decayMinDim = 4;  // conv kernels; not the codebook (it is L2-normalised where used)
    adamw.gradClip = 1.0;

    const auto started = std::chrono::steady_clock::now();
    const int64_t firstStep = step;
    EpochBatches batches(o.seed, n, o.batchSize);
    std::vector<at::Tensor> recentCodes;  // code ids of the last batches, for the usage figure
    while (step < steps) {
        at::Tensor x = images.index_select(0, batches.indices(step));
        at::Tensor z = vqEncoderForward(c, get, x);  // [B, e, h, w]
        const int64_t B = z.size(0), h = z.size(2), w = z.size(3);
        at::Tensor zf = z.permute({0, 2, 3, 1}).reshape({-1, c.embedDim});
        at::Tensor emb = params.at("quantize.embedding.weight");
        if (c.l2Norm) {
            zf = l2Normalise(zf);
            emb = l2Normalise(emb);
        }
        at::Tensor codes;
        {
            at::NoGradGuard noGrad;
            at::Tensor d = zf.pow(2).sum(1, true) + emb.pow(2).sum(1) - 2.0 * at::matmul(zf, emb.t());
            codes = d.argmin(1);
        }
        at::Tensor zq = emb.index_select(0, codes);
        at::Tensor codebookLoss = (zq - zf.detach()).pow(2).mean();
        at::Tensor commitLoss = (zq.detach() - zf).pow(2).mean();
        at::Tensor straight = zf + (zq - zf).detach();
        at::Tensor latent = straight.reshape({B, h, w, c.embedDim}).permute({0, 3, 1, 2});
        at::Tensor reconstruction = vqDecoderForward(c, get, latent);
        at::Tensor recLoss = (reconstruction - (x * 2.0 - 1.0)).pow(2).mean();
        at::Tensor loss = recLoss + o.codebookWeight * codebookLoss + o.commitBeta * commitLoss;
        loss.backward();
        const double lossValue = loss.item<double>(), recValue = recLoss.item<double>();
        if (!std::isfinite(lossValue))
            throw Error("VQ training diverged at step " + std::to_string(step) + "; lower the learning rate");
        status.loss = step == firstStep ? lossValue : 0.98 * status.loss + 0.02 * lossValue;
        status.reconstruction = step == firstStep ? recValue : 0.98 * status.reconstruction + 0.02 * recValue;
        run.state.smoothLoss = status.loss;
        recentCodes.push_back(codes);
        if (recentCodes.size() > 20) recentCodes.erase(recentCodes.begin());
        adamWStep(named, run.adam, step,
                  warmupCosineRate(o.learningRate, o.minLrRatio, o.warmupSteps, step, steps), adamw);
        ++step;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        status.step = step;
        status.imagesPerSecond = static_cast<double>((step - firstStep) * o.batchSize) / std::max(elapsed, 1e-9);
        if (log && isLogStep(step, steps)) {
            const int64_t used = std::get<0>(at::_unique(at::cat(recentCodes))).numel();
            status.codebookUsage = static_cast<double>(used) / static_cast<double>(c.codebookSize);
            std::ostringstream figures;
            figures << " rec " << status.reconstruction << " codes used " << status.codebookUsage << " "
                    << static_cast<int64_t>(status.imagesPerSecond) << " img/s";
            log(stepLogLine(step, steps, stepsPerEpoch, status.loss) + figures.str());
        }
        if (endTrainingStep(step, steps, o.checkpointEvery, elapsed, o.maxSeconds, saveCheckpoint, progress, "train VQ"))
            break;
    }
    status.finished = finishTraining(step, steps, named);
    return params;
}

} // namespace npw
