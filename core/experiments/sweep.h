#pragma once
// A sweep: perplexity against sparsity for several methods, ratios and calibration settings,
// as the paper's tables and ablations. The expensive parts are shared: calibration once per
// (seed, samples, seqlen), scores once per (calibration, method, λ); each ratio then only
// re-selects (no re-scoring), applies the mask and evaluates.
#include "core/eval/evaluation_protocol.h"
#include "core/eval/zeroshot.h"
#include "core/models/language_model.h"
#include "core/prune/calibration.h"
#include "core/prune/pruner.h"
#include "core/util/progress.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace npw {

struct SweepEvalSet {
    std::string name;            // e.g. "kjv-nt"
    std::vector<int32_t> ids;    // tokenized once
    bool isText = false;         // bits per byte only for text
    std::string hash;            // of the file's bytes (fileContentHash): which text, exactly
};

struct SweepSpec {
    // Method names as `npw prune --method` takes them, plus "numerical-nocomp" (the paper's
    // ablation without compensation), "numerical-box" and "numerical-z" (the paper's exact
    // cross-layer order, eq. 7 on z; "numerical" uses the default ranking, settings.h).
    std::vector<std::string> methods;
    std::vector<double> ratios;
    // The protocol's calibration (evaluation_protocol.h): 128 windows of the model's context (≤ 2048).
    std::vector<int64_t> calibSamples = {kDefaultCalibrationSamples};
    std::vector<int64_t> calibSeqlens = {kDefaultCalibrationSeqlen};
    // Numerical only: absolute λ values; NaN = relative, λ = lambdaRel / median c (the default).
    std::vector<double> lambdas = {std::numeric_limits<double>::quiet_NaN()};
    double lambdaRel = kDefaultLambdaRel;
    int seeds = 1;                                    // seeds 0..seeds-1: calibration windows, random scores
    std::vector<int32_t> calibStream;
    std::vector<std::vector<int32_t>> calibSequences;  // when set: one window per sequence (its start)
    std::vector<std::string> calibDocuments;  // when set (C4): a window inside a seeded long-enough document
    std::string calibSource;
    std::string calibSourceHash;
    std::vector<SweepEvalSet> evalSets;
    std::vector<ZeroShotTask> zeroShotTasks;  // accuracy rows beside the perplexity rows
    EvaluationProtocol evaluation;  // the one protocol: 2048 capped at the context, every window unless capped
    AlphaMode alphaMode = AlphaMode::Budget;
    double alpha = std::numeric_limits<double>::quiet_NaN();
    // Memory and generation speed of every model (the paper's Figure 5): a "speed" row each,
    // before its evaluation rows: a prefill of speedPromptTokens and a greedy decode of
    // speedDecodeTokens, the median of speedRepeats runs after a warm-up (benchmarkGeneration).
    bool measureSpeed = false;
    int64_t speedPromptTokens = 64, speedDecodeTokens = 64;
    int speedRepeats = 3;
};

// The evalSet name of the speed rows.
inline constexpr const char* kSpeedEvalSet = "speed";

