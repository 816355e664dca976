#pragma once
// The bounded road of `npw prune`: a model whose float32 copy and statistics do not fit in RAM
// (a 7B–8B checkpoint on a workstation) is pruned one decoder layer at a time, with the same
// steps and the same arithmetic as the in-RAM road (pruner.h), only read and written in
// another order:
//
//   calibrate   every window embedded once; one block at a time over all windows
//               (calibrateEachLayer), the block's Gram matrices written to a scratch file as
//               their packed upper triangle, the sums kept in RAM (a few MB)
//   score       computeScoresByLayer: each layer's o_proj / down_proj read from the mapped
//               checkpoint (converted to float32 one tensor at a time) and its Gram unpacked from
//               the scratch file; only what selection needs stays (A⁻¹1, c, the unit scores)
//   select      MaskSelector over every layer at once, as in RAM
//   apply+write each layer converted to float32, compensated and sliced (applyMaskToLayer),
//               written in the checkpoint's dtype into Hugging Face shards
//               (saveHfLlamaDirectoryStreamed) in the work folder, moved whole into
//               writeExportDirectory's staging folder (writeLayerwiseExport: the studio's
//               export on this road writes through it too, from statistics it holds)
//
// What stays in RAM: the mapped weights (page cache, not anonymous memory), the hidden states of
// every window in float32 (windows · seqlen · hidden · 4 B: 128 MiB for 16 × 512 at 7B), one
// layer's statistics in float64 and the scores. The scratch file holds G's upper triangle in
// float64 when that fits in the checkpoint's own size plus the hidden states, else in float32
// (a relative rounding of 2⁻²⁴ per entry; its effect on scores and compensation is measured in
// tst_layerwise_prune and stated in README).
#include "core/models/llama.h"
#include "core/prune/calibration.h"
#include "core/prune/report.h"
#include "core/prune/score.h"
#include "core/prune/select.h"
#include "core/prune/settings.h"
#include "core/prune/stage_bounds.h"
#include "core/util/progress.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace npw {

// The in-RAM road holds the weights in float32 (4 B per parameter) and every layer's statistics
// in float64 (modelStatsBytes): more than kPruneRamFraction of physical RAM takes the layer-wise
// road.
constexpr double kPruneRamFraction = 0.5;
int64_t inRamPruneBytes(const LlamaConfig& config);
// On a GPU the in-RAM road also holds the model in the runtime's dtype and every layer's
// statistics in float64 on the GPU (calibrate() accumulates where the activations are: the Gram
// updates are the costliest part of calibration, ~2.3 PFLOP at 7B for 128 × 2048 tokens, hours on
// a CPU): more than kPruneGpuFraction of the GPU's memory takes the layer-wise road, which holds
// one block, the hidden states and one layer's statistics there (a 7B's in-RAM road needs 13.5 GB
// + 35 GB: an 80 GB H100 holds it, a 24 GB card does not). The rest of the GPU is the forward's
// activations and the allocator's slack.
constexpr double kPruneGpuFraction = 0.75;
int64_t inGpuPruneBytes(const LlamaConfig& config, int64_t runtimeElementBytes);

struct PruneRoad {
    bool layerwise = false;
    bool forced = false;           // --layerwise
    int64_t inRamBytes = 0;        // inRamPruneBytes
    int64_t physicalBytes = 0;     // physicalMemoryBytes() (0: unknown → in RAM)
    int64_t inGpuBytes = 0;        // inGpuPruneBytes, when the runtime is a GPU
    int64_t deviceBytes = 0;       // the GPU's memory (deviceMemoryBytes; 0: the CPU, or unknown)
    std::string reason;            // one sentence, for stderr and --json
};
// deviceBytes: the runtime GPU's memory (0 on the CPU); runtimeElementBytes: the size of the
// runtime's dtype there (bfloat16: 2).
PruneRoad choosePruneRoad(const LlamaConfig& config, int64_t physicalBytes, bool forceLayerwise, int64_t deviceBytes = 0,
                          int64_t runtimeElementBytes = 2);

// Ranking lstar-kl measures each site's damage with 2L + 1 whole-model forward passes over the
// calibration windows, which the layer-by-layer road does not make: refused (npw::Error) on that
// road, the message ending with `instead` (what the caller offers in its place).
void refuseMeasuredDamageLayerByLayer(const PruneSettings& settings, const std::string& instead);

