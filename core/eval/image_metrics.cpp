#include "core/eval/image_metrics.h"
#include "core/models/non_finite.h"

#include "core/io/shape_text.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <algorithm>
#include <cmath>
#include <vector>

namespace npw {

namespace {

void requireFinite(const at::Tensor& t, const std::string& what) {
    if (!allFinite(t)) throw Error(what + " holds NaN or Inf");
}

at::Tensor symmetric(const at::Tensor& m) { return (m + m.transpose(0, 1)) * 0.5; }

// Squared Euclidean distances between the rows of a (B×D) and b (S×D), clamped at 0 as ADM does.
at::Tensor squaredDistances(const at::Tensor& a, const at::Tensor& b, const at::Tensor& normA,
                            const at::Tensor& normB) {
    return (normA.unsqueeze(1) - 2.0 * at::matmul(a, b.transpose(0, 1)) + normB.unsqueeze(0)).clamp_min_(0.0);
}

// Eigenvalues below the round-off level of the largest (d·ε·λmax, numpy's matrix_rank
// tolerance) are zeros of a rank-deficient covariance (fewer samples than dimensions): set to 0,
// since sqrt would turn a 1e-16 residue into a 1e-8 contribution each.
at::Tensor roundOffZero(const at::Tensor& w) {
    const double tol = std::max(0.0, w.max().item<double>()) * double(w.numel()) * 2.220446049250313e-16;
    return at::where(w > tol, w, at::zeros_like(w));
}

// sqrt(Σ) of a symmetric float64 covariance, from its eigen-decomposition.
at::Tensor covarianceSqrt(const at::Tensor& sigma) {
    auto [w, v] = at::linalg_eigh(sigma);
    return at::matmul(v * roundOffZero(w).sqrt().unsqueeze(0), v.transpose(0, 1));
}

// The Fréchet distance with sqrt(Σ1) given (computed once where Σ1 is compared many times: FID's
// bootstrap): tr sqrt(Σ1 Σ2) is that of the symmetric sqrt(Σ1)·Σ2·sqrt(Σ1). float64, checked inputs.
double frechetWithSqrt(const at::Tensor& m1, const at::Tensor& s1, const at::Tensor& sqrtS1, const at::Tensor& m2,
                       const at::Tensor& s2) {
    at::Tensor inner = symmetric(at::matmul(at::matmul(sqrtS1, s2), sqrtS1));
    const double traceSqrt = roundOffZero(at::linalg_eigvalsh(inner)).sqrt().sum().item<double>();
    const at::Tensor diff = m1 - m2;
    return at::dot(diff, diff).item<double>() + s1.trace().item<double>() + s2.trace().item<double>() -
           2.0 * traceSqrt;
}

} // namespace

GaussianStats gaussianStats(const at::Tensor& features) {
    at::NoGradGuard noGrad;
    if (features.dim() != 2) throw Error("gaussianStats: features must be N×D, got " + formatShape(features.sizes()));
    if (features.size(0) < 2)
        throw Error("gaussianStats: a covariance needs at least 2 feature vectors, got " +
                    std::to_string(features.size(0)));
    at::Tensor x = features.to(at::kDouble);
    requireFinite(x, "features");
    GaussianStats s;
    s.count = x.size(0);
    s.mean = x.mean(0);
    at::Tensor xc = x - s.mean;
    s.cov = at::matmul(xc.transpose(0, 1), xc) / double(s.count - 1);
    return s;
}

double frechetDistance(const at::Tensor& mu1, const at::Tensor& sigma1, const at::Tensor& mu2,
                       const at::Tensor& sigma2) {
    at::NoGradGuard noGrad;
    const int64_t d = mu1.numel();
    if (mu1.dim() != 1 || mu2.dim() != 1 || mu2.numel() != d)
        throw Error("Fréchet distance: means must be vectors of one length, got " + formatShape(mu1.sizes()) + " and " +
                    formatShape(mu2.sizes()));
    for (const at::Tensor* s : {&sigma1, &sigma2})
        if (s->dim() != 2 || s->size(0) != d || s->size(1) != d)
            throw Error("Fréchet distance: covariance " + formatShape(s->sizes()) + " does not match the mean's " +
                        std::to_string(d) + " dimensions");
    at::Tensor m1 = mu1.to(at::kDouble), m2 = mu2.to(at::kDouble);
    at::Tensor s1 = symmetric(sigma1.to(at::kDouble)), s2 = symmetric(sigma2.to(at::kDouble));
    for (auto [t, name] : {std::pair{&m1, "first mean"}, {&m2, "second mean"}, {&s1, "first covariance"},
                           {&s2, "second covariance"}})
        requireFinite(*t, std::string("Fréchet distance: ") + name);
    return frechetWithSqrt(m1, s1, covarianceSqrt(s1), m2, s2);
}

double frechetDistance(const GaussianStats& a, const GaussianStats& b) {
    return frechetDistance(a.mean, a.cov, b.mean, b.cov);
}

InceptionScore inceptionScore(const at::Tensor& logits, int64_t splits) {
    at::NoGradGuard noGrad;
    if (logits.dim() != 2 || logits.size(1) < 2)
        throw Error("Inception Score: logits must be N×K with K >= 2 classes, got " + formatShape(logits.sizes()));
    const int64_t n = logits.size(0);
    if (splits < 1 || splits > n)
        throw Error("Inception Score: " + std::to_string(splits) + " splits of " + std::to_string(n) +
                    " samples (need 1 <= splits <= samples)");
    at::Tensor logp = at::log_softmax(logits.to(at::kDouble), 1);
    requireFinite(logp, "Inception Score: logits");
    at::Tensor p = logp.exp();
    std::vector<double> scores;
    for (int64_t s = 0; s < splits; ++s) {
        const int64_t begin = s * n / splits, end = (s + 1) * n / splits;
        at::Tensor part = p.narrow(0, begin, end - begin), logPart = logp.narrow(0, begin, end - begin);
        at::Tensor logMarginal = part.mean(0, true).log();
        // p·(log p − log p(y)); a class whose probability underflowed to 0 contributes 0.
        at::Tensor terms = at::where(part > 0, part * (logPart - logMarginal), at::zeros_like(part));
        scores.push_back(std::exp(terms.sum(1).mean().item<double>()));
    }
    InceptionScore r;
    r.splits = splits;
    const auto splitCount = static_cast<double>(splits);
    for (double s : scores) r.mean += s / splitCount;
    for (double s : scores) r.std += (s - r.mean) * (s - r.mean) / splitCount;  // numpy's std (ddof 0)
    r.std = std::sqrt(r.std);
    return r;
}

at::Tensor manifoldRadii(const at::Tensor& features, int64_t k, int64_t rowBatch, const ProgressFn& progress) {
    at::NoGradGuard noGrad;
    if (features.dim() != 2) throw Error("manifold radii: features must be N×D, got " + formatShape(features.sizes()));
    const int64_t n = features.size(0);
    if (k < 1 || n < k + 1)
        throw Error("manifold radii: k = " + std::to_string(k) + " needs at least " + std::to_string(k + 1) +
                    " feature vectors, got " + std::to_string(n));
    at::Tensor x = features.to(at::kDouble);
    at::Tensor norms = (x * x).sum(1);
    at::Tensor radii = at::empty({n}, at::kDouble);
    for (int64_t b = 0; b < n; b += rowBatch) {
        const int64_t m = std::min(rowBatch, n - b);
        at::Tensor dist = squaredDistances(x.narrow(0, b, m), x, norms.narrow(0, b, m), norms);
        // Row i's own distance (0) is its 0-th neighbour, so the k-th is at index k.
        at::Tensor kth = std::get<0>(at::topk(dist, k + 1, 1, /*largest=*/false, /*sorted=*/true)).select(1, k);
        radii.narrow(0, b, m).copy_(kth);
        reportProgress(progress, "manifold radii", double(b + m), double(n));
    }
    return radii;
}

PrecisionRecall precisionRecall(const at::Tensor& reference, const at::Tensor& samples, int64_t k, int64_t rowBatch,
                                const at::Tensor& referenceRadii, const ProgressFn& progress) {
    at::NoGradGuard noGrad;
    if (reference.dim() != 2 || samples.dim() != 2 || reference.size(1) != samples.size(1))
        throw Error("precision/recall: reference " + formatShape(reference.sizes()) + " and samples " +
                    formatShape(samples.sizes()) + " must be N×D with one D");
    at::Tensor r = reference.to(at::kDouble), s = samples.to(at::kDouble);
    at::Tensor radiiR = referenceRadii.defined() ? referenceRadii.to(at::kDouble) : manifoldRadii(r, k, rowBatch);
    if (radiiR.dim() != 1 || radiiR.size(0) != r.size(0))
        throw Error("precision/recall: " + std::to_string(radiiR.numel()) + " reference radii for " +
                    std::to_string(r.size(0)) + " reference features");
    at::Tensor radiiS = manifoldRadii(s, k, rowBatch);
    at::Tensor normR = (r * r).sum(1), normS = (s * s).sum(1);
    at::Tensor sampleInReference = at::zeros({s.size(0)}, at::kBool);
    at::Tensor referenceInSamples = at::zeros({r.size(0)}, at::kBool);
    for (int64_t b = 0; b < r.size(0); b += rowBatch) {
        const int64_t m = std::min(rowBatch, r.size(0) - b);
        at::Tensor dist = squaredDistances(r.narrow(0, b, m), s, normR.narrow(0, b, m), normS);  // m×S
        sampleInReference.logical_or_(dist.le(radiiR.narrow(0, b, m).unsqueeze(1)).any(0));
        referenceInSamples.narrow(0, b, m).copy_(dist.le(radiiS.unsqueeze(0)).any(1));
        reportProgress(progress, "precision/recall", double(b + m), double(r.size(0)));
    }
    PrecisionRecall pr;
    pr.precision = sampleInReference.to(at::kDouble).mean().item<double>();
    pr.recall = referenceInSamples.to(at::kDouble).mean().item<double>();
    return pr;
}

at::Tensor sfidFeatures(const at::Tensor& spatial, int64_t channels) {
    if (spatial.dim() != 4)
        throw Error("sFID: the spatial features must be N×C×H×W, got " + formatShape(spatial.sizes()));
    if (spatial.size(1) < channels)
        throw Error("sFID: the spatial features have " + std::to_string(spatial.size(1)) + " channels; at least " +
                    std::to_string(channels) + " are needed");
    return spatial.narrow(1, 0, channels).permute({0, 2, 3, 1}).reshape({spatial.size(0), -1}).contiguous();
}

ReferenceStats makeReferenceStats(const FeatureSet& f, const std::map<std::string, std::string>& metadata, int64_t k,
                                  const ProgressFn& progress) {
    ReferenceStats r;
    r.pooled = gaussianStats(f.pooled);
    r.spatial = gaussianStats(f.spatial);
    r.features = f.pooled.to(at::kFloat).contiguous();
    r.k = k;
    r.radii = manifoldRadii(r.features, k, 1024, progress);
    r.metadata = metadata;
    r.metadata["count"] = std::to_string(f.pooled.size(0));
    r.metadata["k"] = std::to_string(k);
    return r;
}

void saveReferenceStats(const ReferenceStats& s, const std::string& path) {
    auto meta = s.metadata;
    meta["npw_reference_stats"] = "1";
    meta["k"] = std::to_string(s.k);
    writeSafeTensors(path,
                     {{"pooled.mean", s.pooled.mean},
                      {"pooled.cov", s.pooled.cov},
                      {"spatial.mean", s.spatial.mean},
                      {"spatial.cov", s.spatial.cov},
                      {"features", s.features},
                      {"radii", s.radii}},
                     meta);
}

ReferenceStats loadReferenceStats(const std::string& path) {
    auto file = SafeTensorsFile::open(path);
    auto fail = [&](const std::string& problem) -> void {
        throw Error("reference statistics '" + path + "': " + problem);
    };
    if (!file->metadata().count("npw_reference_stats"))
        fail("not written by npw metrics (no npw_reference_stats in the metadata)");
    for (const char* name : {"pooled.mean", "pooled.cov", "spatial.mean", "spatial.cov", "features", "radii"})
        if (!file->has(name)) fail(std::string("tensor '") + name + "' is missing");
    ReferenceStats s;
    s.metadata = file->metadata();
    s.k = std::stoll(s.metadata.at("k"));
    s.pooled.mean = file->load("pooled.mean").to(at::kDouble);
    s.pooled.cov = file->load("pooled.cov").to(at::kDouble);
    s.spatial.mean = file->load("spatial.mean").to(at::kDouble);
    s.spatial.cov = file->load("spatial.cov").to(at::kDouble);
    s.features = file->loadFloat("features");
    s.radii = file->load("radii").to(at::kDouble);
    const int64_t d = s.pooled.mean.numel(), ds = s.spatial.mean.numel(), n = s.features.size(0);
    if (s.pooled.cov.sizes() != at::IntArrayRef({d, d}) || s.spatial.cov.sizes() != at::IntArrayRef({ds, ds}) ||
        s.features.dim() != 2 || s.features.size(1) != d || s.radii.sizes() != at::IntArrayRef({n}))
        fail("shapes disagree: pooled mean " + formatShape(s.pooled.mean.sizes()) + ", cov " +
             formatShape(s.pooled.cov.sizes()) + ", spatial mean " + formatShape(s.spatial.mean.sizes()) + ", cov " +
             formatShape(s.spatial.cov.sizes()) + ", features " + formatShape(s.features.sizes()) + ", radii " +
             formatShape(s.radii.sizes()));
    s.pooled.count = s.spatial.count = n;
    return s;
}

int64_t fidMinimumSamples(int64_t featureDims) { return 4 * featureDims; }

std::string fidSampleWarning(const ImageMetrics& m) {
    if (m.featureDims <= 0 || m.samples >= fidMinimumSamples(m.featureDims)) return {};
    return "FID on " + std::to_string(m.samples) + " images is noise: with " + std::to_string(m.featureDims) +
           "-dimensional features it needs at least " + std::to_string(fidMinimumSamples(m.featureDims)) +
           " (4 per dimension)" +
           (m.samples <= m.featureDims ? std::string(", and below ") + std::to_string(m.featureDims + 1) +
                                             " the samples' covariance is singular"
                                       : std::string()) +
           "; its bias (FID reads high on few images, falling as 1/N) and seed-to-seed spread can exceed the "
           "differences between models, so do not rank models by it (more images: --samples / --n; fid_low–fid_high: "
           "FID's 5–95 % bootstrap interval over these images)";
}

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// numpy.percentile's default (linear): the value at rank q·(n−1) of the sorted values.
double percentile(std::vector<double> sorted, double q) {
    std::sort(sorted.begin(), sorted.end());
    const double rank = q * double(sorted.size() - 1);
    const size_t below = static_cast<size_t>(std::floor(rank));
    const size_t above = std::min(below + 1, sorted.size() - 1);
    return sorted[below] + (rank - double(below)) * (sorted[above] - sorted[below]);
}

} // namespace

