#pragma once
// Dense and pruned image models side by side, for interactive comparison (npw-studio's Images
// tab): the dense model is calibrated once on its own samples, each method is scored once, and
// any (method, ρ) is then one selection and one mask application away. Images of the dense and
// the pruned model come from the same classes and seeds, so they differ only by what pruning
// did. No Qt: the studio runs these calls on its worker thread.
#include "core/eval/image_eval.h"
#include "core/experiments/image_calibration.h"
#include "core/prune/pruner.h"

#include <limits>
#include <map>
#include <memory>
#include <string>

namespace npw {

// Writes a pruned image model as an npw image-model folder — config.json (per-layer sizes, plus
// extraConfigJson's keys, e.g. class_names), model.safetensors in LlamaGen's key names, the VQ
// tokenizer in vq/ (when given), npw-manifest.json — whole or not at all (writeExportDirectory:
// the source is never overwritten).
void savePrunedImageModel(const LlamaGenCheckpoint& pruned, const VqModel* vq, const std::string& dir,
                          const std::string& manifestJson, const std::string& extraConfigJson = "");

// What ImagePruningWorkbench::prune(settings) did.
struct ImageWorkbenchPrune {
    std::shared_ptr<const ScoreSet> scores;
    SelectionResult selection;
    PrunedModel pruned;     // the transformer, compensated and sliced
    PruneReport report;     // timings: calibrate (the statistics; generating the samples apart), score, select, apply
};

struct ImageComparison {
    std::string method;
    double ratio = 0, achievedRatio = 0;
    std::vector<int64_t> classes;
    at::Tensor dense, pruned;             // [N, C, H, W] in [0, 1]
    double denseTokensPerSecond = 0, prunedTokensPerSecond = 0;
    int64_t denseParameters = 0, prunedParameters = 0;
    std::vector<LayerPruneReport> layers;  // kept heads / channels per layer
};

// The one pipeline of image pruning: npw prune IMAGE_MODEL, npw sweep IMAGE_MODEL, the demo
// and the studio's Images tab all calibrate, score, select and apply through it.
class ImagePruningWorkbench {
public:
    // vq may be null when nothing is decoded to pixels (npw prune --metric none on a model
    // without its tokenizer): compare() and vq() then refuse.
    ImagePruningWorkbench(LlamaGenCheckpoint dense, std::shared_ptr<const VqModel> vq, Runtime runtime);

    const LlamaGenModel& dense() const { return *dense_; }
    const VqModel& vq() const;
    bool hasVq() const { return vq_ != nullptr; }
    bool isCalibrated() const { return stats_ != nullptr; }
    const ImageCalibrationSet& calibration() const { return calibration_; }
    // A manifest for an export of prune(method, ratio, λ): what was pruned how, on what calibration.
    std::string manifestJson(const std::string& sourceModel, const std::string& method, double ratio, double lambda,
                             const PrunedModel& pruned) const;

    // Generates perClass samples per class with `sampling` and accumulates the statistics;
    // forgets earlier scores. The expensive step (with scoring).
    void calibrate(int64_t perClass, const ImageSamplingOptions& sampling, const ProgressFn& progress = nullptr);
    // The last calibrate()'s seconds: generating the samples, accumulating the statistics.
    double generationSeconds() const { return generationSeconds_; }
    double statisticsSeconds() const { return statisticsSeconds_; }
    // The calibration as a report names it (source, samples, tokens, seed); throws before calibrate().
    CalibrationSummary calibrationSummary() const;
    // Whether the statistics come from perClass samples per class generated with `sampling`
    // (batch size aside, which changes no sample): calibrate() with them would redo the same.
    bool isCalibratedFor(int64_t perClass, const ImageSamplingOptions& sampling) const;
    // The scores of a sweep method name ("numerical", "flap", "numerical-nocomp",
    // "numerical-box", ...) at λ, computed on first use (the box-constrained z once per ρ, the
    // others once for every ρ). Throws npw::Error before calibrate().
    std::shared_ptr<const ScoreSet> scores(const std::string& method, double lambda = std::numeric_limits<double>::quiet_NaN(),
                                           const ProgressFn& progress = nullptr, double ratio = 0.2);
    // npw::Error for settings an image model cannot be pruned with: ranking lstar-kl (site damage
    // is measured on a language model's text windows). Cheap: callers check before calibrating.
    // The settings themselves are validated where they are built (the CLI's flags; the overloads
    // on a sweep method's name below).
    static void checkSettings(const PruneSettings& settings);
    // The scores for any settings npw prune takes (method, λ, ranking, unit, scope, …), through
    // the one dispatch (scoreModel), computed on first use for those settings.
    std::shared_ptr<const ScoreSet> scores(const PruneSettings& settings, const ProgressFn& progress = nullptr);
    // The prune of `settings` at its ρ, α and α reading: scores(settings), the global selection,
    // compensation and slicing with the report (applySelectionAndReport).
    ImageWorkbenchPrune prune(const PruneSettings& settings, const ProgressFn& progress = nullptr);
    // The pruned checkpoint at ρ (by default the budget reading and the model's α) and what
    // pruning did: prune(settings) with a sweep method name's settings.
    PrunedModel prune(const std::string& method, double ratio, double lambda = std::numeric_limits<double>::quiet_NaN(),
                      const ProgressFn& progress = nullptr, AlphaMode alphaMode = AlphaMode::Budget,
                      double alpha = std::numeric_limits<double>::quiet_NaN());
    // Dense and pruned images of `classes` with the same seeds (sample i: sampling.seed + i).
    ImageComparison compare(const std::string& method, double ratio, const std::vector<int64_t>& classes,
                            const ImageSamplingOptions& sampling, double lambda = std::numeric_limits<double>::quiet_NaN(),
                            const ProgressFn& progress = nullptr);

private:
    std::unique_ptr<LlamaGenModel> dense_;
    std::shared_ptr<const VqModel> vq_;
    Runtime runtime_;
    ImageCalibrationSet calibration_;
    std::shared_ptr<const ModelStats> stats_;
    double generationSeconds_ = 0, statisticsSeconds_ = 0;
    std::map<std::string, std::shared_ptr<const ScoreSet>> scores_;  // by the settings that shape the scores
};

} // namespace npw
