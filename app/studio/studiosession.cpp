#include "app/studio/studiosession.h"

#include "app/studio/workspacefile.h"
#include "core/eval/perplexity.h"
#include "core/experiments/dataset_inputs.h"
#include "core/models/sliced_llama.h"
#include "core/prune/slicegpt.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <QFileInfo>
#include <QFutureWatcher>
#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>
#include <limits>

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString unitNameFor(const npw::LlamaConfig& config, npw::AttentionUnitKind kind) {
    for (int64_t l = 0; l < config.num_layers; ++l)
        if (config.num_kv_heads[l] > 0 && config.num_kv_heads[l] != config.num_heads[l])
            return kind == npw::AttentionUnitKind::KvGroup ? QStringLiteral("KV group") : QStringLiteral("query slot");
    return QStringLiteral("head");
}

// The Run settings' calibration as the workbench takes it (empty source: the demo corpus).
npw::CalibrationRequest calibrationRequest(const studio::CalibrationSettings& settings) {
    npw::CalibrationRequest request;
    request.source = settings.source.empty() ? studio::defaultCalibrationSource() : settings.source;
    request.sourceIsIds = settings.sourceIsIds;
    request.samples = settings.samples;
    request.seqlen = settings.seqlen;
    request.seed = settings.seed;
    return request;
}

} // namespace

struct StudioSession::Restored {
    studio::WorkspaceFile file;
    npw::LanguageModel model;
    npw::LanguagePruningWorkbench::Calibration calibration;
    std::vector<npw::ComputedScores> scoreSets;
};

StudioSession::StudioSession(QObject* parent) : QObject(parent) {
    qRegisterMetaType<SelectionView>();
    connect(&jobs_, &JobRunner::failed, this,
            [this](const QString& title, const QString& message) { emit logMessage(tr("%1 failed: %2").arg(title, message)); });
    connect(&jobs_, &JobRunner::cancelled, this, [this](const QString& title) {
        emit logMessage(tr("%1 cancelled; the workspace is as it was before it started.").arg(title));
    });
    connect(&jobs_, &JobRunner::finished, this, [this](const QString& title, double seconds) {
        emit logMessage(tr("%1 done in %2 s.").arg(title).arg(seconds, 0, 'f', 1));
    });
}

StudioSession::~StudioSession() {
    jobs_.cancel();
    QThreadPool::globalInstance()->waitForDone();  // the loss job and the runner's job hold our model
}

void StudioSession::setSettings(const studio::RunSettings& settings) {
    settings_ = settings;
    emit settingsChanged();
}

bool StudioSession::calibrationStale() const {
    return !workbench_.isCalibrated() || !statsCalibration_ || *statsCalibration_ != settings_.calibration;
}

QStringList StudioSession::scoreMethods() const {
    QStringList names;
    for (const std::string& name : workbench_.scoreSetNames()) names << qs(name);
    return names;
}

std::vector<npw::WorkbenchSelection> StudioSession::selectionsAtKnobs() {
    std::vector<npw::WorkbenchSelection> out;
    for (const std::string& name : workbench_.scoreSetNames())
        out.push_back(workbench_.select(name, knobs_.rho, knobs_.alpha, knobs_.mode, knobs_.lambda));
    return out;
}

std::shared_ptr<const npw::ScoreSet> StudioSession::currentScores() const {
    if (selected_ && selected_->method == current_.toStdString()) return selected_->scores;
    return workbench_.computedScores(current_.toStdString());
}

void StudioSession::resetModelState() {
    workbench_ = npw::LanguagePruningWorkbench(workbench_.model());
    statsCalibration_.reset();
    current_.clear();
    view_.reset();
    selected_.reset();
    layerReports_.clear();
    ++reportGeneration_;
    sweepRows_.clear();
    emit scoresChanged();
    emit sweepCleared();
}

