#include "core/prune/image_sweep.h"
#include "core/util/error.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <sstream>

namespace npw {

PruneSettings sweepMethodSettings(const std::string& method, double lambda, AlphaMode mode, double alpha) {
    PruneSettings s;
    if (method == "numerical-nocomp") {
        s.method = PruneMethod::Numerical;
        s.compensation = CompensationKind::None;
    } else if (method == "numerical-box") {
        s.method = PruneMethod::Numerical;
        s.boxConstrained = true;
    } else {
        s.method = parsePruneMethod(method);
    }
    s.lambda = lambda;
    s.alphaMode = mode;
    s.alpha = alpha;
    return s;
}

std::vector<ImageSweepRow> runImageSweep(ImagePruningWorkbench& bench, FeatureNetwork& network,
                                         const ReferenceStats& reference, const ImageSweepSpec& spec,
                                         const std::function<void(const ImageSweepRow&)>& onRow,
                                         const ProgressFn& progress) {
    if (spec.methods.empty() || spec.ratios.empty()) throw Error("an image sweep needs at least one method and one ratio");
    for (double r : spec.ratios)
        if (!(r > 0 && r < 1)) throw Error("sweep ratios must lie in (0, 1), got " + std::to_string(r));
    for (const std::string& m : spec.methods) sweepMethodSettings(m, spec.lambda, spec.alphaMode, spec.alpha).validate();

    std::vector<ImageSweepRow> rows;
    auto emitRow = [&](ImageSweepRow row) {
        rows.push_back(row);
        if (onRow) onRow(rows.back());
    };
    const LlamaGenModel& dense = bench.dense();
    ImageSweepRow denseRow;
    denseRow.method = "dense";
    denseRow.eval = evaluateImageModel(dense, bench.vq(), network, reference, spec.evalSamples, spec.evalSampling,
                                       progress, spec.isSplits);
    emitRow(denseRow);

    // Calibration once; the workbench scores each method once (the box-constrained z once per ρ).
    bench.calibrate(spec.calibPerClass, spec.calibSampling, progress);
    const LlamaCheckpoint transformer = dense.checkpoint().transformer();
    const int64_t prunableBefore = prunableParameters(transformer.config);
    const int64_t paramsBefore = checkpointParameters(transformer) + dense.checkpoint().classEmbedding.numel();
    for (const std::string& method : spec.methods)
        for (double ratio : spec.ratios) {
            const PrunedModel pruned = bench.prune(method, ratio, spec.lambda, progress, spec.alphaMode, spec.alpha);
            const LlamaGenModel model(dense.checkpoint().withTransformer(pruned.checkpoint), dense.runtime());
            ImageSweepRow row;
            row.method = method;
            row.ratio = ratio;
            const int64_t removed = prunableBefore - prunableParameters(pruned.checkpoint.config);
            row.achievedRatio = prunableBefore > 0 ? double(removed) / double(prunableBefore) : 0.0;
            row.achievedRatioModel = double(removed) / double(paramsBefore);
            row.eval = evaluateImageModel(model, bench.vq(), network, reference, spec.evalSamples, spec.evalSampling,
                                          progress, spec.isSplits);
            emitRow(row);
        }
    return rows;
}

std::string imageSweepRowsCsv(const std::vector<ImageSweepRow>& rows) {
    std::ostringstream out;
    out.precision(8);
    out << "method,ratio,achieved_ratio,achieved_ratio_model,fid,sfid,is,is_std,precision,recall,class_accuracy,"
           "tokens_per_s,images_per_s,parameters,weight_bytes,samples\n";
    for (const ImageSweepRow& r : rows) {
        const ImageEvaluation& e = r.eval;
        out << r.method << "," << r.ratio << "," << r.achievedRatio << "," << r.achievedRatioModel << ","
            << e.metrics.fid << "," << e.metrics.sfid << "," << e.metrics.is.mean << "," << e.metrics.is.std << ","
            << e.metrics.precision << "," << e.metrics.recall << ",";
        if (std::isfinite(e.classAccuracy)) out << e.classAccuracy;
        out << "," << e.tokensPerSecond << "," << e.imagesPerSecond << "," << e.parameters << "," << e.weightBytes
            << "," << e.metrics.samples << "\n";
    }
    return out.str();
}

namespace {

nlohmann::json finiteOrNull(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

template <class T>
T fieldOf(const nlohmann::json& j, const char* name) {
    if (!j.is_object() || !j.contains(name)) throw Error(std::string("image evaluation: field '") + name + "' is missing");
    const nlohmann::json& v = j.at(name);
    if constexpr (std::is_floating_point_v<T>) {
        if (v.is_null()) return std::numeric_limits<T>::quiet_NaN();
        if (!v.is_number()) throw Error(std::string("image evaluation: field '") + name + "' must be a number");
    } else if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer()) throw Error(std::string("image evaluation: field '") + name + "' must be an integer");
    } else {
        if (!v.is_string()) throw Error(std::string("image evaluation: field '") + name + "' must be a string");
    }
    return v.get<T>();
}

} // namespace

