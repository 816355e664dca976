#include "app/studio/synthetic_model.h"

#include <ATen/ATen.h>
#include <cmath>
#include <numeric>
#include <random>

namespace {

// A⁻¹1 for one layer: log-normal entries (a larger entry = a cheaper channel to remove) times
// the layer's scale; `deadBlocks` blocks of `blockWidth` channels made 3× larger.
npw::NumericalSolve syntheticSolve(std::mt19937& rng, int64_t D, double scale, int64_t blockWidth, int deadBlocks) {
    std::lognormal_distribution<double> entry(0.0, 0.35);
    std::vector<double> a(static_cast<size_t>(D));
    for (double& v : a) v = scale * entry(rng);
    std::uniform_int_distribution<int64_t> block(0, D / blockWidth - 1);
    for (int i = 0; i < deadBlocks; ++i) {
        const int64_t b = block(rng);
        for (int64_t j = 0; j < blockWidth; ++j) a[static_cast<size_t>(b * blockWidth + j)] *= 3;
    }
    npw::NumericalSolve solve;
    solve.D = D;
    solve.Ainv1 = at::tensor(a, at::kDouble);
    solve.c = std::accumulate(a.begin(), a.end(), 0.0);
    return solve;
}

} // namespace

SyntheticModel makeSyntheticModel(uint32_t seed, const SyntheticShape& shape) {
    SyntheticModel model;
    npw::LlamaConfig& c = model.config;
    c.vocab_size = 4096;
    c.head_dim = shape.headDim;
    c.hidden_size = shape.heads * shape.headDim;
    c.num_layers = shape.layers;
    c.num_heads.assign(static_cast<size_t>(shape.layers), shape.heads);
    c.num_kv_heads.assign(static_cast<size_t>(shape.layers), shape.heads);
    c.intermediate_size.assign(static_cast<size_t>(shape.layers), shape.intermediate);
    std::mt19937 rng(seed);
    const double pi = std::acos(-1.0);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        // Sensitive (small A⁻¹1) at both ends, cheap in the middle.
        const double scale = 1e-3 * std::exp(1.4 * std::sin(pi * (double(l) + 0.5) / double(c.num_layers)));
        const int deadHeads = 1 + static_cast<int>(shape.heads / 16) + (l % 3 == 1 ? 1 : 0);
        model.attention.push_back(syntheticSolve(rng, c.hidden_size, scale, c.head_dim, deadHeads));
        model.mlp.push_back(
            syntheticSolve(rng, shape.intermediate, 0.7 * scale, 1, static_cast<int>(shape.intermediate / 17)));
    }
    return model;
}

std::vector<npw::LayerScores> syntheticScores(const SyntheticModel& model, double rho, double lambda) {
    std::vector<npw::LayerScores> scores;
    for (size_t l = 0; l < model.attention.size(); ++l)
        scores.push_back(
            npw::numericalLayerScores(model.attention[l], model.mlp[l], model.config.head_dim, rho, lambda));
    return scores;
}

std::vector<SyntheticSweepPoint> syntheticSweep() {
    struct Method {
        const char* name;
        double growth;  // how fast perplexity rises with sparsity
        double spread;  // relative std over seeds
    };
    const Method methods[] = {{"numerical score (ours)", 2.6, 0.015}, {"FLAP", 3.4, 0.02}, {"Wanda-sp", 5.2, 0.04}};
    std::vector<SyntheticSweepPoint> points;
    for (const Method& m : methods)
        for (double s : {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}) {
            const double mean = kSyntheticDensePerplexity * std::exp(m.growth * std::pow(s, 1.6));
            points.push_back({m.name, s, mean, mean * m.spread * (1 + 8 * s)});
        }
    return points;
}
