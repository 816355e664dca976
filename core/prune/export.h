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
// inside a source directory, an input of the run (runOutputGuard), an existing file, or a
// non-empty directory that is not provably an export npw wrote: one whose npw-manifest.json is
// npw's and lists every other file in it with its size, with nothing else present (a user's
// folder is never replaced, whatever file in it is named npw-manifest.json; a manifest of an
// older npw, which listed no files, does not prove it either). An empty directory may be
// written into. Cheap: the CLI checks before calibrating.
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

// The atomic directory write under savePrunedModel (and the other exports): checks the target
// as checkExportTarget does, lets `write` fill a sibling staging directory, writes
// npw-manifest.json there (`manifestJson` with "files": every file written and its size), then
// renames it into place (replacing an earlier export). The staging directory is removed on any
// error; those of a killed run are removed by the next export to `dir` (removeStaleTemporaries).
void writeExportDirectory(const std::string& sourceModel, const std::string& dir, const std::string& manifestJson,
                          const std::function<void(const std::string& staging)>& write);

// The same with the manifest known only once the model is written (the bounded prune's losses
// come layer by layer): manifestAfterWrite() is asked after `write` returns.
void writeExportDirectory(const std::string& sourceModel, const std::string& dir,
                          const std::function<std::string()>& manifestAfterWrite,
                          const std::function<void(const std::string& staging)>& write);

// --save-scores: per layer the channel scores (at ρ) and unit scores as float64 tensors
// "layers.{l}.{attn|mlp}.{channel_scores|unit_scores}" (+ "…attn.ainv1"/"…mlp.ainv1" and
// "…c" for numerical), metadata = method, ρ, λ. Atomic.
void saveScoreSet(const ScoreSet& scores, double rho, const std::string& path);

} // namespace npw
