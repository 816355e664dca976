#pragma once
// The checkpoint of a resumable training run, shared by the demo trainers (language models,
// feature classifier): one safetensors file with every parameter ("p.NAME") and its Adam
// moments ("m.NAME", "v.NAME"), plus the run's signature, step and smoothed loss as metadata.
// Resuming from it continues exactly where the run stopped.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace npw {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor*>>;

struct AdamMoments {
    std::vector<at::Tensor> m, v;  // one per parameter, in the order of NamedParameters

    static AdamMoments zerosLike(const NamedParameters& parameters);
};

struct TrainingProgress {
    int64_t step = 0;
    double smoothLoss = 0;
};

// When `path` exists: restores the parameters (in place) and the moments and returns the step
// and loss it holds; throws npw::Error when it belongs to another run (another signature).
// Returns false, touching nothing, when there is no checkpoint (or `path` is empty).
bool loadTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            AdamMoments& moments, TrainingProgress& progress);

// Writes the checkpoint atomically (nothing when `path` is empty).
void saveTrainingCheckpoint(const std::string& path, const std::string& signature, const NamedParameters& parameters,
                            const AdamMoments& moments, const TrainingProgress& progress);

} // namespace npw
