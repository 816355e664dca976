// Step "score": every method's channel metric per layer, reduced to unit scores (score.h).
#include "core/prune/score.h"
#include "core/models/non_finite.h"
#include "core/prune/score_journal.h"

#include "core/prune/baseline_metrics.h"
#include "core/prune/compensation.h"
#include "core/prune/method_registry.h"
#include "core/util/error.h"
#include "core/util/finite.h"
#include "core/util/number_text.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace npw {

namespace {

// Progress stages: each pass over the layers its own, so that a terminal's ETA is the pass's
// (the relative λ's solves and the L* curves cost a Cholesky per site each; the scores from
// the solves are nearly free).
constexpr const char* kSolveStage = "score: solve";
constexpr const char* kScoreStage = "score";
constexpr const char* kRankingStage = "score: L* ranking";

// A journal's record, read back (score_journal.h): a missing entry is a damaged work folder.
const at::Tensor& recordEntry(const ScoreRecord& record, const std::string& name, ScorePass pass, size_t layer) {
    const auto it = record.find(name);
    if (it == record.end() || !it->second.defined())
        throw Error(std::string("the recorded ") + scorePassName(pass) + " step of layer " + std::to_string(layer) +
                    " lacks '" + name + "'; remove the work folder");
    return it->second;
}

void putSolve(ScoreRecord& record, const std::string& site, const NumericalSolve& solve) {
    if (solve.D == 0) return;
    record[site + ".solve"] = at::tensor(std::vector<double>{solve.c, solve.jitter, solve.outputEnergy}, at::kDouble);
    record[site + ".channels_in"] = at::full({1}, solve.D, at::kLong);
    record[site + ".ainv1"] = solve.Ainv1.cpu();
}

NumericalSolve getSolve(const ScoreRecord& record, const std::string& site, ScorePass pass, size_t layer) {
    NumericalSolve solve;
    if (!record.count(site + ".solve")) return solve;
    const at::Tensor v = recordEntry(record, site + ".solve", pass, layer).to(at::kDouble).contiguous();
    solve.c = v[0].item<double>();
    solve.jitter = v[1].item<double>();
    solve.outputEnergy = v[2].item<double>();
    solve.D = recordEntry(record, site + ".channels_in", pass, layer).reshape({-1})[0].item<int64_t>();
    solve.Ainv1 = recordEntry(record, site + ".ainv1", pass, layer);
    return solve;
}

at::Tensor textTensor(const std::string& text) {
    at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
    std::copy(text.begin(), text.end(), t.data_ptr<uint8_t>());
    return t;
}

std::string tensorText(const at::Tensor& t) {
    const at::Tensor c = t.to(at::kByte).contiguous();
    return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), static_cast<size_t>(c.numel()));
}

std::optional<ScoreRecord> journalLoad(const ScoreJournal& journal, ScorePass pass, size_t layer) {
    return journal.load ? journal.load(pass, layer) : std::nullopt;
}

void journalSave(const ScoreJournal& journal, ScorePass pass, size_t layer, const ScoreRecord& record) {
    if (journal.save) journal.save(pass, layer, record);
}

void requireFiniteWeights(const LlamaCheckpoint& checkpoint) {
    LlamaWeights weights = checkpoint.weights;  // handles only: namedTensors wants a mutable object
    for (const auto& [name, tensor] : namedTensors(weights)) {
        if (!tensor->defined() || tensor->numel() == 0) continue;
        if (!allFinite(*tensor))
            throw Error("model '" + checkpoint.source + "': tensor '" + name +
                        "' has NaN or infinite values; a model with non-finite weights cannot be pruned");
    }
}

// Scores that became NaN or ±∞ (weights too large for the arithmetic) would rank arbitrarily:
// an error naming the layer, the site and the first such unit.
void requireFiniteScores(const at::Tensor& scores, size_t layer, const char* site) {
    if (allFinite(scores)) return;  // also an undefined or empty set
    const at::Tensor flat = scores.to(at::kDouble).flatten();
    const at::Tensor bad = at::logical_not(at::isfinite(flat)).nonzero();
    const int64_t unit = bad[0][0].item<int64_t>();
    requireFinite(flat[unit].item<double>(), "layer " + std::to_string(layer) + "'s score of " + site + " channel " +
                                                 std::to_string(unit), kNonFiniteHint);
}

