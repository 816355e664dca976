#pragma once
// The checkpoint of a resumable training run, shared by the demo trainers (language models,
// feature classifier): one safetensors file with every parameter ("p.NAME") and its Adam
// moments ("m.NAME", "v.NAME"), plus the run's signature, step and smoothed loss as metadata.
// Resuming from it continues exactly where the run stopped.
#include "core/util/progress.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace npw {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor*>>;

struct AdamMoments {
    std::vector<at::Tensor> m, v;  // one per parameter, in the order of NamedParameters

    static AdamMoments zerosLike(const NamedParameters& parameters);
};

// One AdamW step over every parameter (decoupled weight decay on tensors of at least
// decayMinDim dimensions: matrices and embeddings by default, never norms or biases), after
// clipping the global gradient norm to gradClip (0: no clipping). Zeroes the gradients. `step`
// counts from 0. Returns the gradient norm before clipping.
struct AdamWSettings {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double weightDecay = 0;
    int64_t decayMinDim = 2;
    double gradClip = 0;
};
double adamWStep(const NamedParameters& parameters, AdamMoments& moments, int64_t step, double learningRate,
                 const AdamWSettings& settings);

// The warm-up + cosine schedule of every demo trainer: linear warm-up over warmupSteps to
// `peak`, then cosine decay to minRatio·peak at `steps`.
double warmupCosineRate(double peak, double minRatio, int64_t warmupSteps, int64_t step, int64_t steps);

// The shuffled order of n examples in one epoch: depends only on (seed, epoch), a Fisher-Yates
// with our own draws, the same on every libstdc++ (so a resumed run sees the same batches).
std::vector<int64_t> epochOrder(uint64_t seed, int64_t epoch, int64_t n);

// The examples of each step's batch: epoch after epoch of n examples in epochOrder, cut into
// batches of batchSize (an epoch's last partial batch is dropped); one order cached at a time.
class EpochBatches {
public:
    EpochBatches(uint64_t seed, int64_t n, int64_t batchSize);
    int64_t stepsPerEpoch() const { return n_ / batchSize_; }
    at::Tensor indices(int64_t step);  // int64 [batchSize]

private:
    uint64_t seed_;
    int64_t n_, batchSize_, epoch_ = -1;
    at::Tensor order_;
};

// The end of a training step, the same in every trainer: after `step` of `steps`, checkpoint
// (save) every `every` steps, at the last step, or once maxSeconds (> 0) have passed; report
// progress as `stage`. Returns true when the time is up and the run must stop.
bool endTrainingStep(int64_t step, int64_t steps, int64_t every, double elapsedSeconds, double maxSeconds,
                     const std::function<void()>& save, const ProgressFn& progress, const std::string& stage);

// The trainers' log line, every 50 steps and at the last: "step S/N epoch E loss L" (epochs
// only where stepsPerEpoch > 0), to which each trainer appends its own figures.
bool isLogStep(int64_t step, int64_t steps);
std::string stepLogLine(int64_t step, int64_t steps, int64_t stepsPerEpoch, double loss);

// After the training loop: the parameters stop requiring gradients (the weights are handed out
// for inference); returns whether the run reached its last step.
bool finishTraining(int64_t step, int64_t steps, const NamedParameters& parameters);

struct TrainingProgress {
    int64_t step = 0;
    double smoothLoss = 0;
};

// When `path` exists: restores the parameters (in place) and the moments and returns the step
// and loss it holds; throws npw::Error when it belongs to another run (another signature).
// Returns false, touching nothing, when there is no checkpoint (or `path` is empty).
bool loadTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            AdamMoments& moments, TrainingProgress& progress);

// Writes the checkpoint atomically (nothing when `path` is empty).
void saveTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            const AdamMoments& moments, const TrainingProgress& progress);

// The resumable part of one training run, as every trainer keeps it: Adam moments and progress,
// restored from `path` when it holds a checkpoint of the same run (said through `log`), written
// back by save(). The parameters require gradients from then on (finishTraining ends that).
struct ResumableRun {
    ResumableRun(std::string path, std::string signature, NamedParameters parameters,
                 const std::function<void(const std::string&)>& log);
    void save() const { saveTrainingCheckpoint(path, signature, parameters, adam, state); }

    std::string path, signature;
    NamedParameters parameters;
    AdamMoments adam;
    TrainingProgress state;
};

} // namespace npw
