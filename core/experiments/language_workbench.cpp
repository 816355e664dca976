#include "core/experiments/language_workbench.h"
#include "core/prune/site_damage.h"

#include "core/eval/perplexity.h"
#include "core/experiments/dataset_inputs.h"
#include "core/experiments/sweep.h"
#include "core/models/parameter_count.h"
#include "core/prune/slicegpt.h"
#include "core/util/content_hash.h"
#include "core/util/error.h"
#include "core/util/output_guard.h"
#include <unordered_map>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace npw {

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Numerical scores follow λ in closed form; box-constrained ones need a new solve.
bool rescoresLive(const ScoreSet& s) { return s.settings.method == PruneMethod::Numerical && !s.settings.boxConstrained; }

std::string fixed(double value, int digits) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", digits, value);
    return text;
}

std::string percent(double fraction) { return fixed(100 * fraction, 1) + " %"; }

// "3, 4 and 5"
std::string listed(const std::vector<int64_t>& values) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i)
        out += (i == 0 ? "" : i + 1 == values.size() ? " and " : ", ") + std::to_string(values[i]);
    return out;
}

} // namespace

int64_t calibrationSeqlen(int64_t requested, const LlamaConfig& config, std::string* note) {
    const int64_t seqlen = effectiveSeqlen(requested, config);
    if (note) {
        note->clear();
        if (requested > seqlen)
            *note = "seqlen " + std::to_string(requested) + " capped at the model's context of " + std::to_string(seqlen);
    }
    return seqlen;
}

CalibrationPool readCalibrationPool(const LanguageModel& lm, const std::string& source, bool sourceIsIds, bool perLine) {
    CalibrationPool pool;
    if (const std::optional<TextDatasetRef> dataset = parseTextDatasetRef(source)) {  // wikitext2:FILE, c4:FILE, …
        if (sourceIsIds || perLine)
            throw Error("calibration source " + source + " is a data set (text): token ids and one sample per line do not apply");
        CalibrationCorpus corpus = calibrationCorpus(readTextDataset(*dataset, TextDatasetUse::Calibration), encoderOf(lm));
        pool.source = corpus.source;
        pool.sourceHash = fileContentHash(dataset->path);
        pool.stream = std::move(corpus.stream);
        pool.documents = std::move(corpus.documents);
        return pool;
    }
    pool.source = source;
    pool.sourceIsIds = sourceIsIds || perLine;
    if (perLine) pool.sequences = readTokenIdLines(source, lm.model->config().vocab_size);
    else pool.stream = readCalibrationStream(source, sourceIsIds, lm);
    pool.sourceHash = fileContentHash(source);  // read above, so a missing file was named there
    return pool;
}

CalibrationSet drawCalibration(const CalibrationPool& pool, const LanguageModel& lm, int64_t samples, int64_t seqlen,
                               uint64_t seed, std::string* note) {
    const int64_t length = calibrationSeqlen(seqlen, lm.model->config(), note);
    CalibrationSet set =
        !pool.documents.empty() ? drawCalibrationSetFromDocuments(pool.documents, encoderOf(lm), samples, length, seed, pool.source)
        : !pool.sequences.empty() ? drawCalibrationSetFromSequences(pool.sequences, samples, length, seed, pool.source)
                                  : drawCalibrationSet(pool.stream, samples, length, seed, pool.source);
    set.sourceIsIds = pool.sourceIsIds;
    set.sourceHash = pool.sourceHash;
    return set;
}

CalibrationSet buildCalibrationSet(const LanguageModel& lm, const CalibrationRequest& request, std::string* note) {
    return drawCalibration(readCalibrationPool(lm, request.source, request.sourceIsIds, request.perLine), lm,
                           request.samples, request.seqlen, request.seed, note);
}

void setSweepCalibrationPool(SweepSpec& spec, CalibrationPool pool) {
    spec.calibStream = std::move(pool.stream);
    spec.calibSequences = std::move(pool.sequences);
    spec.calibDocuments = std::move(pool.documents);
    spec.calibSource = std::move(pool.source);
    spec.calibSourceHash = std::move(pool.sourceHash);
}

