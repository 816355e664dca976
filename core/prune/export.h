#pragma once
// Step "export" of the flow: manifests, the pruned Hugging Face directory (atomic), score files.
#include "core/prune/calibration.h"
#include "core/prune/report.h"
#include "core/prune/score.h"
#include "core/prune/settings.h"

#include <functional>
#include <string>

namespace npw {

// Refuses (npw::Error) an export target that is the source model, its directory, a directory
// inside a source directory, an existing file, or a non-empty directory that is not an earlier
// npw export. Cheap: the CLI checks before calibrating.
void checkExportTarget(const std::string& sourceModel, const std::string& dir);

// The "calibration" object of every manifest (pruneManifestJson, the baselines' manifests):
// source, kind, samples, seqlen, seed, stream_tokens, tokens.
nlohmann::json calibrationManifestJson(const CalibrationSummary& calibration);

// npw-manifest.json of an export: settings, calibration, normalisation, achieved ratios, per-layer
// sizes and losses, npw version.
std::string pruneManifestJson(const PruneReport& report, const PruneSettings& settings,
                              const CalibrationSummary& calibration, const std::string& sourceModel);

// Writes the pruned model as a Hugging Face directory (config.json with per-layer lists,
// model.safetensors with FLAP's biases where added, tokenizer.json when the source had one) plus
// npw-manifest.json. The directory appears whole or not at all: everything is written into a
// sibling staging directory that is then renamed into place. `dir` may be new, empty, or a
// previous npw export (replaced); anything else, the source model, or a directory inside the
// source's is refused.
void savePrunedModel(const LlamaCheckpoint& pruned, const std::string& dir, const std::string& manifestJson);

// The atomic directory write under savePrunedModel (and the image models' export): checks the
// target as checkExportTarget does, lets `write` fill a sibling staging directory, then renames
// it into place (replacing an earlier export). The staging directory is removed on any error.
void writeExportDirectory(const std::string& sourceModel, const std::string& dir,
                          const std::function<void(const std::string& staging)>& write);

// --save-scores: per layer the channel scores (at ρ) and unit scores as float64 tensors
// "layers.{l}.{attn|mlp}.{channel_scores|unit_scores}" (+ "…attn.ainv1"/"…mlp.ainv1" and
// "…c" for numerical), metadata = method, ρ, λ. Atomic.
void saveScoreSet(const ScoreSet& scores, double rho, const std::string& path);

} // namespace npw
