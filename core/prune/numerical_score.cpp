#include "core/prune/numerical_score.h"
#include "core/models/non_finite.h"

#include "core/prune/dense_kernels.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>
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

namespace {

// Rows of the weight read per block: 256 × D float64 (22 MB at D = 11,008).
constexpr int64_t kRowBlock = 256;

// Factorises the D×D matrix that `fill` writes into the lower triangle of `a` (column-major,
// leading dimension D), retrying with a growing jitter on the diagonal as solveNumericalScore
// documents, and solves A⁻¹1. `fill` returns false when A has NaN/Inf entries; it is called again
// for every retry (dpotrf overwrites the triangle), which only a singular A pays for.
NumericalSolve solveInBuffer(int64_t d, double* a, const std::function<bool(double*)>& fill) {
    using namespace dense;
    NumericalSolve out;
    out.D = d;
    StageWork work;
    const auto nonFinite = [d] {
        return Error("solveNumericalScore: A (" + std::to_string(d) + "×" + std::to_string(d) +
                     ") has NaN or Inf entries; check the weight and the calibration statistics");
    };
    if (!fill(a)) throw nonFinite();
    double diagSum = 0;
    for (int64_t i = 0; i < d; ++i) diagSum += a[i * d + i];
    const double dd = static_cast<double>(d);
    work.choleskyFlops += dd * dd * dd / 3;
    bool factorised = choleskyLower(a, d, d);
    if (!factorised) {
        // Singular A (a channel whose input or weight column is all zero, or too few tokens):
        // the smallest jitter that factorises, relative to A's own scale.
        const double meanDiag = d > 0 ? diagSum / dd : 0.0;
        const double scale = meanDiag > 0 && std::isfinite(meanDiag) ? meanDiag : 1.0;
        for (double relative = 1e-12; relative <= 1e-2 * (1 + 1e-9) && !factorised; relative *= 10) {
            out.jitter = relative * scale;
            if (!fill(a)) throw nonFinite();
            for (int64_t i = 0; i < d; ++i) a[i * d + i] += out.jitter;
            work.choleskyFlops += dd * dd * dd / 3;
            factorised = choleskyLower(a, d, d);
        }
        if (!factorised)
            throw Error("solveNumericalScore: A (" + std::to_string(d) + "×" + std::to_string(d) +
                        ") is not positive semidefinite even with a jitter of 1e-2·mean(diag A)");
    }
    out.Ainv1 = at::ones({d}, at::kDouble);
    choleskySolve(a, d, d, out.Ainv1.data_ptr<double>(), 1, d);
    work.gemmFlops += 2 * dd * dd;
    out.c = out.Ainv1.sum().item<double>();
    addWork(WorkStage::Score, work);
    return out;
}

} // namespace

NumericalSolve solveNumericalScore(const at::Tensor& A) {
    requireSquare(A, "solveNumericalScore");
    const dense::StageTimer timer(dense::WorkStage::Score);
    const at::Tensor a = A.to(at::kCPU, at::kDouble).contiguous();
    const int64_t d = a.size(0);
    const double* src = a.data_ptr<double>();
    double energy = 0;
    std::unique_ptr<double[]> buffer(new double[static_cast<size_t>(std::max<int64_t>(d * d, 1))]);
    NumericalSolve out = solveInBuffer(d, buffer.get(), [&](double* dst) {
        // The row-major upper triangle of A is the column-major lower one.
        double sum = 0;
        bool finite = true;
        for (int64_t j = 0; j < d; ++j)
            for (int64_t i = j; i < d; ++i) {
                const double v = src[j * d + i];
                finite = finite && std::isfinite(v) && std::isfinite(src[i * d + j]);
                dst[j * d + i] = v;
                sum += i == j ? v : 2 * v;
            }
        energy = sum;
        return finite;
    });
    out.outputEnergy = energy;
    if (out.D > 0) out.Ainv1 = out.Ainv1.to(A.device());
    return out;
}