void requireFiniteRanking(const std::vector<LayerScores>& ranking) {
    for (size_t l = 0; l < ranking.size(); ++l) {
        for (size_t h = 0; h < ranking[l].heads.size(); ++h)
            requireFinite(ranking[l].heads[h], "layer " + std::to_string(l) + "'s score of head " + std::to_string(h),
                          kNonFiniteHint);
        for (size_t c = 0; c < ranking[l].channels.size(); ++c)
            requireFinite(ranking[l].channels[c],
                          "layer " + std::to_string(l) + "'s score of MLP channel " + std::to_string(c), kNonFiniteHint);
    }
}

void checkProtectedLayers(const LlamaConfig& config, const PruneSettings& settings) {
    for (int64_t layer : settings.protectedLayers)
        if (layer >= config.num_layers)
            throw Error("protected layer " + std::to_string(layer) + " is out of range (the model has " +
                        std::to_string(config.num_layers) + " layers)");
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

const LayerStats& statsOf(const LayerStats& site, size_t layer, int64_t channels, const char* what) {
    if (site.channels() != channels || site.tokens <= 0)
        throw Error("no calibration statistics for the input of " + std::string(what) + " in layer " +
                    std::to_string(layer) + " (expected " + std::to_string(channels) + " channels)");
    return site;
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
// `solved`: the layer's solve when a pre-pass already made it (relative λ), else D = 0.
ChannelScore scoreChannels(const PruneSettings& s, const at::Tensor& weight, const LayerStats& stats, bool isAttention,
                           std::mt19937_64& rng, const NumericalSolve& solved) {
    ChannelScore out;
    switch (s.method) {
    case PruneMethod::Numerical: {
        at::Tensor A;
        out.solve = solved.D > 0 ? solved : solveNumericalSite(weight, stats.gram, 1.0 / static_cast<double>(stats.tokens));
        if (s.boxConstrained || s.iters > 0) A = numericalScoreMatrix(weight, stats.gramPerToken());
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
    if (methodInfo(s.method).standardises || s.standardisedGlobal) out.scores = standardised(out.scores);
    return out;
}

// Wanda-sp, magnitude (and random) sum a head's channels in FLAP's code (their rows' unitsSumChannels); the paper and FLAP's
// AL-AM average them. Inside one layer both give the same order.
bool unitsSumChannels(const PruneSettings& s) {
    return !s.standardisedGlobal && methodInfo(s.method).unitsSumChannels;
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

// Mean over rows of ‖row‖² in float64, 1,024 rows at a time (no float64 copy of a whole
// embedding: 1 GiB at 7B).
double meanSquaredRowNorm(const at::Tensor& m) {
    const int64_t rows = m.size(0);
    double total = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += 1024)
        total += m.narrow(0, r0, std::min<int64_t>(1024, rows - r0)).to(at::kDouble).square().sum().item<double>();
    return rows > 0 ? total / static_cast<double>(rows) : 0.0;
}

// One site's units in removal order (lowest channel-score unit first) with their cumulative L*
// (compensatedLossCurve) → the convex-minorant slope of each unit per parameter (higher = keep). unitChannels[u]: the o_proj input channels (or the one MLP channel) of unit u.
// scale: what the site's L* is divided by (1, or the residual stream's energy).
std::vector<double> compensatedErrorScores(const std::vector<double>& unitScores,
                                           const std::vector<std::vector<int64_t>>& unitChannels, int64_t unitParams,
                                           const at::Tensor& weight, const LayerStats& stats, double damp, double scale) {
    const size_t n = unitScores.size();
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return unitScores[a] < unitScores[b]; });
    std::vector<int64_t> channelOrder;
    std::vector<size_t> ends;  // cumulative channel count after each unit
    for (size_t u : order) {
        channelOrder.insert(channelOrder.end(), unitChannels[u].begin(), unitChannels[u].end());
        ends.push_back(channelOrder.size());
    }
    // A singular G with γ = 0 (fewer tokens than channels, a dead channel) cannot be inverted; the
    // ranking then copes as the score does (solveNumericalScore's jitter): the smallest relative
    // dampening from 1e-10 up that factorises. applyMask still refuses γ = 0 there, naming it.
    std::vector<double> curve;
    for (double gamma = damp;; gamma = gamma > 0 ? gamma * 100 : 1e-10) {
        try {
            curve = compensatedLossCurveScaled(weight, stats.gram, 1.0 / static_cast<double>(stats.tokens), channelOrder,
                                               gamma);
            break;
        } catch (const Error&) {
            if (gamma >= 1e-2) throw;
        }
    }
    std::vector<double> increments(n), weights(n, static_cast<double>(std::max<int64_t>(unitParams, 1)));
    double previous = 0;
    for (size_t k = 0; k < n; ++k) {
        const double atK = ends[k] > 0 ? curve[ends[k] - 1] / scale : 0.0;
        increments[k] = atK - previous;
        previous = atK;
    }
    const std::vector<double> slopes = convexMinorantSlopes(increments, weights);
    // Higher = keep: a unit's score is the L* per parameter its removal costs (on the hull).
    // Pooled steps share a slope; they stay in their order (nextafter), so a budget that ends
    // inside a pooled run removes a prefix of it, not the whole run.
    std::vector<double> out(n);
    double last = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < n; ++k) {
        double v = slopes[k];
        if (v <= last) v = std::nextafter(last, std::numeric_limits<double>::infinity());
        last = v;
        out[order[k]] = v;
    }
    return out;
}

// Replaces the ranking by the L* slopes per site, keeping each site's order of its unit scores.
void rankByCompensatedError(ScoreSet& set, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                            const ScoreJournal& journal, const ProgressFn& progress) {
    // lstar-kl starts from lstar-rel's curves (site_damage.h rescales them per site).
    const bool relative = set.settings.crossLayer == CrossLayerRanking::RelativeCompensatedError ||
                          set.settings.crossLayer == CrossLayerRanking::MeasuredDamage;
    set.attentionLossScale.assign(set.ranking.size(), 1.0);
    set.mlpLossScale.assign(set.ranking.size(), 1.0);
    // The residual stream's energy per token where each site adds its output: the embedding's mean
    // squared row norm, then every block's output energy tr(W G Wᵀ) in order (cross terms
    // neglected). Only the relative variant uses it. tr(W G Wᵀ) = Σ (WᵀW ∘ G) = Σ A: the numerical
    // solve summed it while forming A (NumericalSolve::outputEnergy), so no W·G·Wᵀ product here.
    double residual = relative ? meanSquaredRowNorm(embed) : 1.0;
    auto outputEnergy = [](const NumericalSolve& solve, size_t layer, const char* site) {
        if (solve.D == 0)
            throw Error(std::string("no numerical solve of ") + site + " in layer " + std::to_string(layer) +
                        " for its output energy");
        return solve.outputEnergy;
    };
    const auto layers = static_cast<double>(set.ranking.size());
    for (size_t l = 0; l < set.ranking.size(); ++l) {
        reportProgress(progress, kRankingStage, static_cast<double>(l), layers);
        if (set.ranking[l].heads.empty() && set.ranking[l].channels.empty()) continue;
        if (const std::optional<ScoreRecord> r = journalLoad(journal, ScorePass::Ranking, l)) {
            if (!set.ranking[l].heads.empty()) {
                const at::Tensor h = recordEntry(*r, "heads", ScorePass::Ranking, l).to(at::kDouble).contiguous();
                set.ranking[l].heads.assign(h.data_ptr<double>(), h.data_ptr<double>() + h.numel());
            }
            if (!set.ranking[l].channels.empty()) {
                const at::Tensor c = recordEntry(*r, "channels", ScorePass::Ranking, l).to(at::kDouble).contiguous();
                set.ranking[l].channels.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
            }
            const at::Tensor scales = recordEntry(*r, "scales", ScorePass::Ranking, l).to(at::kDouble).contiguous();
            set.attentionLossScale[l] = scales[0].item<double>();
            set.mlpLossScale[l] = scales[1].item<double>();
            residual = scales[2].item<double>();
            continue;
        }
        const ScoredLayer w = layerAt(l, /*withGram=*/true);
        const int64_t layer = static_cast<int64_t>(l);
        const std::string where = " of layer " + std::to_string(l);
        try {
            if (!set.ranking[l].heads.empty()) {
                const AttentionUnits units(set.config, layer, set.settings.attentionUnit);
                std::vector<std::vector<int64_t>> channels(set.ranking[l].heads.size());
                for (size_t u = 0; u < channels.size(); ++u) {
                    std::vector<bool> keep(channels.size(), true);
                    keep[u] = false;
                    const std::vector<bool> queries = units.keptQueryHeads(keep);
                    for (size_t h = 0; h < queries.size(); ++h)
                        if (!queries[h])
                            for (int64_t j = 0; j < set.config.head_dim; ++j)
                                channels[u].push_back(static_cast<int64_t>(h) * set.config.head_dim + j);
                }
                if (relative) residual += outputEnergy(set.attentionSolves.at(l), l, "o_proj");
                set.attentionLossScale[l] = relative ? residual : 1.0;
                set.ranking[l].heads = compensatedErrorScores(set.ranking[l].heads, channels, set.costs[l].headParams, w.wo,
                                                              w.attn, set.settings.damp, relative ? residual : 1.0);
            }
            if (!set.ranking[l].channels.empty()) {
                std::vector<std::vector<int64_t>> channels(set.ranking[l].channels.size());
                for (size_t j = 0; j < channels.size(); ++j) channels[j] = {static_cast<int64_t>(j)};
                if (relative) residual += outputEnergy(set.mlpSolves.at(l), l, "down_proj");
                set.mlpLossScale[l] = relative ? residual : 1.0;
                set.ranking[l].channels = compensatedErrorScores(set.ranking[l].channels, channels,
                                                                 set.costs[l].channelParams, w.wDown, w.mlp,
                                                                 set.settings.damp, relative ? residual : 1.0);
            }
        } catch (const Error& e) {
            throw Error("ranking by the compensated error L*" + where + ": " + e.what());
        }
        ScoreRecord record;
        if (!set.ranking[l].heads.empty()) record["heads"] = at::tensor(set.ranking[l].heads, at::kDouble);
        if (!set.ranking[l].channels.empty()) record["channels"] = at::tensor(set.ranking[l].channels, at::kDouble);
        record["scales"] = at::tensor(std::vector<double>{set.attentionLossScale[l], set.mlpLossScale[l], residual}, at::kDouble);
        journalSave(journal, ScorePass::Ranking, l, record);
    }
    reportProgress(progress, kRankingStage, layers, layers);
}

} // namespace

