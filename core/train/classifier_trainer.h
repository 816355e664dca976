#pragma once
// Trains the demo feature classifier (core/models/image_classifier.h) with Adam and a cosine
// schedule. Like the LM trainer: deterministic from the seed (at a fixed thread count) and
// resumable — the checkpoint holds weights, Adam moments and the step, and the batch of a
// step depends only on (seed, step), so checkpoint + resume = one uninterrupted run.
#include "core/models/image_classifier.h"
#include "core/util/progress.h"

#include <functional>
#include <string>

namespace npw {

struct ClassifierTrainOptions {
    ImageClassifierConfig config;
    int64_t epochs = 8;
    int64_t batchSize = 128;
    double learningRate = 2e-3;  // peak, after warm-up; cosine decay to minLrRatio of it
    double minLrRatio = 0.02;
    int64_t warmupSteps = 100;
    double weightDecay = 1e-4;   // decoupled (AdamW), weights only
    double beta1 = 0.9, beta2 = 0.999, adamEps = 1e-8;
    uint64_t seed = 1;
    int64_t checkpointEvery = 200;
    double maxSeconds = 0;       // stop after a checkpoint once this much time passed; 0 = no limit
    std::string checkpointPath;  // safetensors; empty = no checkpoints
};

struct ClassifierTrainStatus {
    int64_t step = 0, steps = 0;
    double loss = 0;             // smoothed training cross-entropy
    double imagesPerSecond = 0;
    bool finished = false;
};

// images: N×1×H×W float [0,1]; labels int64 N. Returns the weights reached.
ImageClassifierWeights trainClassifier(const at::Tensor& images, const at::Tensor& labels,
                                       const ClassifierTrainOptions& options, ClassifierTrainStatus& status,
                                       const ProgressFn& progress = nullptr,
                                       const std::function<void(const std::string&)>& log = nullptr);

} // namespace npw
