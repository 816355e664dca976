#include "core/experiments/image_sweep.h"
#include "core/experiments/sweep_method.h"
#include "core/text/json_fields.h"
#include "core/util/error.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace npw {

PruneSettings sweepMethodSettings(const std::string& method, double lambda, AlphaMode mode, double alpha) {
    const SweepMethod m = parseSweepMethod(method, SweptModel::Image);
    PruneSettings s;
    s.method = m.method;
    s.compensation = m.compensation;
    s.boxConstrained = m.boxConstrained;
    s.crossLayer = m.crossLayer;
    s.lambda = lambda;  // NaN: relative (λ_rel / median c, the default)
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
        rows.push_back(std::move(row));
        if (onRow) onRow(rows.back());
    };
    // Sample metrics (FID, …) when asked; the held-out token perplexity when codes are given.
    auto measure = [&](const LlamaGenModel& model, ImageSweepRow& row) {
        if (spec.generatedMetrics)
            row.eval = evaluateImageModel(model, bench.vq(), network, reference, spec.evalSamples, spec.evalSampling,
                                          progress, spec.isSplits);
        else
            row.eval.metrics.fid = row.eval.metrics.sfid = row.eval.metrics.is.mean = row.eval.metrics.is.std =
                row.eval.metrics.precision = row.eval.metrics.recall = std::numeric_limits<double>::quiet_NaN();
        if (spec.heldOut) row.tokenPpl = classConditionalTokenPerplexity(model, *spec.heldOut, 250, progress).ppl;
    };
    const LlamaGenModel& dense = bench.dense();
    ImageSweepRow denseRow;
    denseRow.method = "dense";
    measure(dense, denseRow);
    emitRow(denseRow);

    // Calibration once; the workbench scores each method once (the box-constrained z once per ρ).
    bench.calibrate(spec.calibPerClass, spec.calibSampling, progress);
    const LlamaCheckpoint transformer = dense.checkpoint().transformer();
    const int64_t classRows = dense.checkpoint().classEmbedding.numel();
    for (const std::string& method : spec.methods)
        for (double ratio : spec.ratios) {
            const PrunedModel pruned = bench.prune(method, ratio, spec.lambda, progress, spec.alphaMode, spec.alpha);
            const LlamaGenModel model(dense.checkpoint().withTransformer(pruned.checkpoint), dense.runtime());
            ImageSweepRow row;
            row.method = method;
            row.ratio = ratio;
            const PruneCounts counts = countPrunedParameters(transformer, pruned.checkpoint, classRows);
            row.achievedRatio = counts.achievedRatio;
            row.achievedRatioModel = counts.achievedRatioModel;
            measure(model, row);
            emitRow(row);
        }
    return rows;
}

std::string imageSweepRowsCsv(const std::vector<ImageSweepRow>& rows) {
    std::ostringstream out;
    out.precision(8);
    out << "method,ratio,achieved_ratio,achieved_ratio_model,fid,sfid,is,is_std,precision,recall,class_accuracy,"
           "tokens_per_s,images_per_s,parameters,weight_bytes,samples,token_ppl,fid_low,fid_high,fid_resamples\n";
    for (const ImageSweepRow& r : rows) {
        const ImageEvaluation& e = r.eval;
        out << r.method << "," << r.ratio << "," << r.achievedRatio << "," << r.achievedRatioModel << ","
            << e.metrics.fid << "," << e.metrics.sfid << "," << e.metrics.is.mean << "," << e.metrics.is.std << ","
            << e.metrics.precision << "," << e.metrics.recall << ",";
        if (std::isfinite(e.classAccuracy)) out << e.classAccuracy;
        out << "," << e.tokensPerSecond << "," << e.imagesPerSecond << "," << e.parameters << "," << e.weightBytes
            << "," << e.metrics.samples << ",";
        if (std::isfinite(r.tokenPpl)) out << r.tokenPpl;
        out << ",";
        if (e.metrics.fidResamples > 0) out << e.metrics.fidLow << "," << e.metrics.fidHigh;
        else out << ",";
        out << "," << e.metrics.fidResamples << "\n";
    }
    return out.str();
}

namespace {

constexpr const char* kImageRow = "image evaluation";

} // namespace

