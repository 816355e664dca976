#include "core/prune/select.h"

#include "core/models/llama_config.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <iterator>
#include <set>
#include <string>

namespace npw {

namespace {

void requireRho(double rho) {
    if (!(rho >= 0 && rho < 1))
        throw Error("selection: the pruning ratio ρ must lie in [0, 1), got " + std::to_string(rho));
}

void requireAlpha(double alpha) {
    if (!(alpha > 0) || !std::isfinite(alpha))
        throw Error("selection: α must be a positive finite number, got " + std::to_string(alpha));
}

std::set<int64_t> protectedSet(const SelectionOptions& options, size_t layers) {
    std::set<int64_t> out;
    for (int64_t l : options.protectedLayers) {
        if (l < 0 || l >= static_cast<int64_t>(layers))
            throw Error("selection: protected layer " + std::to_string(l) + " is out of range (model has " +
                        std::to_string(layers) + " layers)");
        out.insert(l);
    }
    return out;
}

bool headsAreCandidates(const SelectionOptions& o) { return o.scope != SelectionScope::MlpOnly; }
bool channelsAreCandidates(const SelectionOptions& o) { return o.scope != SelectionScope::AttentionOnly; }

Mask fullMask(const std::vector<int64_t>& headsPerLayer, const std::vector<int64_t>& channelsPerLayer) {
    Mask m;
    m.keepHeads.reserve(headsPerLayer.size());
    m.keepChannels.reserve(channelsPerLayer.size());
    for (int64_t n : headsPerLayer) m.keepHeads.emplace_back(static_cast<size_t>(n), true);
    for (int64_t n : channelsPerLayer) m.keepChannels.emplace_back(static_cast<size_t>(n), true);
    return m;
}

void requireMaskMatchesCosts(const Mask& mask, const std::vector<LayerUnitCost>& costs) {
    if (mask.keepHeads.size() != costs.size() || mask.keepChannels.size() != costs.size())
        throw Error("selection: mask has " + std::to_string(mask.keepHeads.size()) + "/" +
                    std::to_string(mask.keepChannels.size()) + " layers, costs have " + std::to_string(costs.size()));
}

} // namespace

SelectionIndex::SelectionIndex(const std::vector<LayerScores>& scores, std::vector<LayerUnitCost> costs,
                               const SelectionOptions& options)
    : costs_(std::move(costs)) {
    if (costs_.size() != scores.size())
        throw Error("SelectionIndex: " + std::to_string(scores.size()) + " layers of scores but " +
                    std::to_string(costs_.size()) + " layers of costs");
    const std::set<int64_t> locked = protectedSet(options, scores.size());
    for (size_t l = 0; l < scores.size(); ++l) {
        const LayerScores& s = scores[l];
        headsPerLayer_.push_back(static_cast<int64_t>(s.heads.size()));
        channelsPerLayer_.push_back(static_cast<int64_t>(s.channels.size()));
        const bool isProtected = locked.count(static_cast<int64_t>(l)) > 0;
        auto collect = [&](const std::vector<double>& values, int64_t cost, bool candidate, const char* kind,
                           std::vector<Unit>& into) {
            for (size_t i = 0; i < values.size(); ++i)
                if (std::isnan(values[i]))
                    throw Error(std::string("SelectionIndex: ") + kind + " score " + std::to_string(i) + " of layer " +
                                std::to_string(l) + " is NaN");
            if (!candidate || isProtected) return;
            if (!values.empty() && cost <= 0)
                throw Error(std::string("SelectionIndex: layer ") + std::to_string(l) + " has " + kind +
                            " units but a non-positive cost per unit");
            for (size_t i = 0; i < values.size(); ++i)
                into.push_back({values[i], static_cast<int32_t>(l), static_cast<int32_t>(i)});
        };
        collect(s.heads, costs_[l].headParams, headsAreCandidates(options), "head", heads_);
        collect(s.channels, costs_[l].channelParams, channelsAreCandidates(options), "channel", channels_);
    }
    auto ascending = [](const Unit& a, const Unit& b) {
        if (a.score != b.score) return a.score < b.score;
        if (a.layer != b.layer) return a.layer < b.layer;
        return a.index < b.index;
    };
    std::sort(heads_.begin(), heads_.end(), ascending);
    std::sort(channels_.begin(), channels_.end(), ascending);
    auto prefix = [this](const std::vector<Unit>& units, bool isHead) {
        std::vector<int64_t> p(units.size() + 1, 0);
        for (size_t i = 0; i < units.size(); ++i) {
            const LayerUnitCost& c = costs_[units[i].layer];
            p[i + 1] = p[i] + (isHead ? c.headParams : c.channelParams);
        }
        return p;
    };
    headCostPrefix_ = prefix(heads_, true);
    channelCostPrefix_ = prefix(channels_, false);
}

Mask SelectionIndex::keepAll() const { return fullMask(headsPerLayer_, channelsPerLayer_); }

SelectionResult SelectionIndex::removeLowest(int64_t heads, int64_t channels, double threshold) const {
    SelectionResult r;
    r.mask = keepAll();
    for (int64_t i = 0; i < heads; ++i) r.mask.keepHeads[heads_[i].layer][heads_[i].index] = false;
    for (int64_t i = 0; i < channels; ++i) r.mask.keepChannels[channels_[i].layer][channels_[i].index] = false;
    r.removedHeads = heads;
    r.removedChannels = channels;
    r.removedParams = headCostPrefix_[heads] + channelCostPrefix_[channels];
    r.threshold = threshold;
    return r;
}

SelectionResult SelectionIndex::select(double rho, double alpha, AlphaMode mode, double headOffset) const {
    requireRho(rho);
    requireAlpha(alpha);
    if (!std::isfinite(headOffset) || (mode == AlphaMode::Budget && headOffset != 0))
        throw Error("selection: a head offset must be finite and is only defined for the paper reading, got " +
                    std::to_string(headOffset));
    const int64_t nh = candidateHeads(), nc = candidateChannels();
    const auto hBegin = heads_.begin(), hEnd = heads_.end();
    const auto cBegin = channels_.begin(), cEnd = channels_.end();

    if (mode == AlphaMode::Paper) {
        // Ψ = (α·heads + offset) ∪ channels. Multiplying by α > 0 and adding a constant are
        // monotone in floating point too, so the ascending head list stays ascending.
        const double off = headOffset;
        const int64_t n = nh + nc;
        const int64_t k = std::llround(rho * static_cast<double>(n));
        if (n == 0) return removeLowest(0, 0, -std::numeric_limits<double>::infinity());
        if (k >= n) return removeLowest(nh, nc, std::numeric_limits<double>::infinity());
        // #{ψ ∈ Ψ : ψ ≤ v}
        auto countAtMost = [&](double v) {
            const auto h = std::upper_bound(hBegin, hEnd, v, [alpha, off](double x, const Unit& u) { return x < alpha * u.score + off; });
            const auto c = std::upper_bound(cBegin, cEnd, v, [](double x, const Unit& u) { return x < u.score; });
            return static_cast<int64_t>((h - hBegin) + (c - cBegin));
        };
        // η = the smallest ψ with #{≤ ψ} ≥ k + 1. It lies in one of the two lists; in each,
        // the first entry passing that test is a candidate, and the smaller candidate is η.
        double eta = std::numeric_limits<double>::infinity();
        const auto h = std::partition_point(hBegin, hEnd, [&](const Unit& u) { return countAtMost(alpha * u.score + off) < k + 1; });
        if (h != hEnd) eta = std::min(eta, alpha * h->score + off);
        const auto c = std::partition_point(cBegin, cEnd, [&](const Unit& u) { return countAtMost(u.score) < k + 1; });
        if (c != cEnd) eta = std::min(eta, c->score);
        const auto hCut = std::lower_bound(hBegin, hEnd, eta, [alpha, off](const Unit& u, double x) { return alpha * u.score + off < x; });
        const auto cCut = std::lower_bound(cBegin, cEnd, eta, [](const Unit& u, double x) { return u.score < x; });
        return removeLowest(hCut - hBegin, cCut - cBegin, eta);
    }

    // Budget: weight of the units scoring ≥ v is α·#heads + #channels; keep everything above
    // τ = the largest score whose "≥ τ" set already outweighs the budget.
    const double budget = (1.0 - rho) * (alpha * static_cast<double>(nh) + static_cast<double>(nc));
    auto weightAtLeast = [&](double v) {
        const auto h = std::lower_bound(hBegin, hEnd, v, [](const Unit& u, double x) { return u.score < x; });
        const auto c = std::lower_bound(cBegin, cEnd, v, [](const Unit& u, double x) { return u.score < x; });
        return alpha * static_cast<double>(hEnd - h) + static_cast<double>(cEnd - c);
    };
    double tau = -std::numeric_limits<double>::infinity();
    const auto h = std::partition_point(hBegin, hEnd, [&](const Unit& u) { return weightAtLeast(u.score) > budget; });
    if (h != hBegin) tau = std::max(tau, std::prev(h)->score);
    const auto c = std::partition_point(cBegin, cEnd, [&](const Unit& u) { return weightAtLeast(u.score) > budget; });
    if (c != cBegin) tau = std::max(tau, std::prev(c)->score);
    const auto hCut = std::upper_bound(hBegin, hEnd, tau, [](double x, const Unit& u) { return x < u.score; });
    const auto cCut = std::upper_bound(cBegin, cEnd, tau, [](double x, const Unit& u) { return x < u.score; });
    return removeLowest(hCut - hBegin, cCut - cBegin, tau);
}

SelectionResult selectGlobal(const std::vector<LayerScores>& scores, const std::vector<LayerUnitCost>& costs,
                             double rho, double alpha, AlphaMode mode, const SelectionOptions& options) {
    return SelectionIndex(scores, costs, options).select(rho, alpha, mode);
}

Mask selectUniformPerLayer(const std::vector<LayerScores>& scores, double rho, const SelectionOptions& options) {
    requireRho(rho);
    const std::set<int64_t> locked = protectedSet(options, scores.size());
    Mask m;
    auto uniform = [rho](const std::vector<double>& values, bool candidate) {
        for (double v : values)
            if (std::isnan(v)) throw Error("selectUniformPerLayer: a score is NaN");
        std::vector<bool> keep(values.size(), true);
        // FLAP: thresh = sort(metric)[int(ρ·n)]; keep metric ≥ thresh.
        const auto k = static_cast<size_t>(rho * static_cast<double>(values.size()));
        if (!candidate || k == 0) return keep;
        std::vector<double> sorted = values;
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
        const double threshold = sorted[k];
        for (size_t i = 0; i < values.size(); ++i) keep[i] = values[i] >= threshold;
        return keep;
    };
    for (size_t l = 0; l < scores.size(); ++l) {
        const bool open = locked.count(static_cast<int64_t>(l)) == 0;
        m.keepHeads.push_back(uniform(scores[l].heads, open && headsAreCandidates(options)));
        m.keepChannels.push_back(uniform(scores[l].channels, open && channelsAreCandidates(options)));
    }
    return m;
}

int64_t removedParameters(const Mask& mask, const std::vector<LayerUnitCost>& costs) {
    requireMaskMatchesCosts(mask, costs);
    int64_t removed = 0;
    for (size_t l = 0; l < costs.size(); ++l) {
        removed += costs[l].headParams * std::count(mask.keepHeads[l].begin(), mask.keepHeads[l].end(), false);
        removed += costs[l].channelParams * std::count(mask.keepChannels[l].begin(), mask.keepChannels[l].end(), false);
    }
    return removed;
}

double achievedRatio(const Mask& mask, const std::vector<LayerUnitCost>& costs) {
    requireMaskMatchesCosts(mask, costs);
    int64_t total = 0;
    for (size_t l = 0; l < costs.size(); ++l)
        total += costs[l].headParams * static_cast<int64_t>(mask.keepHeads[l].size()) +
                 costs[l].channelParams * static_cast<int64_t>(mask.keepChannels[l].size());
    return total > 0 ? static_cast<double>(removedParameters(mask, costs)) / static_cast<double>(total) : 0.0;
}

double achievedRatioModel(const Mask& mask, const std::vector<LayerUnitCost>& costs, int64_t modelParameters) {
    if (modelParameters <= 0)
        throw Error("achievedRatioModel: model parameter count must be positive, got " + std::to_string(modelParameters));
    return static_cast<double>(removedParameters(mask, costs)) / static_cast<double>(modelParameters);
}

std::vector<bool> expandUnitMask(const std::vector<bool>& keepUnits, int64_t width) {
    if (width <= 0) throw Error("expandUnitMask: width must be positive, got " + std::to_string(width));
    std::vector<bool> out;
    out.reserve(keepUnits.size() * static_cast<size_t>(width));
    for (bool keep : keepUnits) out.insert(out.end(), static_cast<size_t>(width), keep);
    return out;
}

MaskSelector::MaskSelector(const ScoreSet& scores)
    : costs_(scores.costs), numericalW_(scores.rankingIsNumericalW()),
      defaultAlpha_(defaultAlphaFor(scores.config, scores.settings.attentionUnit)) {
    if (scores.settings.method == PruneMethod::Numerical && scores.settings.crossLayer == CrossLayerRanking::MeasuredDamage &&
        !scores.siteDamageApplied)
        throw Error("ranking lstar-kl needs each site's damage measured on the calibration windows "
                    "(rankBySiteDamage), which this path does not do: use lstar-rel here, or npw prune / npw sweep");
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
