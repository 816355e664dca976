#include "core/prune/score_view.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace npw {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

void checkMaskMatches(const std::vector<LayerScores>& scores, const Mask& mask) {
    if (mask.keepHeads.size() != scores.size() || mask.keepChannels.size() != scores.size())
        throw Error("score view: the mask has " + std::to_string(mask.keepHeads.size()) + " head layers and " +
                    std::to_string(mask.keepChannels.size()) + " channel layers; expected " +
                    std::to_string(scores.size()) + " (one per layer of the scores)");
    for (size_t l = 0; l < scores.size(); ++l) {
        if (mask.keepHeads[l].size() != scores[l].heads.size() ||
            mask.keepChannels[l].size() != scores[l].channels.size())
            throw Error("score view: layer " + std::to_string(l) + " of the mask has " +
                        std::to_string(mask.keepHeads[l].size()) + " units and " +
                        std::to_string(mask.keepChannels[l].size()) + " channels; the scores have " +
                        std::to_string(scores[l].heads.size()) + " and " + std::to_string(scores[l].channels.size()) +
                        " (mask and scores come from different models)");
    }
}

double quantileOfSorted(const std::vector<double>& sorted, double p) {
    const double position = p * static_cast<double>(sorted.size() - 1);
    const size_t below = static_cast<size_t>(std::floor(position));
    const size_t above = std::min(below + 1, sorted.size() - 1);
    const double fraction = position - static_cast<double>(below);
    return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

std::vector<double> sortedFinite(std::vector<double> values) {
    values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
                 values.end());
    std::sort(values.begin(), values.end());
    return values;
}

} // namespace

void ValueRange::include(double value) {
    if (!std::isfinite(value)) return;
    if (empty) {
        lo = hi = value;
        empty = false;
        return;
    }
    lo = std::min(lo, value);
    hi = std::max(hi, value);
}

ValueRange valueRange(const std::vector<double>& values) {
    ValueRange range;
    for (double v : values) range.include(v);
    return range;
}

ValueRange nonDegenerate(ValueRange range) {
    if (range.empty) return {0.0, 1.0, false};
    const double center = 0.5 * (range.lo + range.hi);
    const double halfWidth = std::max(std::abs(center) * 1e-6, 1e-12);
    if (range.hi - range.lo < 2 * halfWidth) {
        range.lo = center - halfWidth;
        range.hi = center + halfWidth;
    }
    return range;
}

HistogramBins histogramBins(const std::vector<double>& values, int bins, double lo, double hi,
                            HistogramOutliers outliers) {
    if (bins < 1) throw Error("histogram: " + std::to_string(bins) + " bins; expected at least 1");
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
        throw Error("histogram: range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "]; expected finite lo < hi");
    HistogramBins h;
    h.lo = lo;
    h.width = (hi - lo) / bins;
    h.counts.assign(static_cast<size_t>(bins), 0);
    for (double v : values) {
        if (!std::isfinite(v)) {
            ++h.nonFinite;
        } else if (v < lo) {
            ++h.below;
            if (outliers == HistogramOutliers::InEdgeBins) ++h.counts.front();
        } else if (v > hi) {
            ++h.above;
            if (outliers == HistogramOutliers::InEdgeBins) ++h.counts.back();
        } else {
            // Rounding may put v = hi (or a value a hair below it) one past the end.
            const auto bin = static_cast<size_t>((v - lo) / h.width);
            ++h.counts[std::min(bin, h.counts.size() - 1)];
        }
    }
    return h;
}

int histogramBinCount(size_t n) {
    const int root = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
    return std::clamp(root, 8, 60);
}

KeptPrunedHistogram keptPrunedHistogram(const std::vector<double>& values, const std::vector<bool>& keep, int bins,
                                        double lo, double hi, HistogramOutliers outliers) {
    if (values.size() != keep.size())
        throw Error("histogram: " + std::to_string(values.size()) + " values but " + std::to_string(keep.size()) +
                    " kept flags");
    std::vector<double> kept, pruned;
    for (size_t i = 0; i < values.size(); ++i) (keep[i] ? kept : pruned).push_back(values[i]);
    return {histogramBins(kept, bins, lo, hi, outliers), histogramBins(pruned, bins, lo, hi, outliers)};
}

