#pragma once
// Benchmarks of the pruning engine (figures printed by `npw bench --suite pruning` and
// `npw bench --synthetic SIZE`): the numerical-score solvers, re-selection latency, and
// decode speed and memory of LLaMA-shaped models pruned to several ratios.
#include "core/models/llama_config.h"
#include "core/models/runtime.h"
#include "core/util/progress.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

struct SolverTiming {
    int64_t D = 0;
    double newtonResolveSeconds = -1;  // Algorithm 1 as written: T solves of H (D ≤ 4096 only)
    double newtonFactoredSeconds = 0;  // Algorithm 1 with H factorised once
    double closedFormSolveSeconds = 0; // the one Cholesky solve that stores A⁻¹1 and c
    double closedFormZSeconds = 0;     // z for a new ρ/λ from the stored solve
    double maxDeviation = 0;           // max |z_newton − z_closed| (float64)
    int iterations = 0;
};

// Times the solvers on a random positive-definite A = (WᵀW) ∘ G of size D (float64).
SolverTiming benchmarkNumericalSolvers(int64_t D, int iterations, double lambda, double rho, uint64_t seed);

struct ReselectionTiming {
    int64_t layers = 0, headsPerLayer = 0, channelsPerLayer = 0;
    double buildSeconds = 0;          // sorting once (SelectionIndex)
    double medianSelectSeconds = 0;   // one re-selection for a new ρ/α (median of many)
    double maxSelectSeconds = 0;
    double fullSortSeconds = 0;       // what a naive std::sort of all scores costs, for scale
};

// A LLaMA-7B-sized score set by default: 32 layers × (32 heads + 11008 channels).
ReselectionTiming benchmarkReselection(int64_t layers = 32, int64_t heads = 32, int64_t channels = 11008,
                                       int repeats = 50);

// "1b" (~1.1B parameters: 22 layers, hidden 2048, 32 heads × 64, 4 KV heads, MLP 5632, as
// TinyLlama), "110m" (GPT-2-small's shape: 12 layers, hidden 768, 12 heads × 64, MLP 2048) or "tiny" (a few M, for tests). Random weights: speed does not depend on them.
LlamaConfig syntheticLlamaConfig(const std::string& size);

// The config with a fraction ρ of every layer's KV groups and MLP channels removed (by shape,
// as a pruned model would be), at least nothing below 0.
LlamaConfig prunedByShape(const LlamaConfig& config, double rho);

struct SparsitySpeedRow {
    double ratio = 0;
    int64_t parameters = 0;
    double weightsMiB = 0;
    double residentMiB = 0;       // process RSS with this model loaded (CPU), or CUDA allocated
    double decodeTokensPerSecond = 0;
    double prefillTokensPerSecond = 0;
};

std::vector<SparsitySpeedRow> benchmarkSpeedAgainstSparsity(const LlamaConfig& dense, const std::vector<double>& ratios,
                                                            const Runtime& runtime, int64_t promptTokens,
                                                            int64_t decodeTokens, const ProgressFn& progress = nullptr);

double currentResidentMiB();

// One calibration of a random LLaMA (`npw bench --suite calibration-memory`), in RAM or layer by
// layer with the statistics streamed to `statsPath`. Peak memory is the process's resident
// high-water mark (VmHWM), reset before calibrating (/proc/self/clear_refs) so that it is the
// peak *during* calibration; run each mode in a fresh process (the allocator keeps freed
// memory, and the mark counts it).
struct CalibrationMemoryRow {
    bool layerwise = false;
    int64_t parameters = 0, layers = 0, windows = 0, seqlen = 0;
    double weightsMiB = 0;        // float32 weights
    double statsMiB = 0;          // modelStatsBytes: what in-RAM calibration holds
    double hiddenMiB = 0;         // layer-wise: hidden states of all windows
    double residentBeforeMiB = 0; // VmRSS with the model loaded, before calibrating
    double peakMiB = 0;           // VmHWM during calibration (model included)
    double anonAfterMiB = 0;      // RssAnon with the statistics returned (mapped pages are RssFile)
    double fileAfterMiB = 0;      // RssFile then
    double seconds = 0;
    bool peakWasReset = false;    // false: clear_refs refused, peakMiB includes the model's build
};

CalibrationMemoryRow measureCalibrationMemory(const LlamaConfig& config, const Runtime& runtime, int64_t windows,
                                              int64_t seqlen, bool layerwise, const std::string& statsPath,
                                              const ProgressFn& progress = nullptr);

} // namespace npw
