#pragma once
// The trainer of the bundled demo language models: a LLaMA trained from scratch on a token
// stream with AdamW, cosine schedule, gradient clipping. Deterministic from a seed and
// resumable: it checkpoints (weights, optimizer moments, step) and a later call continues
// exactly where the last one stopped, so a background run can be killed at any time.
#include "core/models/llama_weights.h"
#include "core/util/progress.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace npw {

struct LmTrainOptions {
    LlamaConfig config;           // the architecture to train
    int64_t seqlen = 512;         // tokens per training window
    int64_t batchSize = 8;        // windows per step
    int64_t steps = 4000;         // total optimizer steps of the whole run
    int64_t warmupSteps = 100;
    double learningRate = 3e-3;   // peak; cosine decay to minLrRatio of it
    double minLrRatio = 0.1;
    double weightDecay = 0.1;     // on matrices only, not norms
    double beta1 = 0.9, beta2 = 0.95, adamEps = 1e-8;
    double gradClip = 1.0;
    uint64_t seed = 1;
    int64_t checkpointEvery = 200;   // steps between checkpoints
    double maxSeconds = 0;           // stop (after checkpointing) once this much time passed; 0 = no limit
    std::string checkpointPath;      // resumable state (safetensors); empty = no checkpoints
};

struct LmTrainStatus {
    int64_t step = 0;          // steps done in total
    double loss = 0;           // smoothed training loss (nats/token)
    double tokensPerSecond = 0;
    bool finished = false;     // reached options.steps
};

// Trains (or resumes) and returns the weights (float32, CPU). Reports progress after every
// step; `log` receives one line every few steps.
LlamaWeights trainLlama(const std::vector<int32_t>& corpus, const LmTrainOptions& options,
                        LmTrainStatus& status, const ProgressFn& progress = nullptr,
                        const std::function<void(const std::string&)>& log = nullptr);

} // namespace npw