std::string calibrationReuseWarning(const CalibrationSummary& c) {
    if (c.distinctTokens <= 0 || c.tokens < 2 * c.distinctTokens) return {};
    return std::to_string(c.samples) + " calibration windows × " + std::to_string(c.seqlen) + " tokens = " +
           std::to_string(c.tokens) + " positions cover only " + std::to_string(c.distinctTokens) +
           " distinct tokens of " + (c.source.empty() ? std::string("the calibration text") : c.source) + " (each used " +
           fixed(double(c.tokens) / double(c.distinctTokens), 1) +
           " times on average): the statistics describe a short text many times over; give a longer text, or fewer "
           "or shorter windows";
}

std::string calibrationOverlapWarning(const CalibrationPool& pool, const std::string& evalName, const std::string& evalHash,
                                      const std::vector<int32_t>& evalIds) {
    const std::string calibName = pool.source.empty() ? std::string("the calibration text") : pool.source;
    const std::string consequence = ": its perplexity measures text the statistics were computed on, not held-out text";
    if (!evalHash.empty() && evalHash == pool.sourceHash)
        return "the evaluation text '" + evalName + "' is the calibration text " + calibName + " (the same bytes, " +
               evalHash + ")" + consequence;
    // Non-overlapping 32-token spans of the evaluation text, looked up at every offset of the
    // calibration's token sequences: one pass over each.
    constexpr size_t kSpan = 32;
    auto spanHash = [](const int32_t* p) { return fnv1a64(p, kSpan * sizeof(int32_t)); };
    std::unordered_map<uint64_t, size_t> evalSpans;  // hash → index
    for (size_t i = 0; i + kSpan <= evalIds.size(); i += kSpan) evalSpans.emplace(spanHash(evalIds.data() + i), evalSpans.size());
    if (evalSpans.empty()) return {};
    std::vector<char> found(evalSpans.size(), 0);
    auto scan = [&](const std::vector<int32_t>& ids) {
        for (size_t i = 0; i + kSpan <= ids.size(); ++i) {
            const auto it = evalSpans.find(spanHash(ids.data() + i));
            if (it != evalSpans.end()) found[it->second] = 1;
        }
    };
    scan(pool.stream);
    for (const std::vector<int32_t>& sequence : pool.sequences) scan(sequence);
    const auto shared = static_cast<size_t>(std::count(found.begin(), found.end(), char(1)));
    if (shared * 100 < evalSpans.size()) return {};
    return std::to_string(shared) + " of the " + std::to_string(evalSpans.size()) + " 32-token spans of the evaluation text '" +
           evalName + "' (" + percent(double(shared) / double(evalSpans.size())) + ") also occur in the calibration text " +
           calibName + consequence;
}