FidInterval fidBootstrapInterval(const at::Tensor& features, const GaussianStats& reference, int64_t resamples,
                                 uint64_t seed) {
    at::NoGradGuard noGrad;
    if (features.dim() != 2 || features.size(0) < 2)
        throw Error("FID bootstrap: features must be N×D with N ≥ 2, got " + formatShape(features.sizes()));
    if (resamples < 2) throw Error("FID bootstrap: needs at least 2 resamples, got " + std::to_string(resamples));
    const int64_t n = features.size(0);
    const at::Tensor x = features.to(at::kDouble);
    if (x.size(1) != reference.mean.numel())
        throw Error("FID bootstrap: features of " + std::to_string(x.size(1)) + " dimensions against a reference of " +
                    std::to_string(reference.mean.numel()));
    // The reference side is the same in every resample: its sqrt(Σ) once (FID is symmetric).
    const at::Tensor refMean = reference.mean.to(at::kDouble), refCov = symmetric(reference.cov.to(at::kDouble));
    requireFinite(refMean, "FID bootstrap: the reference mean");
    requireFinite(refCov, "FID bootstrap: the reference covariance");
    const at::Tensor refSqrt = covarianceSqrt(refCov);
    std::vector<double> fids;
    fids.reserve(static_cast<size_t>(resamples));
    std::vector<int64_t> rows(static_cast<size_t>(n));
    for (int64_t b = 0; b < resamples; ++b) {
        for (int64_t k = 0; k < n; ++k)
            rows[static_cast<size_t>(k)] =
                static_cast<int64_t>(splitmix64(seed + static_cast<uint64_t>(b) * static_cast<uint64_t>(n) + static_cast<uint64_t>(k)) %
                                     static_cast<uint64_t>(n));
        const at::Tensor index = at::tensor(rows, at::kLong);
        const GaussianStats resampled = gaussianStats(x.index_select(0, index));
        fids.push_back(frechetWithSqrt(refMean, refCov, refSqrt, resampled.mean, symmetric(resampled.cov)));
    }
    const GaussianStats all = gaussianStats(x);
    const double fid = frechetWithSqrt(refMean, refCov, refSqrt, all.mean, symmetric(all.cov));
    double mean = 0;
    for (double f : fids) mean += f / double(resamples);
    FidInterval out;
    out.bias = mean - fid;
    out.low = percentile(fids, 0.05) - out.bias;
    out.high = percentile(fids, 0.95) - out.bias;
    out.resamples = resamples;
    return out;
}

