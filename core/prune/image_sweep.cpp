#include "core/prune/image_sweep.h"
#include "core/util/error.h"

#include <cmath>
#include <sstream>

namespace npw {

PruneSettings sweepMethodSettings(const std::string& method, double lambda, AlphaMode mode, double alpha) {
    PruneSettings s;
    if (method == "numerical-nocomp") {
        s.method = PruneMethod::Numerical;
        s.compensation = CompensationKind::None;
    } else {
        s.method = parsePruneMethod(method);
    }
    s.lambda = lambda;
    s.alphaMode = mode;
    s.alpha = alpha;
    return s;
}

std::vector<ImageSweepRow> runImageSweep(const LlamaGenModel& dense, const VqModel& vq, FeatureNetwork& network,
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
    ImageSweepRow denseRow;
    denseRow.method = "dense";
    denseRow.eval = evaluateImageModel(dense, vq, network, reference, spec.evalSamples, spec.evalSampling, progress,
                                       spec.isSplits);
    emitRow(denseRow);

    const ImageCalibrationSet calibration =
        generateImageCalibration(dense, spec.calibPerClass, spec.calibSampling, progress);
    const ModelStats stats = calibrateImageModel(dense, calibration, progress);
    const LlamaCheckpoint transformer = dense.checkpoint().transformer();
    const int64_t prunableBefore = prunableParameters(transformer.config);
    const int64_t paramsBefore = checkpointParameters(transformer) + dense.checkpoint().classEmbedding.numel();
    for (const std::string& method : spec.methods) {
        PruneSettings settings = sweepMethodSettings(method, spec.lambda, spec.alphaMode, spec.alpha);
        const ScoreSet scores = computeScores(transformer, stats, settings, progress);
        const MaskSelector selector(scores);
        for (double ratio : spec.ratios) {
            settings.ratio = ratio;
            const SelectionResult selection = selector.select(ratio, settings.alpha, settings.alphaMode);
            PrunedModel pruned = applyMask(transformer, stats, selection.mask, settings);
            const LlamaGenModel model(dense.checkpoint().withTransformer(pruned.checkpoint), dense.runtime());
            ImageSweepRow row;
            row.method = method;
            row.ratio = ratio;
            const int64_t removed = prunableBefore - prunableParameters(pruned.checkpoint.config);
            row.achievedRatio = prunableBefore > 0 ? double(removed) / double(prunableBefore) : 0.0;
            row.achievedRatioModel = double(removed) / double(paramsBefore);
            row.eval = evaluateImageModel(model, vq, network, reference, spec.evalSamples, spec.evalSampling, progress,
                                          spec.isSplits);
            emitRow(row);
        }
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

} // namespace npw