std::vector<double> convexMinorantSlopes(const std::vector<double>& increments, const std::vector<double>& weights) {
    if (increments.size() != weights.size())
        throw Error("convexMinorantSlopes: " + std::to_string(increments.size()) + " increments but " +
                    std::to_string(weights.size()) + " weights");
    struct Block {
        double cost, weight;
        size_t steps;
    };
    std::vector<Block> blocks;
    for (size_t i = 0; i < increments.size(); ++i) {
        if (!(weights[i] > 0) || !std::isfinite(weights[i]) || !std::isfinite(increments[i]))
            throw Error("convexMinorantSlopes: step " + std::to_string(i) + " has a non-finite cost or a non-positive weight");
        blocks.push_back({increments[i], weights[i], 1});
        // Pool while the last block's slope is below its predecessor's (a violation of convexity).
        while (blocks.size() >= 2) {
            const Block& b = blocks.back();
            const Block& a = blocks[blocks.size() - 2];
            if (b.cost * a.weight >= a.cost * b.weight) break;
            const Block merged{a.cost + b.cost, a.weight + b.weight, a.steps + b.steps};
            blocks.pop_back();
            blocks.back() = merged;
        }
    }
    std::vector<double> out;
    out.reserve(increments.size());
    for (const Block& b : blocks) out.insert(out.end(), b.steps, b.cost / b.weight);
    return out;
}

