#include "core/prune/compensation.h"

#include "core/prune/dense_kernels.h"
#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <memory>
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

} // namespace

namespace {

// Rows of the weight read per block (the output columns of the paper's W): 256 × D float64.
constexpr int64_t kRowBlock = 256;

// H = 2s·G + γ'I, γ' = γ·mean(diag 2s·G), its rows and columns in the order `perm` (a permutation
// of the D channels), factorised in place: H[perm, perm] = L Lᵀ, L in the lower triangle of an
// owned D×D column-major buffer. Only G's row-major upper triangle is read. Every quantity of
// Theorem 3 and of the L* curve is a block of this one factor (see compensation.h).
struct PermutedFactor {
    std::unique_ptr<double[]> l;
    int64_t d = 0;
    double dampening = 0;  // γ'
    bool positiveDefinite = false;
    const double* at(int64_t row, int64_t col) const { return l.get() + col * d + row; }
};

PermutedFactor factorisePermuted(const at::Tensor& gram, double scale, const std::vector<int64_t>& perm, double gamma) {
    const at::Tensor g = gram.to(at::kCPU, at::kDouble).contiguous();
    const double* gp = g.data_ptr<double>();
    PermutedFactor f;
    f.d = g.size(0);
    const int64_t d = f.d;
    double diag = 0;
    for (int64_t i = 0; i < d; ++i) diag += gp[i * d + i];
    f.dampening = d > 0 ? gamma * 2 * scale * diag / static_cast<double>(d) : 0.0;
    f.l.reset(new double[static_cast<size_t>(std::max<int64_t>(d * d, 1))]);
    double* h = f.l.get();
    for (int64_t b = 0; b < d; ++b) {
        const int64_t x = perm[static_cast<size_t>(b)];
        const double* gx = gp + x * d;  // G(x, y ≥ x), row-major upper triangle
        double* hb = h + b * d;
        for (int64_t a = b; a < d; ++a) {
            const int64_t y = perm[static_cast<size_t>(a)];
            hb[a] = 2 * scale * (y >= x ? gx[y] : gp[y * d + x]);
        }
        hb[b] += f.dampening;
    }
    f.positiveDefinite = dense::choleskyLower(h, d, d);
    return f;
}

double cube(int64_t n) { return static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n); }

// Columns `channels` of rows r0 … r0+n−1 of a torch-layout weight, i.e. the paper's W[channels, block],
// as a column-major |channels|×n matrix (leading dimension |channels|), from the float64 block.
void gatherColumns(const double* rows, int64_t d, int64_t n, const std::vector<int64_t>& channels, double* dst) {
    const auto m = static_cast<int64_t>(channels.size());
    for (int64_t t = 0; t < n; ++t) {
        const double* row = rows + t * d;
        double* col = dst + t * m;
        for (int64_t i = 0; i < m; ++i) col[i] = row[channels[static_cast<size_t>(i)]];
    }
}

double sumOfSquares(const double* v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += v[i] * v[i];
    return s;
}

} // namespace

CompensationResult compensatePrunedChannels(const at::Tensor& weight, const at::Tensor& gram,
                                            const std::vector<bool>& keepChannel, double gamma) {
    return compensatePrunedChannelsScaled(weight, gram, 1.0, keepChannel, gamma);
}