BoxQuantiles layerQuantiles(std::vector<double> values) {
    const std::vector<double> sorted = sortedFinite(std::move(values));
    BoxQuantiles box{kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, {}, 0};
    if (sorted.empty()) return box;
    box.min = sorted.front();
    box.q1 = quantileOfSorted(sorted, 0.25);
    box.median = quantileOfSorted(sorted, 0.5);
    box.q3 = quantileOfSorted(sorted, 0.75);
    box.max = sorted.back();
    box.count = static_cast<int64_t>(sorted.size());
    const double reach = 1.5 * (box.q3 - box.q1);
    const auto first = std::lower_bound(sorted.begin(), sorted.end(), box.q1 - reach);
    const auto last = std::upper_bound(sorted.begin(), sorted.end(), box.q3 + reach);  // one past
    // Some value lies in [q1, q3] (for n ≥ 3 an order statistic sits between their
    // positions; n ≤ 2 is checked by hand), so both whiskers exist and low ≤ high.
    box.lowWhisker = *first;
    box.highWhisker = *(last - 1);
    box.outliers.assign(sorted.begin(), first);
    box.outliers.insert(box.outliers.end(), last, sorted.end());
    return box;
}

ValueRange robustRange(std::vector<double> values) {
    const std::vector<double> sorted = sortedFinite(std::move(values));
    ValueRange range;
    if (sorted.empty()) return range;
    const double q1 = quantileOfSorted(sorted, 0.25), q3 = quantileOfSorted(sorted, 0.75);
    const double reach = 3.0 * (q3 - q1);
    range.include(std::max(sorted.front(), q1 - reach));
    range.include(std::min(sorted.back(), q3 + reach));
    return range;
}

std::vector<BoxQuantiles> channelQuantilesPerLayer(const std::vector<LayerScores>& scores) {
    std::vector<BoxQuantiles> boxes;
    boxes.reserve(scores.size());
    for (const LayerScores& layer : scores) boxes.push_back(layerQuantiles(layer.channels));
    return boxes;
}

std::vector<LayerKeptCounts> keptPerLayer(const Mask& mask) {
    if (mask.keepHeads.size() != mask.keepChannels.size())
        throw Error("kept per layer: the mask has " + std::to_string(mask.keepHeads.size()) + " head layers but " +
                    std::to_string(mask.keepChannels.size()) + " channel layers");
    std::vector<LayerKeptCounts> counts(mask.keepHeads.size());
    for (size_t l = 0; l < counts.size(); ++l) {
        const auto& heads = mask.keepHeads[l];
        const auto& channels = mask.keepChannels[l];
        counts[l].heads = static_cast<int64_t>(heads.size());
        counts[l].keptHeads = std::count(heads.begin(), heads.end(), true);
        counts[l].channels = static_cast<int64_t>(channels.size());
        counts[l].keptChannels = std::count(channels.begin(), channels.end(), true);
    }
    return counts;
}

ChannelScoresView channelScoresOf(const std::vector<LayerScores>& scores, const Mask& mask, int layer) {
    checkMaskMatches(scores, mask);
    if (layer >= static_cast<int>(scores.size()))
        throw Error("channel scores: layer " + std::to_string(layer) + " out of range; the scores have " +
                    std::to_string(scores.size()) + " layers");
    ChannelScoresView view;
    const size_t first = layer < 0 ? 0 : static_cast<size_t>(layer);
    const size_t last = layer < 0 ? scores.size() : first + 1;
    for (size_t l = first; l < last; ++l) {
        view.scores.insert(view.scores.end(), scores[l].channels.begin(), scores[l].channels.end());
        view.keep.insert(view.keep.end(), mask.keepChannels[l].begin(), mask.keepChannels[l].end());
    }
    return view;
}

HeadGrid headGrid(const std::vector<LayerScores>& scores, const Mask& mask) {
    checkMaskMatches(scores, mask);
    HeadGrid grid;
    grid.layers = static_cast<int64_t>(scores.size());
    for (const LayerScores& layer : scores)
        grid.maxUnits = std::max(grid.maxUnits, static_cast<int64_t>(layer.heads.size()));
    const size_t cells = static_cast<size_t>(grid.layers * grid.maxUnits);
    grid.score.assign(cells, kNaN);
    grid.state.assign(cells, HeadGrid::Cell::Absent);
    for (int64_t l = 0; l < grid.layers; ++l) {
        const auto& heads = scores[static_cast<size_t>(l)].heads;
        for (size_t u = 0; u < heads.size(); ++u) {
            const size_t i = grid.index(l, static_cast<int64_t>(u));
            const bool kept = mask.keepHeads[static_cast<size_t>(l)][u];
            grid.score[i] = heads[u];
            grid.state[i] = kept ? HeadGrid::Cell::Kept : HeadGrid::Cell::Pruned;
            grid.scoreRange.include(heads[u]);
            ++(kept ? grid.keptCells : grid.prunedCells);
        }
    }
    return grid;
}

} // namespace npw
