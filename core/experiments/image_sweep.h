#pragma once
// The image counterpart of core/experiments/sweep.h: FID, sFID, IS, precision, recall, class
// accuracy, generation speed and weight memory against sparsity for several methods on a
// class-conditional LlamaGen model (the paper's image table and Figure 5). Calibration
// (generated samples, statistics) happens once; each method is scored once; each ratio only
// re-selects, applies the mask and evaluates. Every model generates the same classes with the
// same seeds, so rows differ only by what pruning did.
#include "core/eval/image_eval.h"
#include "core/eval/image_token_perplexity.h"
#include "core/experiments/image_calibration.h"
#include "core/experiments/image_workbench.h"
#include "core/prune/pruner.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <limits>
#include <string>
#include <vector>

namespace npw {

struct ImageSweepSpec {
    std::vector<std::string> methods;  // sweep method names (sweep_method.h)
    std::vector<double> ratios;
    int64_t calibPerClass = 16;
    ImageSamplingOptions calibSampling;  // how the dense model generates its calibration samples
    int64_t evalSamples = 1000;
    ImageSamplingOptions evalSampling;
    double lambda = std::numeric_limits<double>::quiet_NaN();
    AlphaMode alphaMode = AlphaMode::Budget;
    double alpha = std::numeric_limits<double>::quiet_NaN();
    int64_t isSplits = 10;
    // When set, every row also gets the class-conditional token perplexity of these held-out
    // codes (issue 15's c2i metric: the Fashion-MNIST test images for demo:c2i). Not owned.
    const HeldOutCodes* heldOut = nullptr;
    // false: no images are generated (FID and the other sample metrics stay NaN) — the token
    // perplexity alone, which is cheap (`npw sweep --token-ppl-only`).
    bool generatedMetrics = true;
};

struct ImageSweepRow {
    std::string method;          // "dense" for the unpruned model
    double ratio = 0;            // requested ρ
    double achievedRatio = 0;    // of attention + MLP parameters
    double achievedRatioModel = 0;
    ImageEvaluation eval;
    double tokenPpl = std::numeric_limits<double>::quiet_NaN();  // held-out codes; NaN when not measured
};

// bench holds the dense model and its tokenizer; the sweep calibrates it (spec's calibration
// settings, replacing what it had) and prunes through it. onRow is called as each row is ready
// (dense first).
std::vector<ImageSweepRow> runImageSweep(ImagePruningWorkbench& bench, FeatureNetwork& network,
                                         const ReferenceStats& reference, const ImageSweepSpec& spec,
                                         const std::function<void(const ImageSweepRow&)>& onRow = nullptr,
                                         const ProgressFn& progress = nullptr);

// Pruning settings of a sweep method name (sweep_method.h: "numerical-nocomp", "numerical-box",
// "numerical-z", ...; numerical-lstar-kl is refused for an image model) at λ and α.
PruneSettings sweepMethodSettings(const std::string& method, double lambda, AlphaMode mode, double alpha);

std::string imageSweepRowsCsv(const std::vector<ImageSweepRow>& rows);

// An evaluation and a sweep row as JSON (`npw sweep --json`, `npw prune --json`, the studio's
// workspace file) and back; NaN is null. The readers throw npw::Error naming a missing or
// mistyped field.
nlohmann::json imageEvaluationJson(const ImageEvaluation& e);
ImageEvaluation imageEvaluationFromJson(const nlohmann::json& j);
nlohmann::json imageSweepRowJson(const ImageSweepRow& r);
ImageSweepRow imageSweepRowFromJson(const nlohmann::json& j);

} // namespace npw