LanguagePruningWorkbench::LanguagePruningWorkbench(LanguageModel model) : model_(std::move(model)) {}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::windowsOnly(const LanguageModel& lm,
                                                                            const CalibrationRequest& request) {
    std::string note;
    CalibrationSet set = buildCalibrationSet(lm, request, &note);
    return windowsOnly(std::move(set), std::move(note));
}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::windowsOnly(CalibrationSet windows, std::string note) {
    Calibration c;
    c.summary = CalibrationSummary::of(windows);
    c.windows = std::make_shared<const CalibrationSet>(std::move(windows));
    c.note = std::move(note);
    return c;
}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::calibrate(const LanguageModel& lm,
                                                                          const CalibrationRequest& request,
                                                                          const ProgressFn& progress,
                                                                          const CalibrationOptions& options) {
    std::string note;
    CalibrationSet set = buildCalibrationSet(lm, request, &note);
    Calibration c = calibrate(lm, std::move(set), progress, options);
    c.note = std::move(note);
    return c;
}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::calibrate(const LanguageModel& lm, CalibrationSet windows,
                                                                          const ProgressFn& progress,
                                                                          const CalibrationOptions& options) {
    Calibration c = windowsOnly(std::move(windows));
    const auto start = Clock::now();
    c.stats = std::make_shared<const ModelStats>(npw::calibrate(*lm.model, *c.windows, progress, options));
    c.seconds = secondsSince(start);
    return c;
}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::calibrateToFile(const LanguageModel& lm,
                                                                                const CalibrationRequest& request,
                                                                                const std::string& statsFile,
                                                                                const std::string& modelName,
                                                                                const ProgressFn& progress) {
    ensureNotOverwritingSource(lm.model->checkpoint().source, statsFile);  // before the windows are drawn
    std::string note;
    CalibrationSet set = buildCalibrationSet(lm, request, &note);
    Calibration c = calibrateToFile(lm, std::move(set), statsFile, modelName, progress);
    c.note = std::move(note);
    return c;
}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::calibrateToFile(const LanguageModel& lm,
                                                                                CalibrationSet windows,
                                                                                const std::string& statsFile,
                                                                                const std::string& modelName,
                                                                                const ProgressFn& progress) {
    ensureNotOverwritingSource(lm.model->checkpoint().source, statsFile);
    Calibration c = windowsOnly(std::move(windows));  // the windows kept for ranking lstar-kl
    std::map<std::string, std::string> metadata = c.summary.toMetadata();
    metadata["model"] = modelName;
    const auto start = Clock::now();
    c.stats = std::make_shared<const ModelStats>(calibrateLayerwise(*lm.model, *c.windows, statsFile, metadata, progress));
    c.seconds = secondsSince(start);
    return c;
}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::calibrationFromFile(const std::string& statsFile,
                                                                                    int64_t layers) {
    std::map<std::string, std::string> metadata;
    Calibration c;
    c.stats = std::make_shared<const ModelStats>(loadModelStats(statsFile, layers, &metadata, StatsStorage::Mapped));
    c.summary = CalibrationSummary::fromMetadata(metadata, statsFile);
    return c;
}

void LanguagePruningWorkbench::setCalibration(Calibration calibration) {
    calibration_ = std::move(calibration);
    clearScores();
}

ScoreSet LanguagePruningWorkbench::score(const LanguageModel& lm, const ModelStats& stats, const PruneSettings& settings,
                                         const ProgressFn& progress, const CalibrationSet* windows) {
    // The method dispatch: every method computeScores knows (numerical, flap, wanda-sp,
    // magnitude, random) from the same statistics. A method with its own pipeline is added here.
    return scoreModel(*lm.model, stats, settings, progress, windows);
}

std::string scoreSetName(const ScoreRequest& request) {
    if (!request.baseline) return scoreSetName(request.settings);
    std::string name = baselineMethodName(*request.baseline);
    if (*request.baseline == BaselineMethod::LlmPruner) {
        const BaselineOptions& o = request.baselineOptions;
        if (o.llmPrunerGlobal) name += "-global";
        if (o.taylor != TaylorKind::ParamFirst) name += std::string("-") + taylorKindName(o.taylor);
        if (o.layerStart >= 0 || o.layerEnd >= 0)
            name += "-layers-" + (o.layerStart >= 0 ? std::to_string(o.layerStart) : std::string("default")) + "-" +
                    (o.layerEnd >= 0 ? std::to_string(o.layerEnd - 1) : std::string("default"));
        if (!std::isnan(o.layerRatio)) name += "-r" + fixed(o.layerRatio, 3);
    }
    return name;
}

BaselineScores LanguagePruningWorkbench::scoreBaseline(const LanguageModel& lm, std::shared_ptr<const CalibrationSet> windows,
                                                       BaselineMethod method, const BaselineOptions& options,
                                                       const ProgressFn& progress) {
    // The baselines' half of the method dispatch (score() above is the other): what each
    // computes once from the windows, so that any ρ re-selects without it.
    if (!windows)
        throw Error(std::string(baselineMethodName(method)) +
                    " scores on the calibration windows; statistics read from a file carry none: calibrate instead");
    const auto start = Clock::now();
    BaselineScores out;
    out.method = method;
    out.options = options;
    out.windows = std::move(windows);
    switch (method) {
    case BaselineMethod::LlmPruner: out.llmPruner = llmPrunerScores(*lm.model, *out.windows, options, progress); break;
    case BaselineMethod::BlockInfluence: out.blocks = blockInfluence(*lm.model, *out.windows, progress); break;
    case BaselineMethod::SliceGpt: break;  // its rotation depends on the width: computed when applied
    }
    out.seconds = secondsSince(start);
    return out;
}