ImageMetrics computeImageMetrics(const ReferenceStats& ref, const FeatureSet& f, int64_t isSplits,
                                 const ProgressFn& progress) {
    const std::string net = ref.metadata.count("feature_network") ? ref.metadata.at("feature_network") : "?";
    if (f.pooled.size(1) != ref.pooled.mean.numel() || f.spatial.size(1) != ref.spatial.mean.numel())
        throw Error("the samples' features (pooled " + std::to_string(f.pooled.size(1)) + ", spatial " +
                    std::to_string(f.spatial.size(1)) + " dims) do not match the reference statistics (pooled " +
                    std::to_string(ref.pooled.mean.numel()) + ", spatial " + std::to_string(ref.spatial.mean.numel()) +
                    " dims, made with feature network '" + net + "')");
    ImageMetrics m;
    m.samples = f.pooled.size(0);
    m.referenceCount = ref.features.size(0);
    m.featureDims = f.pooled.size(1);
    m.fid = frechetDistance(gaussianStats(f.pooled), ref.pooled);
    // Below the samples FID needs, how far the generated images' own sampling moves it.
    if (m.samples < fidMinimumSamples(m.featureDims)) {
        const FidInterval interval = fidBootstrapInterval(f.pooled, ref.pooled);
        m.fidLow = interval.low;
        m.fidHigh = interval.high;
        m.fidResampleBias = interval.bias;
        m.fidResamples = interval.resamples;
    }
    m.sfid = frechetDistance(gaussianStats(f.spatial), ref.spatial);
    m.is = inceptionScore(f.logits, std::min<int64_t>(isSplits, f.logits.size(0)));
    PrecisionRecall pr = precisionRecall(ref.features, f.pooled, ref.k, 1024, ref.radii, progress);
    m.precision = pr.precision;
    m.recall = pr.recall;
    // Finite inputs can still overflow (features near float64's range): never a null in the JSON.
    if (m.fidResamples > 0 && !(std::isfinite(m.fidLow) && std::isfinite(m.fidHigh)))
        throw Error("image metrics: FID's bootstrap interval became non-finite on " + std::to_string(m.samples) + " samples");
    for (const auto& [value, name] : {std::pair{m.fid, "FID"}, {m.sfid, "sFID"}, {m.is.mean, "Inception Score"},
                                      {m.is.std, "the Inception Score's spread"}, {m.precision, "precision"},
                                      {m.recall, "recall"}})
        if (!std::isfinite(value))
            throw Error(std::string("image metrics: ") + name + " became non-finite (" + nonFiniteName(value) +
                        ") on " + std::to_string(m.samples) + " samples");
    return m;
}

} // namespace npw
