#pragma once
// Text generation with a KV cache (greedy, temperature, top-p; seeded) and the speed and
// memory benchmark built on it.
#include "core/models/llama.h"
#include "core/util/progress.h"

#include <cstdint>
#include <functional>
#include <random>
#include <map>
#include <string>
#include <vector>

namespace npw {

struct SamplingOptions {
    double temperature = 0.0;  // <= 0: greedy (argmax)
    double topP = 1.0;         // nucleus: smallest set of tokens whose probability reaches topP
    uint64_t seed = 0;
    int64_t maxNewTokens = 64;
    int64_t stopToken = -1;    // generation ends after this id (e.g. EOS); -1 = never
    bool keepPromptLogits = false;  // GenerationResult::promptLogits (`npw generate --logits`)
};

struct GenerationResult {
    std::vector<int32_t> tokens;  // the new tokens only
    int64_t promptTokens = 0;
    double prefillSeconds = 0;    // the prompt's forward pass
    double decodeSeconds = 0;     // all single-token steps
    at::Tensor promptLogits;      // [prompt tokens, vocab] float32 on the CPU, with keepPromptLogits
};

// Picks the next token from one row of logits [vocab] (CPU float32).
int32_t sampleToken(const at::Tensor& logits, const SamplingOptions& options, std::mt19937_64& rng);

// Generates from a non-empty prompt (batch 1): the prompt's prefill into a KV cache, then one
// token at a time. onToken is called with each new id. Any CausalLm: a LLaMA or a sliced model.
GenerationResult generate(const CausalLm& model, const std::vector<int32_t>& prompt,
                          const SamplingOptions& options,
                          const std::function<void(int32_t)>& onToken = nullptr);

struct BenchResult {
    std::string device;
    int64_t promptTokens = 0, decodeTokens = 0, batch = 1;
    double prefillTokensPerSecond = 0;
    double decodeTokensPerSecond = 0;
    // The fastest of the repeats: the least disturbed run, for timings taken while other work
    // (a GUI redrawing) shares the cores.
    double bestPrefillTokensPerSecond = 0, bestDecodeTokensPerSecond = 0;
    // The slowest of the repeats: with the fastest, the spread a reader needs to judge a median.
    double slowestPrefillTokensPerSecond = 0, slowestDecodeTokensPerSecond = 0;
    double peakMemoryMiB = 0;      // process peak RSS on the CPU; CUDA allocator peak on a GPU
    std::string peakMemoryKind;    // which of the two
    double weightsMiB = 0;         // the model's weights as held to run (CausalLm::heldWeightBytes)
    std::map<std::string, double> weightsMiBByDtype;  // the same by dtype ("BFloat16", "Float", ...)
    int64_t parameters = 0;        // CausalLm::parameters (a sliced model's shortcuts included)
    int repeats = 0;
};

// Median (and best) of `repeats` runs of a prefill of promptTokens and a greedy decode of
// decodeTokens (after one warm-up run).
BenchResult benchmarkGeneration(const CausalLm& model, int64_t promptTokens, int64_t decodeTokens, int repeats,
                                const ProgressFn& progress = nullptr);

// Peak resident memory of this process (MiB), from the kernel.
double peakResidentMiB();

} // namespace npw