ComputedScores LanguagePruningWorkbench::score(const LanguageModel& lm, const Calibration& calibration,
                                               const ScoreRequest& request, const ProgressFn& progress) {
    ComputedScores out;
    if (request.baseline) {
        out.baseline = scoreBaseline(lm, calibration.windows, *request.baseline, request.baselineOptions, progress);
    } else {
        if (!calibration.stats) throw Error("the workbench has no calibration statistics yet: calibrate first");
        out.scores = score(lm, *calibration.stats, request.settings, progress, calibration.windows.get());
    }
    return out;
}

std::string LanguagePruningWorkbench::addScores(BaselineScores scores) {
    Entry entry;
    entry.request.baseline = scores.method;
    entry.request.baselineOptions = scores.options;
    std::string name = scoreSetName(entry.request);
    entry.baseline = std::make_shared<const BaselineScores>(std::move(scores));
    if (!entries_.count(name)) order_.push_back(name);
    entries_[name] = std::move(entry);
    return name;
}

std::string LanguagePruningWorkbench::addScores(ComputedScores scores) {
    if (scores.baseline) return addScores(std::move(*scores.baseline));
    if (!scores.scores) throw Error("no scores to keep");
    return addScores(std::move(*scores.scores));
}

ScoreRequest LanguagePruningWorkbench::requestOf(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw Error("no score set '" + name + "' on the workbench");
    return it->second.request;
}

std::shared_ptr<const BaselineScores> LanguagePruningWorkbench::baselineScores(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : it->second.baseline;
}

std::string LanguagePruningWorkbench::addScores(ScoreSet scores) {
    std::string name = scoreSetName(scores.settings);
    Entry entry;
    entry.request = ScoreRequest(scores.settings);
    entry.computed = std::make_shared<const ScoreSet>(std::move(scores));
    entry.atLambda = entry.computed;
    entry.selector = std::make_shared<const MaskSelector>(*entry.computed);
    if (!entries_.count(name)) order_.push_back(name);
    entries_[name] = std::move(entry);
    return name;
}

std::string LanguagePruningWorkbench::scoreAndKeep(const PruneSettings& settings, const ProgressFn& progress) {
    if (!isCalibrated()) throw Error("the workbench has no calibration statistics yet: calibrate first");
    return addScores(score(model_, *calibration_.stats, settings, progress, calibration_.windows.get()));
}

std::shared_ptr<const ScoreSet> LanguagePruningWorkbench::computedScores(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : it->second.computed;
}

void LanguagePruningWorkbench::clearScores() {
    entries_.clear();
    order_.clear();
}

