#pragma once
// Made-up inputs for the widget gallery: a small LLaMA shape with what the numerical score
// keeps per layer (A⁻¹1 and c), so that core's closed form turns ρ and λ into scores exactly
// as it will for a real model, and a made-up perplexity sweep.
#include "core/models/llama_config.h"
#include "core/prune/numerical_score.h"

#include <cstdint>
#include <string>
#include <vector>

struct SyntheticModel {
    npw::LlamaConfig config;
    std::vector<npw::NumericalSolve> attention;  // per layer, over o_proj's input channels
    std::vector<npw::NumericalSolve> mlp;        // per layer, over down_proj's input channels
};

// The shape of the made-up model (LLaMA-7B: 32 layers, 32 heads of 128, 11008 channels).
struct SyntheticShape {
    int64_t layers = 16;
    int64_t heads = 8;
    int64_t headDim = 32;
    int64_t intermediate = 688;
};

// Middle layers are made less sensitive than the first and last, and a few heads and channels
// nearly dead, as calibration often finds.
SyntheticModel makeSyntheticModel(uint32_t seed, const SyntheticShape& shape = {});

// Every layer's unit scores at ρ and λ (npw::numericalLayerScores).
std::vector<npw::LayerScores> syntheticScores(const SyntheticModel& model, double rho, double lambda);

struct SyntheticSweepPoint {
    std::string method;
    double sparsity;
    double meanPerplexity;
    double stdPerplexity;
};
// Three methods, six ratios, spread as over three seeds; dense perplexity 18.4.
std::vector<SyntheticSweepPoint> syntheticSweep();
constexpr double kSyntheticDensePerplexity = 18.4;
