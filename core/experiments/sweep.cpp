#include "core/experiments/sweep.h"
#include "core/experiments/language_workbench.h"
#include "core/experiments/layerwise_workbench.h"
#include "core/experiments/sweep_method.h"
#include "core/eval/layerwise_perplexity.h"
#include "core/models/model_loader.h"
#include "core/util/atomic_file.h"
#include "core/eval/generate.h"
#include "core/eval/perplexity.h"
#include "core/prune/baseline_pruner.h"
#include "core/prune/method_registry.h"
#include "core/prune/calibration.h"
#include "core/prune/layerwise_prune.h"
#include "core/models/sliced_llama.h"
#include "core/util/content_hash.h"
#include "core/text/json_fields.h"
#include "core/util/error.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>
#include <unistd.h>

namespace npw {

namespace {

constexpr const char* kSweepRow = "sweep row";

// A field that older files (workspaces) lack: NaN then.
double optionalNumber(const nlohmann::json& j, const char* name) {
    return j.is_object() && j.contains(name) ? json_fields::numberOrNaN(j, name, kSweepRow) : std::nan("");
}


// A text field that older files lack: empty then; a wrong type is an error naming the field.
std::string optionalString(const nlohmann::json& j, const char* name) {
    return j.is_object() && j.contains(name) ? json_fields::requiredString(j, name, kSweepRow) : std::string();
}

// A CSV cell: quoted when it holds a comma, a quote or a line break (a file name may).
std::string csvCell(const std::string& text) {
    if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

PruneSettings sweepSettings(const SweepMethod& choice, const SweepSpec& spec, int seed, double lambda);

// What every sweep checks before any work: at least one of each, ratios in [0, 1), known methods,
// and every method's settings at every ratio and λ (PruneSettings::validate: the sweep's edge; the
// steps below trust them).
void checkSweepSpec(const SweepSpec& spec) {
    if (spec.methods.empty()) throw Error("sweep: no methods given");
    if (spec.ratios.empty()) throw Error("sweep: no ratios given");
    if (spec.evalSets.empty() && spec.zeroShotTasks.empty() && !spec.measureSpeed)
        throw Error("sweep: no evaluation sets, zero-shot tasks or speed measurement given");
    if (spec.seeds < 1) throw Error("sweep: the number of seeds must be at least 1, got " + std::to_string(spec.seeds));
    if (spec.measureSpeed && (spec.speedPromptTokens < 1 || spec.speedDecodeTokens < 1 || spec.speedRepeats < 1))
        throw Error("sweep: speed needs at least one prompt token, one decode token and one repeat");
    for (const auto& m : spec.methods)
        if (!parseBaselineMethod(m)) parseSweepMethod(m);  // reject typos before any work
    for (double r : spec.ratios) {
        if (!(r >= 0 && r < 1)) throw Error("sweep: ratio " + std::to_string(r) + " is outside [0, 1)");
        for (const auto& m : spec.methods) {
            const MethodInfo* row = findMethod(m);
            if (r == 0 && row && row->fixedBox) throw Error("sweep: " + m + " needs ratios > 0 (at ρ = 0 every z is 1)");
        }
    }
    for (const auto& m : spec.methods) {
        if (parseBaselineMethod(m)) continue;
        for (double lambda : spec.lambdas)
            for (double r : spec.ratios) {
                PruneSettings settings = sweepSettings(parseSweepMethod(m), spec, 0, lambda);
                settings.ratio = r;
                try {
                    settings.validate();
                } catch (const Error& e) {
                    throw Error("sweep: " + m + ": " + e.what());
                }
            }
    }
}

// The settings of a method's scores at one (seed, λ); the ratio is set per selection.
PruneSettings sweepSettings(const SweepMethod& choice, const SweepSpec& spec, int seed, double lambda) {
    PruneSettings settings;
    settings.method = choice.method;
    settings.compensation = choice.compensation;
    settings.alphaMode = spec.alphaMode;
    settings.alpha = spec.alpha;
    settings.seed = static_cast<uint64_t>(seed);
    if (choice.method == PruneMethod::Numerical) {
        settings.lambda = lambda;  // NaN: relative
        settings.lambdaRel = spec.lambdaRel;
    }
    settings.boxConstrained = choice.boxConstrained;
    settings.crossLayer = choice.crossLayer;
    return settings;
}

// What every row of one calibration records about it.
SweepRow calibratedRow(const CalibrationSet& calibration, int64_t samples, int seed) {
    SweepRow calibrated;
    calibrated.calibSamples = samples;
    calibrated.calibSeqlen = calibration.seqlen;
    calibrated.calibSource = calibration.source;
    calibrated.calibHash = calibration.sourceHash;
    calibrated.calibDistinctTokens = calibration.distinctTokens;
    calibrated.seed = seed;
    return calibrated;
}

// The sweep's steps for its progress bar: the dense model, then one per seed, calibration,
// method, λ and ratio (both roads).
double sweepSteps(const SweepSpec& spec) {
    size_t lambdaRuns = 0;
    for (const auto& m : spec.methods)
        lambdaRuns += !parseBaselineMethod(m) && parseSweepMethod(m).method == PruneMethod::Numerical ? spec.lambdas.size() : 1;
    return 1.0 + double(spec.seeds) * double(spec.calibSamples.size()) * double(spec.calibSeqlens.size()) *
                     double(lambdaRuns) * double(spec.ratios.size());
}

// Calibration, scoring and evaluation report inside the current step `done` (stage "sweep: WHAT"),
// so that a progress bar moves and a cancel stops within one batch, not one whole step.
ProgressFn withinStep(const ProgressFn& progress, const double& done, double totalSteps, const std::string& what) {
    if (!progress) return nullptr;
    return [&progress, &done, totalSteps, what](const Progress& p) {
        const double part = p.total > 0 ? std::min(p.done / p.total, 1.0) : 0.0;
        return progress({"sweep: " + what, done + 0.99 * part, totalSteps});
    };
}

// A pruned model's row before its evaluation: the method, ρ, λ as given and as scored with.
SweepRow prunedRow(const SweepRow& calibrated, const std::string& methodName, bool numerical, double ratio, double lambda,
                   const SweepSpec& spec, const ScoreSet& scores) {
    SweepRow row = calibrated;
    row.method = methodName;
    row.ratio = ratio;
    row.lambda = lambda;
    if (numerical && std::isnan(lambda)) row.lambdaRel = spec.lambdaRel;
    if (numerical) row.lambdaUsed = scores.settings.lambda;
    return row;
}

// A model's perplexity row on one set (`base` carries the settings).
SweepRow perplexityRow(const SweepRow& base, const SweepEvalSet& set, const PerplexityResult& r, const SweepSpec& spec) {
    SweepRow row = base;
    row.evalSet = set.name;
    row.evalHash = set.hash;
    row.evalSeqlen = r.seqlen;
    row.evalWindows = r.windows;
    row.evalMaxWindows = spec.evaluation.maxWindows;
    row.ppl = r.ppl;
    row.nll = r.nll;
    row.bitsPerByte = r.bitsPerByte;
    row.evalTokens = r.tokens;
    return row;
}

CalibrationPool calibrationPoolOf(const SweepSpec& spec) {
    CalibrationPool pool;
    pool.stream = spec.calibStream;
    pool.sequences = spec.calibSequences;
    pool.documents = spec.calibDocuments;
    pool.source = spec.calibSource;
    pool.sourceHash = spec.calibSourceHash;
    pool.sourceIsIds = !spec.calibSequences.empty();
    return pool;
}

// The journal's name of the dense model.
constexpr const char* kDenseModelKey = "dense";

// The rows of one model at a time (the dense one, or one pruned at a method, λ and ratio): taken
// from the journal when an interrupted run recorded them, else collected as they are measured and
// recorded once the model is done. Without a journal: rows passed on as they come.
class ModelRows {
public:
    ModelRows(std::vector<SweepRow>& rows, const std::function<void(const SweepRow&)>& onRow, SweepJournal* journal)
        : rows_(rows), onRow_(onRow), journal_(journal) {}
    // True when `key` was recorded: its rows are passed on here, in their place. Else the rows
    // emitted next are `key`'s.
    bool resume(const std::string& key) {
        if (journal_)
            if (std::optional<std::vector<SweepRow>> recorded = journal_->recorded(key)) {
                for (const SweepRow& row : *recorded) pass(row);
                return true;
            }
        key_ = key;
        pending_.clear();
        return false;
    }
    void emit(const SweepRow& row) {
        pending_.push_back(row);
        pass(row);
    }
    // The model's rows are all measured.
    void finish() {
        if (journal_) journal_->record(key_, pending_);
        pending_.clear();
    }

private:
    void pass(const SweepRow& row) {
        rows_.push_back(row);
        if (onRow_) onRow_(row);
    }
    std::vector<SweepRow>& rows_;
    const std::function<void(const SweepRow&)>& onRow_;
    SweepJournal* journal_;
    std::string key_ = kDenseModelKey;
    std::vector<SweepRow> pending_;
};

} // namespace

std::vector<SweepRow> runSweep(const LanguageModel& lm, const SweepSpec& spec,
                               const std::function<void(const SweepRow&)>& onRow, const ProgressFn& progress,
                               SweepJournal* journal) {
    checkSweepSpec(spec);

    if (!lm.model) throw Error("sweep: model '" + lm.name + "' is no LLaMA (a sweep prunes a LLaMA; a sliced model cannot be pruned again)");
    const LlamaModel& model = *lm.model;
    std::vector<SweepRow> rows;
    ModelRows models(rows, onRow, journal);
    auto emitRow = [&](const SweepRow& row) { models.emit(row); };
    const double totalSteps = sweepSteps(spec);
    double done = 0;
    auto within = [&](const std::string& what) { return withinStep(progress, done, totalSteps, what); };
    auto evaluate = [&](const CausalLm& m, const SweepEvalSet& set) {
        const PerplexityOptions o = perplexityOptions(spec.evaluation, m.config());  // the one protocol
        DecodeFn decode;
        if (set.isText && lm.tokenizer) decode = [&lm](const std::vector<int32_t>& v) { return lm.decode(v); };
        return evaluatePerplexity(m, set.ids, o, nullptr, decode, within("evaluate " + set.name));
    };

    // One row per evaluation set and zero-shot task for a model (and its speed row first);
    // `base` carries the settings.
    auto emitPerplexityRow = [&](const SweepRow& base, const SweepEvalSet& set, const PerplexityResult& r) {
        emitRow(perplexityRow(base, set, r, spec));
    };
    // `pruned`: the dense model's LanguageModel (its tokenizer) with the pruned LLaMA in `model` or
    // a SliceGPT-sliced model in `sliced`: every row runs through CausalLm, whatever the structure.
    auto evaluateAllRows = [&](const LanguageModel& pruned, const SweepRow& base) {
        const CausalLm* m = &pruned.causal();
        // Speed first: timed right after the mask was applied, before this model's other rows reach
        // a GUI that redraws on each (on a small machine its drawing would share the cores).
        if (spec.measureSpeed) {
            double load[1] = {std::numeric_limits<double>::quiet_NaN()};
            if (::getloadavg(load, 1) != 1) load[0] = std::numeric_limits<double>::quiet_NaN();
            const double loadBefore = load[0];
            const BenchResult b = benchmarkGeneration(*m, spec.speedPromptTokens, spec.speedDecodeTokens,
                                                      spec.speedRepeats, within("speed"));
            SweepRow row = base;
            row.evalSet = kSpeedEvalSet;
            row.ppl = row.nll = std::numeric_limits<double>::quiet_NaN();
            row.evalTokens = spec.speedPromptTokens + spec.speedDecodeTokens;
            row.parameters = b.parameters;
            row.weightsMiB = b.weightsMiB;
            row.kvCacheMiB = kvCacheMiB(m->config(), spec.speedPromptTokens + spec.speedDecodeTokens,
                                        static_cast<int64_t>(c10::elementSize(m->runtime().dtype)));
            // The median run, with the slowest and fastest and the load the runs shared the cores
            // with (the sweep's other work, a GUI plotting its rows, other processes).
            row.prefillTokensPerSecond = b.prefillTokensPerSecond;
            row.decodeTokensPerSecond = b.decodeTokensPerSecond;
            row.decodeSlowest = b.slowestDecodeTokensPerSecond;
            row.decodeFastest = b.bestDecodeTokensPerSecond;
            row.speedRuns = b.repeats;
            row.loadAverage = loadBefore;
            emitRow(row);
        }
        for (const auto& set : spec.evalSets) emitPerplexityRow(base, set, evaluate(*m, set));
        if (!spec.zeroShotTasks.empty()) {
            for (const ZeroShotTask& task : spec.zeroShotTasks) {
                const ZeroShotResult r = evaluateZeroShot(pruned, task, {}, within("zero-shot " + task.name));
                SweepRow row = base;
                row.evalSet = task.name;
                row.ppl = row.nll = std::numeric_limits<double>::quiet_NaN();
                row.acc = r.acc;
                row.accNorm = r.accNorm;
                row.evalTokens = r.items;
                emitRow(row);
            }
        }
    };
    // A row's error names the row (a result that became non-finite says which model it was).
    auto evaluateAll = [&](const LanguageModel& pruned, const SweepRow& base) {
        try {
            evaluateAllRows(pruned, base);
        } catch (const Error& e) {
            std::ostringstream row;
            row << "sweep: method " << base.method << " at ratio " << base.ratio << ", seed " << base.seed << ": "
                << e.what();
            throw Error(row.str());
        }
    };
    // The dense LanguageModel with another model in it (the tokenizer and name stay).
    auto withModel = [&lm](std::shared_ptr<LlamaModel> llama, std::shared_ptr<SlicedLlama> sliced) {
        LanguageModel m = lm;
        m.model = std::move(llama);
        m.sliced = std::move(sliced);
        return m;
    };
    SweepRow denseRow;
    denseRow.method = "dense";
    if (!models.resume(kDenseModelKey)) {
        evaluateAll(lm, denseRow);
        models.finish();
    }
    reportProgress(progress, "sweep", ++done, totalSteps);

    const CalibrationPool pool = calibrationPoolOf(spec);
    for (int seed = 0; seed < spec.seeds; ++seed)
        for (int64_t samples : spec.calibSamples)
            for (int64_t calibSeqlen : spec.calibSeqlens) {
                const auto calibSeed = static_cast<uint64_t>(seed);
                // The windows, drawn when a model of theirs is measured here (not when every one is
                // resumed): the workbench's one builder and one rule for the window length (capped
                // at the model's context; the rows record the length used).
                std::optional<CalibrationSet> drawn;
                auto calibration = [&]() -> const CalibrationSet& {
                    if (!drawn) drawn = drawCalibration(pool, lm, samples, calibSeqlen, calibSeed);
                    return *drawn;
                };
                // The workbench of npw prune and the studio: this calibration's statistics (and
                // windows, for lstar-kl), calibrated when a score needs them (the baselines
                // calibrate in their own way, baselines.h); each method's scores kept once (the
                // box-constrained z once per ρ), selected and applied at every ratio by its select
                // and applySelection.
                LanguagePruningWorkbench workbench(lm);
                bool calibrated = false;
                auto ensureStats = [&] {
                    if (calibrated) return;
                    workbench.setCalibration(LanguagePruningWorkbench::calibrate(lm, calibration(), within("calibrate")));
                    calibrated = true;
                };
                for (const std::string& methodName : spec.methods) {
                    // ---- Baselines in their own structure (llm-pruner, slicegpt, block-influence) ----
                    if (const std::optional<BaselineMethod> baseline = parseBaselineMethod(methodName)) {
                        // Scores once per calibration (block influence, Taylor importances), any ρ from them.
                        std::optional<BaselinePruner> pruner;
                        for (double ratio : spec.ratios) {
                            if (!models.resume(sweepModelKey(seed, samples, calibSeqlen, methodName,
                                                             std::numeric_limits<double>::quiet_NaN(), ratio))) {
                                if (!pruner)
                                    pruner.emplace(*baseline, model, calibration(), BaselineOptions{},
                                                   within("prune " + methodName));
                                const BaselineRun run = pruner->prune(ratio);
                                SweepRow row = calibratedRow(calibration(), samples, seed);
                                row.method = methodName;
                                row.ratio = ratio;
                                row.achievedRatio = run.report.achievedRatio;
                                row.achievedRatioModel = run.report.achievedRatioModel;
                                evaluateAll(run.sliced ? withModel(nullptr, run.sliced)
                                                       : withModel(std::make_shared<LlamaModel>(run.pruned, model.runtime()), nullptr),
                                            row);
                                models.finish();
                            }
                            reportProgress(progress, "sweep", ++done, totalSteps);
                        }
                        continue;
                    }
                    const SweepMethod choice = parseSweepMethod(methodName);
                    const bool numerical = choice.method == PruneMethod::Numerical;
                    const std::vector<double> lambdas =
                        numerical ? spec.lambdas : std::vector<double>{std::numeric_limits<double>::quiet_NaN()};
                    for (double lambda : lambdas) {
                        PruneSettings settings = sweepSettings(choice, spec, seed, lambda);
                        // Scores once for every ratio (at the settings' own ρ, when the first model
                        // not resumed needs them), except the box-constrained z (one solve per ρ).
                        const double scoreRatio = settings.ratio;
                        std::string scored;  // the kept score set's name
                        bool haveScores = false;
                        auto scoreAt = [&](double ratio) {
                            ensureStats();
                            settings.ratio = ratio;
                            scored = workbench.scoreAndKeep(settings, within("score " + methodName));
                            haveScores = true;
                        };
                        for (double ratio : spec.ratios) {
                            if (!models.resume(sweepModelKey(seed, samples, calibSeqlen, methodName, lambda, ratio))) {
                                if (choice.boxConstrained) scoreAt(ratio);
                                else if (!haveScores) scoreAt(scoreRatio);
                                settings.ratio = ratio;
                                // λ NaN: the set's own λ (as computed from this λ or λ_rel), no re-score.
                                const WorkbenchSelection selection = workbench.select(scored, ratio, spec.alpha, spec.alphaMode);
                                WorkbenchPrune pruned = LanguagePruningWorkbench::applySelection(
                                    model, *workbench.calibration().stats, selection, settings);
                                auto prunedModel = std::make_shared<LlamaModel>(std::move(pruned.pruned.checkpoint), model.runtime());
                                SweepRow row = prunedRow(calibratedRow(calibration(), samples, seed), methodName, numerical,
                                                         ratio, lambda, spec, *selection.scores);
                                row.achievedRatio = pruned.report.achievedRatio;
                                row.achievedRatioModel = pruned.report.achievedRatioModel;
                                evaluateAll(withModel(prunedModel, nullptr), row);
                                models.finish();
                            }
                            reportProgress(progress, "sweep", ++done, totalSteps);
                        }
                        if (haveScores) workbench.clearScores();  // one method's scores in memory at a time, as before
                    }
                }
            }
    return rows;
}

namespace {

constexpr const char* kSweepWorkPrefix = "npw-sweep-";

// The layer-wise sweep's own folder: created fresh (never one that exists: it may be another's),
// removed with everything in it when the sweep leaves, done, failed or cancelled.
class SweepWorkFolder {
public:
    explicit SweepWorkFolder(const std::string& path) : path_(path) {
        std::error_code ec;
        if (!std::filesystem::create_directory(path_, ec))
            throw Error("cannot create the sweep's work folder '" + path_ + "': " +
                        (ec ? ec.message() : std::string("it exists already")));
    }
    ~SweepWorkFolder() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    SweepWorkFolder(const SweepWorkFolder&) = delete;
    SweepWorkFolder& operator=(const SweepWorkFolder&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

} // namespace

std::string layerwiseSweepWorkDir(const std::string& parent) {
    namespace fs = std::filesystem;
    const fs::path dir = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
    // What a sweep killed with -9 left (its scratch file, an export): gone before this one adds its own.
    removeWorkOfDeadProcesses(dir.string(), kSweepWorkPrefix);
    static std::atomic<int> counter{0};
    return (dir / (std::string(kSweepWorkPrefix) + std::to_string(::getpid()) + "-" + std::to_string(++counter))).string();
}

void refuseOnLayerwiseSweep(const SweepSpec& spec, const std::string& why) {
    for (const std::string& m : spec.methods) {
        if (parseBaselineMethod(m))
            throw Error("sweep: method " + m + " prunes in its own structure from the whole model in memory (its "
                        "scores need every block at once), which the layer-by-layer road does not hold (" + why +
                        "): sweep it on a machine where the model fits, or leave it out");
        if (parseSweepMethod(m).crossLayer == CrossLayerRanking::MeasuredDamage)
            throw Error("sweep: method " + m + " measures each site's damage with 2L + 1 whole-model forward passes "
                        "over the calibration windows, which the layer-by-layer road does not make (" + why +
                        "): use numerical (the L*-relative ranking) or numerical-lstar");
    }
    if (spec.measureSpeed)
        throw Error("sweep: speed rows (--speed) time generation with the whole model in memory, which the "
                    "layer-by-layer road does not hold (" + why + "): measure a pruned export with npw bench instead");
    if (!spec.zeroShotTasks.empty())
        throw Error("sweep: zero-shot tasks (--zeroshot) are scored with the whole model in memory, which the "
                    "layer-by-layer road does not hold (" + why + ")");
}

bool sweepMethodNeedsWholeModel(const std::string& method) {
    const MethodInfo* row = findMethod(method);
    return row && row->wholeModel;  // unknown: not this road's to refuse
}

std::vector<SweepRow> runSweepLayerwise(const LanguageModel& lm, const SweepSpec& spec, const LayerwiseSweepOptions& options,
                                        const std::function<void(const SweepRow&)>& onRow, const ProgressFn& progress) {
    namespace fs = std::filesystem;
    checkSweepSpec(spec);
    refuseOnLayerwiseSweep(spec, "the sweep runs layer by layer");
    if (!lm.model) throw Error("sweep: model '" + lm.name + "' is no LLaMA (a sweep prunes a LLaMA; a sliced model cannot be pruned again)");
    if (options.workDir.empty()) throw Error("internal: the layer-wise sweep needs a work folder");
    const LlamaModel& model = *lm.model;
    const Runtime runtime = options.evalRuntime.value_or(model.runtime());
    const SweepWorkFolder work(options.workDir);

    std::vector<SweepRow> rows;
    ModelRows models(rows, onRow, options.journal);
    auto emitRow = [&](const SweepRow& row) { models.emit(row); };
    const double totalSteps = sweepSteps(spec);
    double done = 0;
    auto within = [&](const std::string& what) { return withinStep(progress, done, totalSteps, what); };
    // Every set, one block at a time, with the in-RAM sweep's protocol; an error names the row.
    auto evaluateAll = [&](const LlamaCheckpoint& checkpoint, const SweepRow& base) {
        try {
            for (const SweepEvalSet& set : spec.evalSets) {
                const PerplexityOptions o = perplexityOptions(spec.evaluation, checkpoint.config);
                DecodeFn decode;
                if (set.isText && lm.tokenizer) decode = [&lm](const std::vector<int32_t>& v) { return lm.decode(v); };
                emitRow(perplexityRow(base, set,
                                      evaluatePerplexityLayerwise(checkpoint, runtime, set.ids, o, decode,
                                                                  within("evaluate " + set.name)),
                                      spec));
            }
        } catch (const Error& e) {
            std::ostringstream row;
            row << "sweep: method " << base.method << " at ratio " << base.ratio << ", seed " << base.seed << ": "
                << e.what();
            throw Error(row.str());
        }
    };
    SweepRow denseRow;
    denseRow.method = "dense";
    if (!models.resume(kDenseModelKey)) {
        evaluateAll(model.checkpoint(), denseRow);
        models.finish();
    }
    reportProgress(progress, "sweep", ++done, totalSteps);

    const CalibrationPool pool = calibrationPoolOf(spec);
    int exports = 0;
    for (int seed = 0; seed < spec.seeds; ++seed)
        for (int64_t samples : spec.calibSamples)
            for (int64_t calibSeqlen : spec.calibSeqlens) {
                // The windows and their statistics, made when a model of theirs is measured here
                // (not when every one is resumed): the Gram triangles in the work folder, removed
                // with `stats`.
                std::optional<CalibrationSet> drawn;
                auto calibration = [&]() -> const CalibrationSet& {
                    if (!drawn) drawn = drawCalibration(pool, lm, samples, calibSeqlen, static_cast<uint64_t>(seed));
                    return *drawn;
                };
                std::shared_ptr<const LayerwiseStatistics> stats;
                for (const std::string& methodName : spec.methods) {
                    const SweepMethod choice = parseSweepMethod(methodName);
                    const bool numerical = choice.method == PruneMethod::Numerical;
                    const std::vector<double> lambdas =
                        numerical ? spec.lambdas : std::vector<double>{std::numeric_limits<double>::quiet_NaN()};
                    for (double lambda : lambdas) {
                        PruneSettings settings = sweepSettings(choice, spec, seed, lambda);
                        const double scoreRatio = settings.ratio;
                        std::optional<ScoreSet> scores;
                        std::optional<MaskSelector> selector;
                        auto scoreAt = [&](double ratio) {
                            if (!stats)
                                stats = LayerwiseStatistics::calibrate(model, calibration(), work.path(), within("calibrate"),
                                                                       options.calibration);
                            settings.ratio = ratio;
                            scores = stats->score(model, settings, within("score " + methodName));
                            selector.emplace(*scores);
                        };
                        for (double ratio : spec.ratios) {
                            if (!models.resume(sweepModelKey(seed, samples, calibSeqlen, methodName, lambda, ratio))) {
                                if (choice.boxConstrained) scoreAt(ratio);
                                else if (!scores) scoreAt(scoreRatio);
                                const SelectionResult selection = selector->select(ratio, spec.alpha, spec.alphaMode);
                                settings.ratio = ratio;
                                // One pruned model on disk at a time, in the checkpoint's dtype.
                                const std::string exportDir =
                                    (fs::path(work.path()) / ("pruned-" + std::to_string(++exports))).string();
                                const LayerwiseExport written = stats->exportScores(
                                    model, *scores, selection, settings, selector->defaultAlpha(), exportDir, lm.name,
                                    within("write " + methodName));
                                SweepRow row = prunedRow(calibratedRow(calibration(), samples, seed), methodName, numerical,
                                                         ratio, lambda, spec, *scores);
                                row.achievedRatio = written.report.achievedRatio;
                                row.achievedRatioModel = written.report.achievedRatioModel;
                                {
                                    const LlamaCheckpoint pruned = loadLlamaCheckpoint(exportDir, WeightStorage::Mapped);
                                    evaluateAll(pruned, row);
                                }  // unmapped before its files go
                                std::error_code ec;
                                fs::remove_all(exportDir, ec);
                                models.finish();
                            }
                            reportProgress(progress, "sweep", ++done, totalSteps);
                        }
                    }
                }
            }
    return rows;
}

std::string sweepModelKey(int seed, int64_t samples, int64_t seqlen, const std::string& method, double lambda, double ratio) {
    return nlohmann::json{{"seed", seed}, {"calib_samples", samples}, {"calib_seqlen", seqlen}, {"method", method},
                          {"lambda", exactNumberText(lambda)}, {"ratio", exactNumberText(ratio)}}
        .dump();
}

std::string sweepFingerprint(const LanguageModel& lm, const SweepSpec& spec, const std::string& road, const Runtime& runtime) {
    if (!lm.model) throw Error("sweep: model '" + lm.name + "' is no LLaMA (a sweep prunes a LLaMA; a sliced model cannot be pruned again)");
    nlohmann::json j = checkpointFingerprint(lm.model->checkpoint(), "npw-sweep-work");
    j["road"] = road;
    j["runtime"] = runtime.device.str() + " " + c10::toString(runtime.dtype);
    auto idsHash = [](const std::vector<int32_t>& ids, uint64_t hash = kFnv64Offset) {
        return fnv1a64(ids.data(), ids.size() * sizeof(int32_t), hash);
    };
    auto textHash = [](const std::string& text, uint64_t hash) {
        const uint64_t size = text.size();  // the length too: "ab","c" is not "a","bc"
        return fnv1a64(text.data(), text.size(), fnv1a64(&size, sizeof size, hash));
    };
    // The texts, by what the sweep reads of them: token ids (the tokenizer's result), documents.
    uint64_t pool = idsHash(spec.calibStream);
    for (const std::vector<int32_t>& sequence : spec.calibSequences) pool = idsHash(sequence, fnv1a64("|", 1, pool));
    for (const std::string& document : spec.calibDocuments) pool = textHash(document, pool);
    j["calibration"] = {{"source", spec.calibSource}, {"hash", spec.calibSourceHash}, {"pool", contentHashText(pool)},
                        {"sequences", spec.calibSequences.size()}, {"documents", spec.calibDocuments.size()}};
    j["eval"] = nlohmann::json::array();
    for (const SweepEvalSet& set : spec.evalSets)
        j["eval"].push_back({{"name", set.name}, {"hash", set.hash}, {"text", set.isText}, {"tokens", set.ids.size()},
                             {"ids", contentHashText(idsHash(set.ids))}});
    j["zeroshot"] = nlohmann::json::array();
    for (const ZeroShotTask& task : spec.zeroShotTasks) {
        uint64_t items = kFnv64Offset;
        for (const MultipleChoiceItem& item : task.items) {
            for (const auto* texts : {&item.contexts, &item.continuations, &item.choices}) {
                const uint64_t count = texts->size();
                items = fnv1a64(&count, sizeof count, items);
                for (const std::string& text : *texts) items = textHash(text, items);
            }
            items = fnv1a64(&item.gold, sizeof item.gold, items);
        }
        j["zeroshot"].push_back({{"name", task.name}, {"kind", task.kind}, {"source", task.source},
                                 {"acc_norm", task.reportsAccNorm}, {"items", task.items.size()},
                                 {"hash", contentHashText(items)}});
    }
    auto exact = [](const std::vector<double>& values) {
        nlohmann::json out = nlohmann::json::array();
        for (double v : values) out.push_back(exactNumberText(v));
        return out;
    };
    j["settings"] = {{"methods", spec.methods},
                     {"ratios", exact(spec.ratios)},
                     {"calib_samples", spec.calibSamples},
                     {"calib_seqlens", spec.calibSeqlens},
                     {"lambdas", exact(spec.lambdas)},
                     {"lambda_rel", exactNumberText(spec.lambdaRel)},
                     {"seeds", spec.seeds},
                     {"alpha_mode", static_cast<int>(spec.alphaMode)},
                     {"alpha", exactNumberText(spec.alpha)},
                     {"eval_seqlen", spec.evaluation.seqlen},
                     {"max_windows", spec.evaluation.maxWindows},
                     {"speed", {spec.measureSpeed, spec.speedPromptTokens, spec.speedDecodeTokens, spec.speedRepeats}}};
    return j.dump(2) + "\n";
}

SweepJournal::SweepJournal(std::string dir, std::string fingerprint, std::function<void(const std::string&)> note)
    : dir_(std::move(dir)), fingerprint_(std::move(fingerprint)), note_(std::move(note)) {
    namespace fs = std::filesystem;
    if (!keepMatchingWorkFolder(dir_, fingerprint_, nullptr, "another model, other texts or other settings", note_)) return;
    created_ = true;
    // model-N.json: {"key", "rows"}. A damaged record (a disk that lost it) is measured again.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("model-", 0) != 0 || entry.path().extension() != ".json") continue;
        nextFile_ = std::max(nextFile_, std::atoi(name.c_str() + 6) + 1);
        try {
            const nlohmann::json j = json_fields::parseJsonLimited(readTextFile(entry.path().string()), entry.path().string());
            std::vector<SweepRow> rows;
            for (const nlohmann::json& row : j.at("rows")) {
                rows.push_back(sweepRowFromJson(row));
                rows.back().resumed = true;
            }
            recorded_[j.at("key").get<std::string>()] = std::move(rows);
        } catch (const std::exception&) {
        }
    }
    if (note_)
        note_("resuming the sweep from the work folder " + dir_ + ": " + std::to_string(recorded_.size()) +
              " model(s) measured by an interrupted run are taken from it");
}

std::optional<std::vector<SweepRow>> SweepJournal::recorded(const std::string& key) const {
    const auto it = recorded_.find(key);
    if (it == recorded_.end()) return std::nullopt;
    return it->second;
}

void SweepJournal::record(const std::string& key, const std::vector<SweepRow>& rows) {
    namespace fs = std::filesystem;
    if (!created_) {
        createWorkFolder(dir_, fingerprint_);
        created_ = true;
    }
    nlohmann::json j = {{"key", key}, {"rows", nlohmann::json::array()}};
    for (const SweepRow& row : rows) j["rows"].push_back(sweepRowJson(row));
    const int number = nextFile_++;
    writeTextAtomically((fs::path(dir_) / ("model-" + std::to_string(number) + ".json")).string(), j.dump() + "\n");
    recorded_[key] = rows;
    testStallPoint(("sweep-recorded-model-" + std::to_string(number)).c_str());
}

void SweepJournal::complete() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    created_ = false;
}

double kvCacheMiB(const LlamaConfig& config, int64_t tokens, int64_t elementBytes) {
    double elements = 0;
    for (int64_t layer = 0; layer < config.num_layers; ++layer)
        elements += 2.0 * double(config.num_kv_heads[static_cast<size_t>(layer)]) * double(config.head_dim) * double(tokens);
    return elements * double(elementBytes) / (1024.0 * 1024.0);
}

std::vector<SweepSummaryRow> summariseOverSeeds(const std::vector<SweepRow>& rows) {
    using Key = std::tuple<std::string, double, int64_t, int64_t, std::string, std::string>;
    std::map<Key, std::vector<const SweepRow*>> groups;
    std::vector<Key> order;
    for (const SweepRow& r : rows) {
        std::ostringstream lambda;
        lambda << r.lambda << "/" << r.lambdaRel;
        Key key{r.method, r.ratio, r.calibSamples, r.calibSeqlen, lambda.str(), r.evalSet};
        if (!groups.count(key)) order.push_back(key);
        groups[key].push_back(&r);
    }
    std::vector<SweepSummaryRow> out;
    for (const Key& key : order) {
        const auto& g = groups[key];
        SweepSummaryRow s;
        s.first = *g.front();
        s.count = static_cast<int>(g.size());
        const double n = static_cast<double>(g.size());
        for (const SweepRow* r : g) {
            s.pplMean += r->ppl / n;
            s.achievedRatioMean += r->achievedRatio / n;
            s.bitsPerByteMean += r->bitsPerByte / n;
            s.accMean += r->acc / n;
            s.accNormMean += r->accNorm / n;
            s.decodeMean += r->decodeTokensPerSecond / n;
            s.prefillMean += r->prefillTokensPerSecond / n;
            s.weightsMiBMean += r->weightsMiB / n;
            s.kvCacheMiBMean += r->kvCacheMiB / n;
        }
        // Sample standard deviations (NaN propagates: ppl for zero-shot rows, acc for the rest).
        auto sampleStd = [&](double mean, double SweepRow::*field) {
            if (g.size() < 2) return 0.0;
            double ss = 0;
            for (const SweepRow* r : g) ss += (r->*field - mean) * (r->*field - mean);
            return std::sqrt(ss / double(g.size() - 1));
        };
        s.pplStd = sampleStd(s.pplMean, &SweepRow::ppl);
        s.accStd = sampleStd(s.accMean, &SweepRow::acc);
        s.decodeStd = sampleStd(s.decodeMean, &SweepRow::decodeTokensPerSecond);
        s.decodeSlowest = s.decodeFastest = std::numeric_limits<double>::quiet_NaN();
        for (const SweepRow* r : g) {
            if (!std::isfinite(r->decodeSlowest) || !std::isfinite(r->decodeFastest)) continue;
            s.decodeSlowest = std::isfinite(s.decodeSlowest) ? std::min(s.decodeSlowest, r->decodeSlowest) : r->decodeSlowest;
            s.decodeFastest = std::isfinite(s.decodeFastest) ? std::max(s.decodeFastest, r->decodeFastest) : r->decodeFastest;
        }
        out.push_back(s);
    }
    return out;
}

std::string sweepRowsCsv(const std::vector<SweepRow>& rows) {
    std::ostringstream out;
    out.precision(10);
    out << "method,ratio,calib_samples,calib_seqlen,lambda,lambda_rel,lambda_used,seed,eval,achieved_ratio,achieved_ratio_model,ppl,nll,"
           "bits_per_byte,eval_tokens,acc,acc_norm,parameters,weights_mib,kv_cache_mib,prefill_tokens_per_s,"
           "decode_tokens_per_s,eval_seqlen,eval_windows,eval_max_windows,eval_hash,calib_source,calib_hash,"
           "calib_distinct_tokens,speed_runs,decode_tokens_per_s_slowest,decode_tokens_per_s_fastest,load_average\n";
    auto finiteCell = [&out](double x) {
        out << ",";
        if (std::isfinite(x)) out << x;
    };
    for (const SweepRow& r : rows) {
        out << r.method << "," << r.ratio << "," << r.calibSamples << "," << r.calibSeqlen << ",";
        if (std::isfinite(r.lambda)) out << r.lambda;
        out << ",";
        if (std::isfinite(r.lambdaRel)) out << r.lambdaRel;
        out << ",";
        if (std::isfinite(r.lambdaUsed)) out << r.lambdaUsed;
        out << "," << r.seed << "," << r.evalSet << "," << r.achievedRatio << "," << r.achievedRatioModel << "," << r.ppl
            << "," << r.nll << ",";
        if (std::isfinite(r.bitsPerByte)) out << r.bitsPerByte;
        out << "," << r.evalTokens << ",";
        if (std::isfinite(r.acc)) out << r.acc;
        out << ",";
        if (std::isfinite(r.accNorm)) out << r.accNorm;
        out << ",";
        if (r.parameters > 0) out << r.parameters;
        finiteCell(r.weightsMiB);
        finiteCell(r.kvCacheMiB);
        finiteCell(r.prefillTokensPerSecond);
        finiteCell(r.decodeTokensPerSecond);
        out << "," << r.evalSeqlen << "," << r.evalWindows << "," << r.evalMaxWindows << "," << r.evalHash << ","
            << csvCell(r.calibSource) << "," << r.calibHash << "," << r.calibDistinctTokens << "," << r.speedRuns;
        finiteCell(r.decodeSlowest);
        finiteCell(r.decodeFastest);
        finiteCell(r.loadAverage);
        out << "\n";
    }
    return out.str();
}

nlohmann::json sweepRowJson(const SweepRow& r) {
    return {{"method", r.method},         {"ratio", r.ratio},
            {"calib_samples", r.calibSamples}, {"calib_seqlen", r.calibSeqlen},
            {"lambda", json_fields::finiteOrNull(r.lambda)}, {"lambda_rel", json_fields::finiteOrNull(r.lambdaRel)},
            {"lambda_used", json_fields::finiteOrNull(r.lambdaUsed)}, {"seed", r.seed},
            {"eval", r.evalSet},          {"achieved_ratio", r.achievedRatio},
            {"achieved_ratio_model", r.achievedRatioModel}, {"ppl", json_fields::finiteOrNull(r.ppl)},
            {"nll", json_fields::finiteOrNull(r.nll)}, {"bits_per_byte", json_fields::finiteOrNull(r.bitsPerByte)},
            {"eval_tokens", r.evalTokens}, {"acc", json_fields::finiteOrNull(r.acc)},
            {"acc_norm", json_fields::finiteOrNull(r.accNorm)}, {"parameters", r.parameters},
            {"weights_mib", json_fields::finiteOrNull(r.weightsMiB)}, {"kv_cache_mib", json_fields::finiteOrNull(r.kvCacheMiB)},
            {"prefill_tokens_per_s", json_fields::finiteOrNull(r.prefillTokensPerSecond)},
            {"decode_tokens_per_s", json_fields::finiteOrNull(r.decodeTokensPerSecond)},
            {"eval_seqlen", r.evalSeqlen}, {"eval_windows", r.evalWindows}, {"eval_max_windows", r.evalMaxWindows},
            {"eval_hash", r.evalHash}, {"calib_source", r.calibSource}, {"calib_hash", r.calibHash},
            {"calib_distinct_tokens", r.calibDistinctTokens}, {"speed_runs", r.speedRuns},
            {"decode_tokens_per_s_slowest", json_fields::finiteOrNull(r.decodeSlowest)},
            {"decode_tokens_per_s_fastest", json_fields::finiteOrNull(r.decodeFastest)},
            {"load_average", json_fields::finiteOrNull(r.loadAverage)}, {"resumed", r.resumed}};
}

SweepRow sweepRowFromJson(const nlohmann::json& j) {
    SweepRow r;
    r.method = json_fields::requiredString(j, "method", kSweepRow);
    r.ratio = json_fields::requiredNumber(j, "ratio", kSweepRow);
    r.calibSamples = json_fields::requiredInt(j, "calib_samples", kSweepRow);
    r.calibSeqlen = json_fields::requiredInt(j, "calib_seqlen", kSweepRow);
    r.lambda = json_fields::numberOrNaN(j, "lambda", kSweepRow);
    r.lambdaRel = optionalNumber(j, "lambda_rel");  // older workspaces: absolute λ only
    r.lambdaUsed = optionalNumber(j, "lambda_used");
    r.seed = static_cast<int>(json_fields::requiredInt(j, "seed", kSweepRow));
    r.evalSet = json_fields::requiredString(j, "eval", kSweepRow);
    r.achievedRatio = json_fields::requiredNumber(j, "achieved_ratio", kSweepRow);
    r.achievedRatioModel = json_fields::requiredNumber(j, "achieved_ratio_model", kSweepRow);
    r.ppl = json_fields::numberOrNaN(j, "ppl", kSweepRow);  // null: a zero-shot or speed row
    r.nll = json_fields::numberOrNaN(j, "nll", kSweepRow);
    r.bitsPerByte = json_fields::numberOrNaN(j, "bits_per_byte", kSweepRow);
    r.evalTokens = json_fields::requiredInt(j, "eval_tokens", kSweepRow);
    r.acc = optionalNumber(j, "acc");
    r.accNorm = optionalNumber(j, "acc_norm");
    r.parameters = json_fields::intOr(j, "parameters", 0, kSweepRow);
    r.weightsMiB = optionalNumber(j, "weights_mib");
    r.kvCacheMiB = optionalNumber(j, "kv_cache_mib");
    r.prefillTokensPerSecond = optionalNumber(j, "prefill_tokens_per_s");
    r.decodeTokensPerSecond = optionalNumber(j, "decode_tokens_per_s");
    // Recorded since the one protocol; rows of older workspaces read as 0 / empty (unknown).
    r.evalSeqlen = json_fields::intOr(j, "eval_seqlen", 0, kSweepRow);
    r.evalWindows = json_fields::intOr(j, "eval_windows", 0, kSweepRow);
    r.evalMaxWindows = json_fields::intOr(j, "eval_max_windows", 0, kSweepRow);
    r.evalHash = optionalString(j, "eval_hash");
    r.calibSource = optionalString(j, "calib_source");
    r.calibHash = optionalString(j, "calib_hash");
    r.calibDistinctTokens = json_fields::intOr(j, "calib_distinct_tokens", 0, kSweepRow);
    r.speedRuns = static_cast<int>(json_fields::intOr(j, "speed_runs", 0, kSweepRow));
    r.decodeSlowest = optionalNumber(j, "decode_tokens_per_s_slowest");
    r.decodeFastest = optionalNumber(j, "decode_tokens_per_s_fastest");
    r.loadAverage = optionalNumber(j, "load_average");
    r.resumed = j.is_object() && j.contains("resumed") && j["resumed"].is_boolean() && j["resumed"].get<bool>();
    return r;
}

} // namespace npw
