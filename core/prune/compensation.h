#pragma once
// Updating an output projection (o_proj / down_proj) after some of its input channels were
// pruned, so that the layer's output moves as little as possible.
//
// Theorem 3 of the paper, in its orientation W = weight.T (rows = input channels D):
//     min ‖X δW‖²  s.t. the pruned rows of W + δW are zero
//     δW* = −Hinv[:, p] · Hinv[p, p]⁻¹ · W[p, :],   Hinv = (2G + γ·mean(diag 2G)·I)⁻¹
// with G = XᵀX and p the pruned rows. The dampening γ is relative, as GPTQ and SparseGPT
// use it ("dampening ratio" in the paper's remark), so it means the same for any scale of G.
// (By the block-inverse identity this is the ridge-regularised least-squares refit of the
// kept rows, W_k + H_kk⁻¹ H_kp W_p with H = 2G + γ'I: with γ = 0 the exact refit.)
#include <ATen/core/Tensor.h>
#include <cstdint>
#include <vector>

namespace npw {

struct CompensationResult {
    at::Tensor weight;        // torch layout [out, D], the input weight's dtype and device;
                              // the pruned input channels (columns) are exactly zero
    // L* of the paper's remark, ½·tr(W_pᵀ Hinv[p,p]⁻¹ W_p), computed with the same dampened
    // inverse. With γ = 0 it is exactly the achieved ‖X δW*‖²_F (the paper's 𝓛(δW*); note
    // ½·δWᵀ(2G)δW = ‖XδW‖², so "½" and "2G" cancel). With γ > 0 it is the optimum of the
    // dampened objective ‖X δW‖² + ½γ'‖δW‖²_F, γ' = γ·mean(diag 2G), an upper bound of the
    // achieved ‖X δW‖². In the units of the G passed: the raw Gram gives the error summed over
    // the calibration tokens, gramPerToken() the mean error per token.
    double optimalLoss = 0;
    double dampening = 0;     // γ' = γ·mean(diag 2G), the absolute value added to 2G's diagonal
    // tr(W_p G_pp W_pᵀ): the error of merely zeroing the pruned channels (no compensation), in
    // the units of optimalLoss; from the same factorisation (no W_p·G_pp product).
    double uncompensatedLoss = 0;
    // ‖weight − input weight‖²_F, both in float64 after rounding to the weight's dtype.
    double deltaSquaredNorm = 0;
};

// weight: [out, D] (torch layout, any float dtype); gram: [D, D] (float64 preferably);
// keepChannel: D flags, false = pruned; gamma ≥ 0. Computed in float64. Throws npw::Error on
// mismatched shapes, γ < 0, or a 2G + γ'I that is not positive definite (G singular with
// γ = 0: fewer calibration tokens than channels, or a dead channel; use γ > 0).
CompensationResult compensatePrunedChannels(const at::Tensor& weight, const at::Tensor& gram,
                                            const std::vector<bool>& keepChannel, double gamma = 0.01);

// How both functions here compute (one Cholesky factorisation per call, in one owned D×D float64
// buffer; no inverse): H = 2G + γ'I is gathered with its channels permuted, factorised in place,
// and every quantity read from blocks of that factor (compensation.cpp). The weight is read in
// blocks of 256 rows (any float dtype, a bf16 mapped view included). Peak: one D×D float64
// buffer, plus (compensation only) the result in the weight's dtype, besides the inputs.
// The *Scaled forms take the raw Gram sum with gramScale = 1/N instead of a G/N copy; only the
// row-major upper triangle of gram is read (LayerStats::accumulate's triangle).
CompensationResult compensatePrunedChannelsScaled(const at::Tensor& weight, const at::Tensor& gram, double gramScale,
                                                  const std::vector<bool>& keepChannel, double gamma = 0.01);

// L* of removing the first k channels of `order` (k = 1 … order.size()), each as Theorem 3
// would compensate it: element k−1 is compensatePrunedChannels(weight, gram, mask of the first k,
// gamma).optimalLoss, all of them from one Cholesky factor R of Hinv[order, order] (its
// leading k×k block is Hinv[p, p] of the first k, so ½‖R_k⁻¹ W_p‖² = ½ Σ_{i<k} ‖(R⁻¹ W[order])_i‖²,
// the sequential trick of OBS/SparseGPT); R⁻¹ itself is read off the factor of H (below), so
// neither Hinv nor R is formed. D³/3 + |order|²·out flops, float64. `order` lists distinct
// channels (not necessarily all of them); npw::Error otherwise, and as compensatePrunedChannels.
std::vector<double> compensatedLossCurve(const at::Tensor& weight, const at::Tensor& gram,
                                         const std::vector<int64_t>& order, double gamma = 0.01);
std::vector<double> compensatedLossCurveScaled(const at::Tensor& weight, const at::Tensor& gram, double gramScale,
                                               const std::vector<int64_t>& order, double gamma = 0.01);

// FLAP's bias compensation: the pruned channels' mean contribution moves into the bias,
// bias = (mean ∘ (1 − keep)) @ weightᵀ, [out] in the weight's dtype. FLAP assigns it as the
// layer's bias; add it to an existing bias. weight: [out, D]; inputMean: [D]
// (LayerStats::mean()).
at::Tensor flapBiasCompensation(const at::Tensor& weight, const at::Tensor& inputMean,
                                const std::vector<bool>& keepChannel);

} // namespace npw
