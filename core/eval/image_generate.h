#pragma once
// Class-conditional image-token generation with LlamaGen's sampling (autoregressive/models/
// generate.py): classifier-free guidance on a [cond; null] batch, logits = u + (c − u)·scale,
// an optional guidance interval, temperature, top-k, top-p.
//
// Every sample draws from its own generator, std::mt19937_64(seed + sample index), so a sample
// does not depend on which other samples share its batch, and a dense and a pruned model given
// the same seed and class draw the same random numbers (their images differ only as far as
// their logits do).
#include "core/models/llamagen.h"
#include "core/util/progress.h"

#include <cstdint>
#include <random>
#include <vector>

namespace npw {

struct ImageSamplingOptions {
    double cfgScale = 1.0;      // > 1: classifier-free guidance (LlamaGen's condition)
    // LlamaGen's cfg_interval: −1 = guide every token; otherwise tokens after the first
    // cfgInterval + 2 use the conditional logits alone (decode step i > cfgInterval).
    int64_t cfgInterval = -1;
    double temperature = 1.0;   // ≤ 0: greedy
    int64_t topK = 0;           // 0: off
    double topP = 1.0;          // 1: off
    uint64_t seed = 0;
    int64_t batchSize = 16;     // samples per forward pass (memory), results do not depend on it

    void validate() const;  // npw::Error naming the bad value
};

struct ImageTokens {
    at::Tensor tokens;          // [N, grid²] int64, raster order
    std::vector<int64_t> classes;
    double seconds = 0;
    double tokensPerSecond = 0; // image tokens generated per second (all samples)
};

// Picks one token from a row of logits [vocab] as LlamaGen's sample() does: logits /
// max(T, 1e-5), top-k (ties with the k-th kept), top-p (the smallest prefix whose mass
// exceeds p, at least one token), softmax, one draw from rng.
int64_t sampleImageToken(const at::Tensor& logits, const ImageSamplingOptions& options, std::mt19937_64& rng);

// Generates one image per entry of `classes`; sample i uses the generator seeded with
// options.seed + firstIndex + i. Progress: "generate", tokens done / grid².
ImageTokens generateImageTokens(const LlamaGenModel& model, const std::vector<int64_t>& classes,
                                const ImageSamplingOptions& options, int64_t firstIndex = 0,
                                const ProgressFn& progress = nullptr);

} // namespace npw