struct SweepRow {
    std::string method;
    double ratio = 0;  // requested ρ (0 = the dense model)
    int64_t calibSamples = 0, calibSeqlen = 0;  // as drawn (the length after the cap at the context)
    std::string calibSource, calibHash;         // the calibration text and its content hash
    int64_t calibDistinctTokens = 0;            // distinct positions the windows cover (0: unknown)
    double lambda = std::numeric_limits<double>::quiet_NaN();  // numerical only: as given (NaN: relative)
    double lambdaRel = std::numeric_limits<double>::quiet_NaN();  // numerical with a relative λ: λ_rel
    double lambdaUsed = std::numeric_limits<double>::quiet_NaN();  // numerical: the absolute λ scored with
    int seed = 0;
    std::string evalSet;
    double achievedRatio = 0, achievedRatioModel = 0;
    double ppl = 0, nll = 0;
    double bitsPerByte = std::numeric_limits<double>::quiet_NaN();
    int64_t evalTokens = 0;  // scored tokens; items for a zero-shot task
    // Perplexity rows: the evaluation as run (the protocol resolved on this model and text) and
    // which text, exactly; 0 and empty elsewhere (and in workspaces written before they were recorded).
    int64_t evalSeqlen = 0, evalWindows = 0, evalMaxWindows = 0;  // evalMaxWindows: the cap (0: every window)
    std::string evalHash;
    // Zero-shot rows (evalSet = the task's name): accuracy; ppl and nll are NaN there.
    double acc = std::numeric_limits<double>::quiet_NaN();
    double accNorm = std::numeric_limits<double>::quiet_NaN();
    // Speed rows (evalSet = kSpeedEvalSet): the model's size and speed; NaN/0 elsewhere.
    int64_t parameters = 0;
    double weightsMiB = std::numeric_limits<double>::quiet_NaN();    // in the runtime dtype
    double kvCacheMiB = std::numeric_limits<double>::quiet_NaN();    // K and V of prompt + decode tokens
    double prefillTokensPerSecond = std::numeric_limits<double>::quiet_NaN();
    double decodeTokensPerSecond = std::numeric_limits<double>::quiet_NaN();
    // How the speed was measured: the median of speedRuns timed runs (after a warm-up), the
    // slowest and fastest of them, and the machine's 1-minute load average just before (other
    // work on the cores slows a run: a reader needs all three to judge a difference). 0 / NaN:
    // not recorded (rows written before these were).
    int speedRuns = 0;
    double decodeSlowest = std::numeric_limits<double>::quiet_NaN();
    double decodeFastest = std::numeric_limits<double>::quiet_NaN();
    double loadAverage = std::numeric_limits<double>::quiet_NaN();
    // Taken from the work folder of an interrupted run of the same sweep (SweepJournal), not
    // measured by this run.
    bool resumed = false;

    bool isSpeedRow() const { return evalSet == kSpeedEvalSet; }
};

// Bytes of the key/value cache of `tokens` positions: Σ over layers of 2·kv heads·D_h·tokens
// elements of `elementBytes` (pruned KV heads shrink it; a layer without heads has none).
double kvCacheMiB(const LlamaConfig& config, int64_t tokens, int64_t elementBytes);

// A resumable sweep's record of its finished models, in a work folder beside its output
// (`npw sweep --csv FILE`: ".FILE.npw-work", workFolderBeside): one file per model (the dense one,
// then each method, λ and ratio of each seed and calibration setting) with every row of that model,
// written atomically once all of them are measured, beside fingerprint.json — the model's files and
// config, the texts (calibration and evaluation token ids, zero-shot items) and every setting of the
// sweep, the road and the runtime (sweepFingerprint). The same sweep again takes each recorded
// model's rows in its place (marked resumed) instead of pruning and evaluating it again; a
// calibration, a score set or a baseline's scores are computed only when a model that needs them is
// not recorded. A folder with another fingerprint is removed (said through `note`, naming it). The
// folder is made with the first record (a sweep refused before any row leaves none) and removed by
// complete(), once the sweep's outputs are written; a sweep that fails or is killed leaves it for
// the next run. The layer-wise road's calibration scratch is not kept: a resumed sweep calibrates
// again when a model it still has to measure needs that calibration.
class SweepJournal {
public:
    SweepJournal(std::string dir, std::string fingerprint, std::function<void(const std::string&)> note = nullptr);
    // The rows an interrupted run recorded for the model `key` (sweepModelKey), each marked resumed.
    std::optional<std::vector<SweepRow>> recorded(const std::string& key) const;
    // Every row of the model `key`, measured: on disk before this returns.
    void record(const std::string& key, const std::vector<SweepRow>& rows);
    size_t recordedModels() const { return recorded_.size(); }
    const std::string& dir() const { return dir_; }
    // The sweep's outputs are written: the folder goes.
    void complete();

private:
    std::string dir_, fingerprint_;
    std::function<void(const std::string&)> note_;
    std::map<std::string, std::vector<SweepRow>> recorded_;
    int nextFile_ = 1;
    bool created_ = false;
};
// The fingerprint of a sweep's work folder: the model (checkpointFingerprint), the texts, the spec's
// settings, the road ("in RAM", "layer-wise") and the runtime the models run on.
std::string sweepFingerprint(const LanguageModel& lm, const SweepSpec& spec, const std::string& road, const Runtime& runtime);
// The journal's name of one model of a sweep: "dense", or its seed, calibration setting, method, λ
// (as given; NaN: relative) and ratio.
std::string sweepModelKey(int seed, int64_t samples, int64_t seqlen, const std::string& method, double lambda, double ratio);