nlohmann::json imageEvaluationJson(const ImageEvaluation& e) {
    return {{"fid", finiteOrNull(e.metrics.fid)},
            {"sfid", finiteOrNull(e.metrics.sfid)},
            {"is", finiteOrNull(e.metrics.is.mean)},
            {"is_std", finiteOrNull(e.metrics.is.std)},
            {"is_splits", e.metrics.is.splits},
            {"precision", finiteOrNull(e.metrics.precision)},
            {"recall", finiteOrNull(e.metrics.recall)},
            {"class_accuracy", finiteOrNull(e.classAccuracy)},
            {"samples", e.metrics.samples},
            {"reference_count", e.metrics.referenceCount},
            {"tokens_per_s", finiteOrNull(e.tokensPerSecond)},
            {"images_per_s", finiteOrNull(e.imagesPerSecond)},
            {"parameters", e.parameters},
            {"weight_bytes", e.weightBytes},
            {"seconds", finiteOrNull(e.seconds)}};
}

ImageEvaluation imageEvaluationFromJson(const nlohmann::json& j) {
    ImageEvaluation e;
    e.metrics.fid = fieldOf<double>(j, "fid");
    e.metrics.sfid = fieldOf<double>(j, "sfid");
    e.metrics.is.mean = fieldOf<double>(j, "is");
    e.metrics.is.std = fieldOf<double>(j, "is_std");
    e.metrics.is.splits = fieldOf<int64_t>(j, "is_splits");
    e.metrics.precision = fieldOf<double>(j, "precision");
    e.metrics.recall = fieldOf<double>(j, "recall");
    e.classAccuracy = fieldOf<double>(j, "class_accuracy");
    e.metrics.samples = fieldOf<int64_t>(j, "samples");
    e.metrics.referenceCount = fieldOf<int64_t>(j, "reference_count");
    e.tokensPerSecond = fieldOf<double>(j, "tokens_per_s");
    e.imagesPerSecond = fieldOf<double>(j, "images_per_s");
    e.parameters = fieldOf<int64_t>(j, "parameters");
    e.weightBytes = fieldOf<int64_t>(j, "weight_bytes");
    e.seconds = fieldOf<double>(j, "seconds");
    return e;
}

nlohmann::json imageSweepRowJson(const ImageSweepRow& r) {
    nlohmann::json j = imageEvaluationJson(r.eval);
    j["method"] = r.method;
    j["ratio"] = r.ratio;
    j["achieved_ratio"] = r.achievedRatio;
    j["achieved_ratio_model"] = r.achievedRatioModel;
    return j;
}

ImageSweepRow imageSweepRowFromJson(const nlohmann::json& j) {
    ImageSweepRow r;
    r.method = fieldOf<std::string>(j, "method");
    r.ratio = fieldOf<double>(j, "ratio");
    r.achievedRatio = fieldOf<double>(j, "achieved_ratio");
    r.achievedRatioModel = fieldOf<double>(j, "achieved_ratio_model");
    r.eval = imageEvaluationFromJson(j);
    return r;
}

} // namespace npw