double medianNumericalC(const std::vector<NumericalSolve>& attention, const std::vector<NumericalSolve>& mlp) {
    std::vector<double> cs;
    for (const auto* solves : {&attention, &mlp})
        for (const NumericalSolve& s : *solves)
            if (s.D > 0) cs.push_back(s.c);
    if (cs.empty()) throw Error("a relative λ needs at least one scored layer (the model has no heads or channels)");
    std::sort(cs.begin(), cs.end());
    const size_t n = cs.size();
    return n % 2 == 1 ? cs[n / 2] : 0.5 * (cs[n / 2 - 1] + cs[n / 2]);
}

bool ScoreSet::channelsAreNumericalW() const {
    return settings.method == PruneMethod::Numerical && !settings.standardisedGlobal && !settings.boxConstrained;
}

bool ScoreSet::rankingIsNumericalW() const {
    return channelsAreNumericalW() && !rankingIsCompensatedError();
}

bool ScoreSet::rankingIsCompensatedError() const {
    return settings.method == PruneMethod::Numerical && settings.crossLayer != CrossLayerRanking::Relaxed;
}

at::Tensor ScoreSet::attentionChannelScoresAt(size_t layer, double rho) const {
    const at::Tensor& s = attentionChannels.at(layer);
    return s.defined() && channelsAreNumericalW() ? 1 + rho * s : s;
}

