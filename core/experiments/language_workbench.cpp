#include "core/experiments/language_workbench.h"
#include "core/prune/site_damage.h"

#include "core/eval/perplexity.h"
#include "core/experiments/dataset_inputs.h"
#include "core/experiments/sweep.h"
#include "core/util/error.h"

#include <chrono>
#include <cmath>

namespace npw {

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Numerical scores follow λ in closed form; box-constrained ones need a new solve.
bool rescoresLive(const ScoreSet& s) { return s.settings.method == PruneMethod::Numerical && !s.settings.boxConstrained; }

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
        pool.stream = std::move(corpus.stream);
        pool.documents = std::move(corpus.documents);
        return pool;
    }
    pool.source = source;
    pool.sourceIsIds = sourceIsIds || perLine;
    if (perLine) pool.sequences = readTokenIdLines(source, lm.model->config().vocab_size);
    else pool.stream = readCalibrationStream(source, sourceIsIds, lm);
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
}

LanguagePruningWorkbench::LanguagePruningWorkbench(LanguageModel model) : model_(std::move(model)) {}

LanguagePruningWorkbench::Calibration LanguagePruningWorkbench::calibrate(const LanguageModel& lm,
                                                                          const CalibrationRequest& request,
                                                                          const ProgressFn& progress,
                                                                          const CalibrationOptions& options) {
    Calibration c;
    const CalibrationSet set = buildCalibrationSet(lm, request, &c.note);
    const auto start = Clock::now();
    c.stats = std::make_shared<const ModelStats>(npw::calibrate(*lm.model, set, progress, options));
    c.seconds = secondsSince(start);
    c.summary = CalibrationSummary::of(set);
    c.windows = std::make_shared<const CalibrationSet>(set);
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
    ScoreSet scores = computeScores(lm.model->checkpoint(), stats, settings, progress);
    if (settings.method == PruneMethod::Numerical && settings.crossLayer == CrossLayerRanking::MeasuredDamage) {
        if (!windows)
            throw Error("ranking lstar-kl measures each site's damage on the calibration windows; statistics read "
                        "from a file carry none: calibrate (--calib) instead of --stats");
        rankBySiteDamage(scores, *lm.model, stats, *windows);
    }
    return scores;
}

std::string LanguagePruningWorkbench::addScores(ScoreSet scores) {
    const std::string name = scoreSetName(scores.settings);
    Entry entry;
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
    return out;
}

WorkbenchPrune LanguagePruningWorkbench::applySelection(const LlamaModel& model, const ModelStats& stats,
                                                        const WorkbenchSelection& selection, PruneSettings settings,
                                                        const ProgressFn& progress) {
    // What was selected how comes from the selection; how to compensate from `settings`.
    const PruneSettings& scored = selection.scores->settings;
    const CompensationKind compensation = settings.compensation;
    const double damp = settings.damp;
    settings = scored;
    settings.compensation = compensation;
    settings.damp = damp;
    settings.ratio = selection.ratio;
    settings.alpha = selection.alpha;
    settings.alphaMode = selection.alphaMode;
    if (std::isfinite(selection.lambdaRel)) {  // reported as given: relative
        settings.lambda = std::nan("");
        settings.lambdaRel = selection.lambdaRel;
    }
    WorkbenchPrune out;
    reportProgress(progress, "apply", 0, 1);
    const auto start = Clock::now();
    out.pruned = applyMask(model.checkpoint(), stats, selection.selection.mask, settings);
    reportProgress(progress, "apply", 1, 1);
    out.report = makePruneReport(settings, selection.alpha, *selection.scores, selection.selection, model.checkpoint(),
                                 out.pruned);
    out.report.timings.applySeconds = secondsSince(start);
    out.settings = settings;
    return out;
}

WorkbenchPrune LanguagePruningWorkbench::prune(const PruneSettings& settings, const ProgressFn& progress) {
    settings.validate();
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
