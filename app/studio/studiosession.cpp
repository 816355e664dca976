#include "app/studio/studiosession.h"

#include <QPointer>

#include "core/models/sliced_llama.h"
#include "core/prune/slicegpt.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/front_end.h"
#include "core/util/number_text.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

} // namespace

StudioSession::StudioSession(QObject* parent) : QObject(parent) {
    // Core's refusals name the studio's remedies, not the command line's flags (front_end.h).
    npw::setFrontEnd(npw::FrontEnd::Studio);
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
    const bool calibrated = road_.layerwise ? layerwise_ != nullptr : workbench_.isCalibrated();
    return !calibrated || !statsCalibration_ || *statsCalibration_ != settings_.calibration;
}

QString StudioSession::pruneRoadText() const {
    if (!hasModel()) return {};
    if (road_.physicalBytes <= 0) return tr("in RAM (this machine's RAM is unknown)");
    const QString need = qs(npw::byteSizeText(road_.inRamBytes)), ram = qs(npw::byteSizeText(road_.physicalBytes));
    return road_.layerwise ? tr("layer by layer (%1 > ½ × %2 RAM)").arg(need, ram) : tr("in RAM (%1 ≤ ½ × %2 RAM)").arg(need, ram);
}

QString StudioSession::roadWhy() const {
    return tr("the model in float32 and its statistics in float64 would need %1, more than half of this machine's %2 of RAM")
        .arg(qs(npw::byteSizeText(road_.inRamBytes)), qs(npw::byteSizeText(road_.physicalBytes)));
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
    if (view_ && view_->method == current_.toStdString()) return view_->scores;
    return workbench_.computedScores(current_.toStdString());
}

void StudioSession::resetModelState() {
    workbench_ = npw::LanguagePruningWorkbench(workbench_.model());
    layerwise_.reset();  // its scratch file goes with it
    road_ = hasModel() ? npw::studioPruneRoad(workbench_.model().model->config()) : npw::PruneRoad{};
    statsCalibration_.reset();
    current_.clear();
    view_.reset();
    layerReports_.clear();
    ++reportGeneration_;
    sweepRows_.clear();
    unsaved_ = false;
    emit scoresChanged();
    emit sweepCleared();
}

bool StudioSession::openModel(const QString& reference, const QString& device) {
    const std::string ref = reference.toStdString(), dev = device.toStdString();
    using Headers = std::shared_ptr<const npw::LlamaCheckpoint>;
    QElapsedTimer startedAt;
    startedAt.start();
    const bool started = jobs_.startWithPartials<npw::LanguageModel, Headers>(
        tr("Open %1").arg(reference),
        [ref, dev](const npw::ProgressFn& progress, const PartialResults<Headers>& headers) {
            // The headers first (seconds at any size): the architecture shows while the weights,
            // mapped in the file's dtype, are checked one layer at a time.
            return npw::openLanguageModelInSteps(
                ref, npw::chooseRuntime(dev),
                [&headers](const npw::LlamaCheckpoint& ckpt) { headers.emitPartial(std::make_shared<const npw::LlamaCheckpoint>(ckpt)); },
                progress);
        },
        [this, reference, clock = std::make_shared<QElapsedTimer>(startedAt)](Headers headers) {
            openingHeaders_ = std::move(headers);
            openingRef_ = reference;
            emit logMessage(tr("%1: architecture read from the headers in %2 s; checking the weights, layer by layer…")
                                .arg(reference)
                                .arg(static_cast<double>(clock->elapsed()) / 1000.0, 0, 'f', 1));
            emit headersRead();
        },
        [this, reference, device](npw::LanguageModel lm) {
            openingHeaders_.reset();
            workbench_ = npw::LanguagePruningWorkbench(std::move(lm));
            // A calibration file chosen for another model is not this one's (its tokenizer, its
            // domain): the field starts empty, which the demo models read as their corpus.
            const bool otherModel = reference != modelRef_;
            if (otherModel && !settings_.calibration.source.empty()) {
                settings_.calibration.source.clear();
                settings_.calibration.sourceIsIds = false;
            }
            modelRef_ = reference;
            device_ = device;
            resetModelState();
            emit logMessage(tr("Opened %1 on %2: %3 layers, %4 parameters.")
                                .arg(reference, qs(workbench_.model().model->runtime().describe()))
                                .arg(workbench_.model().model->config().num_layers)
                                .arg(QLocale().toString(qlonglong(workbench_.model().model->config().parameterCount()))));
            if (road_.layerwise)
                emit logMessage(tr("Pruning this model runs layer by layer: %1. Run calibrates one block at a time "
                                   "into a scratch file in %2 and scores from it; Export writes the pruned model "
                                   "layer by layer from those statistics; the sweep writes and evaluates each pruned "
                                   "model layer by layer. The baselines, lstar-kl, and the sweep's zero-shot and "
                                   "speed rows need the whole model at once and are not offered here.")
                                    .arg(roadWhy(), QDir::tempPath()));
            emit modelChanged();
            if (otherModel) emit settingsChanged();
        });
    if (!started) return false;
    // A failed or cancelled open leaves the model that was open: its architecture again.
    // (runningChanged(false) comes just before a successful open's result: looked at after it.)
    connect(
        &jobs_, &JobRunner::runningChanged, this,
        [this](bool) {
            QMetaObject::invokeMethod(
                this,
                [this] {
                    if (!openingHeaders_) return;
                    openingHeaders_.reset();
                    emit modelChanged();
                },
                Qt::QueuedConnection);
        },
        Qt::SingleShotConnection);
    return true;
}

