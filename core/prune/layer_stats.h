#pragma once
// Calibration statistics of the input X of one scored linear layer (o_proj or down_proj):
// everything the scores, FLAP's baselines and the compensation need, accumulated once
// over all calibration tokens. float64 throughout: G sums millions of products, and the
// numerical score solves with it.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <cstdint>

namespace npw {

struct LayerStats {
    // float64 [D, D]: G = Σ_tokens xᵀx (the paper's XᵀX, unnormalised). accumulate() updates
    // only its row-major upper triangle on the CPU (a symmetric rank-k update: half the work of
    // a full product); symmetriseGram() completes it once, after the last accumulate (calibration
    // does, before the statistics are checked, saved or used). The per-site arithmetic (numerical
    // score, L* curve, Theorem 3) reads only that triangle; gramPerToken() symmetrises its copy.
    at::Tensor gram;
    at::Tensor sum;     // float64 [D]: Σ_tokens x_j
    at::Tensor sumSq;   // float64 [D]: Σ_tokens x_j²
    int64_t tokens = 0; // N, the number of rows of X seen so far

    LayerStats() = default;
    // Zeroed statistics for D input channels, kept on `device` (the inputs' device is best:
    // no transfer per batch).
    explicit LayerStats(int64_t channels, c10::Device device = c10::kCPU);

    int64_t channels() const { return sum.defined() ? sum.size(0) : 0; }

    // Adds the rows of x ([..., D], any floating dtype, any leading shape) in float64.
    // Throws npw::Error when the last dimension is not D.
    void accumulate(const at::Tensor& x);
    // Copies the upper triangle that accumulate() updated onto the lower one; a no-op when the
    // matrix is complete. One pass over D² values.
    void symmetriseGram();
    bool gramIsTriangle() const { return gramTriangle_; }

    // G / N. The paper assumes a normalised input ("‖X‖ ≤ 1") without saying how; dividing
    // by the token count realises it, so that the scale of A = (W Wᵀ) ∘ G, and with it the
    // meaning of λ, is the same for every model, layer and number of calibration samples.
    at::Tensor gramPerToken() const;
    at::Tensor mean() const;        // [D] Σx / N
    // [D] population variance Σ(x − mean)² / N: the quantity FLAP's running estimate tracks
    // (its code updates mean and variance per sample and ignores the first sample's spread;
    // the exact value is used here). Clamped at 0 against cancellation.
    at::Tensor variance() const;
    at::Tensor channelNorm() const; // [D] ‖X_j‖₂ over all tokens (Wanda-sp's activation norm)

private:
    bool gramTriangle_ = false;  // the lower triangle is stale (accumulate's state)
};

} // namespace npw
