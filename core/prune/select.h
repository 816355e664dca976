#pragma once
// Which attention units and MLP channels to remove, over all layers at once (paper §3.3,
// eq. 7), and FLAP's uniform per-layer structure for the baselines.
//
// Units and their scores: core/prune/unit_scores.h. Scores: higher = more important.
//
// Two readings of the head/channel balance α (reference.md §1-2):
//  - AlphaMode::Paper, eq. 7 as written: Ψ = α·{unit scores} ∪ {channel scores}; with N
//    candidates and k = round(ρ·N), η = the k-th smallest of Ψ (0-based; η = +∞ when k = N);
//    every entry of Ψ strictly below η is removed. ρ is a fraction of the *number* of units;
//    ties at η are kept, so at most k entries go.
//  - AlphaMode::Budget, FLAP's code: units ranked by their raw score, descending; a unit
//    weighs α, a channel 1; the longest prefix whose cumulative weight stays ≤ (1 − ρ)·(total
//    weight) is kept. With α = the parameter ratio, ρ is a fraction of parameters. Units tied
//    with the first one that does not fit are removed too (FLAP keeps `metric > threshold`),
//    so the kept weight never exceeds the budget and the result does not depend on how ties
//    are ordered. FLAP itself cuts at the unit whose inclusive cumulative weight is *nearest*
//    to the budget and removes that unit as well, so it may remove one unit more than here;
//    and, storing 512/3 in an integer tensor, it weighs a head 170 instead of 170.67.
// Re-selection is cheap: a SelectionIndex sorts once; select() finds the threshold by binary
// searches over the two sorted lists (O(log² N)) and then writes the mask (O(N)).
#include "core/prune/score.h"
#include "core/prune/settings.h"
#include "core/prune/unit_scores.h"
#include "core/prune/units.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace npw {

struct SelectionOptions {
    SelectionScope scope = SelectionScope::AttentionAndMlp;
    std::vector<int64_t> protectedLayers;  // layers none of whose units are candidates
};
// ρ always refers to the candidates: units outside the scope and in protected layers are
// kept and count neither in N (Paper) nor in the total weight (Budget). The achieved-ratio
// helpers below report what that means for the whole block or model.

struct Mask {
    std::vector<std::vector<bool>> keepHeads;     // [layer][unit]: unit = head, or KV group (GQA)
    std::vector<std::vector<bool>> keepChannels;  // [layer][MLP channel]
};

struct SelectionResult {
    Mask mask;
    int64_t removedHeads = 0;     // attention units removed
    int64_t removedChannels = 0;
    int64_t removedParams = 0;    // Σ unit costs of what was removed
    // Paper: η, removed iff α·unit score < η (resp. channel score < η); +∞ when all go.
    // Budget: τ, removed iff score ≤ τ; −∞ when nothing goes.
    double threshold = 0;
};

class SelectionIndex {
public:
    // Sorts the candidates once. Throws npw::Error on NaN scores, a cost list of the wrong
    // length, a non-positive cost where there are units, or a protected layer out of range.
    SelectionIndex(const std::vector<LayerScores>& scores, std::vector<LayerUnitCost> costs,
                   const SelectionOptions& options = {});

    // ρ ∈ [0, 1) and α > 0 finite (npw::Error otherwise). No sorting here.
    // headOffset (Paper reading only; finite): ranks α·unit score + headOffset instead of
    // α·unit score. The numerical score needs it to re-select for a new ρ without re-sorting
    // (MaskSelector below); η is then reported on that shifted scale.
    SelectionResult select(double rho, double alpha, AlphaMode mode, double headOffset = 0) const;

    int64_t candidateHeads() const { return static_cast<int64_t>(heads_.size()); }
    int64_t candidateChannels() const { return static_cast<int64_t>(channels_.size()); }
    const std::vector<LayerUnitCost>& costs() const { return costs_; }

private:
    struct Unit {
        double score;
        int32_t layer;
        int32_t index;
    };
    Mask keepAll() const;
    SelectionResult removeLowest(int64_t heads, int64_t channels, double threshold) const;

    std::vector<Unit> heads_, channels_;             // candidates, ascending (score, layer, index)
    std::vector<int64_t> headCostPrefix_, channelCostPrefix_;  // [i] = cost of the i lowest
    std::vector<int64_t> headsPerLayer_, channelsPerLayer_;
    std::vector<LayerUnitCost> costs_;
};

// One-off convenience: builds the index and selects once.
SelectionResult selectGlobal(const std::vector<LayerScores>& scores, const std::vector<LayerUnitCost>& costs,
                             double rho, double alpha, AlphaMode mode, const SelectionOptions& options = {});

// FLAP's uniform structure (UL-UM), used by Wanda-sp and magnitude: in every non-protected
// layer the lowest int(ρ·H) units and int(ρ·D_inter) channels go (threshold = that sorted
// entry, keep score ≥ threshold, as FLAP's code: ties at the threshold stay).
Mask selectUniformPerLayer(const std::vector<LayerScores>& scores, double rho, const SelectionOptions& options = {});

// Parameters removed from attention + MLP / all attention + MLP parameters (weights only).
double achievedRatio(const Mask& mask, const std::vector<LayerUnitCost>& costs);
// Parameters removed / the whole model's parameters (pass LlamaConfig::parameterCount(): it
// includes embeddings, norms and the classifier).
double achievedRatioModel(const Mask& mask, const std::vector<LayerUnitCost>& costs, int64_t modelParameters);
int64_t removedParameters(const Mask& mask, const std::vector<LayerUnitCost>& costs);

// A per-unit mask repeated `width` times: units → their input channels (width = D_h or g·D_h),
// or KV groups → their query heads (width = g).
std::vector<bool> expandUnitMask(const std::vector<bool>& keepUnits, int64_t width);

// Selection for any ρ, α and reading, sorting once. Global methods use a SelectionIndex; for the
// numerical score eq. 7 is evaluated on s = −w with the heads shifted by (α − 1)/ρ, which is
// the same order as α·z_head ∪ z_channel at that ρ (divide by ρ, subtract 1/ρ), so no re-sort
// per ρ either. Uniform methods (wanda-sp, magnitude, random) ignore α and the reading.
class MaskSelector {
public:
    explicit MaskSelector(const ScoreSet& scores);
    // α NaN = the default; ρ ∈ [0, 1). threshold is in the units a user reads (z for numerical;
    // NaN for uniform selection).
    SelectionResult select(double rho, double alpha, AlphaMode mode) const;
    double defaultAlpha() const { return defaultAlpha_; }
    bool isGlobal() const { return index_.has_value(); }

private:
    std::optional<SelectionIndex> index_;
    std::vector<LayerScores> ranking_;  // uniform selection only
    std::vector<LayerUnitCost> costs_;
    SelectionOptions options_;
    bool numericalW_ = false;
    double defaultAlpha_ = 0;
};

// One-off: MaskSelector(scores).select(ratio, alpha, mode).
SelectionResult selectMask(const ScoreSet& scores, double ratio, double alpha, AlphaMode mode);

} // namespace npw