at::Tensor ScoreSet::mlpChannelScoresAt(size_t layer, double rho) const {
    const at::Tensor& s = mlpChannels.at(layer);
    return s.defined() && channelsAreNumericalW() ? 1 + rho * s : s;
}

LayerScores ScoreSet::unitScoresAt(size_t layer, double rho) const {
    LayerScores out = ranking.at(layer);
    if (rankingIsNumericalW()) {
        for (double& x : out.heads) x = 1 + rho * x;  // the mean of z = 1 + ρ·s is 1 + ρ·mean(s)
        for (double& x : out.channels) x = 1 + rho * x;
    }
    return out;
}

static ScoreSet scoreChecked(const LlamaConfig& config, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                             const PruneSettings& settings, const ProgressFn& progress, const ScoreJournal& journal);

ScoreSet computeScores(const LlamaCheckpoint& checkpoint, const ModelStats& stats, const PruneSettings& settings,
                       const ProgressFn& progress) {
    settings.requireSolveRatio();
    checkpoint.config.validate(checkpoint.source);
    checkProtectedLayers(checkpoint.config, settings);
    requireFiniteWeights(checkpoint);
    const LayerStats none;
    auto site = [&none](const std::vector<LayerStats>& sites, size_t l) -> const LayerStats& {
        return l < sites.size() ? sites[l] : none;
    };
    return scoreChecked(  // checked above: not again
        checkpoint.config, checkpoint.weights.embed,
        [&](size_t l, bool) {
            const LlamaLayerWeights& w = checkpoint.weights.layers.at(l);
            return ScoredLayer{w.wo, w.w_down, site(stats.attn, l), site(stats.mlp, l)};
        },
        settings, progress, ScoreJournal{});
}

const char* scorePassName(ScorePass pass) {
    switch (pass) {
    case ScorePass::Solve: return "solve";
    case ScorePass::Score: return "score";
    case ScorePass::Ranking: return "ranking";
    }
    return "?";
}

ScoreSet computeScoresByLayer(const LlamaConfig& config, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                              const PruneSettings& settings, const ProgressFn& progress) {
    return computeScoresByLayer(config, embed, layerAt, settings, progress, ScoreJournal{});
}

ScoreSet computeScoresByLayer(const LlamaConfig& config, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                              const PruneSettings& settings, const ProgressFn& progress, const ScoreJournal& journal) {
    settings.requireSolveRatio();
    return scoreChecked(config, embed, layerAt, settings, progress, journal);
}