bool StudioSession::openModel(const QString& reference, const QString& device) {
    const std::string ref = reference.toStdString(), dev = device.toStdString();
    return jobs_.start<npw::LanguageModel>(
        tr("Open %1").arg(reference),
        [ref, dev](const npw::ProgressFn&) { return npw::openLanguageModel(ref, npw::chooseRuntime(dev)); },
        [this, reference, device](npw::LanguageModel lm) {
            workbench_ = npw::LanguagePruningWorkbench(std::move(lm));
            modelRef_ = reference;
            device_ = device;
            resetModelState();
            emit logMessage(tr("Opened %1 on %2: %3 layers, %4 parameters.")
                                .arg(reference, qs(workbench_.model().model->runtime().describe()))
                                .arg(workbench_.model().model->config().num_layers)
                                .arg(QLocale().toString(qlonglong(workbench_.model().model->config().parameterCount()))));
            emit modelChanged();
        });
}

bool StudioSession::runScoring() {
    if (!hasModel()) return false;
    return runScoringFor({settings_.scoreRequest()}, QString());
}

bool StudioSession::recompute() {
    if (!hasModel()) return false;
    // Every score set shown, with the Run settings' calibration; box-constrained sets at the
    // knobs' ρ and λ. The current set stays current.
    std::vector<npw::ScoreRequest> list;
    for (const std::string& m : workbench_.scoreSetNames()) list.push_back(workbench_.requestOf(m));
    if (list.empty()) list.push_back(settings_.scoreRequest());
    return runScoringFor(list, current_);
}

bool StudioSession::runScoringFor(std::vector<npw::ScoreRequest> list, const QString& keepCurrent) {
    struct Result {
        npw::LanguagePruningWorkbench::Calibration calibration;
        bool recalibrated = false;
        std::vector<npw::ComputedScores> scores;
    };
    QStringList names;
    for (npw::ScoreRequest& request : list) {
        npw::PruneSettings& prune = request.settings;
        prune.ratio = knobs_.rho;
        prune.lambda = std::numeric_limits<double>::quiet_NaN();  // relative: the knob is λ_rel
        prune.lambdaRel = knobs_.lambda;
        prune.alpha = knobs_.alpha;
        prune.alphaMode = knobs_.mode;
        names << qs(npw::scoreSetName(request));
    }
    const bool stale = calibrationStale();
    const studio::CalibrationSettings calibration = settings_.calibration;
    const npw::LanguageModel lm = workbench_.model();
    const auto current = stale ? npw::LanguagePruningWorkbench::Calibration{} : workbench_.calibration();
    const QString method = names.join(QStringLiteral(", "));
    return jobs_.start<Result>(
        stale ? tr("Calibrate and score %1").arg(method) : tr("Score %1").arg(method),
        [=](const npw::ProgressFn& progress) {
            Result r;
            r.calibration = current;
            if (!r.calibration.stats) {
                // Smaller batches than core's default: a Cancel then waits for at most ~2k tokens.
                npw::CalibrationOptions options;
                options.batchTokens = 2048;
                r.calibration =
                    npw::LanguagePruningWorkbench::calibrate(lm, calibrationRequest(calibration), progress, options);
                r.recalibrated = true;
            }
            for (const npw::ScoreRequest& request : list) {
                if (request.baseline && !r.calibration.windows)  // statistics from a workspace: no windows kept
                    r.calibration.windows = std::make_shared<const npw::CalibrationSet>(
                        npw::buildCalibrationSet(lm, calibrationRequest(calibration)));
                r.scores.push_back(npw::LanguagePruningWorkbench::score(lm, r.calibration, request, progress));
            }
            return r;
        },
        [this, calibration, keepCurrent](Result r) {
            if (r.recalibrated) {
                const npw::CalibrationSummary summary = r.calibration.summary;
                const std::string note = r.calibration.note;
                workbench_.setCalibration(std::move(r.calibration));  // scores of other statistics go
                statsCalibration_ = calibration;
                emit logMessage(tr("Calibrated on %1 windows of %2 tokens of %3%4.")
                                    .arg(summary.samples)
                                    .arg(summary.seqlen)
                                    .arg(QFileInfo(qs(summary.source)).fileName())
                                    .arg(note.empty() ? QString() : tr(" (%1)").arg(qs(note))));
            }
            for (npw::ComputedScores& computed : r.scores) {
                if (computed.scores && computed.scores->settings.boxConstrained) {
                    const npw::ScoreSet& set = *computed.scores;
                    emit logMessage(tr("Box-constrained z solved at ρ = %1, λ = %2 (λ_rel / median c): %3 channels "
                                       "at 0, %4 at 1, KKT residual %5.")
                                        .arg(set.settings.ratio)
                                        .arg(set.settings.lambda, 0, 'g', 3)
                                        .arg(set.boxAtZero)
                                        .arg(set.boxAtOne)
                                        .arg(set.boxKktViolation, 0, 'g', 2));
                }
                addScores(std::move(computed));
            }
            if (!keepCurrent.isEmpty() && workbench_.hasScores(keepCurrent.toStdString()) && current_ != keepCurrent) {
                current_ = keepCurrent;
                emit scoresChanged();
                reselect();
            }
        });
}

