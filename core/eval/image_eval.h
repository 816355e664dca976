#pragma once
// What a class-conditional image model is measured by (the paper's image table and Figure 5):
// generate N images with balanced classes and fixed seeds, decode them with the VQ tokenizer,
// and compare their features with a reference set's (FID, sFID, IS, precision, recall); also
// how often the feature network's classifier agrees with the requested class, and how fast
// the model generates.
#include "core/eval/feature_network.h"
#include "core/eval/image_generate.h"
#include "core/eval/image_metrics.h"
#include "core/models/llamagen.h"
#include "core/models/vq_model.h"
#include "core/util/progress.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace npw {

// n class ids cycling through 0..numClasses−1 (sample i asks for class i mod numClasses).
std::vector<int64_t> balancedClasses(int64_t n, int64_t numClasses);

struct GeneratedImages {
    at::Tensor images;              // [N, C, H, W] float in [0, 1], CPU
    std::vector<int64_t> classes;
    double generateSeconds = 0;     // token generation
    double decodeSeconds = 0;       // VQ decoding
    double tokensPerSecond = 0;     // image tokens generated per second
};

// Generates (in batches of sampling.batchSize) and decodes. Sample i uses seed + i, so a dense
// and a pruned model draw the same random numbers for the same sample. Progress "generate".
GeneratedImages generateImages(const LlamaGenModel& model, const VqModel& vq, const std::vector<int64_t>& classes,
                               const ImageSamplingOptions& sampling, const ProgressFn& progress = nullptr);

struct ImageEvaluation {
    ImageMetrics metrics;
    // Fraction of samples the feature network's classifier labels with the requested class;
    // NaN when its classes are not the model's (its logits have another width).
    double classAccuracy = std::numeric_limits<double>::quiet_NaN();
    double tokensPerSecond = 0, imagesPerSecond = 0;  // generation + decoding
    int64_t parameters = 0;   // the GPT's (transformer + class embedding)
    int64_t weightBytes = 0;  // the GPT's weights at the runtime's dtype
    double seconds = 0;       // the whole evaluation
};

// Generates `samples` images (balancedClasses) and measures them against `reference`.
ImageEvaluation evaluateImageModel(const LlamaGenModel& model, const VqModel& vq, FeatureNetwork& network,
                                   const ReferenceStats& reference, int64_t samples,
                                   const ImageSamplingOptions& sampling, const ProgressFn& progress = nullptr,
                                   int64_t isSplits = 10);

} // namespace npw