WorkbenchSelection LanguagePruningWorkbench::select(const std::string& name, double ratio, double alpha, AlphaMode mode,
                                                    double lambdaRel) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw Error("no score set '" + name + "' on the workbench");
    Entry& entry = it->second;
    if (entry.baseline) return selectBaseline(name, entry, ratio);
    const ScoreSet& computed = *entry.computed;
    const bool numerical = computed.settings.method == PruneMethod::Numerical;
    const bool relative = numerical && std::isfinite(lambdaRel) && std::isfinite(computed.medianC) && computed.medianC > 0;
    if (relative && rescoresLive(computed)) {
        // λ = λ_rel / median c, re-scored in closed form from the stored solves (no new solve).
        const double absolute = lambdaRel / computed.medianC;
        if (entry.atLambda->settings.lambda != absolute) {
            entry.atLambda = computed.settings.lambda == absolute
                                 ? entry.computed
                                 : std::make_shared<const ScoreSet>(rescoreNumerical(computed, absolute));
            entry.selector = std::make_shared<const MaskSelector>(*entry.atLambda);
        }
    }
    WorkbenchSelection out;
    out.method = name;
    out.scores = entry.atLambda;
    out.lambdaRel = relative ? lambdaRel : (numerical && computed.settings.lambdaIsRelative() ? computed.settings.lambdaRel
                                                                                              : std::nan(""));
    out.selection = entry.selector->select(ratio, alpha, mode);
    out.ratio = ratio;
    out.alpha = std::isnan(alpha) ? entry.selector->defaultAlpha() : alpha;
    out.alphaMode = mode;
    out.kept = keptPerLayer(out.selection.mask);
    out.achievedRatio = achievedRatio(out.selection.mask, out.scores->costs);
    out.achievedRatioModel =
        achievedRatioModel(out.selection.mask, out.scores->costs, model_.model ? model_.model->config().parameterCount() : 0);
    for (size_t l = 0; l < out.scores->ranking.size(); ++l) out.unitScores.push_back(out.scores->unitScoresAt(l, ratio));
    out.scoreLabel = "unit score (higher = more important)";
    return out;
}

