#include "core/experiments/image_workbench.h"
#include "core/text/json_output.h"
#include "core/experiments/image_sweep.h"
#include "core/experiments/sweep_method.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include <ATen/ATen.h>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace npw {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The settings that shape a ScoreSet (not the selection's ρ, α and reading, nor the
// compensation), doubles in hexadecimal: the key of a score set computed once.
std::string scoreKey(const PruneSettings& s) {
    auto x = [](double v) {
        char text[64];
        std::snprintf(text, sizeof text, "%a", v);
        return std::string(text);
    };
    std::string key = methodName(s.method) + " λ" + x(s.lambda) + " λrel" + x(s.lambdaRel) + " rank" +
                      std::to_string(static_cast<int>(s.crossLayer)) + " iters" + std::to_string(s.iters) + " z0" +
                      x(s.z0) + " damp" + x(s.damp) + " scope" + std::to_string(static_cast<int>(s.scope)) + " seed" +
                      std::to_string(s.seed) + " unit" + std::to_string(static_cast<int>(s.attentionUnit)) +
                      (s.standardisedGlobal ? " std" : "") + (s.boxConstrained ? " box" : "") + " protect";
    for (int64_t l : s.protectedLayers) key += "," + std::to_string(l);
    // The box's z and Algorithm 1 are solved for one ρ.
    if (s.boxConstrained || s.iters > 0) key += " ρ" + x(s.ratio);
    return key;
}

} // namespace

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
    if (vq_ && dense_->config().transformer.vocab_size != vq_->config().codebookSize)
        throw Error("the GPT's vocabulary (" + std::to_string(dense_->config().transformer.vocab_size) +
                    ") is not the VQ codebook (" + std::to_string(vq_->config().codebookSize) + " codes in " +
                    vq_->source() + ")");
}

const VqModel& ImagePruningWorkbench::vq() const {
    if (!vq_) throw Error("image model '" + dense_->checkpoint().source + "': no VQ tokenizer was loaded to decode images");
    return *vq_;
}

void ImagePruningWorkbench::calibrate(int64_t perClass, const ImageSamplingOptions& sampling,
                                      const ProgressFn& progress) {
    auto start = std::chrono::steady_clock::now();
    ImageCalibrationSet set = generateImageCalibration(*dense_, perClass, sampling, progress);
    const double generation = secondsSince(start);
    start = std::chrono::steady_clock::now();
    auto stats = std::make_shared<const ModelStats>(calibrateImageModel(*dense_, set, progress, sampling.batchSize));
    // Only now, when both steps succeeded (a cancel throws before): the workbench stays whole.
    calibration_ = std::move(set);
    stats_ = std::move(stats);
    generationSeconds_ = generation;
    statisticsSeconds_ = secondsSince(start);
    scores_.clear();
}

CalibrationSummary ImagePruningWorkbench::calibrationSummary() const {
    if (!stats_) throw Error("calibrate the image model before describing its calibration");
    const ImageSamplingOptions& sampling = calibration_.sampling;
    CalibrationSummary summary;
    summary.source = "generated by the dense model: " + std::to_string(calibration_.perClass) + " per class, cfg " +
                     std::to_string(sampling.cfgScale) + ", seeds " + std::to_string(sampling.seed) + "..";
    summary.samples = static_cast<int64_t>(calibration_.classes.size());
    summary.seqlen = dense_->config().blockSize();
    summary.tokens = summary.samples * summary.seqlen;
    summary.seed = sampling.seed;
    return summary;
}

bool ImagePruningWorkbench::isCalibratedFor(int64_t perClass, const ImageSamplingOptions& sampling) const {
    const ImageSamplingOptions& had = calibration_.sampling;
    return stats_ && calibration_.perClass == perClass && had.cfgScale == sampling.cfgScale &&
           had.cfgInterval == sampling.cfgInterval && had.temperature == sampling.temperature &&
           had.topK == sampling.topK && had.topP == sampling.topP && had.seed == sampling.seed;
}

std::shared_ptr<const ScoreSet> ImagePruningWorkbench::scores(const std::string& method, double lambda,
                                                              const ProgressFn& progress, double ratio) {
    PruneSettings settings = sweepMethodSettings(method, lambda, AlphaMode::Budget, std::nan(""));
    settings.ratio = ratio;
    settings.validate();  // built here from loose values: this is their edge
    return scores(settings, progress);
}

std::shared_ptr<const ScoreSet> ImagePruningWorkbench::scores(const PruneSettings& settings, const ProgressFn& progress) {
    if (!stats_) throw Error("calibrate the image model before scoring it");
    checkSettings(settings);
    const std::string key = scoreKey(settings);
    auto it = scores_.find(key);
    if (it != scores_.end()) return it->second;
    auto computed = std::make_shared<const ScoreSet>(scoreModel(dense_->transformer(), *stats_, settings, progress));
    scores_[key] = computed;
    return computed;
}

void ImagePruningWorkbench::checkSettings(const PruneSettings& settings) {
    // Measuring each site's damage runs the language model's forward on text windows: scoreModel
    // would refuse it for want of windows, naming --stats; this says why an image model cannot.
    if (settings.method == PruneMethod::Numerical && settings.crossLayer == CrossLayerRanking::MeasuredDamage)
        throw Error(siteDamageOnImageModelRefusal());
}

ImageWorkbenchPrune ImagePruningWorkbench::prune(const PruneSettings& settings, const ProgressFn& progress) {
    checkSettings(settings);
    ImageWorkbenchPrune out;
    auto start = std::chrono::steady_clock::now();
    out.scores = scores(settings, progress);
    const double scoreSeconds = secondsSince(start);
    start = std::chrono::steady_clock::now();
    const MaskSelector selector(*out.scores);
    out.selection = selector.select(settings.ratio, settings.alpha, settings.alphaMode);
    const double selectSeconds = secondsSince(start);
    AppliedSelection applied = applySelectionAndReport(dense_->transformer().checkpoint(), *stats_, *out.scores,
                                                       out.selection, settings, selector.defaultAlpha(), progress);
    out.pruned = std::move(applied.pruned);
    out.report = std::move(applied.report);
    out.report.timings.calibrateSeconds = statisticsSeconds_;
    out.report.timings.scoreSeconds = scoreSeconds;
    out.report.timings.selectSeconds = selectSeconds;
    return out;
}

PrunedModel ImagePruningWorkbench::prune(const std::string& method, double ratio, double lambda,
                                         const ProgressFn& progress, AlphaMode alphaMode, double alpha) {
    PruneSettings settings = sweepMethodSettings(method, lambda, alphaMode, alpha);
    settings.ratio = ratio;
    settings.validate();  // built here from loose values: this is their edge
    return prune(settings, progress).pruned;
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
    GeneratedImages d = generateImages(*dense_, vq(), classes, sampling, progress);
    GeneratedImages p = generateImages(prunedModel, vq(), classes, sampling, progress);
    c.dense = d.images;
    c.pruned = p.images;
    c.denseTokensPerSecond = d.tokensPerSecond;
    c.prunedTokensPerSecond = p.tokensPerSecond;
    c.denseParameters = counts.paramsBefore;
    c.prunedParameters = counts.paramsAfter;
    return c;
}

} // namespace npw
