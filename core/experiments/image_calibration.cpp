#include "core/experiments/image_calibration.h"
#include "core/util/error.h"

#include <ATen/ATen.h>

namespace npw {

std::map<std::string, std::string> ImageCalibrationSet::toMetadata() const {
    return {{"calibration_source", "generated"},
            {"calibration_per_class", std::to_string(perClass)},
            {"calibration_samples", std::to_string(classes.size())},
            {"calibration_seed", std::to_string(sampling.seed)},
            {"calibration_cfg", std::to_string(sampling.cfgScale)},
            {"calibration_temperature", std::to_string(sampling.temperature)},
            {"calibration_top_k", std::to_string(sampling.topK)},
            {"calibration_top_p", std::to_string(sampling.topP)}};
}

ImageCalibrationSet generateImageCalibration(const LlamaGenModel& model, int64_t perClass,
                                             const ImageSamplingOptions& sampling, const ProgressFn& progress) {
    if (perClass <= 0) throw Error("calibration samples per class must be positive, got " + std::to_string(perClass));
    sampling.validate();
    ImageCalibrationSet set;
    set.perClass = perClass;
    set.sampling = sampling;
    for (int64_t k = 0; k < model.config().num_classes; ++k)
        for (int64_t i = 0; i < perClass; ++i) set.classes.push_back(k);
    ProgressFn relabelled = progress ? ProgressFn([&progress](const Progress& p) {
        Progress q = p;
        q.stage = "calibration samples";
        return progress(q);
    })
                                     : nullptr;
    set.tokens = generateImageTokens(model, set.classes, sampling, 0, relabelled).tokens;
    return set;
}

ModelStats calibrateImageModel(const LlamaGenModel& model, const ImageCalibrationSet& set, const ProgressFn& progress,
                               int64_t batch) {
    const LlamaGenConfig& c = model.config();
    const int64_t n = static_cast<int64_t>(set.classes.size());
    if (!set.tokens.defined() || set.tokens.dim() != 2 || set.tokens.size(0) != n || set.tokens.size(1) != c.blockSize())
        throw Error("image calibration: expected " + std::to_string(n) + " sequences of " +
                    std::to_string(c.blockSize()) + " tokens (" + std::to_string(c.grid) + "×" + std::to_string(c.grid) +
                    " grid)");
    const at::Tensor classes = at::tensor(set.classes, at::kLong);
    return calibrateWithForward(
        c.transformer, model.runtime().device, n, batch,
        [&](int64_t first, int64_t count, const ActivationTap& tap) {
            // The inputs of generation: the class token, then every image token but the last.
            model.logits(classes.narrow(0, first, count), set.tokens.narrow(0, first, count).narrow(1, 0, c.blockSize() - 1),
                         /*cache=*/nullptr, /*keepOnDevice=*/true, tap);
        },
        progress);
}

} // namespace npw