WorkbenchSelection LanguagePruningWorkbench::selectBaseline(const std::string& name, const Entry& entry,
                                                            double ratio) const {
    const BaselineScores& b = *entry.baseline;
    if (!(ratio >= 0 && ratio < 1)) throw Error(name + ": ratio " + std::to_string(ratio) + " is outside [0, 1)");
    const LlamaConfig& cfg = model_.model->config();
    const auto layers = static_cast<size_t>(cfg.num_layers);
    BaselineOptions options = b.options;
    options.ratio = ratio;
    WorkbenchSelection out;
    out.method = name;
    out.ratio = ratio;
    out.alpha = std::nan("");
    out.baseline = entry.baseline;
    out.selection.threshold = std::nan("");
    const std::string at = " at ρ = " + fixed(ratio, 3), At = " At ρ = " + fixed(ratio, 3);
    Mask& mask = out.selection.mask;
    switch (b.method) {
    case BaselineMethod::SliceGpt: {
        // No per-unit scores and no mask: the width for ρ and what it removes, counted as
        // pruneSliceGpt's report counts it (shortcut matrices and the untied classifier included).
        bool reached = true;
        const int64_t d = slicegptWidthForRatio(cfg, ratio, options.roundInterval, &reached);
        const int64_t before = prunableParameters(cfg);
        const int64_t after = slicedPrunableParameters(cfg, d) + untyingExtraParameters(cfg, d);
        const auto removed = static_cast<double>(before - after);
        out.achievedRatio = removed / static_cast<double>(before);
        out.achievedRatioModel = removed / static_cast<double>(checkpointParameters(model_.model->checkpoint()));
        const double fraction = 1.0 - static_cast<double>(d) / static_cast<double>(cfg.hidden_size);
        out.native = {{"knob", "slicing_fraction"},   {"slicing_fraction", fraction},
                      {"width", d},                   {"hidden_size", cfg.hidden_size},
                      {"target_reached", reached},    {"round_interval", options.roundInterval}};
        out.description = "SliceGPT has no per-unit scores: it rotates the residual stream (a PCA basis at each "
                          "residual location) and deletes its least significant directions, not heads or channels." +
                          At + " it keeps " + std::to_string(d) + " of " + std::to_string(cfg.hidden_size) +
                          " directions (slicing fraction " + percent(fraction) + "), removing " +
                          percent(out.achievedRatio) +
                          " of the attention + MLP parameters (its shortcut matrices and the untied classifier "
                          "counted)" + (reached ? "" : "; ρ is out of its reach") +
                          ". Applying it slices the model (seconds).";
        return out;
    }
    case BaselineMethod::LlmPruner: {
        const LlmPrunerScores& scores = *b.llmPruner;
        const LlmPrunerSelection chosen = llmPrunerSelect(cfg, options, [&]() -> const LlmPrunerScores& { return scores; });
        mask = chosen.mask;
        for (size_t l = 0; l < layers; ++l) {
            LayerScores s;
            const bool scored = static_cast<int64_t>(l) >= scores.start && static_cast<int64_t>(l) < scores.end;
            s.heads = scored ? scores.importance.heads[l]
                             : std::vector<double>(static_cast<size_t>(cfg.num_kv_heads[l]), std::nan(""));
            s.channels = scored ? scores.importance.channels[l]
                                : std::vector<double>(static_cast<size_t>(cfg.intermediate_size[l]), std::nan(""));
            out.unitScores.push_back(std::move(s));
        }
        const char* knob = options.llmPrunerGlobal ? "global_unit_ratio" : "per_layer_ratio";
        out.native = {{"knob", knob},
                      {knob, chosen.knob},
                      {"target_reached", chosen.reached},
                      {"layers_pruned", {chosen.start, chosen.end}},
                      {"taylor", taylorKindName(options.taylor)}};
        out.scoreLabel = std::string("Taylor importance (") + taylorKindName(options.taylor) + ")";
        out.description =
            "LLM-Pruner's first-order Taylor importance per KV group and MLP channel of layers " +
            std::to_string(chosen.start) + "–" + std::to_string(chosen.end - 1) + " (the others are not pruned: no score)" +
            at + (options.llmPrunerGlobal
                      ? ": ranked globally, the lowest " + percent(chosen.knob) + " of the range's units go"
                      : ": every layer in the range removes the same fraction r = " + fixed(chosen.knob, 3) +
                            " of its units, the least important") +
            (chosen.reached ? "." : "; ρ is out of its reach in this range.");
        break;
    }
    case BaselineMethod::BlockInfluence: {
        const std::vector<double>& bi = b.blocks->influence;
        const std::vector<int64_t> removed = blocksToRemove(cfg, bi, ratio);
        for (size_t l = 0; l < layers; ++l) {
            const bool gone = std::find(removed.begin(), removed.end(), static_cast<int64_t>(l)) != removed.end();
            mask.keepHeads.emplace_back(static_cast<size_t>(cfg.num_kv_heads[l]), !gone);
            mask.keepChannels.emplace_back(static_cast<size_t>(cfg.intermediate_size[l]), !gone);
            // One score per block: every unit of a block shows the block's (a whole column).
            LayerScores s;
            s.heads.assign(static_cast<size_t>(cfg.num_kv_heads[l]), bi[l]);
            s.channels.assign(static_cast<size_t>(cfg.intermediate_size[l]), bi[l]);
            out.unitScores.push_back(std::move(s));
        }
        out.native = {{"knob", "blocks_removed"},
                      {"blocks_removed", removed.size()},
                      {"removed_blocks", removed},
                      {"block_influence", bi}};
        out.scoreLabel = "block influence (1 − cos), per block";
        std::string scoresText;
        for (size_t l = 0; l < bi.size(); ++l) scoresText += (l ? ", " : "") + fixed(bi[l], 4);
        out.description = "ShortGPT's block influence, one score per block (1 − mean cos of its input and output: " +
                          scoresText + "); no per-head or per-channel scores: each column of the head map is a whole block." +
                          At + (removed.empty() ? " no block goes." : " the " + std::to_string(removed.size()) +
                                                                        " lowest go: block" + (removed.size() > 1 ? "s " : " ") +
                                                                        listed(removed) + ".");
        break;
    }
    }
    const std::vector<LayerUnitCost> costs = unitCosts(cfg, AttentionUnitKind::KvGroup);
    for (size_t l = 0; l < layers; ++l) {
        for (bool keep : mask.keepHeads[l]) out.selection.removedHeads += keep ? 0 : 1;
        for (bool keep : mask.keepChannels[l]) out.selection.removedChannels += keep ? 0 : 1;
    }
    out.selection.removedParams = removedParameters(mask, costs);
    out.kept = keptPerLayer(mask);
    out.achievedRatio = achievedRatio(mask, costs);
    out.achievedRatioModel = achievedRatioModel(mask, costs, cfg.parameterCount());
    return out;
}

