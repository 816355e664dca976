#include "core/experiments/image_workbench.h"
#include "core/text/json_output.h"
#include "core/experiments/image_sweep.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include <ATen/ATen.h>
#include <cmath>

namespace npw {

void savePrunedImageModel(const LlamaGenCheckpoint& pruned, const VqModel* vq, const std::string& dir,
                          const std::string& manifestJson, const std::string& extraConfigJson) {
    nlohmann::json extra = {{"npw_pruned", {{"manifest", "npw-manifest.json"}}}};
    if (!extraConfigJson.empty()) extra.update(nlohmann::json::parse(extraConfigJson));
    writeExportDirectory(pruned.source, dir, manifestJson, [&](const std::string& staging) {
        saveLlamaGenDirectory(pruned, staging, json_fields::dumpJson(extra));
        if (vq) vq->save((std::filesystem::path(staging) / "vq").string());
    });
}

std::string ImagePruningWorkbench::manifestJson(const std::string& sourceModel, const std::string& method, double ratio,
                                                double lambda, const PrunedModel& pruned) const {
    const LlamaCheckpoint dense = dense_->checkpoint().transformer();
    const PruneCounts counts = countPrunedParameters(dense, pruned.checkpoint);
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerPruneReport& l : pruned.layers)
        layers.push_back({{"heads", l.headsAfter}, {"heads_before", l.headsBefore}, {"channels", l.channelsAfter},
                          {"channels_before", l.channelsBefore}, {"attn_loss", l.attentionLoss}, {"mlp_loss", l.mlpLoss}});
    nlohmann::json j = {{"format", "npw-pruned-model"},
                        {"source_model", sourceModel},
                        {"method", method},
                        {"ratio", ratio},
                        {"lambda", std::isnan(lambda) ? nlohmann::json(nullptr) : nlohmann::json(lambda)},
                        {"lambda_given", std::isnan(lambda) ? "relative" : "absolute"},
                        {"lambda_rel", kDefaultLambdaRel},
                        {"compensation", compensationName(pruned.compensation)},
                        {"prunable_before", counts.prunableBefore},
                        {"prunable_after", counts.prunableAfter},
                        {"achieved_ratio", counts.achievedRatio},
                        {"calibration", calibration_.toMetadata()},
                        {"layers", layers}};
    return json_fields::dumpJson(j, 2, "the export manifest") + "\n";
}

ImagePruningWorkbench::ImagePruningWorkbench(LlamaGenCheckpoint dense, std::shared_ptr<const VqModel> vq, Runtime runtime)
    : dense_(std::make_unique<LlamaGenModel>(std::move(dense), runtime)), vq_(std::move(vq)), runtime_(runtime) {
    if (!vq_) throw Error("an image workbench needs the model's VQ tokenizer");
    if (dense_->config().transformer.vocab_size != vq_->config().codebookSize)
        throw Error("the GPT's vocabulary (" + std::to_string(dense_->config().transformer.vocab_size) +
                    ") is not the VQ codebook (" + std::to_string(vq_->config().codebookSize) + " codes in " +
                    vq_->source() + ")");
}

void ImagePruningWorkbench::calibrate(int64_t perClass, const ImageSamplingOptions& sampling,
                                      const ProgressFn& progress) {
    ImageCalibrationSet set = generateImageCalibration(*dense_, perClass, sampling, progress);
    auto stats = std::make_shared<const ModelStats>(calibrateImageModel(*dense_, set, progress, sampling.batchSize));
    // Only now, when both steps succeeded (a cancel throws before): the workbench stays whole.
    calibration_ = std::move(set);
    stats_ = std::move(stats);
    scores_.clear();
}

bool ImagePruningWorkbench::isCalibratedFor(int64_t perClass, const ImageSamplingOptions& sampling) const {
    const ImageSamplingOptions& had = calibration_.sampling;
    return stats_ && calibration_.perClass == perClass && had.cfgScale == sampling.cfgScale &&
           had.cfgInterval == sampling.cfgInterval && had.temperature == sampling.temperature &&
           had.topK == sampling.topK && had.topP == sampling.topP && had.seed == sampling.seed;
}

std::shared_ptr<const ScoreSet> ImagePruningWorkbench::scores(const std::string& method, double lambda,
                                                              const ProgressFn& progress, double ratio) {
    if (!stats_) throw Error("calibrate the image model before scoring it");
    PruneSettings settings = sweepMethodSettings(method, lambda, AlphaMode::Budget, std::nan(""));
    settings.ratio = ratio;
    std::string key = method + "@" + std::to_string(lambda);
    if (settings.boxConstrained) key += "@" + std::to_string(ratio);  // z is solved for this ρ
    auto it = scores_.find(key);
    if (it != scores_.end()) return it->second;
    auto computed = std::make_shared<const ScoreSet>(computeScores(dense_->checkpoint().transformer(), *stats_, settings, progress));
    scores_[key] = computed;
    return computed;
}

PrunedModel ImagePruningWorkbench::prune(const std::string& method, double ratio, double lambda,
                                         const ProgressFn& progress, AlphaMode alphaMode, double alpha) {
    std::shared_ptr<const ScoreSet> s = scores(method, lambda, progress, ratio);
    PruneSettings settings = sweepMethodSettings(method, lambda, alphaMode, alpha);
    settings.ratio = ratio;
    settings.validate();
    const SelectionResult selection = MaskSelector(*s).select(ratio, settings.alpha, settings.alphaMode);
    return applyMask(dense_->checkpoint().transformer(), *stats_, selection.mask, settings);
}

ImageComparison ImagePruningWorkbench::compare(const std::string& method, double ratio,
                                               const std::vector<int64_t>& classes,
                                               const ImageSamplingOptions& sampling, double lambda,
                                               const ProgressFn& progress) {
    ImageComparison c;
    c.method = method;
    c.ratio = ratio;
    c.classes = classes;
    PrunedModel pruned = prune(method, ratio, lambda, progress);
    const LlamaCheckpoint denseTransformer = dense_->checkpoint().transformer();
    const int64_t classRows = dense_->checkpoint().classEmbedding.numel();
    const PruneCounts counts = countPrunedParameters(denseTransformer, pruned.checkpoint, classRows);
    c.achievedRatio = counts.achievedRatio;
    c.layers = pruned.layers;
    const LlamaGenModel prunedModel(dense_->checkpoint().withTransformer(pruned.checkpoint), runtime_);
    GeneratedImages d = generateImages(*dense_, *vq_, classes, sampling, progress);
    GeneratedImages p = generateImages(prunedModel, *vq_, classes, sampling, progress);
    c.dense = d.images;
    c.pruned = p.images;
    c.denseTokensPerSecond = d.tokensPerSecond;
    c.prunedTokensPerSecond = p.tokensPerSecond;
    c.denseParameters = counts.paramsBefore;
    c.prunedParameters = counts.paramsAfter;
    return c;
}

} // namespace npw
