#pragma once
// Trains a VQ image tokenizer of LlamaGen's design (core/models/vq_model.h) from scratch: the
// encoder, the L2-normalised codebook and the decoder, with LlamaGen's VQ losses less the two
// that need weights this machine does not have (LPIPS's VGG, the GAN discriminator):
//
//   loss = ‖decode(z_q) − x‖²                 reconstruction (LlamaGen's "l2" rec loss)
//        + ‖sg[ẑ] − ê‖²                       codebook loss (moves the codes)
//        + β‖ẑ − sg[ê]‖²                      commitment loss (β = 0.25)
//
// with ẑ, ê the L2-normalised encoder output and code, and the straight-through estimator
// z_q = ẑ + sg[ê − ẑ] (LlamaGen's VectorQuantizer). Deterministic from the seed at a fixed
// thread count and resumable like the other demo trainers (core/train/training_checkpoint.h).
#include "core/models/vq_model.h"
#include "core/util/progress.h"

#include <ATen/core/Tensor.h>
#include <functional>
#include <map>
#include <string>

namespace npw {

struct VqTrainOptions {
    VqConfig config;
    int64_t epochs = 2;
    int64_t batchSize = 64;
    double learningRate = 1e-3;   // peak after warm-up; cosine decay to minLrRatio of it
    double minLrRatio = 0.05;
    int64_t warmupSteps = 100;
    double weightDecay = 0.05;    // LlamaGen's vq_train default; conv kernels only
    double beta1 = 0.9, beta2 = 0.95;
    double commitBeta = 0.25;
    double codebookWeight = 1.0;
    uint64_t seed = 1;
    int64_t checkpointEvery = 100;
    double maxSeconds = 0;        // stop after a checkpoint once this much time passed; 0 = no limit
    std::string checkpointPath;   // safetensors; empty = no checkpoints
};

struct VqTrainStatus {
    int64_t step = 0, steps = 0;
    double loss = 0;              // smoothed total loss
    double reconstruction = 0;    // smoothed mean squared error in the model's [−1, 1] range
    double codebookUsage = 0;     // fraction of codes used by the last 20 batches
    double imagesPerSecond = 0;
    bool finished = false;
};

// Fresh parameters in LlamaGen's names: PyTorch's default conv init (U(±1/√fan_in) for kernel
// and bias), GroupNorm 1/0, codebook U(±1/K) then L2-normalised (LlamaGen's VectorQuantizer).
std::map<std::string, at::Tensor> initVqParameters(const VqConfig& config, uint64_t seed);

// images: N×C×H×W float in [0, 1]. Returns the parameters reached (CPU float32), ready for
// VqModel::fromTensors.
std::map<std::string, at::Tensor> trainVq(const at::Tensor& images, const VqTrainOptions& options,
                                          VqTrainStatus& status, const ProgressFn& progress = nullptr,
                                          const std::function<void(const std::string&)>& log = nullptr);

} // namespace npw
