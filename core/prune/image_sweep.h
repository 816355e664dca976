#pragma once
// The image counterpart of core/prune/sweep.h: FID, sFID, IS, precision, recall, class
// accuracy, generation speed and weight memory against sparsity for several methods on a
// class-conditional LlamaGen model (the paper's image table and Figure 5). Calibration
// (generated samples, statistics) happens once; each method is scored once; each ratio only
// re-selects, applies the mask and evaluates. Every model generates the same classes with the
// same seeds, so rows differ only by what pruning did.
#include "core/eval/image_eval.h"
#include "core/prune/image_calibration.h"
#include "core/prune/pruner.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace npw {

struct ImageSweepSpec {
    std::vector<std::string> methods;  // as `npw prune --method`, plus "numerical-nocomp"
    std::vector<double> ratios;
    int64_t calibPerClass = 16;
    ImageSamplingOptions calibSampling;  // how the dense model generates its calibration samples
    int64_t evalSamples = 1000;
    ImageSamplingOptions evalSampling;
    double lambda = kDefaultLambda;
    AlphaMode alphaMode = AlphaMode::Budget;
    double alpha = std::numeric_limits<double>::quiet_NaN();
    int64_t isSplits = 10;
};

struct ImageSweepRow {
    std::string method;          // "dense" for the unpruned model
    double ratio = 0;            // requested ρ
    double achievedRatio = 0;    // of attention + MLP parameters
    double achievedRatioModel = 0;
    ImageEvaluation eval;
};

// dense: the unpruned model; onRow is called as each row is ready (dense first).
std::vector<ImageSweepRow> runImageSweep(const LlamaGenModel& dense, const VqModel& vq, FeatureNetwork& network,
                                         const ReferenceStats& reference, const ImageSweepSpec& spec,
                                         const std::function<void(const ImageSweepRow&)>& onRow = nullptr,
                                         const ProgressFn& progress = nullptr);

// Pruning settings of a sweep method name ("numerical-nocomp": numerical without compensation).
PruneSettings sweepMethodSettings(const std::string& method, double lambda, AlphaMode mode, double alpha);

std::string imageSweepRowsCsv(const std::vector<ImageSweepRow>& rows);

} // namespace npw
