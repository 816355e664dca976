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
// TinyLlama) or "tiny" (a few M, for tests). Random weights: speed does not depend on them.
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

} // namespace npw
