#pragma once
// The numerical score (paper §3.2, Algorithm 1) of the input channels of one scored layer
// (o_proj or down_proj).
//
// Convention: the paper writes X·W with W ∈ R^{D×D'} (rows = input channels). A torch
// weight is [out, in], so the paper's W is weight.T and its W Wᵀ is weight.T @ weight, the
// D×D product over input channels. The problem (eq. 5) is
//     min_z ½ (z − 1)ᵀ A (z − 1) + ½ λ (⟨1, z⟩ − r)²,   A = (W Wᵀ) ∘ G,  r = (1 − ρ) D.
// It is quadratic with the constant Hessian H = A + λ11ᵀ, so one exact Newton step reaches
// the minimiser, and by Sherman-Morrison
//     z* = 1 − ρ·w,   w = λD·A⁻¹1 / (1 + λc),   c = 1ᵀA⁻¹1.
// One Cholesky solve per layer (A⁻¹1 and c) therefore gives z for every ρ and λ; inside a
// layer the ranking of channels is that of −A⁻¹1 and depends on neither.
// Like Algorithm 1, nothing here clamps z to [0, 1].
#include "core/prune/unit_scores.h"

#include <ATen/core/Tensor.h>
#include <cstdint>

namespace npw {

// A = (weight.T @ weight) ∘ gram in float64. weight: torch layout [out, D] (any float dtype);
// gram: [D, D], normally LayerStats::gramPerToken(). Throws npw::Error on mismatched shapes.
at::Tensor numericalScoreMatrix(const at::Tensor& weight, const at::Tensor& gram);

// What a layer keeps so that z for any ρ and λ is closed-form.
struct NumericalSolve {
    at::Tensor Ainv1;     // float64 [D]: A⁻¹1
    double c = 0;         // 1ᵀA⁻¹1
    int64_t D = 0;        // input channels
    double jitter = 0;    // absolute value added to A's diagonal to make it factorise; 0 when
                          // A was positive definite as it is (a dead channel makes it singular)
    // Σ_ij A_ij = Σ_ij (WᵀW)_ij G_ij = tr(W G Wᵀ) (torch layout): the site's output energy per
    // token when G is per token. Free while A is formed; no W·G·Wᵀ product is needed for it.
    double outputEnergy = 0;
};

// One Cholesky solve of A (from numericalScoreMatrix). When the factorisation fails, a jitter
// of 1e-12·mean(diag A) (× 10 per retry, up to 1e-2·mean(diag A)) is added to the diagonal
// and reported in `jitter`; an all-zero A uses 1 as its scale. Throws npw::Error when even
// the largest jitter fails (A not positive semidefinite) or A has NaN/Inf entries.
NumericalSolve solveNumericalScore(const at::Tensor& A);

// numericalScoreMatrix then solveNumericalScore for one site, without either D×D tensor: A is
// formed in one owned float64 buffer (WᵀW as symmetric rank-k updates over row blocks of the
// weight, then ∘ gramScale·G), factorised there in place and solved. Peak: one D×D float64
// buffer plus a block of 256 weight rows, besides the inputs. weight: [out, D], any float dtype
// (a bf16 mapped view is read block by block); gram: [D, D] float64 of which only the row-major
// upper triangle is read (LayerStats::accumulate's triangle, so no symmetrised copy is needed);
// gramScale: 1/N for raw sums. The same results as the two calls, to rounding; the same errors.
NumericalSolve solveNumericalSite(const at::Tensor& weight, const at::Tensor& gram, double gramScale = 1.0);

// z* = 1 − ρ·λD·A⁻¹1 / (1 + λc): float64 [D]. ρ ∈ [0, 1], λ > 0 (npw::Error otherwise).
at::Tensor numericalScoreClosedForm(const NumericalSolve& solve, double rho, double lambda);

// Algorithm 1 as written: H = A + λ11ᵀ, g = A(z − 1) + λ(⟨1, z⟩ − r)·1, z ← z − H⁻¹g, for T
// iterations from z0 (float64 [D]). reuseFactorisation=false builds H and solves it afresh in
// every iteration, as the algorithm is written (O(T·D³)); true factorises H once (Cholesky)
// and reuses it (O(D³ + T·D²)). Kept as the paper's reference and to check the closed form.
at::Tensor numericalScoreNewton(const at::Tensor& A, double r, double lambda, int T, const at::Tensor& z0,
                                bool reuseFactorisation);

// The box-constrained variant of eq. 5: the same objective with z ∈ [0, 1]^D, as the paper
// states z's domain (Algorithm 1 itself never clamps). The bound makes z depend on ρ and λ
// beyond the one scalar of the closed form, so it is solved again for every ρ and λ (not live
// in a GUI). A primal active-set method on H = A + λ11ᵀ (Nocedal & Wright §16.5): start at the
// unconstrained z* clamped to the box, fix what sits on a bound, minimise over the free
// channels (one Cholesky solve of H_FF), step until a bound blocks, release the bound whose
// multiplier has the wrong sign; finite for a positive-definite H. `jitter` is added to A's
// diagonal as solveNumericalScore chose it (so a singular A solves the same regularised problem).
struct BoxedNumericalScore {
    at::Tensor z;            // float64 [D], every entry in [0, 1]
    int iterations = 0;      // active-set changes
    int64_t atZero = 0, atOne = 0;
    double kktViolation = 0; // max over channels of the KKT residual, relative to the gradient's scale
};
// npw::Error for ρ outside [0, 1], λ ≤ 0, NaN in A, or no convergence in 20·D + 100 iterations.
BoxedNumericalScore numericalScoreBoxed(const at::Tensor& A, double rho, double lambda, double jitter = 0);

// A layer's unit scores at ρ and λ: attention units = block means of the o_proj input
// channels' z (unitWidth = D_h, or g·D_h for KV groups), MLP channels = down_proj's z.
// Either solve may be empty (a layer without heads or without channels).
LayerScores numericalLayerScores(const NumericalSolve& attention, const NumericalSolve& mlp, int64_t unitWidth,
                                 double rho, double lambda);

} // namespace npw