QString StudioSession::recomputeReason() const {
    if (!hasModel() || workbench_.scoreSetNames().empty()) return QString();
    if (workbench_.isCalibrated() && statsCalibration_ && *statsCalibration_ != settings_.calibration) {
        const studio::CalibrationSettings& was = *statsCalibration_;
        const studio::CalibrationSettings& now = settings_.calibration;
        return tr("The scores shown come from %1 windows × %2 tokens (seed %3)%4; the Run settings now ask for "
                  "%5 × %6 (seed %7)%8. A new calibration and new solves are needed.")
            .arg(was.samples)
            .arg(was.seqlen)
            .arg(was.seed)
            .arg(was.source.empty() ? QString() : tr(" of %1").arg(QFileInfo(qs(was.source)).fileName()))
            .arg(now.samples)
            .arg(now.seqlen)
            .arg(now.seed)
            .arg(now.source.empty() ? QString() : tr(" of %1").arg(QFileInfo(qs(now.source)).fileName()));
    }
    const auto computed = workbench_.computedScores(current_.toStdString());
    if (computed && computed->settings.boxConstrained) {
        const npw::PruneSettings& s = computed->settings;
        const bool sameLambda = std::isfinite(computed->medianC) && computed->medianC > 0
                                    ? s.lambda == knobs_.lambda / computed->medianC
                                    : true;
        if (s.ratio != knobs_.rho || !sameLambda)
            return tr("The box-constrained z was solved at ρ = %1, λ_rel = %2; the mask re-ranks that z at ρ = %3, "
                      "λ_rel = %4. The bounded optimum there needs a new solve.")
                .arg(s.ratio)
                .arg(s.lambda * computed->medianC, 0, 'g', 3)
                .arg(knobs_.rho)
                .arg(knobs_.lambda, 0, 'g', 3);
    }
    return QString();
}

void StudioSession::addScores(npw::ComputedScores scores) {
    current_ = qs(workbench_.addScores(std::move(scores)));
    emit scoresChanged();
    reselect();
}

void StudioSession::setCurrentMethod(const QString& method) {
    if (method == current_ || !workbench_.hasScores(method.toStdString())) return;
    current_ = method;
    reselect();
}

void StudioSession::setKnobs(const studio::SelectionKnobs& knobs) {
    if (knobs == knobs_ && view_) return;
    knobs_ = knobs;
    reselect();
}

void StudioSession::reselect() {
    // Called from slots: a core error (e.g. an α that does not fit) is reported, never thrown
    // into Qt's event loop.
    try {
        reselectOrThrow();
    } catch (const std::exception& e) {
        emit logMessage(tr("Selection: %1").arg(e.what()));
    }
}

