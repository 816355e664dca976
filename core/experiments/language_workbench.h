#pragma once
// A language model's pruning, the one place where `npw prune`, `npw sweep`, `npw demo`, `npw bench`
// and the studio take their steps (the twin of image_workbench.h): the calibration windows (one
// builder, one rule for their length), the statistics, the score sets computed so far (one per
// method, side by side), a selection at any ρ, α, λ_rel, and the pruned model with its report.
//
// The expensive steps (calibrate, score, applySelection) are static and pure: the studio runs
// them on its worker thread with copies and hands the results back to the workbench it keeps
// on the GUI thread (setCalibration, addScores), so a cancelled job changes nothing. select()
// is quick (a re-selection, a closed-form re-score for numerical λ) and runs where it is asked.
//
// The baselines in their own structure (core/prune/baselines.h) are kept here too, beside the
// score sets: LLM-Pruner's Taylor importances (per KV group and MLP channel: per-unit scores,
// selected at any ρ by its own rule without new gradients), ShortGPT's block influence (one
// score per block; the fewest lowest blocks reaching ρ) and SliceGPT (no per-unit scores: a
// selection is its width for ρ; applying it slices, seconds). They score from the calibration
// windows, not the statistics. No Qt.
#include "core/eval/evaluation_protocol.h"
#include "core/models/language_model.h"
#include "core/prune/baselines.h"
#include "core/prune/block_influence.h"
#include "core/prune/llm_pruner.h"
#include "core/prune/pruner.h"
#include "core/prune/score_view.h"

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npw {

struct SweepSpec;

// Where calibration windows are drawn from, read (and tokenized) once: a token stream (a text
// tokenized with one BOS, or an id file), one sequence per line of an id file (a window at each
// start), or a data set's documents (C4: a window inside a seeded long-enough document).
struct CalibrationPool {
    std::vector<int32_t> stream;
    std::vector<std::vector<int32_t>> sequences;
    std::vector<std::string> documents;
    std::string source;
    bool sourceIsIds = false;
    std::string sourceHash;  // of the file's bytes (fileContentHash)
};

// A calibration as a user asks for it (CLI flags, the studio's Run settings).
struct CalibrationRequest {
    std::string source;        // a text file, an id file (sourceIsIds), or NAME:FILE (wikitext2:, c4:, …)
    bool sourceIsIds = false;
    bool perLine = false;      // an id file, one sample per line: a window at each start
    // The protocol's defaults (core/eval/evaluation_protocol.h): 128 windows of the model's
    // context, at most 2048 tokens.
    int64_t samples = kDefaultCalibrationSamples;
    int64_t seqlen = kDefaultCalibrationSeqlen;  // 0: the model's context, at most 2048 (calibrationSeqlen)
    uint64_t seed = 0;         // of the window offsets
};

// The one rule for a calibration window's length: 0 takes the model's context (at most 2048);
// a length beyond the model's context is capped at it — the windows a model can see — and
// `note` (when given) says so ("seqlen 4096 capped at the model's context of 512"); empty
// otherwise. Every caller (CLI, sweep, studio) reports the note where it reports the calibration.
int64_t calibrationSeqlen(int64_t requested, const LlamaConfig& config, std::string* note = nullptr);

// Reads `source` as CalibrationRequest describes it. npw::Error naming the file.
CalibrationPool readCalibrationPool(const LanguageModel& lm, const std::string& source, bool sourceIsIds, bool perLine);
// The windows of a pool (drawCalibrationSet / …FromSequences / …FromDocuments as it holds),
// seqlen by calibrationSeqlen's rule.
CalibrationSet drawCalibration(const CalibrationPool& pool, const LanguageModel& lm, int64_t samples, int64_t seqlen,
                               uint64_t seed, std::string* note = nullptr);
// readCalibrationPool + drawCalibration: the calibration set of a request.
CalibrationSet buildCalibrationSet(const LanguageModel& lm, const CalibrationRequest& request, std::string* note = nullptr);

// A sweep's calibration from the same pool (SweepSpec keeps stream, sequences and documents).
void setSweepCalibrationPool(SweepSpec& spec, CalibrationPool pool);

// A warning (empty: none) when the calibration reuses its text heavily: its windows cover fewer
// than half as many distinct tokens as they hold (a short text drawn many times over), naming
// the counts ("128 windows × 128 tokens = 16384 positions cover only 1369 distinct tokens of
// dream.txt (each used 12.0 times on average)").
std::string calibrationReuseWarning(const CalibrationSummary& calibration);
// A warning (empty: none) when an evaluation text is (in part) the calibration's: the same bytes
// (content hash), or at least 1 % of its non-overlapping 32-token spans occur in the calibration
// pool (its stream or sequences; a data set's documents are compared by hash only). Perplexity
// on calibration text is not held-out perplexity.
std::string calibrationOverlapWarning(const CalibrationPool& pool, const std::string& evalName,
                                      const std::string& evalHash, const std::vector<int32_t>& evalIds);

// What a score set is computed from: a PruneMethod's settings (from the statistics), or one of
// the baselines in its own structure (from the calibration windows).
struct ScoreRequest {
    PruneSettings settings;                  // a PruneMethod's; for a baseline only its name matters
    std::optional<BaselineMethod> baseline;  // set: this baseline, with baselineOptions
    BaselineOptions baselineOptions;         // its ratio is ignored: a kept set selects at any ρ

    ScoreRequest() = default;
    ScoreRequest(PruneSettings s) : settings(std::move(s)) {}  // NOLINT(google-explicit-constructor): implicit on purpose, a PruneMethod's settings are its request
};
// scoreSetName(settings), or the baseline's: "llm-pruner" ("llm-pruner-global" for its global
// ranking; "-param_mix" / "-vectorize" for another Taylor importance; "-layers-A-B" for another
// layer range), "block-influence", "slicegpt".
std::string scoreSetName(const ScoreRequest& request);

// A baseline's scores as the workbench keeps them.
struct BaselineScores {
    BaselineMethod method = BaselineMethod::LlmPruner;
    BaselineOptions options;
    std::optional<LlmPrunerScores> llmPruner;  // per KV group and MLP channel, in the layer range
    std::optional<BlockInfluence> blocks;      // per block
    // The windows scored on; SliceGPT slices on them when a selection is applied.
    std::shared_ptr<const CalibrationSet> windows;
    double seconds = 0;
};

// What LanguagePruningWorkbench::score computes for a request: one of the two.
struct ComputedScores {
    std::optional<ScoreSet> scores;
    std::optional<BaselineScores> baseline;
};

// A selection and what it removes, for one score set at ρ, α, λ_rel.
struct WorkbenchSelection {
    std::string method;                      // the score set's name (scoreSetName)
    std::shared_ptr<const ScoreSet> scores;  // at the λ selected with (numerical: re-scored in closed form)
    double lambdaRel = std::numeric_limits<double>::quiet_NaN();  // numerical with a relative λ; NaN: absolute
    SelectionResult selection;
    double ratio = 0;
    double alpha = 0;                        // used: the default resolved
    AlphaMode alphaMode = AlphaMode::Budget;
    std::vector<LayerKeptCounts> kept;       // per layer
    double achievedRatio = 0;                // of attention + MLP parameters
    double achievedRatioModel = 0;           // of all parameters
    // What the views show per layer at ρ: the scores a user reads (numerical: z at ρ; the
    // baselines: LLM-Pruner's Taylor importance per KV group and channel, NaN outside its layer
    // range; block influence: the block's one score on each of its units). Empty: the method has
    // no per-unit scores (SliceGPT; its mask is empty too).
    std::vector<LayerScores> unitScores;
    std::string scoreLabel;                  // what unitScores are, for a colour scale or an axis
    // A baseline's selection (scores is then null): its scores, its native knob at ρ (as the
    // manifest's "native" records it: per_layer_ratio, blocks_removed, slicing_fraction, …) and
    // one sentence saying what it removes.
    std::shared_ptr<const BaselineScores> baseline;
    nlohmann::json native;
    std::string description;
};

// A selection applied: the pruned checkpoint and the one prune report (`npw prune --json`, the
// studio's export and per-layer losses).
struct WorkbenchPrune {
    PruneSettings settings;  // as applied: the scores' settings at the selection's ρ, α, λ (for the manifest)
    std::shared_ptr<const ScoreSet> scores;  // what was selected from (WorkbenchSelection::scores)
    SelectionResult selection;               // the mask applied, with its threshold and counts
    PrunedModel pruned;
    PruneReport report;
};

class LanguagePruningWorkbench {
public:
    struct Calibration {
        std::shared_ptr<const ModelStats> stats;
        // The windows themselves (token ids only), for rankings that run the model on them
        // (lstar-kl, site_damage.h); null when the statistics were read from a file.
        std::shared_ptr<const CalibrationSet> windows;
        CalibrationSummary summary;
        std::string note;     // calibrationSeqlen's note; empty when the request was taken as given
        double seconds = 0;
    };

    LanguagePruningWorkbench() = default;
    explicit LanguagePruningWorkbench(LanguageModel model);

    bool hasModel() const { return model_.model != nullptr; }
    const LanguageModel& model() const { return model_; }

    // The request's windows (buildCalibrationSet, with calibrationSeqlen's note) and no
    // statistics: what the baselines score on. windowsOnly(windows): windows drawn already.
    static Calibration windowsOnly(const LanguageModel& lm, const CalibrationRequest& request);
    static Calibration windowsOnly(CalibrationSet windows, std::string note = "");
    // Builds the request's windows and accumulates the statistics (core's calibrate). Smaller
    // batches (options.batchTokens) make a cancel prompter. The overload on `windows` drawn
    // already (a sweep's, drawn from its pool; a test's own) is the same step without the builder.
    static Calibration calibrate(const LanguageModel& lm, const CalibrationRequest& request,
                                 const ProgressFn& progress = nullptr, const CalibrationOptions& options = {});
    static Calibration calibrate(const LanguageModel& lm, CalibrationSet windows, const ProgressFn& progress = nullptr,
                                 const CalibrationOptions& options = {});
    // The same, calibrated layer by layer into `statsFile` (calibrateLayerwise: float64, the
    // format --save-stats writes and --stats reads) and memory-mapped from it; the model stays as
    // loaded. modelName goes into the file's metadata. npw::Error when statsFile is the source.
    static Calibration calibrateToFile(const LanguageModel& lm, const CalibrationRequest& request,
                                       const std::string& statsFile, const std::string& modelName,
                                       const ProgressFn& progress = nullptr);
    static Calibration calibrateToFile(const LanguageModel& lm, CalibrationSet windows, const std::string& statsFile,
                                       const std::string& modelName, const ProgressFn& progress = nullptr);
    // Statistics written earlier (--save-stats, --stats-on-disk), memory-mapped; no windows.
    static Calibration calibrationFromFile(const std::string& statsFile, int64_t layers);
    // Adopts statistics (computed, read from a file, or calibrated layer-wise) and/or windows
    // (the baselines need only the windows); forgets every score set (they belong to another
    // calibration).
    void setCalibration(Calibration calibration);
    bool isCalibrated() const { return calibration_.stats != nullptr; }
    bool hasWindows() const { return calibration_.windows != nullptr; }
    const Calibration& calibration() const { return calibration_; }

    // The scores of one method: the one place where a method's name becomes its scores (new
    // methods are dispatched here). The numerical λ as settings give it (NaN: λ_rel / median c).
    // windows: the calibration windows, which ranking lstar-kl measures each site's damage on
    // (npw::Error without them).
    static ScoreSet score(const LanguageModel& lm, const ModelStats& stats, const PruneSettings& settings,
                          const ProgressFn& progress = nullptr, const CalibrationSet* windows = nullptr);
    // A baseline's scores from the calibration windows (LLM-Pruner's gradients, the block
    // influence pass; SliceGPT computes nothing until applied). Beside score(): the one dispatch.
    static BaselineScores scoreBaseline(const LanguageModel& lm, std::shared_ptr<const CalibrationSet> windows,
                                        BaselineMethod method, const BaselineOptions& options,
                                        const ProgressFn& progress = nullptr);
    // Either of the above for a request: a PruneMethod needs the calibration's statistics, a
    // baseline its windows (npw::Error naming what is missing).
    static ComputedScores score(const LanguageModel& lm, const Calibration& calibration, const ScoreRequest& request,
                                const ProgressFn& progress = nullptr);
    // Keeps a score set under its scoreSetName (replacing one of that name); returns the name.
    std::string addScores(ScoreSet scores);
    std::string addScores(BaselineScores scores);
    std::string addScores(ComputedScores scores);
    // What a kept set was computed from (npw::Error for an unknown name): Recompute and the
    // workspace file ask for it.
    ScoreRequest requestOf(const std::string& name) const;
    // The baseline's scores of that name (null when it is not a baseline's).
    std::shared_ptr<const BaselineScores> baselineScores(const std::string& name) const;
    // score() on the workbench's statistics, kept; npw::Error before a calibration.
    std::string scoreAndKeep(const PruneSettings& settings, const ProgressFn& progress = nullptr);
    std::vector<std::string> scoreSetNames() const { return order_; }  // in the order first added
    bool hasScores(const std::string& name) const { return entries_.count(name) > 0; }
    // As computed (null when there is none of that name, or it is a baseline's).
    std::shared_ptr<const ScoreSet> computedScores(const std::string& name) const;
    void clearScores();

    // The mask of a kept score set at ρ, α (NaN: the model's default) and reading, with λ_rel:
    // numerical scores follow λ_rel in closed form (λ = λ_rel / median c); NaN keeps the λ the
    // set was computed with (an absolute --lambda). Box-constrained sets rank the z of their own
    // solve (recomputeReason in the studio says when that no longer matches). npw::Error naming
    // what does not fit.
    WorkbenchSelection select(const std::string& name, double ratio, double alpha, AlphaMode mode,
                              double lambdaRel = std::numeric_limits<double>::quiet_NaN());
    // Compensates and slices (settings: compensation and damp; the selection's ρ, α, reading and
    // λ are recorded in the report) and reports.
    static WorkbenchPrune applySelection(const LlamaModel& model, const ModelStats& stats,
                                         const WorkbenchSelection& selection, PruneSettings settings,
                                         const ProgressFn& progress = nullptr);
    // The settings a selection is applied with: the score set's, at the selection's ρ, α, reading
    // and λ_rel, with `settings`' compensation and damping (what the report and manifest record).
    static PruneSettings appliedSettings(const WorkbenchSelection& selection, const PruneSettings& settings);

    // A baseline's selection applied in its own structure: what runBaseline gives at the
    // selection's ρ (the same checkpoint or sliced model, report and native knob), from the kept
    // scores (no new gradients or influence pass; SliceGPT slices here). npw::Error for a
    // selection that is not a baseline's.
    static BaselineRun applyBaseline(const LlamaModel& model, const WorkbenchSelection& selection,
                                     const ProgressFn& progress = nullptr);

    // What `npw prune --method llm-pruner|slicegpt|block-influence` does on a workbench with
    // calibration windows: score (kept), select at options.ratio, apply.
    BaselineRun pruneBaseline(BaselineMethod method, const BaselineOptions& options, const ProgressFn& progress = nullptr);

    // What `npw prune` does on a calibrated workbench: score `settings` (kept), select at its ρ,
    // α, reading (λ as given), apply, report with timings (calibrate: the calibration's seconds).
    WorkbenchPrune prune(const PruneSettings& settings, const ProgressFn& progress = nullptr);

private:
    struct Entry;
    WorkbenchSelection selectBaseline(const std::string& name, const Entry& entry, double ratio) const;
    struct Entry {
        ScoreRequest request;
        std::shared_ptr<const BaselineScores> baseline;  // a baseline's (computed is then null)
        std::shared_ptr<const ScoreSet> computed;
        std::shared_ptr<const ScoreSet> atLambda;  // what was selected from last
        std::shared_ptr<const MaskSelector> selector;
    };
    LanguageModel model_;
    Calibration calibration_;
    std::map<std::string, Entry> entries_;
    std::vector<std::string> order_;
};

} // namespace npw
