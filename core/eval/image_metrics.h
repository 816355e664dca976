#pragma once
// Image-generation metrics as the ADM evaluator (openai/guided-diffusion, evaluations/
// evaluator.py) defines them — the numbers LlamaGen and the paper report — over features of
// any feature network (core/eval/feature_network.h):
//   FID   Fréchet distance of Gaussian fits to the pooled features;
//   sFID  the same on the first 7 channels of the spatial map, flattened;
//   IS    exp(mean_x KL(p(y|x) ‖ p(y))) per split, mean and std over splits;
//   precision / recall  k-NN manifolds (k = 3) of Kynkäänniemi et al. 2019: a sample counts
//         for precision when it lies within the k-th-neighbour radius of some reference
//         feature, a reference feature counts for recall when it lies within that of some sample.
// All statistics in float64.
#include "core/util/progress.h"

#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>

#include <map>
#include <string>

namespace npw {

// Mean and covariance (unbiased, N-1, as numpy.cov) of features N×D, in float64.
struct GaussianStats {
    at::Tensor mean;  // D
    at::Tensor cov;   // D×D
    int64_t count = 0;
};
GaussianStats gaussianStats(const at::Tensor& features);

// ‖μ1-μ2‖² + tr Σ1 + tr Σ2 - 2 tr sqrt(Σ1 Σ2). The trace of the matrix square root is taken
// from the symmetric form sqrt(Σ1)·Σ2·sqrt(Σ1), whose eigenvalues are those of Σ1Σ2 (real and
// ≥ 0 for covariances): eigh is stable where scipy's sqrtm on Σ1Σ2 needs the ADM evaluator's
// eps·I fallback, and round-off negatives are clamped to 0. Throws npw::Error on mismatched
// shapes or non-finite input.
double frechetDistance(const GaussianStats& a, const GaussianStats& b);
double frechetDistance(const at::Tensor& mu1, const at::Tensor& sigma1, const at::Tensor& mu2,
                       const at::Tensor& sigma2);

struct InceptionScore {
    double mean = 0, std = 0;
    int64_t splits = 0;
};
// logits N×K (softmax taken here, in float64). The N rows are cut into `splits` contiguous
// parts of (nearly) equal size, as the original IS code; with 50 000 samples and 10 splits
// this is the ADM evaluator's split size of 5000.
InceptionScore inceptionScore(const at::Tensor& logits, int64_t splits = 10);

struct PrecisionRecall {
    double precision = 0, recall = 0;
};
// k-th nearest-neighbour radii (squared Euclidean distance, the point itself counted as its
// own 0-th neighbour, as ADM's ManifoldEstimator). rowBatch bounds memory: rowBatch × N distances.
at::Tensor manifoldRadii(const at::Tensor& features, int64_t k = 3, int64_t rowBatch = 1024,
                         const ProgressFn& progress = nullptr);
// reference R×D, samples S×D. Radii may be given (cached with the reference statistics).
PrecisionRecall precisionRecall(const at::Tensor& reference, const at::Tensor& samples, int64_t k = 3,
                                int64_t rowBatch = 1024, const at::Tensor& referenceRadii = {},
                                const ProgressFn& progress = nullptr);

// ADM's sFID features: the first 7 channels of an N×C×H×W map, laid out N×H×W×7 (the
// TensorFlow channel-last order of `mixed_6/conv`) and flattened to N×(7·H·W).
at::Tensor sfidFeatures(const at::Tensor& spatial, int64_t channels = 7);

// Everything the metrics need from a set of images' features.
struct FeatureSet {
    at::Tensor pooled;   // N×D float32
    at::Tensor logits;   // N×K float32
    at::Tensor spatial;  // N×(7·H·W) float32 (already sfidFeatures)
};

// The reference side, computed once and cached: Gaussian fits of the pooled and spatial
// features, the pooled features themselves and their k-NN radii (for precision/recall), and
// metadata naming the feature network and the images that made them.
struct ReferenceStats {
    GaussianStats pooled, spatial;
    at::Tensor features;  // R×D pooled features (float32)
    at::Tensor radii;     // R k-th-neighbour squared radii
    int64_t k = 3;
    std::map<std::string, std::string> metadata;  // "feature_network", "images", "count", ...
};
ReferenceStats makeReferenceStats(const FeatureSet& features, const std::map<std::string, std::string>& metadata,
                                  int64_t k = 3, const ProgressFn& progress = nullptr);
void saveReferenceStats(const ReferenceStats& stats, const std::string& path);
ReferenceStats loadReferenceStats(const std::string& path);

struct ImageMetrics {
    double fid = 0, sfid = 0;
    // FID's bootstrap interval over the generated images (fidBootstrapInterval): the 5th and 95th
    // percentiles; NaN, with fidResamples 0, where it was not computed (from the minimum on).
    double fidLow = std::nan(""), fidHigh = std::nan(""), fidResampleBias = std::nan("");
    int64_t fidResamples = 0;
    InceptionScore is;
    double precision = 0, recall = 0;
    int64_t samples = 0, referenceCount = 0;
    int64_t featureDims = 0;  // D of the pooled features (0: not recorded)
};

// The generated images FID needs to compare models: 4·D for D feature dimensions. Below D + 1
// the samples' covariance is singular; above it FID still carries a bias that falls as 1/N (Chong
// and Forsyth, "Effectively Unbiased FID", 2020) and a seed-to-seed spread. Measured with
// demo:c2i and the demo classifier's features (D = 128), FID of one model at two seeds: 50
// images 121 / 137, 130: 84 / 91, 260: 68 / 80, 520: 64.2 / 63.8, 1,040: 61.6 / 61.3 — from 4·D
// on, within a few percent of the large-sample value and steady across seeds. For Inception
// (D = 2048) that is 8,192, near the papers' 10,000-50,000.
int64_t fidMinimumSamples(int64_t featureDims);
// Empty when `m` has the samples FID needs; else a warning naming the count, the need and what
// it means for a comparison of models.
std::string fidSampleWarning(const ImageMetrics& m);
// FID's 5-95 % bootstrap interval over the generated images: `resamples` times, N of the N
// sample features drawn with replacement and their Gaussian fit compared with the reference's.
// A resample repeats images (about 63 % are distinct), which raises FID by itself where N is small
// next to the feature dimensions (demo:c2i, 50 images, 128 dimensions: FID 110.8, resamples
// 145-211), so the resamples' 5th and 95th percentiles (numpy.percentile's linear interpolation)
// are shifted by that bias, the resamples' mean minus FID: the interval says how far FID moves
// with the images drawn, around FID itself. It does not remove FID's own small-sample bias.
// Index k of resample b is splitmix64(seed + b·N + k) mod N, so an independent implementation can
// draw the same resamples (tests/fixtures/fid_bootstrap_numpy.py).
struct FidInterval {
    double low = 0, high = 0;  // bias-corrected 5th and 95th percentiles
    double bias = 0;           // the resamples' mean FID minus the FID of all the images
    int64_t resamples = 0;
};
inline constexpr int64_t kFidBootstrapResamples = 200;
FidInterval fidBootstrapInterval(const at::Tensor& sampleFeatures, const GaussianStats& reference,
                                 int64_t resamples = kFidBootstrapResamples, uint64_t seed = 0);
// computeImageMetrics adds the interval where FID has fewer samples than it needs (fidSampleWarning).
ImageMetrics computeImageMetrics(const ReferenceStats& reference, const FeatureSet& samples, int64_t isSplits = 10,
                                 const ProgressFn& progress = nullptr);

} // namespace npw