class GramScratch;
// Each layer's scored weights as the in-RAM road holds them — float32 (the widening of bf16/f16
// is exact), one layer at a time — with its statistics read from `scratch`.
ScoredLayerSource scoredLayersFrom(const LlamaCheckpoint& checkpoint, const GramScratch& scratch);

// How the scratch file stores each Gram matrix's upper triangle.
enum class StatsScratchPrecision { Auto, Float64, Float32 };
// Bytes of every scored site's packed upper triangle at that element size.
int64_t packedGramBytes(const LlamaConfig& config, int64_t elementBytes);
// The hidden states of every calibration window, as calibration holds them (float32).
int64_t calibrationHiddenBytes(const LlamaConfig& config, int64_t tokens);
// Hidden states up to this size are written after every calibrated layer for a resume; larger ones
// only as often as keeps the writes under a tenth of the calibration's time (pruneLayerwise).
inline constexpr int64_t kHiddenSavedEveryLayerBytes = int64_t{256} << 20;
// The scratch file's bound: the checkpoint's weights as stored plus the hidden states of every
// calibration window (hiddenBytes).
int64_t scratchBoundBytes(const LlamaCheckpoint& checkpoint, int64_t hiddenBytes);
// The triangles' dtype: float64 when they fit that bound (Auto), else float32.
at::ScalarType scratchDtype(const LlamaConfig& config, int64_t boundBytes,
                            StatsScratchPrecision precision = StatsScratchPrecision::Auto);

// The packed Gram matrices of every layer in one scratch file, the sums in RAM. `reopen`: the
// file exists from an interrupted run (its layers < the resumed one are valid; restoreSums puts
// their sums back); else it is created (O_EXCL) and its whole size reserved up front.
class GramScratch {
public:
    GramScratch(const std::string& path, const LlamaConfig& config, at::ScalarType dtype, bool reopen = false);
    ~GramScratch();
    GramScratch(const GramScratch&) = delete;
    GramScratch& operator=(const GramScratch&) = delete;

    void write(size_t layer, const LayerStats& attn, const LayerStats& mlp);
    // A site's statistics; withGram: G unpacked into a float64 [D, D] (symmetric), else undefined.
    LayerStats read(size_t layer, bool attention, bool withGram) const;
    // The sums of a layer written by an earlier run (gram ignored).
    void restoreSums(size_t layer, const LayerStats& attn, const LayerStats& mlp);
    // fdatasync: what write() wrote is on disk before the work folder says the layer is done.
    void sync() const;
    int64_t bytes() const { return bytes_; }
    at::ScalarType dtype() const { return dtype_; }
    // What read() has read so far (the stage bounds' scratch reading).
    double readSeconds() const { return readSeconds_; }
    double readBytes() const { return readBytes_; }

private:
    std::string path_;
    int fd_ = -1;
    at::ScalarType dtype_;
    int64_t bytes_ = 0;
    std::vector<int64_t> attnOffset_, mlpOffset_;
    std::vector<LayerStats> attn_, mlp_;  // gram undefined
    mutable double readSeconds_ = 0, readBytes_ = 0;
};