NumericalSolve solveNumericalSite(const at::Tensor& weight, const at::Tensor& gram, double gramScale) {
    requireSquare(gram, "solveNumericalSite (gram)");
    if (weight.dim() != 2 || weight.size(1) != gram.size(0))
        throw Error("solveNumericalSite: weight " + shapeOf(weight) + " does not take the " +
                    std::to_string(gram.size(0)) + " input channels of gram " + shapeOf(gram) +
                    " (expected torch layout [out, in])");
    if (!(gramScale > 0) || !std::isfinite(gramScale))
        throw Error("solveNumericalSite: the Gram scale must be a positive number, got " + std::to_string(gramScale));
    const dense::StageTimer timer(dense::WorkStage::Score);
    const at::Tensor g = gram.to(at::kCPU, at::kDouble).contiguous();
    const double* gp = g.data_ptr<double>();
    const int64_t d = g.size(0), rows = weight.size(0);
    double energy = 0;
    std::unique_ptr<double[]> buffer(new double[static_cast<size_t>(std::max<int64_t>(d * d, 1))]);
    NumericalSolve out = solveInBuffer(d, buffer.get(), [&](double* a) {
        // WᵀW (torch layout) = Σ over output rows w wᵀ: a block of rows, row-major [n, D], is the
        // column-major D×n matrix whose rank-n update it is.
        dense::StageWork work;
        if (rows == 0)
            for (int64_t j = 0; j < d; ++j) std::fill(a + j * d + j, a + (j + 1) * d, 0.0);
        for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
            const int64_t n = std::min(kRowBlock, rows - r0);
            const at::Tensor block = weight.narrow(0, r0, n).to(at::kCPU, at::kDouble).contiguous();
            dense::syrkLower(d, n, 1.0, block.data_ptr<double>(), d, r0 == 0 ? 0.0 : 1.0, a, d);
        }
        work.gemmFlops = static_cast<double>(d) * static_cast<double>(d + 1) * static_cast<double>(rows);
        dense::addWork(dense::WorkStage::Score, work);
        // ∘ s·G on the triangle, summing A on the way (Σ A = tr(W G Wᵀ)).
        double sum = 0;
        bool finite = true;
        for (int64_t j = 0; j < d; ++j) {
            double* aj = a + j * d;
            const double* gj = gp + j * d;
            for (int64_t i = j; i < d; ++i) {
                const double v = aj[i] * (gramScale * gj[i]);
                finite = finite && std::isfinite(v);
                aj[i] = v;
                sum += i == j ? v : 2 * v;
            }
        }
        energy = sum;
        return finite;
    });
    out.outputEnergy = energy;
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