// computeScoresByLayer once its entry point has checked the one joined rule a solve needs (ρ > 0
// where the z is solved at ρ). The rest of the settings were validated at the edge that built them
// (PruneSettings::validate): the CLI, the settings JSON, the studio's Run, a sweep's specification.
static ScoreSet scoreChecked(const LlamaConfig& config, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                             const PruneSettings& settings, const ProgressFn& progress, const ScoreJournal& journal) {
    checkProtectedLayers(config, settings);

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
    const bool needsStats = methodInfo(settings.method).needsStatistics;
    const LayerStats none;
    // A relative λ needs every layer's c before any z: solve first, then score with the λ found.
    std::vector<NumericalSolve> attnSolved(layers), mlpSolved(layers);
    if (settings.method == PruneMethod::Numerical && settings.lambdaIsRelative()) {
        for (size_t l = 0; l < layers; ++l) {
            reportProgress(progress, kSolveStage, static_cast<double>(l), static_cast<double>(layers));
            if (const std::optional<ScoreRecord> r = journalLoad(journal, ScorePass::Solve, l)) {
                attnSolved[l] = getSolve(*r, "attn", ScorePass::Solve, l);
                mlpSolved[l] = getSolve(*r, "mlp", ScorePass::Solve, l);
                continue;
            }
            const ScoredLayer w = layerAt(l, /*withGram=*/true);
            auto solve = [&](const at::Tensor& weight, const LayerStats& site, const char* what) {
                try {
                    const LayerStats& st = statsOf(site, l, weight.size(1), what);
                    return solveNumericalSite(weight, st.gram, 1.0 / static_cast<double>(st.tokens));
                } catch (const Error& e) {
                    throw Error("scoring " + std::string(what) + " of layer " + std::to_string(l) + ": " + e.what());
                }
            };
            if (config.num_heads[l] > 0) attnSolved[l] = solve(w.wo, w.attn, "o_proj");
            if (config.intermediate_size[l] > 0) mlpSolved[l] = solve(w.wDown, w.mlp, "down_proj");
            ScoreRecord record;
            putSolve(record, "attn", attnSolved[l]);
            putSolve(record, "mlp", mlpSolved[l]);
            journalSave(journal, ScorePass::Solve, l, record);
        }
        reportProgress(progress, kSolveStage, static_cast<double>(layers), static_cast<double>(layers));
        set.medianC = medianNumericalC(attnSolved, mlpSolved);
        set.settings.lambda = settings.lambdaRel / set.medianC;
        if (!(set.settings.lambda > 0) || !std::isfinite(set.settings.lambda))
            throw Error("the relative λ = " + shortNumber(settings.lambdaRel) + " / median c = " + shortNumber(set.medianC) +
                        " is not a positive number; give an absolute --lambda");
    } else if (settings.method == PruneMethod::Numerical) {
        set.medianC = std::nan("");  // filled below from the solves
    }
    const PruneSettings& effective = set.settings;  // λ resolved
    // The numerical score reads G here unless the pre-pass solved the layer already (and neither
    // Algorithm 1 nor the box needs A again); the baselines read only the sums.
    const bool needsGram = settings.method == PruneMethod::Numerical &&
                           (!settings.lambdaIsRelative() || settings.boxConstrained || settings.iters > 0);
    for (size_t l = 0; l < layers; ++l) {
        reportProgress(progress, kScoreStage, static_cast<double>(l), static_cast<double>(layers));
        if (const std::optional<ScoreRecord> r = journalLoad(journal, ScorePass::Score, l)) {
            if (r->count("attn.channels")) set.attentionChannels[l] = r->at("attn.channels");
            if (r->count("mlp.channels")) set.mlpChannels[l] = r->at("mlp.channels");
            set.attentionSolves[l] = getSolve(*r, "attn", ScorePass::Score, l);
            set.mlpSolves[l] = getSolve(*r, "mlp", ScorePass::Score, l);
            // The running values as they stood after this layer.
            const at::Tensor v = recordEntry(*r, "running", ScorePass::Score, l).to(at::kDouble).contiguous();
            set.newtonMaxDeviation = v[0].item<double>();
            set.boxKktViolation = v[1].item<double>();
            const at::Tensor n = recordEntry(*r, "box_counts", ScorePass::Score, l).to(at::kLong).contiguous();
            set.boxAtZero = n[0].item<int64_t>();
            set.boxAtOne = n[1].item<int64_t>();
            std::istringstream state(tensorText(recordEntry(*r, "rng", ScorePass::Score, l)));
            state >> rng;
            if (!state) throw Error("the recorded score step of layer " + std::to_string(l) +
                                    " has a damaged generator state; remove the work folder");
            continue;
        }
        const ScoredLayer w = layerAt(l, needsGram);
        auto score = [&](const at::Tensor& weight, const LayerStats& site, bool isAttention,
                         at::Tensor& channelsOut, NumericalSolve& solveOut, const NumericalSolve& solved) {
            const char* what = isAttention ? "o_proj" : "down_proj";
            const LayerStats& s = needsStats ? statsOf(site, l, weight.size(1), what) : none;
            try {
                ChannelScore c = scoreChannels(effective, weight, s, isAttention, rng, solved);
                requireFiniteScores(c.scores, l, what);
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
        if (config.num_heads[l] > 0)
            score(w.wo, w.attn, true, set.attentionChannels[l], set.attentionSolves[l], attnSolved[l]);
        if (config.intermediate_size[l] > 0)
            score(w.wDown, w.mlp, false, set.mlpChannels[l], set.mlpSolves[l], mlpSolved[l]);
        ScoreRecord record;
        if (set.attentionChannels[l].defined()) record["attn.channels"] = set.attentionChannels[l].cpu();
        if (set.mlpChannels[l].defined()) record["mlp.channels"] = set.mlpChannels[l].cpu();
        putSolve(record, "attn", set.attentionSolves[l]);
        putSolve(record, "mlp", set.mlpSolves[l]);
        record["running"] = at::tensor(std::vector<double>{set.newtonMaxDeviation, set.boxKktViolation}, at::kDouble);
        record["box_counts"] = at::tensor(std::vector<int64_t>{set.boxAtZero, set.boxAtOne}, at::kLong);
        std::ostringstream state;
        state << rng;
        record["rng"] = textTensor(state.str());
        journalSave(journal, ScorePass::Score, l, record);
    }
    reportProgress(progress, kScoreStage, static_cast<double>(layers), static_cast<double>(layers));
    if (settings.method == PruneMethod::Numerical && std::isnan(set.medianC))
        set.medianC = medianNumericalC(set.attentionSolves, set.mlpSolves);
    rankUnits(set);
    if (set.rankingIsCompensatedError()) rankByCompensatedError(set, embed, layerAt, journal, progress);
    requireFiniteRanking(set.ranking);
    return set;
}

ScoreSet rescoreNumerical(const ScoreSet& scores, double lambda) {
    if (scores.settings.method != PruneMethod::Numerical)
        throw Error("rescoreNumerical: the scores are " + methodName(scores.settings.method) + ", not numerical");
    if (scores.settings.boxConstrained)
        throw Error("box-constrained numerical scores were solved at λ = " + shortNumber(scores.settings.lambda) +
                    "; another λ needs a new solve (compute the scores again)");
    // The one field this step sets (the rest are the set's, as computed).
    if (!(lambda > 0 && std::isfinite(lambda))) throw Error("λ must be a positive number, got " + shortNumber(lambda));
    ScoreSet out = scores;
    out.settings.lambda = lambda;
    out.settings.iters = 0;  // from the stored solves: the closed form
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
    // The L* ranking follows each layer's z-order, which λ does not change (a positive factor
    // per layer): it stays as computed.
    if (!out.rankingIsCompensatedError()) rankUnits(out);
    requireFiniteRanking(out.ranking);
    return out;
}

} // namespace npw
