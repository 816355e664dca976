#include "core/prune/numerical_score.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include <cmath>
#include <string>
#include <tuple>

namespace npw {

namespace {

std::string shapeOf(const at::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
}

void requireSquare(const at::Tensor& m, const char* what) {
    if (m.dim() != 2 || m.size(0) != m.size(1))
        throw Error(std::string(what) + ": expected a square matrix, got " + shapeOf(m));
}

// Lower Cholesky factor, or an undefined tensor when the matrix is not positive definite.
at::Tensor choleskyOrNothing(const at::Tensor& m) {
    auto [factor, info] = at::linalg_cholesky_ex(m, /*upper=*/false, /*check_errors=*/false);
    return info.item<int64_t>() == 0 ? factor : at::Tensor();
}

void requireLambda(double lambda) {
    if (!(lambda > 0) || !std::isfinite(lambda))
        throw Error("numerical score: λ must be a positive finite number, got " + std::to_string(lambda));
}

} // namespace

at::Tensor numericalScoreMatrix(const at::Tensor& weight, const at::Tensor& gram) {
    requireSquare(gram, "numericalScoreMatrix (gram)");
    if (weight.dim() != 2 || weight.size(1) != gram.size(0))
        throw Error("numericalScoreMatrix: weight " + shapeOf(weight) + " does not take the " +
                    std::to_string(gram.size(0)) + " input channels of gram " + shapeOf(gram) +
                    " (expected torch layout [out, in])");
    const at::Tensor w = weight.to(gram.device(), at::kDouble);
    at::Tensor a = at::matmul(w.t(), w);  // the paper's W Wᵀ: input channels × input channels
    a.mul_(gram.to(at::kDouble));
    return a;
}

NumericalSolve solveNumericalScore(const at::Tensor& A) {
    requireSquare(A, "solveNumericalScore");
    const at::Tensor a = A.to(at::kDouble);
    const int64_t d = a.size(0);
    if (!at::isfinite(a).all().item<bool>())
        throw Error("solveNumericalScore: A (" + std::to_string(d) + "×" + std::to_string(d) +
                    ") has NaN or Inf entries; check the weight and the calibration statistics");
    NumericalSolve out;
    out.D = d;

    at::Tensor factor = choleskyOrNothing(a);
    if (!factor.defined()) {
        // Singular A (a channel whose input or weight column is all zero, or too few tokens):
        // the smallest jitter that factorises, relative to A's own scale.
        const double meanDiag = a.diagonal().mean().item<double>();
        const double scale = meanDiag > 0 && std::isfinite(meanDiag) ? meanDiag : 1.0;
        const at::Tensor eye = at::eye(d, a.options());
        for (double relative = 1e-12; relative <= 1e-2 * (1 + 1e-9) && !factor.defined(); relative *= 10) {
            out.jitter = relative * scale;
            factor = choleskyOrNothing(a + out.jitter * eye);
        }
        if (!factor.defined())
            throw Error("solveNumericalScore: A (" + std::to_string(d) + "×" + std::to_string(d) +
                        ") is not positive semidefinite even with a jitter of 1e-2·mean(diag A)");
    }
    const at::Tensor ones = at::ones({d, 1}, a.options());
    out.Ainv1 = at::cholesky_solve(ones, factor, /*upper=*/false).squeeze(1);
    out.c = out.Ainv1.sum().item<double>();
    return out;
}

at::Tensor numericalScoreClosedForm(const NumericalSolve& solve, double rho, double lambda) {
    if (!solve.Ainv1.defined()) throw Error("numericalScoreClosedForm: empty solve");
    if (!(rho >= 0 && rho <= 1)) throw Error("numericalScoreClosedForm: ρ must lie in [0, 1], got " + std::to_string(rho));
    requireLambda(lambda);
    const double scale = rho * lambda * static_cast<double>(solve.D) / (1.0 + lambda * solve.c);
    return 1.0 - scale * solve.Ainv1;
}

at::Tensor numericalScoreNewton(const at::Tensor& A, double r, double lambda, int T, const at::Tensor& z0,
                                bool reuseFactorisation) {
    requireSquare(A, "numericalScoreNewton");
    requireLambda(lambda);
    if (T < 1) throw Error("numericalScoreNewton: T must be at least 1, got " + std::to_string(T));
    const at::Tensor a = A.to(at::kDouble);
    const int64_t d = a.size(0);
    if (z0.dim() != 1 || z0.size(0) != d)
        throw Error("numericalScoreNewton: z0 must be [" + std::to_string(d) + "], got " + shapeOf(z0));
    at::Tensor z = z0.to(a.device(), at::kDouble).clone();
    const at::Tensor ones = at::ones({d}, a.options());

    at::Tensor factor;
    if (reuseFactorisation) {
        factor = choleskyOrNothing(a + lambda);  // H = A + λ·11ᵀ
        if (!factor.defined()) throw Error("numericalScoreNewton: H = A + λ11ᵀ is not positive definite");
    }
    for (int t = 0; t < T; ++t) {
        const at::Tensor g = at::mv(a, z - ones) + lambda * (z.sum() - r) * ones;
        at::Tensor step;
        if (reuseFactorisation) {
            step = at::cholesky_solve(g.unsqueeze(1), factor, /*upper=*/false).squeeze(1);
        } else {
            const at::Tensor h = a + lambda * at::ones({d, d}, a.options());
            step = at::linalg_solve(h, g);
        }
        z = z - step;
    }
    return z;
}

LayerScores numericalLayerScores(const NumericalSolve& attention, const NumericalSolve& mlp, int64_t unitWidth,
                                 double rho, double lambda) {
    LayerScores s;
    if (attention.D > 0) s.heads = blockMeanScores(numericalScoreClosedForm(attention, rho, lambda), unitWidth);
    if (mlp.D > 0) s.channels = toDoubleVector(numericalScoreClosedForm(mlp, rho, lambda));
    return s;
}

} // namespace npw