void StudioSession::reselectOrThrow() {
    if (!workbench_.hasScores(current_.toStdString())) {
        view_.reset();
        selected_.reset();
        return;
    }
    // The knob is λ_rel: numerical scores follow it in closed form (the workbench re-scores).
    npw::WorkbenchSelection selected =
        workbench_.select(current_.toStdString(), knobs_.rho, knobs_.alpha, knobs_.mode, knobs_.lambda);
    SelectionView v;
    v.method = current_;
    v.scores = selected.unitScores;
    v.selection = selected.selection;
    v.kept = selected.kept;
    v.achievedRatio = selected.achievedRatio;
    v.achievedRatioModel = selected.achievedRatioModel;
    v.unitName = unitNameFor(workbench_.model().model->config(),
                             selected.scores ? selected.scores->settings.attentionUnit : npw::AttentionUnitKind::KvGroup);
    v.scoreLabel = qs(selected.scoreLabel);
    v.description = qs(selected.description);
    v.baseline = selected.baseline != nullptr;
    v.perUnitScores = !selected.unitScores.empty();
    v.perBlockScores = selected.baseline && selected.baseline->method == npw::BaselineMethod::BlockInfluence;
    selected_ = std::move(selected);
    view_ = v;
    emit selectionChanged(*view_);
    startLayerReports();
}

void StudioSession::startLayerReports() {
    const quint64 generation = ++reportGeneration_;
    if (!view_ || !selected_ || !workbench_.isCalibrated() || selected_->baseline) return;  // baselines: no losses
    const npw::PruneSettings settings = settings_.prune;  // compensation and damp
    const auto model = workbench_.model().model;
    const auto stats = workbench_.calibration().stats;
    const npw::WorkbenchSelection selection = *selected_;
    auto* watcher = new QFutureWatcher<std::vector<npw::LayerPruneReport>>(this);
    connect(watcher, &QFutureWatcher<std::vector<npw::LayerPruneReport>>::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        try {
            std::vector<npw::LayerPruneReport> reports = watcher->result();
            if (generation != reportGeneration_) return;  // the knobs moved on meanwhile
            layerReports_ = std::move(reports);
            emit layerReportsAvailable(layerReports_);
        } catch (const std::exception& e) {
            if (generation == reportGeneration_) emit logMessage(tr("Per-layer losses: %1").arg(e.what()));
        }
    });
    // applyMask compensates and slices every layer: milliseconds on the demo models, more on
    // big ones, so never on the GUI thread. Results for superseded masks are dropped above.
    watcher->setFuture(QtConcurrent::run([model, stats, selection, settings, generation, this] {
        yieldToTheGuiThread();
        if (generation != reportGeneration_) return std::vector<npw::LayerPruneReport>{};  // already stale
        return npw::LanguagePruningWorkbench::applySelection(*model, *stats, selection, settings).report.layers;
    }));
}