// The work folder (beside --out: ".OUT.npw-work") keeps what an interrupted run finished:
// fingerprint.json (the model's files by path, size and mtime, its config, the windows' token
// ids, the scratch precision and batching, npw's version), grams.bin (the Gram triangles),
// layer-L.sums.safetensors (Σx, Σx², N per layer), hidden.safetensors (the hidden states leaving
// the last finished layer, while calibration runs), scores/PASS-L.safetensors (each score step's
// record, score_journal.h), apply/layer-L.json (each written layer's report and shapes),
// export/ (the export's finished shards) and state.json: the finished layers, the settings the
// steps below were made with, how many score steps are recorded and the finished shards with
// their size and time. state.json is written last, after what it names is synced, so it never
// names an incomplete file. The same command again resumes calibration at the first unfinished
// layer, scoring at the first unrecorded step, and the export at the first layer not in a
// finished shard (a shard that changed since, a half-written one, a damaged record: done again);
// selection is redone (it takes milliseconds). A folder whose fingerprint differs is removed; with
// other settings only its scores and export are; each said. The folder is removed once the
// export is complete; the export moves from it to the staging folder beside --out and appears
// there atomically (writeExportDirectory), byte for byte what an uninterrupted run writes.
//
// The helpers every resumable run's work folder goes through (npw prune's here, npw sweep's
// SweepJournal):
// A double written exactly ("%a": hexadecimal), for fingerprints.
std::string exactNumberText(double x);
// The work folder of a resumable run writing `output` (a file or a folder): ".NAME.npw-work"
// beside it, on the disk the user chose.
std::string workFolderBeside(const std::string& output);
// What every work folder's fingerprint starts with: `format`, npw's version, the model's files
// (by path, size and modification time) and its config: a folder written for another model, or by
// another npw, is not resumed from.
nlohmann::json checkpointFingerprint(const LlamaCheckpoint& checkpoint, const std::string& format);
// The work folder `dir` of an interrupted run, if there is one: kept (true) when its
// fingerprint.json is `fingerprint` and `usable` (when given) says it can be resumed from (an
// exception: it cannot); otherwise removed, `note` naming it ("removed the work folder DIR of an
// interrupted run with " + otherRun). False when there was none.
bool keepMatchingWorkFolder(const std::string& dir, const std::string& fingerprint, const std::function<bool()>& usable,
                            const std::string& otherRun, const std::function<void(const std::string&)>& note);
// Creates `dir` with its fingerprint.json (when missing).
void createWorkFolder(const std::string& dir, const std::string& fingerprint);

struct LayerwisePruneOptions {
    std::string workDir;  // the work folder (created; removed when the export is complete)
    StatsScratchPrecision precision = StatsScratchPrecision::Auto;
    CalibrationOptions calibration;
    int64_t shardBytes = int64_t{2} << 30;
    std::function<void(const std::string&)> note;  // one line each: resuming, a stale folder removed
};

struct LayerwisePruneRun {
    ScoreSet scores;
    SelectionResult selection;
    PruneReport report;
    std::string statsPrecision;   // "float64" or "float32": the scratch file's triangle
    int64_t scratchBytes = 0;     // the scratch file
    int64_t scratchBoundBytes = 0;  // the checkpoint's size + the hidden states
    int64_t hiddenBytes = 0;      // the hidden states of every window
    int64_t resumedAtLayer = -1;  // the first layer this run calibrated after an interrupted one; -1: fresh
    int64_t resumedScoreSteps = 0;     // score steps (one layer of one pass each) taken from the work folder
    int64_t resumedExportAtLayer = -1;  // the first layer this run wrote after finished shards; -1: fresh

    // Where this process spent its time, for the stage bounds (layerwiseStageMeasures): the
    // in-RAM road's stages with the scratch file's I/O apart. stages.calibrateSeconds: the blocks'
    // forward and the Gram updates only; applySeconds: compensation and slicing; saveSeconds: the
    // export's files (shards, index, config, manifest) without the layers' arithmetic.
    PruneStageInputs stages;
    size_t calibratedFromLayer = 0;   // this process calibrated layers [calibratedFromLayer, L)
    double scratchWriteSeconds = 0, scratchWriteBytes = 0;  // Gram triangles, sums, hidden states, state
    double scratchReadSeconds = 0, scratchReadBytes = 0;    // Gram triangles read back (score, apply)
    double recordSeconds = 0, recordBytes = 0;  // score steps' and written layers' records, state.json
};

// The apply+write pass's record of its work, for an export that an interrupted run takes up again
// (pruneLayerwise's work folder; hf_streamed_resume.h). Left empty: nothing is recorded, nothing
// resumed, and the shards are written straight into the export's staging folder.
struct LayerwiseExportJournal {
    // The folder the shards are written into, moved whole into the staging folder once every one
    // is written (it must be on the staging folder's file system); empty: the staging folder.
    std::string shardDir;
    // Asked once per shard, in order, before anything is written (HfStreamedShards::finished):
    // true when `file` is complete in shardDir from an earlier run; it has then filled in each of
    // that shard's layers' report and written shapes (pruned.layers[l],
    // pruned.checkpoint.weights.layers[l]), which the manifest's report counts.
    std::function<bool(size_t shard, const std::string& file, PrunedModel& pruned)> finished;
    // Layer `layer` is compensated and sliced (its report and shapes are in `pruned`); called
    // before the layer goes into its shard.
    std::function<void(size_t layer, const PrunedModel& pruned)> applied;
    // As HfStreamedShards::committed.
    std::function<void(size_t shard, const std::string& file, const std::vector<size_t>& layers)> committed;
};

