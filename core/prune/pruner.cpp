// Settings, attention units, scoring and selection of the pruning engine (pruner.h).
// applyMask and the whole-run driver: prune_apply.cpp; export: prune_export.cpp.
#include "core/prune/pruner.h"

#include "core/prune/baseline_metrics.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace npw {

namespace {

const std::vector<std::pair<PruneMethod, const char*>> kMethodNames = {
    {PruneMethod::Numerical, "numerical"}, {PruneMethod::Flap, "flap"},    {PruneMethod::WandaSp, "wanda-sp"},
    {PruneMethod::Magnitude, "magnitude"}, {PruneMethod::Random, "random"},
};

bool isFiniteNumber(double x) { return std::isfinite(x); }

// Numbers as a user typed them ("1", "-0.1"), not std::to_string's "1.000000".
std::string shortNumber(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

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

std::string scoreSetName(const PruneSettings& settings) {
    return methodName(settings.method) + (settings.boxConstrained ? "-box" : "");
}

std::string methodName(PruneMethod method) {
    for (const auto& [m, name] : kMethodNames)
        if (m == method) return name;
    return "?";
}

PruneMethod parsePruneMethod(const std::string& name) {
    std::string choices;
    for (const auto& [m, n] : kMethodNames) {
        if (name == n) return m;
        choices += (choices.empty() ? "" : ", ") + std::string(n);
    }
    throw Error("unknown pruning method '" + name + "' (choose one of " + choices + ")");
}

std::string compensationName(CompensationKind kind) {
    switch (kind) {
    case CompensationKind::MethodDefault: return "method-default";
    case CompensationKind::Theorem3: return "theorem3";
    case CompensationKind::FlapBias: return "flap-bias";
    case CompensationKind::None: return "none";
    }
    return "?";
}

std::string alphaModeName(AlphaMode mode) { return mode == AlphaMode::Paper ? "paper" : "budget"; }

void PruneSettings::validate() const {
    if (!(ratio >= 0 && ratio < 1))
        throw Error("the pruning ratio ρ must lie in [0, 1), got " + shortNumber(ratio));
    if (!std::isnan(alpha) && !(alpha > 0 && isFiniteNumber(alpha)))
        throw Error("α must be a positive number, got " + shortNumber(alpha));
    if (!(lambda > 0 && isFiniteNumber(lambda)))
        throw Error("λ must be a positive number, got " + shortNumber(lambda));
    if (!(damp >= 0 && isFiniteNumber(damp)))
        throw Error("the dampening γ must be ≥ 0, got " + shortNumber(damp));
    if (iters < 0) throw Error("the Newton iterations T must be ≥ 0, got " + std::to_string(iters));
    if (boxConstrained && method != PruneMethod::Numerical)
        throw Error("the box constraint applies to the numerical score only, not " + methodName(method));
    if (boxConstrained && iters > 0)
        throw Error("the box constraint and Algorithm 1 (iterations T > 0) are alternatives: the box-constrained z comes from its own active-set solve");
    if (boxConstrained && ratio == 0)
        throw Error("the box-constrained score needs ρ > 0: at ρ = 0 every z is 1 and ranks nothing");
    if (iters > 0 && method == PruneMethod::Numerical && ratio == 0)
        throw Error("Algorithm 1 (iterations T > 0) needs ρ > 0: its z at ρ = 0 is all ones and ranks nothing");
    for (int64_t layer : protectedLayers)
        if (layer < 0) throw Error("protected layer " + std::to_string(layer) + " is negative");
}

CompensationKind PruneSettings::effectiveCompensation() const {
    if (compensation != CompensationKind::MethodDefault) return compensation;
    if (method == PruneMethod::Numerical) return CompensationKind::Theorem3;
    if (method == PruneMethod::Flap) return CompensationKind::FlapBias;
    return CompensationKind::None;
}

bool PruneSettings::selectsGlobally() const {
    return method == PruneMethod::Numerical || method == PruneMethod::Flap || standardisedGlobal;
}

AttentionUnits::AttentionUnits(const LlamaConfig& config, int64_t layer, AttentionUnitKind k)
    : kind(k), heads(config.num_heads.at(static_cast<size_t>(layer))),
      kvHeads(config.num_kv_heads.at(static_cast<size_t>(layer))), headDim(config.head_dim) {}

int64_t AttentionUnits::count() const {
    if (heads == 0) return 0;
    if (!isGrouped()) return heads;
    return kind == AttentionUnitKind::KvGroup ? kvHeads : heads / kvHeads;
}

std::vector<bool> AttentionUnits::keptQueryHeads(const std::vector<bool>& keepUnits) const {
    if (static_cast<int64_t>(keepUnits.size()) != count())
        throw Error("attention mask has " + std::to_string(keepUnits.size()) + " units, the layer has " +
                    std::to_string(count()));
    const int64_t g = kvHeads > 0 ? heads / kvHeads : 1;
    std::vector<bool> keep(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) {
        // HF layout: query head h belongs to KV group h / g and is slot h % g of it.
        const int64_t unit = !isGrouped() ? h : kind == AttentionUnitKind::KvGroup ? h / g : h % g;
        keep[static_cast<size_t>(h)] = keepUnits[static_cast<size_t>(unit)];
    }
    return keep;
}

std::vector<bool> AttentionUnits::keptKvHeads(const std::vector<bool>& keepUnits) const {
    if (static_cast<int64_t>(keepUnits.size()) != count())
        throw Error("attention mask has " + std::to_string(keepUnits.size()) + " units, the layer has " +
                    std::to_string(count()));
    if (!isGrouped() || kind == AttentionUnitKind::KvGroup) return keepUnits;  // unit k ↔ KV head k
    // Query slots: every KV head still serves the remaining slots, until none remains.
    const bool any = std::find(keepUnits.begin(), keepUnits.end(), true) != keepUnits.end();
    return std::vector<bool>(static_cast<size_t>(kvHeads), any);
}

std::vector<double> AttentionUnits::reduce(const at::Tensor& channelScores, bool sum) const {
    if (channelScores.dim() != 1 || channelScores.size(0) != heads * headDim)
        throw Error("attention channel scores: expected " + std::to_string(heads * headDim) + " values, got " +
                    std::to_string(channelScores.numel()));
    if (heads == 0) return {};
    const at::Tensor s = channelScores.to(at::kCPU, at::kDouble);
    at::Tensor perUnit;
    if (!isGrouped() || kind == AttentionUnitKind::KvGroup) {
        const at::Tensor blocks = s.reshape({count(), -1});
        perUnit = sum ? blocks.sum(1) : blocks.mean(1);
    } else {
        const at::Tensor slots = s.reshape({kvHeads, heads / kvHeads, headDim});  // [group, slot, dim]
        perUnit = sum ? slots.sum(at::IntArrayRef{0, 2}) : slots.mean(at::IntArrayRef{0, 2});
    }
    return toDoubleVector(perUnit);
}

std::vector<LayerUnitCost> unitCosts(const LlamaConfig& config, AttentionUnitKind kind) {
    std::vector<LayerUnitCost> costs = unitCostsFromConfig(config);
    if (kind == AttentionUnitKind::QuerySlot)
        for (int64_t l = 0; l < config.num_layers; ++l) {
            const AttentionUnits units(config, l, kind);
            if (units.isGrouped()) costs[static_cast<size_t>(l)].headParams = 2 * units.kvHeads * config.head_dim * config.hidden_size;
        }
    return costs;
}

double defaultAlphaFor(const LlamaConfig& config, AttentionUnitKind kind) {
    const std::vector<LayerUnitCost> costs = unitCosts(config, kind);
    double alpha = 0;
    for (int64_t l = 0; l < config.num_layers; ++l) {
        if (AttentionUnits(config, l, kind).count() == 0) continue;
        const LayerUnitCost& c = costs[static_cast<size_t>(l)];
        const double layerAlpha = static_cast<double>(c.headParams) / static_cast<double>(c.channelParams);
        if (alpha != 0 && std::abs(layerAlpha - alpha) > 1e-12 * alpha)
            throw Error("the default α differs between layers (" + std::to_string(alpha) + " vs " +
                        std::to_string(layerAlpha) + " in layer " + std::to_string(l) +
                        ": their attention units have different sizes); give α explicitly");
        alpha = layerAlpha;
    }
    return alpha != 0 ? alpha : 4.0 * static_cast<double>(config.head_dim) / 3.0;
}

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

MaskSelector::MaskSelector(const ScoreSet& scores)
    : costs_(scores.costs), numericalW_(scores.rankingIsNumericalW()),
      defaultAlpha_(defaultAlphaFor(scores.config, scores.settings.attentionUnit)) {
    options_.scope = scores.settings.scope;
    options_.protectedLayers = scores.settings.protectedLayers;
    if (scores.settings.selectsGlobally())
        index_.emplace(scores.ranking, costs_, options_);
    else
        ranking_ = scores.ranking;
}

SelectionResult MaskSelector::select(double rho, double alpha, AlphaMode mode) const {
    if (std::isnan(alpha)) alpha = defaultAlpha_;
    if (!index_) {
        SelectionResult r;
        r.mask = selectUniformPerLayer(ranking_, rho, options_);
        for (size_t l = 0; l < r.mask.keepHeads.size(); ++l) {
            r.removedHeads += std::count(r.mask.keepHeads[l].begin(), r.mask.keepHeads[l].end(), false);
            r.removedChannels += std::count(r.mask.keepChannels[l].begin(), r.mask.keepChannels[l].end(), false);
        }
        r.removedParams = removedParameters(r.mask, costs_);
        r.threshold = std::numeric_limits<double>::quiet_NaN();
        return r;
    }
    if (!numericalW_) return index_->select(rho, alpha, mode);
    // Numerical: the index holds s = (z − 1)/ρ. Budget ranks raw scores, and z = 1 + ρs has the
    // order of s. Paper ranks α·z_unit ∪ z_channel; (ψ − 1)/ρ maps that to (α·s_unit + (α − 1)/ρ)
    // ∪ s_channel, increasing in ψ, so the same entries fall below the threshold.
    const double offset = mode == AlphaMode::Paper && rho > 0 ? (alpha - 1) / rho : 0.0;
    SelectionResult r = index_->select(rho, alpha, mode, offset);
    // Both thresholds back in z units (η of Ψ, τ of raw z): ψ = 1 + ρ·ψ'.
    if (std::isfinite(r.threshold)) r.threshold = 1 + rho * r.threshold;
    return r;
}

SelectionResult selectMask(const ScoreSet& scores, double ratio, double alpha, AlphaMode mode) {
    return MaskSelector(scores).select(ratio, alpha, mode);
}

} // namespace npw

// ---- Setting names and their one parser each (issue 12; declared at the end of pruner.h) ----
namespace npw {

AlphaMode parseAlphaMode(const std::string& name) {
    for (AlphaMode mode : {AlphaMode::Paper, AlphaMode::Budget})
        if (name == alphaModeName(mode)) return mode;
    throw Error("unknown α mode '" + name + "' (expected paper or budget)");
}

CompensationKind parseCompensation(const std::string& name) {
    if (name == "auto" || name == "method-default") return CompensationKind::MethodDefault;
    if (name == "theorem3") return CompensationKind::Theorem3;
    if (name == "flap-bias" || name == "bias") return CompensationKind::FlapBias;
    if (name == "none") return CompensationKind::None;
    throw Error("unknown compensation '" + name + "' (expected auto, theorem3, flap-bias or none)");
}

std::string compensationSettingName(CompensationKind kind) {
    return kind == CompensationKind::MethodDefault ? "auto" : compensationName(kind);
}

std::string attentionUnitName(AttentionUnitKind kind) {
    return kind == AttentionUnitKind::QuerySlot ? "query-slot" : "kv-group";
}

AttentionUnitKind parseAttentionUnit(const std::string& name) {
    for (AttentionUnitKind kind : {AttentionUnitKind::KvGroup, AttentionUnitKind::QuerySlot})
        if (name == attentionUnitName(kind)) return kind;
    throw Error("unknown attention unit '" + name + "' (expected kv-group or query-slot)");
}

} // namespace npw
// ---- end of the setting names block ----------------------------------------------------------