bool StudioSession::runSweep(const SweepRequest& request) {
    if (!hasModel()) return false;
    const npw::LanguageModel lm = workbench_.model();
    const studio::CalibrationSettings calibration = settings_.calibration;
    const studio::SelectionKnobs knobs = knobs_;
    const bool started = jobs_.startWithPartials<int, npw::SweepRow>(
        tr("Sweep"),
        [=](const npw::ProgressFn& progress, const PartialResults<npw::SweepRow>& rowsSoFar) {
            npw::SweepSpec spec;
            for (const QString& m : request.methods) spec.methods.push_back(m.toStdString());
            spec.ratios = request.ratios;
            spec.calibSamples = request.calibSamples.empty() ? std::vector<int64_t>{calibration.samples}
                                                             : request.calibSamples;
            spec.calibSeqlens.clear();
            // Capped at the model's context by the workbench's rule (the rows record the length used).
            spec.calibSeqlens = request.calibSeqlens.empty() ? std::vector<int64_t>{calibration.seqlen} : request.calibSeqlens;
            // The sweep page's λ list is absolute (an ablation axis); without one, the knob's λ_rel.
            spec.lambdas = request.lambdas.empty() ? std::vector<double>{std::numeric_limits<double>::quiet_NaN()}
                                                   : request.lambdas;
            spec.lambdaRel = knobs.lambda;
            spec.seeds = request.seeds;
            const npw::CalibrationRequest source = calibrationRequest(calibration);
            npw::setSweepCalibrationPool(spec, npw::readCalibrationPool(lm, source.source, source.sourceIsIds, false));
            const std::vector<std::string> evalPaths = request.evalSources.empty()
                                                           ? std::vector<std::string>{studio::defaultEvaluationSource()}
                                                           : request.evalSources;
            for (const std::string& evalPath : evalPaths) {
                if (const auto dataset = npw::parseTextDatasetRef(evalPath)) {
                    spec.evalSets.push_back(npw::datasetEvalSet(*dataset, lm, request.evalSeqlen));
                    continue;
                }
                npw::SweepEvalSet eval;
                eval.name = QFileInfo(qs(evalPath)).completeBaseName().toStdString();
                eval.isText = true;
                eval.ids = lm.encode(npw::readTextFile(evalPath), true);
                spec.evalSets.push_back(std::move(eval));
            }
            if (!request.zeroShotTask.empty())
                spec.zeroShotTasks = npw::loadZeroShotTasks(request.zeroShotTask, request.zeroShotLimit);
            spec.measureSpeed = request.measureSpeed;
            spec.speedPromptTokens = spec.speedDecodeTokens = request.speedTokens;
            spec.speedRepeats = request.speedRepeats;
            spec.evalSeqlen = request.evalSeqlen;
            spec.evalMaxWindows = request.evalMaxWindows;
            spec.alphaMode = knobs.mode;
            spec.alpha = knobs.alpha;
            // Each row as it is ready: the plot grows while the sweep runs.
            const auto rows = npw::runSweep(lm, spec, rowsSoFar.callback(), progress);
            return static_cast<int>(rows.size());
        },
        [this](npw::SweepRow row) { addSweepRow(std::move(row)); },
        [this](int rows) { emit logMessage(tr("Sweep: %1 rows.").arg(rows)); });
    if (started) {
        sweepRows_.clear();
        emit sweepCleared();
    }
    return started;
}

void StudioSession::addSweepRow(npw::SweepRow row) {
    sweepRows_.push_back(row);
    if (row.isSpeedRow())
        emit logMessage(tr("%1 at ρ = %2: decode %3 tokens/s, prefill %4 tokens/s, weights %5 MiB, KV cache %6 MiB")
                            .arg(qs(row.method))
                            .arg(row.ratio)
                            .arg(row.decodeTokensPerSecond, 0, 'f', 0)
                            .arg(row.prefillTokensPerSecond, 0, 'f', 0)
                            .arg(row.weightsMiB, 0, 'f', 2)
                            .arg(row.kvCacheMiB, 0, 'f', 3));
    else if (std::isfinite(row.acc))
        emit logMessage(tr("%1 at ρ = %2: %3 accuracy %4 (%5 items)")
                            .arg(qs(row.method))
                            .arg(row.ratio)
                            .arg(qs(row.evalSet))
                            .arg(row.acc, 0, 'f', 3)
                            .arg(row.evalTokens));
    else
        emit logMessage(tr("%1 at ρ = %2: %3% of attention + MLP removed, perplexity %4")
                            .arg(qs(row.method))
                            .arg(row.ratio)
                            .arg(100 * row.achievedRatio, 0, 'f', 1)
                            .arg(row.ppl, 0, 'f', 2));
    emit sweepRowAvailable(sweepRows_.back());
}

bool StudioSession::exportPrunedModel(const QString& dir) {
    if (!view_ || !selected_) return false;
    if (selected_->baseline) return exportBaseline(dir);
    if (!workbench_.isCalibrated()) return false;
    const npw::PruneSettings settings = settings_.prune;  // compensation and damp
    const auto model = workbench_.model().model;
    const auto stats = workbench_.calibration().stats;
    const npw::WorkbenchSelection selection = *selected_;
    const npw::CalibrationSummary calibration = workbench_.calibration().summary;
    const std::string target = dir.toStdString(), source = modelRef_.toStdString();
    return jobs_.start<QString>(
        tr("Export pruned model"),
        [=](const npw::ProgressFn& progress) {
            npw::checkExportTarget(model->checkpoint().source, target);
            // The same selection, application and report as `npw prune` (the core workbench).
            const npw::WorkbenchPrune run =
                npw::LanguagePruningWorkbench::applySelection(*model, *stats, selection, settings, progress);
            const npw::PruneReport& report = run.report;
            npw::reportProgress(progress, "write", 0, 1);
            npw::savePrunedModel(run.pruned.checkpoint, target,
                                 npw::pruneManifestJson(report, run.settings, calibration, source));
            return QObject::tr("Exported %1 → %2 parameters to %3")
                .arg(report.paramsBefore)
                .arg(report.paramsAfter)
                .arg(qs(target));
        },
        [this](QString message) { emit logMessage(message); });
}

