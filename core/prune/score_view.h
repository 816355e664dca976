#pragma once
// What the GUI's score views show, computed here so that it is tested and the widgets only
// draw: histogram bins, per-layer quantiles for box plots, kept counts per layer and the
// layers × attention-units grid of the head map. Plain data in, plain data out; no Qt.
//
// Scores are the selection's (core/prune/unit_scores.h: higher = more important); masks are
// SelectionResult::mask (core/prune/select.h: true = kept).
#include "core/prune/select.h"
#include "core/prune/unit_scores.h"

#include <cstdint>
#include <vector>

namespace npw {

// A closed interval [lo, hi] of values.
struct ValueRange {
    double lo = 0;
    double hi = 0;
    bool empty = true;  // true when no finite value was seen; lo and hi are then meaningless

    void include(double value);  // widens the range to cover a finite value; ignores NaN/±∞
};

// The finite values' range (empty when there are none).
ValueRange valueRange(const std::vector<double>& values);
// A range a histogram or an axis can use: `range` with lo < hi. A single value v (or a range
// too narrow to tell from rounding) is widened to v ± max(|v|·1e-6, 1e-12) so it still gets
// one visible bin; an empty range becomes [0, 1].
ValueRange nonDegenerate(ValueRange range);

struct HistogramBins {
    double lo = 0;                // left edge of bin 0
    double width = 0;             // width of every bin; bin i covers [lo + i·width, lo + (i+1)·width)
    std::vector<int64_t> counts;  // values per bin; the last bin also holds values equal to hi
    int64_t below = 0;            // values < lo (not in any bin)
    int64_t above = 0;            // values > hi (not in any bin)
    int64_t nonFinite = 0;        // NaN or ±∞ values (not in any bin)

    double center(size_t bin) const { return lo + (static_cast<double>(bin) + 0.5) * width; }
    double hi() const { return lo + static_cast<double>(counts.size()) * width; }
};

// Where values outside [lo, hi] go.
enum class HistogramOutliers {
    Separate,    // counted only in `below` / `above`
    InEdgeBins,  // also counted in the first / last bin (an overflow bin), so every finite
                 // value is in some bin; `below` / `above` still say how many are outliers
};

// Equal-width bins over [lo, hi]. npw::Error unless bins ≥ 1 and lo < hi (both finite).
HistogramBins histogramBins(const std::vector<double>& values, int bins, double lo, double hi,
                            HistogramOutliers outliers = HistogramOutliers::Separate);

// The range of the values without far outliers, for an axis that shows the bulk: [min, max]
// clipped to Tukey's outer fences q1 − 3·IQR and q3 + 3·IQR. Pruning scores are heavy-tailed
// (a few near-dead channels score far below the rest); a plain min–max axis squeezes the
// other 99% into a bin or two. Equals [min, max] when nothing lies beyond the fences.
ValueRange robustRange(std::vector<double> values);

// A bin count for n values: ⌈√n⌉ clamped to [8, 60] (enough to show a shape, few enough that
// each bin holds a handful of values and remains a visible bar).
int histogramBinCount(size_t n);

// Two histograms over the same bins: the values kept (keep[i]) and the values pruned.
// npw::Error when values and keep differ in length.
struct KeptPrunedHistogram {
    HistogramBins kept;
    HistogramBins pruned;
};
KeptPrunedHistogram keptPrunedHistogram(const std::vector<double>& values, const std::vector<bool>& keep, int bins,
                                        double lo, double hi, HistogramOutliers outliers = HistogramOutliers::Separate);

// Five-number summary for a box plot, with Tukey's whiskers. Quartiles by linear
// interpolation between order statistics (position p·(n−1), as numpy's default and R's type
// 7). Non-finite values are ignored; count = the finite values used. All numbers are NaN
// when count = 0.
struct BoxQuantiles {
    double min, q1, median, q3, max;
    double lowWhisker, highWhisker;  // the most extreme values within q1 − 1.5·IQR, q3 + 1.5·IQR
    std::vector<double> outliers;    // the values beyond the whiskers, ascending
    int64_t count = 0;
};
BoxQuantiles layerQuantiles(std::vector<double> values);
// layerQuantiles of every layer's MLP channel scores.
std::vector<BoxQuantiles> channelQuantilesPerLayer(const std::vector<LayerScores>& scores);

// Units kept in one layer, of how many.
struct LayerKeptCounts {
    int64_t keptHeads = 0;     // attention units (heads, or KV groups for GQA) kept
    int64_t heads = 0;         // attention units in the layer
    int64_t keptChannels = 0;  // MLP channels kept
    int64_t channels = 0;      // MLP channels in the layer
};
// One entry per layer of the mask. npw::Error when keepHeads and keepChannels disagree on the
// number of layers.
std::vector<LayerKeptCounts> keptPerLayer(const Mask& mask);

// One layer's MLP channel scores with their kept flags; layer < 0 means all layers, in order.
// npw::Error when the layer is out of range or the mask's shape does not match the scores.
struct ChannelScoresView {
    std::vector<double> scores;
    std::vector<bool> keep;
};
ChannelScoresView channelScoresOf(const std::vector<LayerScores>& scores, const Mask& mask, int layer);

// The head map: layers × attention units. Layers may have different numbers of units
// (pruned checkpoints); cells beyond a layer's count are absent.
struct HeadGrid {
    enum class Cell : uint8_t { Absent, Kept, Pruned };
    int64_t layers = 0;
    int64_t maxUnits = 0;       // the widest layer's unit count
    std::vector<double> score;  // [layer·maxUnits + unit]; NaN where absent
    std::vector<Cell> state;    // [layer·maxUnits + unit]
    ValueRange scoreRange;      // of the present cells' finite scores
    int64_t prunedCells = 0;
    int64_t keptCells = 0;

    size_t index(int64_t layer, int64_t unit) const { return static_cast<size_t>(layer * maxUnits + unit); }
};
// npw::Error when the mask's shape does not match the scores (a mask from other scores).
HeadGrid headGrid(const std::vector<LayerScores>& scores, const Mask& mask);

} // namespace npw