// Runs the sweep on `model`. onRow is called as each row is ready (a GUI plots it at once).
// The dense model's rows come first (method "dense", ratio 0). Per model: its speed row (when
// measured), one row per evaluation set, then one per zero-shot task. `journal` (when given):
// models recorded there are taken from it, each model measured here is recorded.
std::vector<SweepRow> runSweep(const LanguageModel& model, const SweepSpec& spec,
                               const std::function<void(const SweepRow&)>& onRow = nullptr,
                               const ProgressFn& progress = nullptr, SweepJournal* journal = nullptr);

// The layer-by-layer road of a sweep, for a model whose float32 copy and statistics exceed what
// fits (choosePruneRoad's rule, as `npw prune` takes it): the same rows as runSweep, from the
// same steps in another order —
//   dense       evaluated one block at a time (evaluatePerplexityLayerwise)
//   calibrate   once per (seed, samples, seqlen), one block at a time, the Gram triangles in a
//               scratch file in the run's work folder (LayerwiseStatistics::calibrate)
//   score       once per (calibration, method, λ) from that file (LayerwiseStatistics::score)
//   per ratio   MaskSelector, the pruned model written layer by layer into the work folder
//               (writeLayerwiseExport, in the checkpoint's dtype), evaluated one block at a time
//               on every set with the same protocol, then removed
// Resident memory: the mapped weights (page cache), one layer's statistics and the scores, the
// hidden states of every calibration or evaluation window, one block's activations. Disk: the
// scratch file and one pruned export at a time. What needs the whole model in memory is refused
// by name before any work (npw::Error): the baselines (llm-pruner, slicegpt, block-influence),
// numerical-lstar-kl (2L + 1 whole-model passes), speed rows and zero-shot tasks.
struct LayerwiseSweepOptions {
    // The run's own folder (created; removed with everything in it when the sweep ends, fails or
    // is cancelled). Name it npw-sweep-PID-… (layerwiseSweepWorkDir) so that the folder of a run
    // killed with -9 is recognised and removed by the next (removeWorkOfDeadProcesses).
    std::string workDir;
    // Where blocks run for evaluation (the model's own runtime when unset: cpu); calibration's
    // block runtime is calibration.blockRuntime.
    std::optional<Runtime> evalRuntime;
    CalibrationOptions calibration;
    SweepJournal* journal = nullptr;  // as runSweep's
};
// A fresh work folder name in `parent` ("npw-sweep-PID-N"); the folders of dead processes there
// are removed first.
std::string layerwiseSweepWorkDir(const std::string& parent);
// npw::Error naming the first method or setting of `spec` the layer-by-layer road cannot run;
// `why`: the road's reason, appended in parentheses.
void refuseOnLayerwiseSweep(const SweepSpec& spec, const std::string& why);
// True for a method that road refuses (a baseline, numerical-lstar-kl); false for any other name,
// an unknown one too (the spec's check refuses that).
bool sweepMethodNeedsWholeModel(const std::string& method);
std::vector<SweepRow> runSweepLayerwise(const LanguageModel& model, const SweepSpec& spec,
                                        const LayerwiseSweepOptions& options,
                                        const std::function<void(const SweepRow&)>& onRow = nullptr,
                                        const ProgressFn& progress = nullptr);

// Mean and sample standard deviation over seeds of rows that agree in everything else.
struct SweepSummaryRow {
    SweepRow first;  // the settings (seed of the first)
    int count = 0;
    double pplMean = 0, pplStd = 0, achievedRatioMean = 0, bitsPerByteMean = 0;
    double accMean = 0, accStd = 0, accNormMean = 0;  // NaN for perplexity rows
    // Speed rows: means over seeds (NaN elsewhere); decode spread as the sample std.
    double decodeMean = 0, decodeStd = 0, prefillMean = 0, weightsMiBMean = 0, kvCacheMiBMean = 0;
    // Speed rows: the slowest and fastest timed run over the group's rows (NaN elsewhere).
    double decodeSlowest = 0, decodeFastest = 0;
};
std::vector<SweepSummaryRow> summariseOverSeeds(const std::vector<SweepRow>& rows);

std::string sweepRowsCsv(const std::vector<SweepRow>& rows);

// A row as JSON (`npw sweep --json`, the studio's workspace file) and back; NaN is null. The
// reader takes files without the accuracy and speed fields (they read as NaN / 0) and throws
// nlohmann's exception for a missing or mistyped field.
nlohmann::json sweepRowJson(const SweepRow& row);
SweepRow sweepRowFromJson(const nlohmann::json& j);

} // namespace npw