BoxedNumericalScore numericalScoreBoxed(const at::Tensor& A, double rho, double lambda, double jitter) {
    requireSquare(A, "numericalScoreBoxed");
    requireLambda(lambda);
    if (!(rho >= 0 && rho <= 1)) throw Error("numericalScoreBoxed: ρ must lie in [0, 1], got " + std::to_string(rho));
    const int64_t d = A.size(0);
    at::Tensor a = A.to(at::kCPU, at::kDouble).contiguous();
    if (!allFinite(a)) throw Error("numericalScoreBoxed: A has NaN or Inf entries");
    if (jitter > 0) a = a + jitter * at::eye(d, a.options());
    const double r = (1 - rho) * static_cast<double>(d);
    // ½(z−1)ᵀA(z−1) + ½λ(1ᵀz − r)² = ½zᵀHz − bᵀz + const, H = A + λ11ᵀ, b = A1 + λr·1.
    const at::Tensor H = a + lambda;
    const at::Tensor b = (a.sum(1) + lambda * r).contiguous();
    const double* h = H.data_ptr<double>();
    const std::vector<double> bv(b.data_ptr<double>(), b.data_ptr<double>() + d);
    double gradientScale = lambda * static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) gradientScale = std::max(gradientScale, std::abs(h[i * d + i]));
    const double tol = 1e-10 * gradientScale;

    enum State : char { Free, AtZero, AtOne };
    std::vector<double> z(static_cast<size_t>(d));
    std::vector<State> state(static_cast<size_t>(d), Free);
    auto gradient = [&](int64_t i) {
        double g = -bv[size_t(i)];
        for (int64_t k = 0; k < d; ++k) g += h[i * d + k] * z[size_t(k)];
        return g;
    };
    // Start: the unconstrained minimiser, clamped.
    {
        const NumericalSolve solve = solveNumericalScore(a);
        const at::Tensor zFree = numericalScoreClosedForm(solve, rho, lambda).contiguous();
        const double* zp = zFree.data_ptr<double>();
        for (int64_t i = 0; i < d; ++i) {
            const double x = zp[i];
            z[size_t(i)] = std::clamp(x, 0.0, 1.0);
            state[size_t(i)] = x <= 0 ? AtZero : x >= 1 ? AtOne : Free;
        }
    }
    BoxedNumericalScore out;
    const int maxIterations = static_cast<int>(20 * d + 100);
    for (;; ++out.iterations) {
        if (out.iterations > maxIterations)
            throw Error("numericalScoreBoxed: no convergence after " + std::to_string(maxIterations) +
                        " active-set changes (D = " + std::to_string(d) + ")");
        std::vector<int64_t> freeIdx;
        for (int64_t i = 0; i < d; ++i)
            if (state[size_t(i)] == Free) freeIdx.push_back(i);
        // The minimiser over the free channels with the others on their bounds.
        std::vector<double> step(freeIdx.size(), 0.0);
        double stepNorm = 0;
        if (!freeIdx.empty()) {
            const auto nf = static_cast<int64_t>(freeIdx.size());
            const at::Tensor idx = at::tensor(freeIdx, at::kLong);
            const at::Tensor hff = H.index_select(0, idx).index_select(1, idx);
            at::Tensor rhs = at::empty({nf, 1}, at::kDouble);
            double* rp = rhs.data_ptr<double>();
            for (int64_t k = 0; k < nf; ++k) {
                const int64_t i = freeIdx[size_t(k)];
                double v = bv[size_t(i)];
                for (int64_t j = 0; j < d; ++j)
                    if (state[size_t(j)] == AtOne) v -= h[i * d + j];
                rp[k] = v;
            }
            const at::Tensor factor = choleskyOrNothing(hff);
            if (!factor.defined()) throw Error("numericalScoreBoxed: H restricted to the free channels is not positive definite");
            const at::Tensor target = at::cholesky_solve(rhs, factor, /*upper=*/false).squeeze(1).contiguous();
            const double* tp = target.data_ptr<double>();
            for (int64_t k = 0; k < nf; ++k) {
                step[size_t(k)] = tp[k] - z[size_t(freeIdx[size_t(k)])];
                stepNorm = std::max(stepNorm, std::abs(step[size_t(k)]));
            }
        }
        if (stepNorm <= 1e-13) {
            // Stationary on this working set: release the bound whose multiplier is most wrong.
            int64_t release = -1;
            double worst = tol;
            for (int64_t i = 0; i < d; ++i) {
                if (state[size_t(i)] == Free) continue;
                const double g = gradient(i);
                const double violation = state[size_t(i)] == AtZero ? -g : g;  // z_i = 0 needs g ≥ 0; z_i = 1, g ≤ 0
                if (violation > worst) worst = violation, release = i;
            }
            if (release < 0) break;
            state[size_t(release)] = Free;
            continue;
        }
        double alpha = 1;
        int64_t blocking = -1;
        State blockingState = Free;
        for (size_t k = 0; k < freeIdx.size(); ++k) {
            const double zi = z[size_t(freeIdx[k])], p = step[k];
            if (p < 0 && (0 - zi) / p < alpha) alpha = (0 - zi) / p, blocking = freeIdx[k], blockingState = AtZero;
            if (p > 0 && (1 - zi) / p < alpha) alpha = (1 - zi) / p, blocking = freeIdx[k], blockingState = AtOne;
        }
        alpha = std::max(alpha, 0.0);
        for (size_t k = 0; k < freeIdx.size(); ++k) z[size_t(freeIdx[k])] += alpha * step[k];
        if (blocking >= 0) {
            state[size_t(blocking)] = blockingState;
            z[size_t(blocking)] = blockingState == AtOne ? 1.0 : 0.0;
        }
    }
    out.z = at::empty({d}, at::kDouble);
    double* zp = out.z.data_ptr<double>();
    for (int64_t i = 0; i < d; ++i) {
        zp[i] = std::clamp(z[size_t(i)], 0.0, 1.0);
        const double g = gradient(i);
        const double residual = state[size_t(i)] == Free ? std::abs(g) : state[size_t(i)] == AtZero ? std::max(-g, 0.0)
                                                                                                     : std::max(g, 0.0);
        out.kktViolation = std::max(out.kktViolation, residual / gradientScale);
        out.atZero += state[size_t(i)] == AtZero;
        out.atOne += state[size_t(i)] == AtOne;
    }
    return out;
}

LayerScores numericalLayerScores(const NumericalSolve& attention, const NumericalSolve& mlp, int64_t unitWidth,
                                 double rho, double lambda) {
    LayerScores s;
    if (attention.D > 0) s.heads = blockMeanScores(numericalScoreClosedForm(attention, rho, lambda), unitWidth);
    if (mlp.D > 0) s.channels = toDoubleVector(numericalScoreClosedForm(mlp, rho, lambda));
    return s;
}

} // namespace npw