npw::ModelDefaults StudioSession::modelDefaults() const {
    return hasModel() ? npw::modelDefaults(modelRef_.toStdString()) : npw::ModelDefaults{};
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
    // Only the demo models have a calibration text of their own; on any other model an empty
    // field would calibrate on the demo's King James text without a word.
    if (calibrationStale() && settings_.calibration.source.empty() && !modelDefaults().demo) {
        emit refused(tr("Run"), tr("No calibration text: name one in the Run settings (a text file in the model's "
                                   "language and domain, a file of token ids, or wikitext2:FILE, ptb:FILE, c4:FILE). "
                                   "Only the demo models bring their own."));
        return false;
    }
    QStringList names;
    for (npw::ScoreRequest& request : list) {
        request = npw::scoredAtKnobs(request, knobs_);
        // Run is the studio's edge: its settings are validated here, once; the steps trust them.
        if (!request.baseline) {
            try {
                request.settings.validate();
            } catch (const npw::Error& e) {
                emit refused(tr("Run"), qs(std::string(e.what())));
                return false;
            }
        }
        names << qs(npw::scoreSetName(request));
    }
    if (road_.layerwise) return runLayerwiseScoring(list, names.join(QStringLiteral(", ")), keepCurrent);
    const bool stale = calibrationStale();
    const studio::CalibrationSettings calibration = settings_.calibration;
    const npw::LanguageModel lm = workbench_.model();
    const auto current = stale ? npw::LanguagePruningWorkbench::Calibration{} : workbench_.calibration();
    const QString method = names.join(QStringLiteral(", "));
    return jobs_.start<npw::ScoringResult>(
        stale ? tr("Calibrate and score %1").arg(method) : tr("Score %1").arg(method),
        [=](const npw::ProgressFn& progress) {
            // Smaller batches than core's default: a Cancel then waits for at most ~2k tokens.
            npw::CalibrationOptions options;
            options.batchTokens = 2048;
            return npw::calibrateAndScore(lm, current, calibration, list, progress, options);
        },
        [this, calibration, keepCurrent](npw::ScoringResult r) {
            if (r.recalibrated) {
                const std::string line = npw::calibrationLine(r.calibration.summary, r.calibration.note);
                workbench_.setCalibration(std::move(r.calibration));  // scores of other statistics go
                statsCalibration_ = calibration;
                emit logMessage(qs(line));
            }
            for (npw::ComputedScores& computed : r.scores) {
                if (computed.scores && computed.scores->settings.boxConstrained)
                    emit logMessage(qs(npw::boxSolveLine(*computed.scores)));
                addScores(std::move(computed));
            }
            if (!keepCurrent.isEmpty() && workbench_.hasScores(keepCurrent.toStdString()) && current_ != keepCurrent) {
                current_ = keepCurrent;
                emit scoresChanged();
                reselect();
            }
        });
}

