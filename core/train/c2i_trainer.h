#pragma once
// Trains a small LlamaGen class-conditional GPT (core/models/llamagen.h) on VQ codes, as
// LlamaGen's autoregressive/train/train_c2i.py does: the class embedding at position 0, the
// image tokens after it, next-token cross-entropy over every image token, the label replaced by
// the null class with probability class_dropout (0.1) so that classifier-free guidance has an
// unconditional model to subtract, AdamW (β 0.9/0.95, weight decay 0.05) with gradient clipping
// at 1, the output layer initialised to zero. Deterministic from the seed at a fixed thread
// count and resumable like the other demo trainers.
#include "core/models/llamagen.h"
#include "core/util/progress.h"

#include <ATen/core/Tensor.h>
#include <functional>
#include <string>

namespace npw {

struct C2iTrainOptions {
    LlamaGenConfig config;
    int64_t epochs = 3;
    int64_t batchSize = 64;      // images (sequences of 1 + grid² − 1 inputs) per step
    double learningRate = 2e-3;  // peak after warm-up; cosine decay to minLrRatio of it
    double minLrRatio = 0.05;
    int64_t warmupSteps = 200;
    double weightDecay = 0.05;
    double beta1 = 0.9, beta2 = 0.95;
    double gradClip = 1.0;
    double classDropout = 0.1;   // LlamaGen's class_dropout_prob
    uint64_t seed = 1;
    int64_t checkpointEvery = 100;
    double maxSeconds = 0;       // stop after a checkpoint once this much time passed; 0 = no limit
    std::string checkpointPath;  // safetensors; empty = no checkpoints
};

struct C2iTrainStatus {
    int64_t step = 0, steps = 0;
    double loss = 0;             // smoothed next-token cross-entropy (nats/token)
    double tokensPerSecond = 0;
    bool finished = false;
};

// codes: [N, grid²] int64 image tokens (raster order); labels: [N] int64 in 0..num_classes−1.
// Returns the model reached (CPU float32); its source is empty.
LlamaGenCheckpoint trainC2i(const at::Tensor& codes, const at::Tensor& labels, const C2iTrainOptions& options,
                            C2iTrainStatus& status, const ProgressFn& progress = nullptr,
                            const std::function<void(const std::string&)>& log = nullptr);

} // namespace npw
