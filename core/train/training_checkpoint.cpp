#include "core/train/training_checkpoint.h"

#include "core/io/safetensors.h"
#include "core/util/error.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <sstream>

namespace npw {

AdamMoments AdamMoments::zerosLike(const NamedParameters& parameters) {
    AdamMoments moments;
    for (const auto& named : parameters) {
        moments.m.push_back(at::zeros_like(*named.second));
        moments.v.push_back(at::zeros_like(*named.second));
    }
    return moments;
}

bool loadTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            AdamMoments& moments, TrainingProgress& progress) {
    if (path.empty() || !std::filesystem::exists(path)) return false;
    auto checkpoint = SafeTensorsFile::open(path);
    auto meta = checkpoint->metadata();
    if (meta["signature"] != signature)
        throw Error("checkpoint '" + path + "' belongs to another run (" + meta["signature"] +
                    "); delete it or use the same options");
    progress.step = std::stoll(meta["step"]);
    progress.smoothLoss = std::stod(meta["loss"]);
    for (size_t i = 0; i < parameters.size(); ++i) {
        parameters[i].second->copy_(checkpoint->loadFloat("p." + parameters[i].first));
        moments.m[i].copy_(checkpoint->loadFloat("m." + parameters[i].first));
        moments.v[i].copy_(checkpoint->loadFloat("v." + parameters[i].first));
    }
    return true;
}

void saveTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            const AdamMoments& moments, const TrainingProgress& progress) {
    if (path.empty()) return;
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (size_t i = 0; i < parameters.size(); ++i) {
        tensors.emplace_back("p." + parameters[i].first, *parameters[i].second);
        tensors.emplace_back("m." + parameters[i].first, moments.m[i]);
        tensors.emplace_back("v." + parameters[i].first, moments.v[i]);
    }
    std::ostringstream loss;
    loss.precision(17);  // the loss is part of the state: a resumed run must log what an uninterrupted one does
    loss << progress.smoothLoss;
    writeSafeTensors(path, tensors,
                     {{"signature", signature}, {"step", std::to_string(progress.step)}, {"loss", loss.str()}});
}

} // namespace npw