bool StudioSession::exportBaseline(const QString& dir) {
    const auto model = workbench_.model().model;
    const npw::WorkbenchSelection selection = *selected_;
    const npw::CalibrationSummary calibration = workbench_.calibration().summary;
    const std::string target = dir.toStdString(), source = modelRef_.toStdString();
    return jobs_.start<QString>(
        tr("Export %1 model").arg(qs(selection.method)),
        [=](const npw::ProgressFn& progress) {
            npw::checkExportTarget(model->checkpoint().source, target);
            // The kept scores at the selection's ρ in the method's own structure, written as
            // `npw prune --method …` writes it (a sliced model in npw's own format).
            const npw::BaselineRun run = npw::LanguagePruningWorkbench::applyBaseline(*model, selection, progress);
            npw::reportProgress(progress, "write", 0, 1);
            const std::string manifest = npw::baselineManifestJson(run, calibration, source);
            if (run.sliced) npw::saveSlicedModel(*run.sliced, target, manifest, model->checkpoint().source);
            else npw::savePrunedModel(run.pruned, target, manifest);
            return QObject::tr("Exported %1 (%2): %3 → %4 parameters to %5")
                .arg(qs(selection.method), qs(run.sliced ? npw::kSlicedModelFormat : "npw-pruned-model"))
                .arg(run.report.paramsBefore)
                .arg(run.report.paramsAfter)
                .arg(qs(target));
        },
        [this](QString message) { emit logMessage(message); });
}

void StudioSession::exportSweepCsv(const QString& path) const {
    if (hasModel()) npw::checkOutputPath({workbench_.model().model->checkpoint().source}, path.toStdString(), "the sweep CSV");
    npw::writeTextAtomically(path.toStdString(), npw::sweepRowsCsv(sweepRows_));
}

void StudioSession::saveWorkspace(const QString& path, const nlohmann::json& images, const std::string& imageSource,
                                  const nlohmann::json& text) const {
    if (!hasModel() && images.is_null()) throw npw::Error("no model is open: nothing to save");
    // Both files are checked before either is written: a refused path leaves nothing behind.
    std::vector<std::string> sources;
    if (hasModel()) sources.push_back(workbench_.model().model->checkpoint().source);
    if (!imageSource.empty()) sources.push_back(imageSource);
    if (!sources.empty()) {
        npw::checkOutputPath(sources, path.toStdString(), "the workspace");
        npw::checkOutputPath(sources, studio::workspaceStatsPath(path.toStdString()), "the workspace's statistics");
    }
    studio::WorkspaceFile w;
    w.images = images;
    w.text = text;
    if (!hasModel()) {
        studio::writeWorkspace(path.toStdString(), w, nullptr);
        return;
    }
    w.model = modelRef_.toStdString();
    w.device = device_.toStdString();
    w.calibration = statsCalibration_ ? *statsCalibration_ : settings_.calibration;
    w.prune = settings_.prune;
    w.knobs = knobs_;
    for (const std::string& m : workbench_.scoreSetNames()) w.scored.push_back(workbench_.requestOf(m));
    if (settings_.baseline) w.runBaseline = settings_.scoreRequest();
    w.currentMethod = current_.toStdString();
    if (workbench_.isCalibrated()) w.statsCalibration = workbench_.calibration().summary;
    if (view_) w.mask = studio::maskToJson(view_->selection.mask);
    w.sweepRows = sweepRows_;
    studio::writeWorkspace(path.toStdString(), w, workbench_.calibration().stats.get());
}