BaselineRun LanguagePruningWorkbench::applyBaseline(const LlamaModel& model, const WorkbenchSelection& selection,
                                                    const ProgressFn& progress) {
    if (!selection.baseline) throw Error("score set '" + selection.method + "' is not a baseline's: apply it with applySelection");
    const BaselineScores& b = *selection.baseline;
    BaselineOptions options = b.options;
    options.ratio = selection.ratio;
    const CalibrationSet none;
    const CalibrationSet& windows = b.windows ? *b.windows : none;
    const auto start = Clock::now();
    BaselineRun run;
    switch (b.method) {
    case BaselineMethod::LlmPruner:
        run = pruneLlmPruner(model, windows, options, progress, b.llmPruner ? &*b.llmPruner : nullptr);
        break;
    case BaselineMethod::BlockInfluence:
        run = pruneBlockInfluence(model, windows, options, progress, b.blocks ? &*b.blocks : nullptr);
        break;
    case BaselineMethod::SliceGpt:
        if (!b.windows) throw Error("slicegpt slices on the calibration windows; this score set has none");
        run = pruneSliceGpt(model, windows, options, progress);
        break;
    }
    run.report.timings.scoreSeconds = b.seconds + secondsSince(start);  // as runBaseline reports it
    return run;
}

BaselineRun LanguagePruningWorkbench::pruneBaseline(BaselineMethod method, const BaselineOptions& options,
                                                    const ProgressFn& progress) {
    if (!hasWindows()) throw Error("the workbench has no calibration windows yet: calibrate first");
    const std::string name = addScores(scoreBaseline(model_, calibration_.windows, method, options, progress));
    return applyBaseline(*model_.model, select(name, options.ratio, std::nan(""), AlphaMode::Budget), progress);
}

PruneSettings LanguagePruningWorkbench::appliedSettings(const WorkbenchSelection& selection, const PruneSettings& given) {
    if (!selection.scores) throw Error("internal: a baseline's selection has no score set's settings to apply");
    // What was scored comes from the score set, what was selected from the selection (scope and
    // protection the score set's), how to compensate from `given`: its whole part.
    PruneSettings settings = selection.scores->settings;
    static_cast<CompensationSettings&>(settings) = given;
    settings.ratio = selection.ratio;
    settings.alpha = selection.alpha;
    settings.alphaMode = selection.alphaMode;
    if (std::isfinite(selection.lambdaRel)) {  // reported as given: relative
        settings.lambda = std::nan("");
        settings.lambdaRel = selection.lambdaRel;
    }
    return settings;
}

WorkbenchPrune LanguagePruningWorkbench::applySelection(const LlamaModel& model, const ModelStats& stats,
                                                        const WorkbenchSelection& selection, PruneSettings settings,
                                                        const ProgressFn& progress) {
    settings = appliedSettings(selection, settings);
    AppliedSelection applied = applySelectionAndReport(model.checkpoint(), stats, *selection.scores, selection.selection,
                                                       settings, selection.alpha, progress);
    WorkbenchPrune out;
    out.scores = selection.scores;
    out.selection = selection.selection;
    out.pruned = std::move(applied.pruned);
    out.report = std::move(applied.report);
    out.settings = settings;
    return out;
}

WorkbenchPrune LanguagePruningWorkbench::prune(const PruneSettings& settings, const ProgressFn& progress) {
    auto start = Clock::now();
    const std::string name = scoreAndKeep(settings, progress);
    const double scoreSeconds = secondsSince(start);
    start = Clock::now();
    const WorkbenchSelection selection = select(
        name, settings.ratio, settings.alpha, settings.alphaMode,
        settings.method == PruneMethod::Numerical && settings.lambdaIsRelative() ? settings.lambdaRel : std::nan(""));
    const double selectSeconds = secondsSince(start);
    WorkbenchPrune out = applySelection(*model_.model, *calibration_.stats, selection, settings, progress);
    out.report.timings.calibrateSeconds = calibration_.seconds;
    out.report.timings.scoreSeconds = scoreSeconds;
    out.report.timings.selectSeconds = selectSeconds;
    return out;
}

} // namespace npw
