#include "core/eval/image_eval.h"
#include "core/models/parameter_count.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <chrono>

namespace npw {

std::vector<int64_t> balancedClasses(int64_t n, int64_t numClasses) {
    if (n <= 0 || numClasses <= 0) throw Error("balancedClasses: need a positive count and class count");
    std::vector<int64_t> classes(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) classes[static_cast<size_t>(i)] = i % numClasses;
    return classes;
}

GeneratedImages generateImages(const LlamaGenModel& model, const VqModel& vq, const std::vector<int64_t>& classes,
                               const ImageSamplingOptions& sampling, const ProgressFn& progress) {
    const LlamaGenConfig& c = model.config();
    if (c.transformer.vocab_size != vq.config().codebookSize)
        throw Error("the GPT's vocabulary (" + std::to_string(c.transformer.vocab_size) + ") is not the VQ codebook (" +
                    std::to_string(vq.config().codebookSize) + " codes in " + vq.source() + ")");
    GeneratedImages out;
    out.classes = classes;
    ImageTokens tokens = generateImageTokens(model, classes, sampling, 0, progress);
    out.generateSeconds = tokens.seconds;
    out.tokensPerSecond = tokens.tokensPerSecond;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<at::Tensor> parts;
    const at::Tensor codes = tokens.tokens.view({-1, c.grid, c.grid});
    const int64_t batch = std::max<int64_t>(1, sampling.batchSize) * 8;
    for (int64_t i = 0; i < codes.size(0); i += batch)
        parts.push_back(vq.decode(codes.narrow(0, i, std::min(batch, codes.size(0) - i))));
    out.images = at::cat(parts, 0);
    out.decodeSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

ImageEvaluation evaluateImageModel(const LlamaGenModel& model, const VqModel& vq, FeatureNetwork& network,
                                   const ReferenceStats& reference, int64_t samples, const ImageSamplingOptions& sampling,
                                   const ProgressFn& progress, int64_t isSplits) {
    const auto t0 = std::chrono::steady_clock::now();
    ImageEvaluation e;
    const std::vector<int64_t> classes = balancedClasses(samples, model.config().num_classes);
    GeneratedImages generated = generateImages(model, vq, classes, sampling, progress);
    FeatureSet features = extractFeatures(network, imageSourceFromTensor(generated.images, "generated"), 250, progress);
    e.metrics = computeImageMetrics(reference, features, std::min<int64_t>(isSplits, samples), progress);
    if (features.logits.size(1) == model.config().num_classes) {
        const at::Tensor predicted = features.logits.argmax(1);
        const at::Tensor wanted = at::tensor(classes, at::kLong);
        e.classAccuracy = predicted.eq(wanted).to(at::kDouble).mean().item<double>();
    }
    e.tokensPerSecond = generated.tokensPerSecond;
    e.imagesPerSecond = static_cast<double>(samples) / std::max(1e-9, generated.generateSeconds + generated.decodeSeconds);
    const LlamaGenCheckpoint& ck = model.checkpoint();
    e.parameters = checkpointParameters(ck.transformer()) + ck.classEmbedding.numel();
    e.weightBytes = e.parameters * static_cast<int64_t>(c10::elementSize(model.runtime().dtype));
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return e;
}

} // namespace npw