namespace {

// What Run computes on the layer-wise road: the statistics (new, or the ones held) and the
// requests' score sets from them.
struct LayerwiseScoring {
    std::shared_ptr<const npw::LayerwiseStatistics> stats;
    bool recalibrated = false;
    std::vector<npw::ScoreSet> scores;
};

} // namespace

bool StudioSession::runLayerwiseScoring(const std::vector<npw::ScoreRequest>& list, const QString& method,
                                        const QString& keepCurrent) {
    // What needs the whole model at once is refused before anything runs, with the reason.
    for (const npw::ScoreRequest& request : list) {
        if (request.baseline) {
            emit refused(tr("Run"),
                         tr("%1 is not available on this model: it scores from whole-model passes over the calibration "
                            "windows (LLM-Pruner: gradients through every block; block influence and SliceGPT: every "
                            "block's input and output at once), and pruning this model runs layer by layer (%2).")
                             .arg(qs(npw::scoreSetName(request)), roadWhy()));
            return false;
        }
        if (request.settings.method == npw::PruneMethod::Numerical &&
            request.settings.crossLayer == npw::CrossLayerRanking::MeasuredDamage) {
            emit refused(tr("Run"), tr("Ranking lstar-kl measures each site's damage with 2L + 1 whole-model forward "
                                       "passes, which the layer-by-layer road does not make (%1); use the L*-relative "
                                       "ranking (the default).")
                                        .arg(roadWhy()));
            return false;
        }
    }
    const bool stale = calibrationStale();
    const studio::CalibrationSettings calibration = settings_.calibration;
    const npw::LanguageModel lm = workbench_.model();
    const auto held = stale ? nullptr : layerwise_;
    // The scratch file goes to the temporary folder (TMPDIR): a 7B's Gram triangles are 8.8 GB in
    // float32. A stale calibration's file is removed before the next one is made.
    if (stale) layerwise_.reset();
    return jobs_.start<LayerwiseScoring>(
        stale ? tr("Calibrate layer by layer and score %1").arg(method) : tr("Score %1").arg(method),
        [=](const npw::ProgressFn& progress) {
            LayerwiseScoring r;
            r.stats = held;
            if (!r.stats) {
                // As in RAM: small batches, so that a Cancel waits for ~2k tokens of one block.
                npw::CalibrationOptions options;
                options.batchTokens = 2048;
                r.stats = npw::LayerwiseStatistics::calibrate(lm, npw::calibrationRequest(calibration),
                                                              QDir::tempPath().toStdString(), progress, options);
                r.recalibrated = true;
            }
            for (const npw::ScoreRequest& request : list) r.scores.push_back(r.stats->score(*lm.model, request.settings, progress));
            return r;
        },
        [this, calibration, keepCurrent](LayerwiseScoring r) {
            if (r.recalibrated) {
                workbench_.setCalibration({});  // scores of other statistics go
                layerwise_ = r.stats;
                statsCalibration_ = calibration;
                emit logMessage(qs(npw::calibrationLine(r.stats->summary(), r.stats->note())));
                emit logMessage(qs(r.stats->describe()));
            }
            for (npw::ScoreSet& scores : r.scores) {
                if (scores.settings.boxConstrained) emit logMessage(qs(npw::boxSolveLine(scores)));
                npw::ComputedScores computed;
                computed.scores = std::move(scores);
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
    return qs(npw::recomputeReason(workbench_, current_.toStdString(), statsCalibration_, settings_.calibration, knobs_));
}

void StudioSession::addScores(npw::ComputedScores scores) {
    current_ = qs(workbench_.addScores(std::move(scores)));
    unsaved_ = true;
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
        return;
    }
    // The knob is λ_rel: numerical scores follow it in closed form (the workbench re-scores).
    npw::WorkbenchSelection selected =
        workbench_.select(current_.toStdString(), knobs_.rho, knobs_.alpha, knobs_.mode, knobs_.lambda);
    SelectionView v;
    v.unitName = qs(npw::attentionUnitLabel(workbench_.model().model->config(),
                                            selected.scores ? selected.scores->settings.attentionUnit
                                                            : npw::AttentionUnitKind::KvGroup));
    static_cast<npw::WorkbenchSelection&>(v) = std::move(selected);
    view_ = std::move(v);
    emit selectionChanged(*view_);
    startLayerReports();
}

void StudioSession::startLayerReports() {
    const quint64 generation = ++reportGeneration_;
    if (!view_ || !workbench_.isCalibrated() || view_->baseline) return;  // baselines: no losses
    const npw::PruneSettings settings = settings_.prune;  // compensation and damp
    const auto model = workbench_.model().model;
    const auto stats = workbench_.calibration().stats;
    const npw::WorkbenchSelection selection = *view_;
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

QStringList StudioSession::sweepMethodsRefused(const std::vector<std::string>& methods, QStringList* reasons) const {
    QStringList refused;
    if (!road_.layerwise) return refused;
    for (const std::string& method : methods) {
        if (!npw::sweepMethodNeedsWholeModel(method)) continue;
        refused << qs(method);
        npw::SweepSpec one;
        one.methods = {method};
        try {
            npw::refuseOnLayerwiseSweep(one, roadWhy().toStdString());
        } catch (const npw::Error& e) {
            if (reasons) *reasons << qs(e.what());
        }
    }
    return refused;
}

bool StudioSession::runSweep(const SweepRequest& asked) {
    if (!hasModel()) return false;
    if (road_.layerwise) {
        // What needs the whole model in memory is refused before anything runs, in core's words
        // (the reason `npw sweep` gives): the baselines, lstar-kl, zero-shot tasks, speed rows.
        npw::SweepSpec whatIsAsked;
        whatIsAsked.methods = asked.methods;
        whatIsAsked.measureSpeed = asked.measureSpeed;
        if (!asked.zeroShotTask.empty()) {
            npw::ZeroShotTask task;  // its name is enough to refuse it
            task.name = asked.zeroShotTask;
            whatIsAsked.zeroShotTasks.push_back(task);
        }
        try {
            npw::refuseOnLayerwiseSweep(whatIsAsked, roadWhy().toStdString());
        } catch (const npw::Error& e) {
            emit refused(tr("Sweep"), qs(e.what()));
            return false;
        }
    }
    // The Run settings' calibration, the Selection's λ_rel and α; the demo's held-out text
    // when the request names none.
    SweepRequest request = asked;
    request.calibration = npw::calibrationRequest(settings_.calibration);
    request.lambdaRel = knobs_.lambda;
    request.alphaMode = knobs_.mode;
    request.alpha = knobs_.alpha;
    if (request.evalSources.empty()) {
        const npw::ModelDefaults defaults = modelDefaults();
        if (!defaults.demo) {
            emit refused(tr("Sweep"), tr("No held-out text: name one or more in Eval texts (text files, or "
                                         "wikitext2:FILE, ptb:FILE, c4:FILE). Only the demo models bring their own."));
            return false;
        }
        request.evalSources = {"text:" + defaults.evaluationSource};
    }
    if (settings_.calibration.source.empty() && !modelDefaults().demo) {
        emit refused(tr("Sweep"), tr("No calibration text: name one in the Run settings. Only the demo models bring "
                                     "their own."));
        return false;
    }
    sweepEvalSources_ = request.evalSources;
    const npw::LanguageModel lm = workbench_.model();
    const bool layerwise = road_.layerwise;
    // Layer by layer: the statistics and one pruned model at a time in a work folder in the
    // temporary folder (TMPDIR), removed when the sweep ends, fails or is cancelled.
    const std::string workParent = QDir::tempPath().toStdString();
    const bool started = jobs_.startWithPartials<int, npw::SweepRow>(
        layerwise ? tr("Sweep layer by layer") : tr("Sweep"),
        [lm, request, layerwise, workParent, self = QPointer<StudioSession>(this)](
            const npw::ProgressFn& progress, const PartialResults<npw::SweepRow>& rowsSoFar) {
            std::vector<std::string> warnings;
            const npw::SweepSpec spec = npw::buildSweepSpec(lm, request, &warnings);
            // Said in the log before the rows (a reused short calibration text, an evaluation text
            // that is the calibration's), as `npw sweep` says them on stderr.
            for (const std::string& w : warnings)
                QMetaObject::invokeMethod(
                    self, [self, w] { if (self) emit self->logMessage(tr("Warning: %1").arg(qs(w))); }, Qt::QueuedConnection);
            // Each row as it is ready: the plot grows while the sweep runs.
            if (!layerwise) return static_cast<int>(npw::runSweep(lm, spec, rowsSoFar.callback(), progress).size());
            // `npw sweep`'s layer-by-layer road, with its options: calibrate into a scratch file,
            // score from it, write each pruned model layer by layer and evaluate it one block at a time.
            npw::LayerwiseSweepOptions options;
            options.workDir = npw::layerwiseSweepWorkDir(workParent);
            return static_cast<int>(npw::runSweepLayerwise(lm, spec, options, rowsSoFar.callback(), progress).size());
        },
        [this](npw::SweepRow row) { addSweepRow(std::move(row)); },
        [this](int rows) { emit logMessage(tr("Sweep: %1 rows.").arg(rows)); });
    if (started) {
        sweepRows_.clear();
        emit sweepCleared();
        if (layerwise)
            emit logMessage(tr("Sweeping layer by layer (%1): each pruned model is written to a work folder in %2 "
                               "and evaluated one block at a time.")
                                .arg(roadWhy(), qs(workParent)));
    }
    return started;
}

void StudioSession::addSweepRow(npw::SweepRow row) {
    sweepRows_.push_back(std::move(row));
    unsaved_ = true;
    emit logMessage(qs(npw::sweepRowSummary(sweepRows_.back())));
    emit sweepRowAvailable(sweepRows_.back());
}

bool StudioSession::exportPrunedModel(const QString& dir) {
    if (!view_) return false;
    if (view_->baseline) return exportBaseline(dir);
    // The export compensates with the Run settings as they are now, which no Run may have seen:
    // their compensation part is validated here, at this edge (the apply step does not again).
    try {
        static_cast<const npw::CompensationSettings&>(settings_.prune).validate();
    } catch (const npw::Error& e) {
        emit refused(tr("Export"), qs(e.what()));
        return false;
    }
    if (road_.layerwise) return exportLayerwise(dir);
    if (!workbench_.isCalibrated()) return false;
    const npw::PruneSettings settings = settings_.prune;  // compensation and damp
    const auto model = workbench_.model().model;
    const auto stats = workbench_.calibration().stats;
    const npw::WorkbenchSelection selection = *view_;
    const npw::CalibrationSummary calibration = workbench_.calibration().summary;
    const std::string target = dir.toStdString(), source = modelRef_.toStdString();
    const npw::OutputGuard guard = outputGuard();
    return jobs_.start<QString>(
        tr("Export pruned model"),
        [=](const npw::ProgressFn& progress) {
            guard.check(target, "the export");
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
        [this](const QString& message) { emit logMessage(message); });
}

bool StudioSession::exportLayerwise(const QString& dir) {
    if (!layerwise_) return false;
    const npw::PruneSettings settings = settings_.prune;  // compensation and damp
    const auto model = workbench_.model().model;
    const auto stats = layerwise_;  // the job holds the scratch file open while it writes
    const npw::WorkbenchSelection selection = *view_;
    const std::string target = dir.toStdString(), source = modelRef_.toStdString();
    const npw::OutputGuard guard = outputGuard();
    // The per-layer losses come with the export on this road (each layer's report as it is
    // compensated): shown when the knobs have not moved since (reportGeneration_).
    const quint64 generation = reportGeneration_;
    struct Exported {
        QString message;
        std::vector<npw::LayerPruneReport> layers;
    };
    return jobs_.start<Exported>(
        tr("Export pruned model (layer by layer)"),
        [=](const npw::ProgressFn& progress) {
            guard.check(target, "the export");
            npw::checkExportTarget(model->checkpoint().source, target);
            // `npw prune --layerwise`'s apply+write pass on the statistics and selection held here:
            // one layer at a time from the mapped checkpoint, in its dtype.
            const npw::LayerwiseExport run = stats->exportSelection(*model, selection, settings, target, source, progress);
            return Exported{QObject::tr("Exported %1 → %2 parameters to %3, layer by layer (%4 written in %5 s)")
                                .arg(run.report.paramsBefore)
                                .arg(run.report.paramsAfter)
                                .arg(qs(target), qs(npw::byteSizeText(run.bytesWritten)))
                                .arg(run.seconds, 0, 'f', 1),
                            run.report.layers};
        },
        [this, generation](Exported exported) {
            emit logMessage(exported.message);
            if (generation != reportGeneration_) return;  // another mask is shown now
            layerReports_ = std::move(exported.layers);
            emit layerReportsAvailable(layerReports_);
        });
}

bool StudioSession::exportBaseline(const QString& dir) {
    const auto model = workbench_.model().model;
    const npw::WorkbenchSelection selection = *view_;
    const npw::CalibrationSummary calibration = workbench_.calibration().summary;
    const std::string target = dir.toStdString(), source = modelRef_.toStdString();
    const npw::OutputGuard guard = outputGuard();
    return jobs_.start<QString>(
        tr("Export %1 model").arg(qs(selection.method)),
        [=](const npw::ProgressFn& progress) {
            guard.check(target, "the export");
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
        [this](const QString& message) { emit logMessage(message); });
}

npw::OutputGuard StudioSession::outputGuard() const {
    npw::OutputGuard guard;
    if (hasModel()) guard.addModel(workbench_.model().model->checkpoint().source);
    if (layerwise_) guard.addInput(layerwise_->file(), "the statistics scratch file");  // read by the export
    guard.addInputSpec(npw::calibrationRequest(settings_.calibration).source, "the calibration text");
    if (workbench_.isCalibrated()) guard.addInputSpec(workbench_.calibration().summary.source, "the calibration text");
    for (const std::string& e : sweepEvalSources_) guard.addInputSpec(e, "the evaluation text");
    return guard;
}

void StudioSession::exportSweepCsv(const QString& path) const {
    outputGuard().check(path.toStdString(), "the sweep CSV");
    npw::writeTextAtomically(path.toStdString(), npw::sweepRowsCsv(sweepRows_));
}

void StudioSession::saveWorkspace(const QString& path, const nlohmann::json& images, const std::string& imageSource,
                                  const nlohmann::json& text) const {
    if (!hasModel() && images.is_null()) throw npw::Error("no model is open: nothing to save");
    std::vector<std::string> sources;  // never written over
    if (hasModel()) sources.push_back(workbench_.model().model->checkpoint().source);
    if (!imageSource.empty()) sources.push_back(imageSource);
    npw::WorkspaceFile w;
    w.images = images;
    w.text = text;
    if (hasModel()) {
        w.model = modelRef_.toStdString();
        w.device = device_.toStdString();
        w.calibration = statsCalibration_ ? *statsCalibration_ : settings_.calibration;
        w.prune = settings_.prune;
        w.knobs = knobs_;
        for (const std::string& m : workbench_.scoreSetNames()) w.scored.push_back(workbench_.requestOf(m));
        if (settings_.baseline) w.runBaseline = settings_.scoreRequest();
        w.currentMethod = current_.toStdString();
        if (workbench_.isCalibrated()) w.statsCalibration = workbench_.calibration().summary;
        if (view_) w.mask = npw::maskToJson(view_->selection.mask);
        w.sweepRows = sweepRows_;
    }
    // The calibration and evaluation texts too (the models are checked in writeWorkspace).
    const npw::OutputGuard guard = outputGuard();
    guard.check(path.toStdString(), "the workspace");
    guard.check(npw::workspaceStatsPath(path.toStdString()), "the workspace's statistics");
    npw::writeWorkspace(path.toStdString(), w, workbench_.calibration().stats.get(), sources);
    unsaved_ = false;
}

bool StudioSession::openWorkspace(const QString& path) {
    const std::string file = path.toStdString();
    return jobs_.start<npw::LoadedWorkspace>(
        tr("Open workspace %1").arg(QFileInfo(path).fileName()),
        [file](const npw::ProgressFn& progress) { return npw::loadWorkspace(file, progress); },
        [this](npw::LoadedWorkspace r) { applyRestored(std::move(r)); });
}

void StudioSession::applyRestored(npw::LoadedWorkspace r) {
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
            emit logMessage(npw::savedMaskMatches(r.file.mask, view_->selection.mask)
                                ? tr("Workspace reopened: the selection matches the saved mask.")
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
    unsaved_ = false;  // as saved
}
