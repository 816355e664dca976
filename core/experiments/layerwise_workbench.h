#pragma once
// The studio's share of the layer-by-layer road (layerwise_prune.h) for a model whose float32
// copy and statistics do not fit in RAM (choosePruneRoad: a 7B–8B checkpoint on a workstation):
//
//   open       the checkpoint's headers first (config, tensor shapes and dtypes: seconds and
//              little memory at any size, no weight read), so a window shows the architecture at
//              once; then the weights' values checked one layer at a time (progress, cancel), and
//              the runtime model built on the mapped file (openLanguageModelInSteps)
//   calibrate  the windows through the model one decoder block at a time (calibrateEachLayer),
//              each block's Gram matrices written to a scratch file as their packed upper
//              triangle (GramScratch), the sums in RAM (LayerwiseStatistics::calibrate)
//   score      computeScoresByLayer: one layer's o_proj / down_proj widened to float32 and its
//              Gram unpacked at a time; what selection needs (A⁻¹1, c, unit scores) stays in the
//              ScoreSet, so any ρ, α, λ_rel re-selects instantly, as in RAM
//   export     the selection at the knobs written layer by layer from the same scratch file
//              (exportSelection → writeLayerwiseExport, the pass of `npw prune --layerwise`)
//
// The same arithmetic as the in-RAM road (calibrate → computeScores); only the order of reading
// differs, so the scores agree to float64 rounding of differently batched sums (float32 triangles
// when float64 ones do not fit: the rounding layerwise_prune.h states). No Qt.
#include "core/experiments/language_workbench.h"
#include "core/prune/layerwise_prune.h"

#include <functional>
#include <memory>
#include <string>

namespace npw {

// openLanguageModel in two steps: `headersRead` gets the mapped checkpoint (config, tensor
// handles, origins; no value read yet) as soon as its headers are parsed; then every layer's
// values are checked (progress "check weights", layers done / layers; a NaN named by file, tensor
// and index as checkWeightValues names it) and the model built with the mapped weights in the
// file's dtype. The same model and tokenizer as openLanguageModel gives.
LanguageModel openLanguageModelInSteps(const std::string& model, const Runtime& runtime,
                                       const std::function<void(const LlamaCheckpoint&)>& headersRead,
                                       const ProgressFn& progress = nullptr);

// The road a model's pruning takes in the studio (on the CPU: the RAM rule of `npw prune`;
// NPW_PHYSICAL_MEMORY_BYTES pretends another RAM size).
PruneRoad studioPruneRoad(const LlamaConfig& config);

// Statistics calibrated layer by layer: the Gram triangles in a scratch file, the sums in RAM.
class LayerwiseStatistics {
public:
    // Draws the request's windows (buildCalibrationSet) and calibrates them one block at a time into
    // a new scratch file in `scratchDir` ("npw-studio-grams-PID-N.bin"; created when missing):
    // float64 triangles when they fit in the checkpoint's own size plus the hidden states, else
    // float32, as `npw prune`'s layer-wise road decides. The file is removed when the object is
    // destroyed, or when calibration fails or is cancelled; a file left by a process that no
    // longer runs (killed) is removed when the next one is made. npw::Error naming the file when
    // the disk cannot hold it.
    static std::shared_ptr<const LayerwiseStatistics> calibrate(const LanguageModel& lm, const CalibrationRequest& request,
                                                                const std::string& scratchDir,
                                                                const ProgressFn& progress = nullptr,
                                                                const CalibrationOptions& options = {});
    // The same for windows already drawn (a sweep draws them per seed, drawCalibration); `note`:
    // what drawing them said (calibrationSeqlen's note), kept for note().
    static std::shared_ptr<const LayerwiseStatistics> calibrate(const LlamaModel& model, const CalibrationSet& set,
                                                                const std::string& scratchDir,
                                                                const ProgressFn& progress = nullptr,
                                                                const CalibrationOptions& options = {},
                                                                const std::string& note = "");
    ~LayerwiseStatistics();
    LayerwiseStatistics(const LayerwiseStatistics&) = delete;
    LayerwiseStatistics& operator=(const LayerwiseStatistics&) = delete;

    // The scores of `settings` (computeScoresByLayer over the scratch file and `model`'s weights),
    // progress "score". npw::Error for ranking lstar-kl (2L + 1 whole-model forward passes).
    ScoreSet score(const LlamaModel& model, const PruneSettings& settings, const ProgressFn& progress = nullptr) const;

    // The studio's export on this road: `selection` (a score set's, made from this object's scores)
    // compensated, sliced and written layer by layer into `outDir` by writeLayerwiseExport, the
    // pass `npw prune --layerwise` writes with — from these statistics: no new calibration, no
    // rescoring. The model appears atomically in Hugging Face layout, in the checkpoint's dtype,
    // with `npw prune`'s manifest (layerwiseManifestJson; sourceModel: the model as the user named
    // it). `settings`: compensation and damping (the rest is the selection's:
    // LanguagePruningWorkbench::appliedSettings). Progress "apply"; a cancel leaves outDir as it
    // was. npw::Error for a baseline's selection or a model other than the one calibrated.
    LayerwiseExport exportSelection(const LlamaModel& model, const WorkbenchSelection& selection,
                                    const PruneSettings& settings, const std::string& outDir,
                                    const std::string& sourceModel, const ProgressFn& progress = nullptr) const;

    // exportSelection's pass for a selection made outside the workbench (a sweep's: one score set,
    // a MaskSelector, one ratio at a time): `settings` as applied (ρ, α as given, compensation),
    // defaultAlpha the selector's. npw::Error for a model other than the one calibrated.
    LayerwiseExport exportScores(const LlamaModel& model, const ScoreSet& scores, const SelectionResult& selection,
                                 const PruneSettings& settings, double defaultAlpha, const std::string& outDir,
                                 const std::string& sourceModel, const ProgressFn& progress = nullptr) const;

    const CalibrationSummary& summary() const { return summary_; }
    const std::string& note() const { return note_; }  // calibrationSeqlen's note
    double seconds() const { return seconds_; }
    const std::string& file() const { return file_; }
    int64_t bytes() const;
    std::string precision() const;  // "float64" or "float32"
    // One line for a log: windows, the scratch file, its size and precision.
    std::string describe() const;

private:
    LayerwiseStatistics() = default;
    std::string file_;
    std::unique_ptr<GramScratch> scratch_;
    std::string modelSource_;  // the checkpoint calibrated
    int64_t hiddenBytes_ = 0, boundBytes_ = 0;  // the scratch precision's bound (scratchBoundBytes)
    CalibrationSummary summary_;
    std::string note_;
    double seconds_ = 0;
};

} // namespace npw