CompensationResult compensatePrunedChannelsScaled(const at::Tensor& weight, const at::Tensor& gram, double gramScale,
                                                  const std::vector<bool>& keepChannel, double gamma) {
    if (gram.dim() != 2 || gram.size(0) != gram.size(1))
        throw Error("compensatePrunedChannels: gram must be square [D, D]");
    const int64_t d = gram.size(0);
    requireShapes("compensatePrunedChannels", weight, d, keepChannel.size());
    if (!(gamma >= 0) || !std::isfinite(gamma))
        throw Error("compensatePrunedChannels: dampening γ must be ≥ 0, got " + std::to_string(gamma));
    if (!(gramScale > 0) || !std::isfinite(gramScale))
        throw Error("compensatePrunedChannels: the Gram scale must be a positive number, got " + std::to_string(gramScale));
    const dense::StageTimer timer(dense::WorkStage::Compensation);

    // H[π, π] with π = [kept, pruned] = [[L11, 0], [L21, L22]] [[L11ᵀ, L21ᵀ], [0, L22ᵀ]]: then
    // H_kk⁻¹ H_kp = L11⁻ᵀ L21ᵀ (the kept rows' update, δW_k = L11⁻ᵀ L21ᵀ W_p), the Schur complement
    // Hinv[p,p]⁻¹ = H_pp − H_pk H_kk⁻¹ H_kp = L22 L22ᵀ (so L* = ½‖L22ᵀ W_p‖²), and
    // W_pᵀ H_pp W_p = ‖L21ᵀ W_p‖² + ‖L22ᵀ W_p‖² (the error of merely zeroing the channels).
    std::vector<int64_t> kept, pruned;
    for (int64_t i = 0; i < d; ++i) (keepChannel[static_cast<size_t>(i)] ? kept : pruned).push_back(i);
    CompensationResult out;
    if (pruned.empty()) {
        double diag = 0;
        const at::Tensor g = gram.to(at::kCPU, at::kDouble).contiguous();
        for (int64_t i = 0; i < d; ++i) diag += g.data_ptr<double>()[i * d + i];
        out.dampening = gamma * 2 * gramScale * diag / static_cast<double>(d);
        out.weight = weight.clone();
        return out;
    }
    std::vector<int64_t> perm = kept;
    perm.insert(perm.end(), pruned.begin(), pruned.end());
    const PermutedFactor f = factorisePermuted(gram, gramScale, perm, gamma);
    out.dampening = f.dampening;
    if (!f.positiveDefinite)
        throw Error("compensatePrunedChannels: 2G + γ·mean(diag 2G)·I is not positive definite (γ = " +
                    std::to_string(gamma) + ", D = " + std::to_string(d) +
                    "): G is singular (fewer calibration tokens than channels, or a dead channel); use γ > 0");
    const auto k = static_cast<int64_t>(kept.size()), p = static_cast<int64_t>(pruned.size());
    const int64_t rows = weight.size(0);
    const double* l11 = f.at(0, 0);
    const double* l21 = f.at(k, 0);
    const double* l22 = f.at(k, k);

    const at::Tensor result = at::empty({rows, d}, weight.options().device(at::kCPU));
    std::vector<double> wp(static_cast<size_t>(p * std::min(kRowBlock, std::max<int64_t>(rows, 1))));
    std::vector<double> z(static_cast<size_t>(k * std::min(kRowBlock, std::max<int64_t>(rows, 1))));
    double zeroedSq = 0, lossSq = 0, prunedSq = 0, deltaSq = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int64_t n = std::min(kRowBlock, rows - r0);
        const at::Tensor original = weight.narrow(0, r0, n).to(at::kCPU, at::kDouble).contiguous();  // [n, D]
        // Updated in place below: a copy even where `original` is the caller's own float64 storage.
        at::Tensor block = original.clone();
        double* bp = block.data_ptr<double>();
        gatherColumns(bp, d, n, pruned, wp.data());
        prunedSq += sumOfSquares(wp.data(), p * n);
        dense::gemmTransposedA(k, n, p, l21, d, wp.data(), p, z.data(), k);  // L21ᵀ W_p
        zeroedSq += sumOfSquares(z.data(), k * n);
        dense::solveLowerTransposed(k, n, l11, d, z.data(), k);               // L11⁻ᵀ L21ᵀ W_p
        dense::multiplyLowerTransposed(p, n, l22, d, wp.data(), p);           // L22ᵀ W_p
        lossSq += sumOfSquares(wp.data(), p * n);
        for (int64_t t = 0; t < n; ++t) {
            double* row = bp + t * d;
            const double* zt = z.data() + t * k;
            for (int64_t i = 0; i < k; ++i) row[kept[static_cast<size_t>(i)]] += zt[i];
            for (int64_t j : pruned) row[j] = 0.0;
        }
        const at::Tensor rounded = block.to(weight.scalar_type());
        result.narrow(0, r0, n).copy_(rounded);
        deltaSq += (rounded.to(at::kDouble) - original).square().sum().item<double>();
    }
    dense::StageWork work;
    work.choleskyFlops = cube(d) / 3;
    const double kd = static_cast<double>(k), pd = static_cast<double>(p);
    work.gemmFlops = (2.0 * kd * pd + kd * kd + pd * pd) * static_cast<double>(rows);
    dense::addWork(dense::WorkStage::Compensation, work);
    out.optimalLoss = 0.5 * lossSq;
    out.uncompensatedLoss = 0.5 * (zeroedSq + lossSq - f.dampening * prunedSq);
    out.deltaSquaredNorm = deltaSq;
    requireFinite(out.optimalLoss, "compensatePrunedChannels: the optimal error L*", kNonFiniteHint);
    out.weight = result.to(weight.device());
    return out;
}

std::vector<double> compensatedLossCurve(const at::Tensor& weight, const at::Tensor& gram,
                                         const std::vector<int64_t>& order, double gamma) {
    return compensatedLossCurveScaled(weight, gram, 1.0, order, gamma);
}