bool StudioSession::openWorkspace(const QString& path) {
    const std::string file = path.toStdString();
    return jobs_.start<Restored>(
        tr("Open workspace %1").arg(QFileInfo(path).fileName()),
        [file](const npw::ProgressFn& progress) {
            Restored r;
            r.file = studio::readWorkspace(file);
            if (r.file.model.empty()) return r;  // only the Images tab's part
            r.model = npw::openLanguageModel(r.file.model, npw::chooseRuntime(r.file.device));
            if (r.file.statsCalibration) {
                std::map<std::string, std::string> metadata;
                r.calibration.stats = std::make_shared<const npw::ModelStats>(
                    npw::loadModelStats(studio::workspaceStatsPath(file), r.model.model->config().num_layers, &metadata));
                r.calibration.summary = *r.file.statsCalibration;
                // The scores are recomputed from the statistics (deterministic), not stored; the
                // baselines' from the windows, drawn again from the same calibration settings.
                for (const npw::ScoreRequest& s : r.file.scored) {
                    if (s.baseline && !r.calibration.windows)
                        r.calibration.windows = std::make_shared<const npw::CalibrationSet>(
                            npw::buildCalibrationSet(r.model, calibrationRequest(r.file.calibration)));
                    r.scoreSets.push_back(npw::LanguagePruningWorkbench::score(r.model, r.calibration, s, progress));
                }
            }
            return r;
        },
        [this](Restored r) { applyRestored(std::move(r)); });
}

void StudioSession::applyRestored(Restored r) {
    // The Images tab's part first: its model opens as the next job, after this one.
    if (!r.file.images.is_null()) emit imageWorkspaceRestored(QByteArray::fromStdString(r.file.images.dump()));
    if (!r.file.text.is_null()) emit textWorkspaceRestored(QByteArray::fromStdString(r.file.text.dump()));
    if (r.file.model.empty()) return;
    workbench_ = npw::LanguagePruningWorkbench(std::move(r.model));
    modelRef_ = qs(r.file.model);
    device_ = qs(r.file.device);
    resetModelState();
    settings_.calibration = r.file.calibration;
    settings_.prune = r.file.prune;
    settings_.baseline = r.file.runBaseline ? r.file.runBaseline->baseline : std::nullopt;
    settings_.llmPrunerGlobal = r.file.runBaseline && r.file.runBaseline->baselineOptions.llmPrunerGlobal;
    knobs_ = r.file.knobs;
    emit modelChanged();
    emit settingsChanged();
    if (r.calibration.stats) {
        workbench_.setCalibration(std::move(r.calibration));
        statsCalibration_ = r.file.calibration;
    }
    for (npw::ComputedScores& s : r.scoreSets) {
        if (s.baseline)
            emit logMessage(tr("%1: recomputed from the calibration windows (%2 s).")
                                .arg(qs(npw::baselineMethodName(s.baseline->method)))
                                .arg(s.baseline->seconds, 0, 'f', 1));
        addScores(std::move(s));
    }
    const QString current = qs(r.file.currentMethod);
    if (workbench_.hasScores(current.toStdString())) current_ = current;
    reselect();
    if (view_ && !r.file.mask.is_null()) {
        // The model, statistics and scores are in place and consistent by now: a saved mask that
        // does not fit this model (an edited file, another checkpoint at that path) is reported,
        // not thrown, so the reopened session stays usable.
        try {
            const npw::Mask saved = studio::maskFromJson(r.file.mask, view_->selection.mask);
            const bool same = saved.keepHeads == view_->selection.mask.keepHeads &&
                              saved.keepChannels == view_->selection.mask.keepChannels;
            emit logMessage(same ? tr("Workspace reopened: the selection matches the saved mask.")
                                 : tr("Workspace reopened, but the recomputed selection differs from the saved mask."));
        } catch (const npw::Error& e) {
            emit logMessage(tr("Workspace reopened, but its saved mask does not fit %1: %2")
                                .arg(modelRef_, QString::fromUtf8(e.what())));
        }
    }
    for (const npw::SweepRow& row : r.file.sweepRows) {
        sweepRows_.push_back(row);
        emit sweepRowAvailable(row);
    }
}
