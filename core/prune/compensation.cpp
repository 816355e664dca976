#include "core/prune/compensation.h"

#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <cmath>
#include <string>

namespace npw {

namespace {

void requireShapes(const char* what, const at::Tensor& weight, int64_t channels, size_t maskSize) {
    if (weight.dim() != 2 || weight.size(1) != channels)
        throw Error(std::string(what) + ": weight must be [out, " + std::to_string(channels) + "] (torch layout), got " +
                    (weight.dim() == 2 ? "[" + std::to_string(weight.size(0)) + ", " + std::to_string(weight.size(1)) + "]"
                                       : std::to_string(weight.dim()) + " dimensions"));
    if (maskSize != static_cast<size_t>(channels))
        throw Error(std::string(what) + ": channel mask has " + std::to_string(maskSize) + " entries, weight has " +
                    std::to_string(channels) + " input channels");
}

at::Tensor indicesWhere(const std::vector<bool>& flags, bool value, const at::Device& device) {
    std::vector<int64_t> idx;
    for (size_t i = 0; i < flags.size(); ++i)
        if (flags[i] == value) idx.push_back(static_cast<int64_t>(i));
    return at::tensor(idx, at::kLong).to(device);
}

at::Tensor prunedIndicator(const std::vector<bool>& keep, const at::TensorOptions& options) {
    std::vector<double> v(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) v[i] = keep[i] ? 0.0 : 1.0;
    return at::tensor(v, at::kDouble).to(options.device());
}

} // namespace

CompensationResult compensatePrunedChannels(const at::Tensor& weight, const at::Tensor& gram,
                                            const std::vector<bool>& keepChannel, double gamma) {
    if (gram.dim() != 2 || gram.size(0) != gram.size(1))
        throw Error("compensatePrunedChannels: gram must be square [D, D]");
    const int64_t d = gram.size(0);
    requireShapes("compensatePrunedChannels", weight, d, keepChannel.size());
    if (!(gamma >= 0) || !std::isfinite(gamma))
        throw Error("compensatePrunedChannels: dampening γ must be ≥ 0, got " + std::to_string(gamma));

    const at::Device device = gram.device();
    const at::Tensor w = weight.to(device, at::kDouble).t().contiguous();  // paper's W: [D, out]
    const at::Tensor pruned = indicesWhere(keepChannel, false, device);
    CompensationResult out;
    const at::Tensor h2 = 2.0 * gram.to(at::kDouble);
    out.dampening = gamma * h2.diagonal().mean().item<double>();
    if (pruned.numel() == 0) {
        out.weight = weight.clone();
        return out;
    }

    const at::Tensor h = h2 + out.dampening * at::eye(d, h2.options());
    auto [factor, info] = at::linalg_cholesky_ex(h, /*upper=*/false, /*check_errors=*/false);
    if (info.item<int64_t>() != 0)
        throw Error("compensatePrunedChannels: 2G + γ·mean(diag 2G)·I is not positive definite (γ = " +
                    std::to_string(gamma) + ", D = " + std::to_string(d) +
                    "): G is singular (fewer calibration tokens than channels, or a dead channel); use γ > 0");
    const at::Tensor hinv = at::cholesky_inverse(factor, /*upper=*/false);

    const at::Tensor hinvColsP = hinv.index_select(1, pruned);       // Hinv[:, p]  [D, k]
    const at::Tensor hinvPP = hinvColsP.index_select(0, pruned);     // Hinv[p, p]  [k, k], SPD
    const at::Tensor wPruned = w.index_select(0, pruned);            // W[p, :]     [k, out]
    const at::Tensor ppFactor = at::linalg_cholesky(hinvPP);
    const at::Tensor y = at::cholesky_solve(wPruned, ppFactor, /*upper=*/false);  // Hinv[p,p]⁻¹ W[p,:]

    at::Tensor compensated = w - at::matmul(hinvColsP, y);
    compensated.index_fill_(0, pruned, 0.0);  // exactly zero, not merely ≈ 0
    out.optimalLoss = 0.5 * (wPruned * y).sum().item<double>();
    requireFinite(out.optimalLoss, "compensatePrunedChannels: the optimal error L*", kNonFiniteHint);
    out.weight = compensated.t().to(weight.device(), weight.scalar_type()).contiguous();
    return out;
}

std::vector<double> compensatedLossCurve(const at::Tensor& weight, const at::Tensor& gram,
                                         const std::vector<int64_t>& order, double gamma) {
    if (gram.dim() != 2 || gram.size(0) != gram.size(1)) throw Error("compensatedLossCurve: gram must be square [D, D]");
    const int64_t d = gram.size(0);
    requireShapes("compensatedLossCurve", weight, d, static_cast<size_t>(d));
    if (!(gamma >= 0) || !std::isfinite(gamma))
        throw Error("compensatedLossCurve: dampening γ must be ≥ 0, got " + std::to_string(gamma));
    std::vector<bool> seen(static_cast<size_t>(d), false);
    for (int64_t j : order) {
        if (j < 0 || j >= d || seen[static_cast<size_t>(j)])
            throw Error("compensatedLossCurve: channel " + std::to_string(j) + " is out of range or repeated (D = " +
                        std::to_string(d) + ")");
        seen[static_cast<size_t>(j)] = true;
    }
    if (order.empty()) return {};
    const at::Device device = gram.device();
    const at::Tensor h2 = 2.0 * gram.to(at::kDouble);
    const double dampening = gamma * h2.diagonal().mean().item<double>();
    const at::Tensor h = h2 + dampening * at::eye(d, h2.options());
    auto [factor, info] = at::linalg_cholesky_ex(h, /*upper=*/false, /*check_errors=*/false);
    if (info.item<int64_t>() != 0)
        throw Error("compensatedLossCurve: 2G + γ·mean(diag 2G)·I is not positive definite (γ = " + std::to_string(gamma) +
                    ", D = " + std::to_string(d) + "); use γ > 0");
    const at::Tensor hinv = at::cholesky_inverse(factor, /*upper=*/false);
    const at::Tensor idx = at::tensor(order, at::kLong).to(device);
    const at::Tensor hinvOO = hinv.index_select(0, idx).index_select(1, idx);
    const at::Tensor r = at::linalg_cholesky(hinvOO);  // lower: Hinv[o, o] = R Rᵀ
    const at::Tensor w = weight.to(device, at::kDouble).t().index_select(0, idx);  // W[order, :]
    const at::Tensor y = at::linalg_solve_triangular(r, w, /*upper=*/false);       // R⁻¹ W[order, :]
    const at::Tensor cumulative = (0.5 * (y * y).sum(1)).cumsum(0).to(at::kCPU).contiguous();
    const double* p = cumulative.data_ptr<double>();
    requireFinite(p[cumulative.numel() - 1], "compensatedLossCurve: the compensated error of removing " +
                                                 std::to_string(order.size()) + " channels", kNonFiniteHint);
    return std::vector<double>(p, p + cumulative.numel());
}

at::Tensor flapBiasCompensation(const at::Tensor& weight, const at::Tensor& inputMean,
                                const std::vector<bool>& keepChannel) {
    if (weight.dim() != 2) throw Error("flapBiasCompensation: weight must be [out, D]");
    const int64_t d = weight.size(1);
    requireShapes("flapBiasCompensation", weight, d, keepChannel.size());
    if (inputMean.dim() != 1 || inputMean.size(0) != d)
        throw Error("flapBiasCompensation: input mean must be [" + std::to_string(d) + "]");
    const at::Tensor w = weight.to(at::kDouble);
    const at::Tensor removedMean = inputMean.to(w.device(), at::kDouble) * prunedIndicator(keepChannel, w.options());
    return at::matmul(removedMean, w.t()).to(weight.scalar_type());
}

} // namespace npw