std::vector<double> compensatedLossCurveScaled(const at::Tensor& weight, const at::Tensor& gram, double gramScale,
                                               const std::vector<int64_t>& order, double gamma) {
    if (gram.dim() != 2 || gram.size(0) != gram.size(1)) throw Error("compensatedLossCurve: gram must be square [D, D]");
    const int64_t d = gram.size(0);
    requireShapes("compensatedLossCurve", weight, d, static_cast<size_t>(d));
    if (!(gamma >= 0) || !std::isfinite(gamma))
        throw Error("compensatedLossCurve: dampening γ must be ≥ 0, got " + std::to_string(gamma));
    if (!(gramScale > 0) || !std::isfinite(gramScale))
        throw Error("compensatedLossCurve: the Gram scale must be a positive number, got " + std::to_string(gramScale));
    std::vector<bool> seen(static_cast<size_t>(d), false);
    for (int64_t j : order) {
        if (j < 0 || j >= d || seen[static_cast<size_t>(j)])
            throw Error("compensatedLossCurve: channel " + std::to_string(j) + " is out of range or repeated (D = " +
                        std::to_string(d) + ")");
        seen[static_cast<size_t>(j)] = true;
    }
    if (order.empty()) return {};
    const dense::StageTimer timer(dense::WorkStage::LossCurve);
    // π = [the channels not in `order`, then `order` reversed]. The trailing m×m block L22 of the
    // factor of H[π, π] factorises the Schur complement S (in reversed order), and Hinv[o, o] = S⁻¹.
    // With J the reversal, S = U Uᵀ for U = J L22 J (upper), so the lower Cholesky factor of
    // Hinv[o, o] is R = U⁻ᵀ and R⁻¹ W[o] = Uᵀ W[o] = J L22ᵀ W[reversed o]: one factorisation and
    // one triangular multiply, no inverse and no second factorisation.
    const auto m = static_cast<int64_t>(order.size());
    std::vector<int64_t> perm;
    perm.reserve(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i)
        if (!seen[static_cast<size_t>(i)]) perm.push_back(i);
    const std::vector<int64_t> reversed(order.rbegin(), order.rend());
    perm.insert(perm.end(), reversed.begin(), reversed.end());
    const PermutedFactor f = factorisePermuted(gram, gramScale, perm, gamma);
    if (!f.positiveDefinite)
        throw Error("compensatedLossCurve: 2G + γ·mean(diag 2G)·I is not positive definite (γ = " + std::to_string(gamma) +
                    ", D = " + std::to_string(d) + "); use γ > 0");
    const double* l22 = f.at(d - m, d - m);
    const int64_t rows = weight.size(0);
    std::vector<double> y(static_cast<size_t>(m * std::min(kRowBlock, std::max<int64_t>(rows, 1))));
    std::vector<double> rowNormSq(static_cast<size_t>(m), 0.0);  // ‖(L22ᵀ W[reversed o])_i‖²
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int64_t n = std::min(kRowBlock, rows - r0);
        const at::Tensor block = weight.narrow(0, r0, n).to(at::kCPU, at::kDouble).contiguous();
        gatherColumns(block.data_ptr<double>(), d, n, reversed, y.data());
        dense::multiplyLowerTransposed(m, n, l22, d, y.data(), m);
        for (int64_t t = 0; t < n; ++t) {
            const double* col = y.data() + t * m;
            for (int64_t i = 0; i < m; ++i) rowNormSq[static_cast<size_t>(i)] += col[i] * col[i];
        }
    }
    dense::StageWork work;
    work.choleskyFlops = cube(d) / 3;
    work.gemmFlops = static_cast<double>(m) * static_cast<double>(m) * static_cast<double>(rows);
    dense::addWork(dense::WorkStage::LossCurve, work);
    std::vector<double> curve(static_cast<size_t>(m));
    double cumulative = 0;
    for (int64_t i = 0; i < m; ++i) {
        cumulative += 0.5 * rowNormSq[static_cast<size_t>(m - 1 - i)];
        curve[static_cast<size_t>(i)] = cumulative;
    }
    requireFinite(curve.back(), "compensatedLossCurve: the compensated error of removing " + std::to_string(order.size()) +
                                    " channels", kNonFiniteHint);
    return curve;
}

at::Tensor flapBiasCompensation(const at::Tensor& weight, const at::Tensor& inputMean,
                                const std::vector<bool>& keepChannel) {
    if (weight.dim() != 2) throw Error("flapBiasCompensation: weight must be [out, D]");
    const int64_t d = weight.size(1);
    requireShapes("flapBiasCompensation", weight, d, keepChannel.size());
    if (inputMean.dim() != 1 || inputMean.size(0) != d)
        throw Error("flapBiasCompensation: input mean must be [" + std::to_string(d) + "]");
    // W[:, p] μ_p: only the pruned columns in float64 (a float64 copy of the whole weight would be
    // 470 MB for one 8B down_proj).
    std::vector<int64_t> pruned;
    for (size_t i = 0; i < keepChannel.size(); ++i)
        if (!keepChannel[i]) pruned.push_back(static_cast<int64_t>(i));
    const at::Tensor idx = at::tensor(pruned, at::kLong).to(weight.device());
    const at::Tensor wp = weight.index_select(1, idx).to(at::kDouble);
    const at::Tensor removedMean = inputMean.to(wp.device(), at::kDouble).index_select(0, idx);
    return at::matmul(wp, removedMean).to(weight.scalar_type());
}

} // namespace npw
