// Step "score": every method's channel metric per layer, reduced to unit scores (score.h).
#include "core/prune/score.h"

#include "core/prune/baseline_metrics.h"
#include "core/util/error.h"
#include "core/util/number_text.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <random>

namespace npw {

namespace {

void requireFiniteWeights(const LlamaCheckpoint& checkpoint) {
    LlamaWeights weights = checkpoint.weights;  // handles only: namedTensors wants a mutable object
    for (const auto& [name, tensor] : namedTensors(weights)) {
        if (!tensor->defined() || tensor->numel() == 0) continue;
        if (!at::isfinite(*tensor).all().item<bool>())
            throw Error("model '" + checkpoint.source + "': tensor '" + name +
                        "' has NaN or infinite values; a model with non-finite weights cannot be pruned");
    }
}

// Uniform doubles in [0, 1) from a 64-bit engine: the top 53 bits, the same on every platform.
double uniformDouble(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

at::Tensor randomScores(int64_t n, std::mt19937_64& rng) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = uniformDouble(rng);
    return at::tensor(v, at::kDouble);
}

// standardisePerLayer needs two values; a single channel carries no ranking information.
at::Tensor standardised(const at::Tensor& metric) {
    return metric.numel() >= 2 ? standardisePerLayer(metric) : at::zeros_like(metric.to(at::kDouble));
}

const LayerStats& statsOf(const std::vector<LayerStats>& sites, size_t layer, int64_t channels, const char* what) {
    if (layer >= sites.size() || sites[layer].channels() != channels || sites[layer].tokens <= 0)
        throw Error("no calibration statistics for the input of " + std::string(what) + " in layer " +
                    std::to_string(layer) + " (expected " + std::to_string(channels) + " channels)");
    return sites[layer];
}

// s = (z − 1)/ρ = −λD·A⁻¹1/(1 + λc): z(ρ) = 1 + ρ·s.
at::Tensor numericalSlope(const NumericalSolve& solve, double lambda) {
    return -(lambda * static_cast<double>(solve.D) / (1.0 + lambda * solve.c)) * solve.Ainv1.to(at::kCPU);
}

struct ChannelScore {
    at::Tensor scores;           // float64 CPU [D]
    NumericalSolve solve;        // numerical only
    double newtonDeviation = -1; // Algorithm 1 only
    BoxedNumericalScore boxed;   // box-constrained only (z undefined otherwise)
};

// One scored layer's channel scores by the chosen method. isAttention: o_proj (FLAP squares
// its metric there); weight: torch layout [out, D].
ChannelScore scoreChannels(const PruneSettings& s, const at::Tensor& weight, const LayerStats& stats, bool isAttention,
                           std::mt19937_64& rng) {
    ChannelScore out;
    switch (s.method) {
    case PruneMethod::Numerical: {
        const at::Tensor A = numericalScoreMatrix(weight, stats.gramPerToken());
        out.solve = solveNumericalScore(A);
        out.scores = numericalSlope(out.solve, s.lambda);
        if (s.boxConstrained) {
            // z itself, solved at this ρ and λ: the set ranks z (rankingIsNumericalW is false).
            out.boxed = numericalScoreBoxed(A, s.ratio, s.lambda, out.solve.jitter);
            out.scores = out.boxed.z;
        } else if (s.iters > 0) {
            // Algorithm 1 as written, from z0 (default 1); one Newton step is already exact, so this
            // reproduces the closed form up to rounding (reported), and its z at ρ gives the slope.
            const double d = static_cast<double>(out.solve.D);
            const at::Tensor z = numericalScoreNewton(A, (1 - s.ratio) * d, s.lambda, s.iters,
                                                      at::full({out.solve.D}, s.z0, at::kDouble), /*reuseFactorisation=*/true)
                                     .to(at::kCPU);
            out.newtonDeviation = (z - (1 + s.ratio * out.scores)).abs().max().item<double>();
            out.scores = (z - 1) / s.ratio;
        }
        break;
    }
    case PruneMethod::Flap:
        out.scores = isAttention ? flapAttentionChannelMetric(weight, stats.variance())
                                 : flapChannelMetric(weight, stats.variance());
        break;
    case PruneMethod::WandaSp: out.scores = wandaSpChannelMetric(weight, stats.channelNorm()); break;
    case PruneMethod::Magnitude: out.scores = magnitudeChannelMetric(weight); break;
    case PruneMethod::Random: out.scores = randomScores(weight.size(1), rng); break;
    }
    out.scores = out.scores.to(at::kCPU, at::kDouble).contiguous();
    if (s.method == PruneMethod::Flap || s.standardisedGlobal) out.scores = standardised(out.scores);
    return out;
}

// Wanda-sp, magnitude (and random) sum a head's channels in FLAP's code; the paper and FLAP's
// AL-AM average them. Inside one layer both give the same order.
bool unitsSumChannels(const PruneSettings& s) {
    return !s.standardisedGlobal &&
           (s.method == PruneMethod::WandaSp || s.method == PruneMethod::Magnitude || s.method == PruneMethod::Random);
}

void rankUnits(ScoreSet& set) {
    const bool sum = unitsSumChannels(set.settings);
    set.ranking.assign(set.attentionChannels.size(), LayerScores{});
    for (size_t l = 0; l < set.ranking.size(); ++l) {
        const AttentionUnits units(set.config, static_cast<int64_t>(l), set.settings.attentionUnit);
        if (set.attentionChannels[l].defined()) set.ranking[l].heads = units.reduce(set.attentionChannels[l], sum);
        if (set.mlpChannels[l].defined()) set.ranking[l].channels = toDoubleVector(set.mlpChannels[l]);
    }
}

} // namespace

bool ScoreSet::rankingIsNumericalW() const {
    return settings.method == PruneMethod::Numerical && !settings.standardisedGlobal && !settings.boxConstrained;
}

at::Tensor ScoreSet::attentionChannelScoresAt(size_t layer, double rho) const {
    const at::Tensor& s = attentionChannels.at(layer);
    return s.defined() && rankingIsNumericalW() ? 1 + rho * s : s;
}

at::Tensor ScoreSet::mlpChannelScoresAt(size_t layer, double rho) const {
    const at::Tensor& s = mlpChannels.at(layer);
    return s.defined() && rankingIsNumericalW() ? 1 + rho * s : s;
}

LayerScores ScoreSet::unitScoresAt(size_t layer, double rho) const {
    LayerScores out = ranking.at(layer);
    if (rankingIsNumericalW()) {
        for (double& x : out.heads) x = 1 + rho * x;  // the mean of z = 1 + ρ·s is 1 + ρ·mean(s)
        for (double& x : out.channels) x = 1 + rho * x;
    }
    return out;
}

ScoreSet computeScores(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const PruneSettings& settings,
                       const ProgressFn& progress) {
    settings.validate();
    const LlamaConfig& config = checkpoint.config;
    config.validate(checkpoint.source);
    for (int64_t layer : settings.protectedLayers)
        if (layer >= config.num_layers)
            throw Error("protected layer " + std::to_string(layer) + " is out of range (the model has " +
                        std::to_string(config.num_layers) + " layers)");
    requireFiniteWeights(checkpoint);

    ScoreSet set;
    set.settings = settings;
    set.config = config;
    const auto layers = static_cast<size_t>(config.num_layers);
    set.attentionChannels.resize(layers);
    set.mlpChannels.resize(layers);
    set.attentionSolves.resize(layers);
    set.mlpSolves.resize(layers);
    set.costs = unitCosts(config, settings.attentionUnit);
    std::mt19937_64 rng(settings.seed);
    const bool needsStats = settings.method != PruneMethod::Magnitude && settings.method != PruneMethod::Random;
    const LayerStats none;
    for (size_t l = 0; l < layers; ++l) {
        reportProgress(progress, "score", static_cast<double>(l), static_cast<double>(layers));
        const LlamaLayerWeights& w = checkpoint.weights.layers.at(l);
        auto score = [&](const at::Tensor& weight, const std::vector<LayerStats>& sites, bool isAttention,
                         at::Tensor& channelsOut, NumericalSolve& solveOut) {
            const char* what = isAttention ? "o_proj" : "down_proj";
            const LayerStats& s = needsStats ? statsOf(sites, l, weight.size(1), what) : none;
            try {
                ChannelScore c = scoreChannels(settings, weight, s, isAttention, rng);
                channelsOut = c.scores;
                solveOut = c.solve;
                set.newtonMaxDeviation = std::max(set.newtonMaxDeviation, c.newtonDeviation);
                if (c.boxed.z.defined()) {
                    set.boxKktViolation = std::max(set.boxKktViolation, c.boxed.kktViolation);
                    set.boxAtZero += c.boxed.atZero;
                    set.boxAtOne += c.boxed.atOne;
                }
            } catch (const Error& e) {
                throw Error("scoring " + std::string(what) + " of layer " + std::to_string(l) + ": " + e.what());
            }
        };
        if (config.num_heads[l] > 0) score(w.wo, stats.attn, true, set.attentionChannels[l], set.attentionSolves[l]);
        if (config.intermediate_size[l] > 0) score(w.w_down, stats.mlp, false, set.mlpChannels[l], set.mlpSolves[l]);
    }
    reportProgress(progress, "score", static_cast<double>(layers), static_cast<double>(layers));
    rankUnits(set);
    return set;
}

ScoreSet rescoreNumerical(const ScoreSet& scores, double lambda) {
    if (scores.settings.method != PruneMethod::Numerical)
        throw Error("rescoreNumerical: the scores are " + methodName(scores.settings.method) + ", not numerical");
    if (scores.settings.boxConstrained)
        throw Error("box-constrained numerical scores were solved at λ = " + shortNumber(scores.settings.lambda) +
                    "; another λ needs a new solve (compute the scores again)");
    ScoreSet out = scores;
    out.settings.lambda = lambda;
    out.settings.iters = 0;  // from the stored solves: the closed form
    out.settings.validate();
    out.newtonMaxDeviation = -1;
    auto rescore = [&](const NumericalSolve& solve, at::Tensor& channels) {
        if (solve.D == 0) return;
        channels = numericalSlope(solve, lambda);
        if (out.settings.standardisedGlobal) channels = standardised(channels);
    };
    for (size_t l = 0; l < out.attentionChannels.size(); ++l) {
        rescore(out.attentionSolves[l], out.attentionChannels[l]);
        rescore(out.mlpSolves[l], out.mlpChannels[l]);
    }
    rankUnits(out);
    return out;
}

} // namespace npw