struct LayerwiseExportOptions {
    int64_t shardBytes = int64_t{2} << 30;
    LayerwiseExportJournal journal;
};

struct LayerwiseExport {
    PruneReport report;          // of the written model; timings: applySeconds only
    double layerSeconds = 0;     // converting, compensating and slicing the layers, the scratch reads included
    double scratchReadSeconds = 0;  // the Gram triangles read back in this pass
    double seconds = 0;          // the whole write: the layers, the files, the manifest, the rename
    int64_t bytesWritten = 0;    // the export's files
};

// The apply+write pass of the bounded road, on statistics already calibrated (`scratch`, of
// `checkpoint`'s model) and a selection already made from `scores`: each layer read from the
// mapped checkpoint and converted to float32, compensated and sliced (applyMaskToLayer) with its two
// Gram matrices unpacked from the scratch file, written in the checkpoint's dtype into Hugging Face
// shards (saveHfLlamaDirectoryStreamed), the folder appearing at outDir atomically
// (writeExportDirectory: the same guards as every export — never the source model, never a folder
// npw did not write; a failure or a cancel removes the staging folder and leaves outDir as it
// was). manifestFor(report) gives the manifest once every layer is written. `settings`: as
// applied (method, ρ, α, compensation, damping); defaultAlpha: the selector's (the report's α
// when settings.alpha is NaN). Resident memory beyond the mapped weights: one layer in float32,
// its two Gram matrices in float64 and the compensation's one D×D float64 factor (compensation.h;
// measured on a 134M bf16 model: 100 MiB, where its float32 copy is 536 MB). Progress "apply"
// (layers written / layers); a cancel
// throws npw::Cancelled between layers. pruneLayerwise and the studio's export
// (LayerwiseStatistics::exportSelection) both write through it.
LayerwiseExport writeLayerwiseExport(const LlamaCheckpoint& checkpoint, const GramScratch& scratch, const ScoreSet& scores,
                                     const SelectionResult& selection, const PruneSettings& settings, double defaultAlpha,
                                     const std::string& outDir,
                                     const std::function<std::string(const PruneReport&)>& manifestFor,
                                     const LayerwiseExportOptions& options = {}, const ProgressFn& progress = nullptr);

// The manifest of a layer-wise export (npw prune's and the studio's): pruneManifestJson with
// "road": "layer-wise" and "statistics_scratch" (statisticsScratchJson).
nlohmann::json statisticsScratchJson(const std::string& precision, int64_t bytes, int64_t boundBytes, int64_t hiddenBytes);
std::string layerwiseManifestJson(const PruneReport& report, const PruneSettings& settings,
                                  const CalibrationSummary& calibration, const std::string& sourceModel,
                                  const nlohmann::json& statisticsScratch);

// The whole bounded road on a model opened with mapped weights (openCausalLanguageModel):
// calibrate, score, select, compensate and write `outDir` (writeExportDirectory: atomic, guarded;
// manifestFor(report) gives the manifest once every layer is written). ranking lstar-kl is refused
// (it runs the whole model 2L + 1 times). Progress stages "calibrate", "score: solve" (a relative
// λ), "score", "score: L* ranking" (lstar, lstar-rel), "apply" (compensation and writing).
LayerwisePruneRun pruneLayerwise(const LlamaModel& model, const CalibrationSet& set, const PruneSettings& settings,
                                 const std::string& outDir,
                                 const std::function<std::string(const LayerwisePruneRun&)>& manifestFor,
                                 const LayerwisePruneOptions& options, const ProgressFn& progress = nullptr);

// The stages of one pruneLayerwise in this process against their bounds (stage_bounds.h): the
// in-RAM road's stages (pruneStageMeasures, the forward counted over the layers this process
// calibrated) plus the statistics scratch file's writing (against the disk write rate) and
// reading (no bound: page cache or disk, the rates hold no read rate), and the records a rerun
// resumes scoring and the export from (against the disk write rate).
std::vector<StageMeasure> layerwiseStageMeasures(const LlamaConfig& config, const LayerwisePruneRun& run);

} // namespace npw
