#include "core/train/training_checkpoint.h"

#include "core/io/safetensors.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <cmath>

#include <filesystem>
#include <sstream>

namespace npw {

double adamWStep(const NamedParameters& parameters, AdamMoments& moments, int64_t step, double lr,
                 const AdamWSettings& o) {
    at::NoGradGuard noGrad;
    double sq = 0;
    for (const auto& named : parameters)
        if (named.second->grad().defined()) sq += named.second->grad().pow(2).sum().item<double>();
    const double norm = std::sqrt(sq);
    const double clip = o.gradClip > 0 ? std::min(1.0, o.gradClip / (norm + 1e-6)) : 1.0;
    const double bc1 = 1 - std::pow(o.beta1, step + 1), bc2 = 1 - std::pow(o.beta2, step + 1);
    for (size_t i = 0; i < parameters.size(); ++i) {
        at::Tensor& p = *parameters[i].second;
        if (!p.grad().defined()) continue;  // not used by this step's loss
        at::Tensor g = clip < 1.0 ? p.grad() * clip : p.grad();
        moments.m[i].mul_(o.beta1).add_(g, 1 - o.beta1);
        moments.v[i].mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
        if (p.dim() >= o.decayMinDim && o.weightDecay > 0) p.mul_(1 - lr * o.weightDecay);
        at::Tensor denom = (moments.v[i] / bc2).sqrt_().add_(o.eps);
        p.addcdiv_(moments.m[i], denom, -lr / bc1);
        p.mutable_grad().zero_();
    }
    return norm;
}

double warmupCosineRate(double peak, double minRatio, int64_t warmupSteps, int64_t step, int64_t steps) {
    if (step < warmupSteps) return peak * double(step + 1) / double(warmupSteps);
    const double p = std::min(1.0, double(step - warmupSteps) / double(std::max<int64_t>(1, steps - warmupSteps)));
    return peak * (minRatio + (1.0 - minRatio) * 0.5 * (1.0 + std::cos(M_PI * p)));
}

std::vector<int64_t> epochOrder(uint64_t seed, int64_t epoch, int64_t n) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed * 7919ULL + static_cast<uint64_t>(epoch) * 104729ULL + 17);
    for (int64_t i = n - 1; i > 0; --i) {
        const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
        std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
    return order;
}

EpochBatches::EpochBatches(uint64_t seed, int64_t n, int64_t batchSize) : seed_(seed), n_(n), batchSize_(batchSize) {}

at::Tensor EpochBatches::indices(int64_t step) {
    const int64_t epoch = step / stepsPerEpoch();
    if (epoch != epoch_) {
        order_ = at::tensor(epochOrder(seed_, epoch, n_), at::kLong);
        epoch_ = epoch;
    }
    return order_.narrow(0, (step % stepsPerEpoch()) * batchSize_, batchSize_);
}

bool endTrainingStep(int64_t step, int64_t steps, int64_t every, double elapsedSeconds, double maxSeconds,
                     const std::function<void()>& save, const ProgressFn& progress, const std::string& stage) {
    const bool timeUp = maxSeconds > 0 && elapsedSeconds >= maxSeconds;
    if (step % every == 0 || step == steps || timeUp) save();
    reportProgress(progress, stage, static_cast<double>(step), static_cast<double>(steps));
    return timeUp;
}

AdamMoments AdamMoments::zerosLike(const NamedParameters& parameters) {
    AdamMoments moments;
    for (const auto& named : parameters) {
        moments.m.push_back(at::zeros_like(*named.second));
        moments.v.push_back(at::zeros_like(*named.second));
    }
    return moments;
}

bool loadTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            AdamMoments& moments, TrainingProgress& progress) {
    if (path.empty() || !std::filesystem::exists(path)) return false;
    auto checkpoint = SafeTensorsFile::open(path);
    auto meta = checkpoint->metadata();
    if (meta["signature"] != signature)
        throw Error("checkpoint '" + path + "' belongs to another run (" + meta["signature"] +
                    "); delete it or use the same options");
    progress.step = std::stoll(meta["step"]);
    progress.smoothLoss = std::stod(meta["loss"]);
    for (size_t i = 0; i < parameters.size(); ++i) {
        parameters[i].second->copy_(checkpoint->loadFloat("p." + parameters[i].first));
        moments.m[i].copy_(checkpoint->loadFloat("m." + parameters[i].first));
        moments.v[i].copy_(checkpoint->loadFloat("v." + parameters[i].first));
    }
    return true;
}

void saveTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            const AdamMoments& moments, const TrainingProgress& progress) {
    if (path.empty()) return;
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (size_t i = 0; i < parameters.size(); ++i) {
        tensors.emplace_back("p." + parameters[i].first, *parameters[i].second);
        tensors.emplace_back("m." + parameters[i].first, moments.m[i]);
        tensors.emplace_back("v." + parameters[i].first, moments.v[i]);
    }
    std::ostringstream loss;
    loss.precision(17);  // the loss is part of the state: a resumed run must log what an uninterrupted one does
    loss << progress.smoothLoss;
    writeSafeTensors(path, tensors,
                     {{"signature", signature}, {"step", std::to_string(progress.step)}, {"loss", loss.str()}});
}

bool finishTraining(int64_t step, int64_t steps, const NamedParameters& parameters) {
    for (const auto& [name, tensor] : parameters) tensor->set_requires_grad(false);
    return step >= steps;
}

bool isLogStep(int64_t step, int64_t steps) { return step % 50 == 0 || step == steps; }

std::string stepLogLine(int64_t step, int64_t steps, int64_t stepsPerEpoch, double loss) {
    std::ostringstream line;
    line << "step " << step << "/" << steps;
    if (stepsPerEpoch > 0) line << " epoch " << (step - 1) / stepsPerEpoch + 1;
    line << " loss " << loss;
    return line.str();
}

ResumableRun::ResumableRun(std::string path_, std::string signature_, NamedParameters parameters_,
                           const std::function<void(const std::string&)>& log)
    : path(std::move(path_)), signature(std::move(signature_)), parameters(std::move(parameters_)),
      adam(AdamMoments::zerosLike(parameters)) {
    if (loadTrainingCheckpoint(path, signature, parameters, adam, state) && log)
        log("resumed from " + path + " at step " + std::to_string(state.step));
    for (const auto& [name, tensor] : parameters) tensor->set_requires_grad(true);  // after the in-place restore
}

} // namespace npw
