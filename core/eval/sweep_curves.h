#pragma once
// Which points of a language-model sweep form one curve. A sweep summarised over seeds gives one
// point per model and evaluation set; its plots (perplexity, zero-shot accuracy, speed) draw one
// curve per method, also per value of an ablation axis that takes more than one value among the
// pruned points ("numerical n=16", "numerical L=64", "numerical λ=100"), and, for perplexity with
// several held-out texts, per text ("numerical · jargon"). The dense model is its plot's dashed
// baseline; with several texts one line cannot stand for all of them, so each perplexity curve
// starts at the dense model's perplexity on its text (at sparsity 0) instead.
//
// Plain descriptions in, curve names out: the studio's Sweep tab builds the keys from core's
// SweepSummaryRow and draws what this returns.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace npw {

enum class SweepPlot { Perplexity, ZeroShot, Speed };

// What the grouping needs to know of one point.
struct SweepPointKey {
    SweepPlot plot = SweepPlot::Perplexity;
    std::string method;   // "dense": the unpruned model
    std::string evalSet;  // the held-out text (perplexity), the task (zero-shot), the speed set
    int64_t calibSamples = 0, calibSeqlen = 0;
    double lambda = std::numeric_limits<double>::quiet_NaN();  // NaN: a method without λ
};

// Where one point is drawn.
struct SweepCurvePoint {
    size_t point = 0;  // index into the keys given
    SweepPlot plot = SweepPlot::Perplexity;
    std::string curve;        // empty: the dense model's baseline of `plot`
    bool denseStart = false;  // the dense point drawn at sparsity 0 as the first point of `curve`
};

// One entry per point, in the order given: its curve, or (the dense model's points) the baseline
// of its plot. With several perplexity texts the dense model's perplexity points are no baseline:
// each starts every curve of its text instead (denseStart), listed after the other entries in the
// order of the curves' names; a text without curves drops its dense point.
std::vector<SweepCurvePoint> sweepCurves(const std::vector<SweepPointKey>& points);

} // namespace npw