nlohmann::json imageEvaluationJson(const ImageEvaluation& e) {
    return {{"fid", json_fields::finiteOrNull(e.metrics.fid)},
            {"sfid", json_fields::finiteOrNull(e.metrics.sfid)},
            {"is", json_fields::finiteOrNull(e.metrics.is.mean)},
            {"is_std", json_fields::finiteOrNull(e.metrics.is.std)},
            {"is_splits", e.metrics.is.splits},
            {"precision", json_fields::finiteOrNull(e.metrics.precision)},
            {"recall", json_fields::finiteOrNull(e.metrics.recall)},
            {"class_accuracy", json_fields::finiteOrNull(e.classAccuracy)},
            {"samples", e.metrics.samples},
            {"reference_count", e.metrics.referenceCount},
            {"feature_dims", e.metrics.featureDims},
            {"fid_min_samples", e.metrics.featureDims > 0 ? nlohmann::json(fidMinimumSamples(e.metrics.featureDims))
                                                          : nlohmann::json(nullptr)},
            {"fid_warning", fidSampleWarning(e.metrics).empty() ? nlohmann::json(nullptr)
                                                                : nlohmann::json(fidSampleWarning(e.metrics))},
            {"fid_low", json_fields::finiteOrNull(e.metrics.fidLow)},
            {"fid_high", json_fields::finiteOrNull(e.metrics.fidHigh)},
            {"fid_resamples", e.metrics.fidResamples},
            {"fid_resample_bias", json_fields::finiteOrNull(e.metrics.fidResampleBias)},
            {"tokens_per_s", json_fields::finiteOrNull(e.tokensPerSecond)},
            {"images_per_s", json_fields::finiteOrNull(e.imagesPerSecond)},
            {"parameters", e.parameters},
            {"weight_bytes", e.weightBytes},
            {"seconds", json_fields::finiteOrNull(e.seconds)}};
}

ImageEvaluation imageEvaluationFromJson(const nlohmann::json& j) {
    ImageEvaluation e;
    e.metrics.fid = json_fields::numberOrNaN(j, "fid", kImageRow);
    e.metrics.sfid = json_fields::numberOrNaN(j, "sfid", kImageRow);
    e.metrics.is.mean = json_fields::numberOrNaN(j, "is", kImageRow);
    e.metrics.is.std = json_fields::numberOrNaN(j, "is_std", kImageRow);
    e.metrics.is.splits = json_fields::requiredInt(j, "is_splits", kImageRow);
    e.metrics.precision = json_fields::numberOrNaN(j, "precision", kImageRow);
    e.metrics.recall = json_fields::numberOrNaN(j, "recall", kImageRow);
    e.classAccuracy = json_fields::numberOrNaN(j, "class_accuracy", kImageRow);
    e.metrics.samples = json_fields::requiredInt(j, "samples", kImageRow);
    e.metrics.referenceCount = json_fields::requiredInt(j, "reference_count", kImageRow);
    // Optional: rows written before the feature dimensions were recorded (then no warning).
    e.metrics.featureDims = json_fields::intOr(j, "feature_dims", 0, kImageRow);
    // Optional too: rows written before FID's bootstrap interval.
    if (j.contains("fid_low")) e.metrics.fidLow = json_fields::numberOrNaN(j, "fid_low", kImageRow);
    if (j.contains("fid_high")) e.metrics.fidHigh = json_fields::numberOrNaN(j, "fid_high", kImageRow);
    e.metrics.fidResamples = json_fields::intOr(j, "fid_resamples", 0, kImageRow);
    if (j.contains("fid_resample_bias")) e.metrics.fidResampleBias = json_fields::numberOrNaN(j, "fid_resample_bias", kImageRow);
    e.tokensPerSecond = json_fields::numberOrNaN(j, "tokens_per_s", kImageRow);
    e.imagesPerSecond = json_fields::numberOrNaN(j, "images_per_s", kImageRow);
    e.parameters = json_fields::requiredInt(j, "parameters", kImageRow);
    e.weightBytes = json_fields::requiredInt(j, "weight_bytes", kImageRow);
    e.seconds = json_fields::numberOrNaN(j, "seconds", kImageRow);
    return e;
}

nlohmann::json imageSweepRowJson(const ImageSweepRow& r) {
    nlohmann::json j = imageEvaluationJson(r.eval);
    j["method"] = r.method;
    j["ratio"] = r.ratio;
    j["achieved_ratio"] = r.achievedRatio;
    j["achieved_ratio_model"] = r.achievedRatioModel;
    j["token_ppl"] = json_fields::finiteOrNull(r.tokenPpl);
    return j;
}

ImageSweepRow imageSweepRowFromJson(const nlohmann::json& j) {
    ImageSweepRow r;
    r.method = json_fields::requiredString(j, "method", kImageRow);
    r.ratio = json_fields::numberOrNaN(j, "ratio", kImageRow);
    r.achievedRatio = json_fields::numberOrNaN(j, "achieved_ratio", kImageRow);
    r.achievedRatioModel = json_fields::numberOrNaN(j, "achieved_ratio_model", kImageRow);
    r.eval = imageEvaluationFromJson(j);
    // Optional: workspaces written before the held-out token perplexity existed lack it.
    if (j.contains("token_ppl")) r.tokenPpl = json_fields::numberOrNaN(j, "token_ppl", kImageRow);
    return r;
}

} // namespace npw
