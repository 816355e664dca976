#pragma once
// The Qt adapter of core's language workbench: one open model, its calibration statistics, the
// score sets computed so far (one per method, side by side), the selection knobs and what they
// select, sweep results; long work on a JobRunner, results as signals. Every number and every
// decision that needs no Qt is core's (LanguagePruningWorkbench, run_settings.h: the settings
// at the knobs and the recompute reason; sweep_request.h: a sweep's spec; workspace.h: the
// workspace file and its reopening); this class holds the state, starts the jobs, adopts their
// results on the GUI thread and hands views their data by value (SelectionView).
// The window wires widgets to it; the tests drive it directly.
#include "app/studio/jobrunner.h"
#include "app/studio/runsettings.h"
#include "core/models/language_model.h"
#include "core/prune/pruner.h"
#include "core/prune/score_view.h"
#include "core/experiments/language_workbench.h"
#include "core/experiments/layerwise_workbench.h"
#include "core/experiments/sweep.h"
#include "core/experiments/sweep_request.h"
#include "core/experiments/workspace.h"
#include "core/util/output_guard.h"

#include <QByteArray>
#include <QMap>
#include <QObject>
#include <QStringList>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

// What every score view shows for the current method and knobs: core's selection as the
// workbench made it (the score set's name, the mask and its counts, the per-unit scores at ρ and
// their label, a baseline's scores, native knob and sentence), and what the studio adds.
struct SelectionView : npw::WorkbenchSelection {
    QString unitName;  // "head", or "KV group" for GQA models
    // Whether the method has per-unit scores at all (SliceGPT has none), and whether they are one
    // per block (block influence: no per-layer histogram).
    bool perUnitScores() const { return !unitScores.empty(); }
    bool perBlockScores() const { return baseline && baseline->method == npw::BaselineMethod::BlockInfluence; }
};
Q_DECLARE_METATYPE(SelectionView)

// What a sweep in the window runs (core's; the session fills in the Run settings' calibration,
// the Selection's λ_rel and α, and the demo's New Testament when it names no evaluation set).
using SweepRequest = npw::SweepRequest;

class StudioSession : public QObject {
    Q_OBJECT
public:
    explicit StudioSession(QObject* parent = nullptr);
    ~StudioSession() override;

    JobRunner* jobs() { return &jobs_; }
    bool hasModel() const { return workbench_.hasModel(); }
    const npw::LanguageModel& model() const { return workbench_.model(); }
    // The core workbench this session adapts (calibration, score sets, selection, report).
    const npw::LanguagePruningWorkbench& workbench() const { return workbench_; }
    // The current selection as core made it (null before scores).
    const npw::WorkbenchSelection* workbenchSelection() const { return view_ ? &*view_ : nullptr; }
    QString modelReference() const { return modelRef_; }
    QString device() const { return device_; }
    // What the open model brings to empty fields (core's modelDefaults: the demo models' texts,
    // nothing for any other model).
    npw::ModelDefaults modelDefaults() const;

    studio::RunSettings settings() const { return settings_; }
    void setSettings(const studio::RunSettings& settings);
    // True when Run would need a new calibration (no statistics, or other calibration settings).
    bool calibrationStale() const;
    // How this model's pruning runs (core's rule, `npw prune`'s): in RAM, or layer by layer when
    // its float32 copy and statistics exceed half the RAM (a 7B on a workstation). Layer by
    // layer, Run calibrates one block at a time into a scratch file (layerwiseStatistics) and
    // scores from it; re-selection is as instant as in RAM; Export writes the selection layer by
    // layer from those statistics (`npw prune --layerwise`'s pass, exportPrunedModel); the
    // per-layer losses are not computed; the sweep runs layer by layer too (runSweep); the
    // baselines are refused with the reason.
    const npw::PruneRoad& pruneRoad() const { return road_; }
    QString pruneRoadText() const;  // "layer by layer (58.0 GiB > ½ × 23.5 GiB RAM)"
    const npw::LayerwiseStatistics* layerwiseStatistics() const { return layerwise_.get(); }
    // The checkpoint an open in progress has read the headers of (its architecture, shown before
    // its weights are checked); null when none.
    std::shared_ptr<const npw::LlamaCheckpoint> openingHeaders() const { return openingHeaders_; }
    QString openingReference() const { return openingRef_; }
    const npw::ModelStats* stats() const { return workbench_.calibration().stats.get(); }

    studio::SelectionKnobs knobs() const { return knobs_; }
    QStringList scoreMethods() const;  // in the order computed
    QString currentMethod() const { return current_; }
    const std::optional<SelectionView>& selection() const { return view_; }
    // The current method's scores at the current λ (null without scores).
    std::shared_ptr<const npw::ScoreSet> currentScores() const;
    // Every score set's selection at the current knobs, in the order computed (the Text page
    // continues each of them beside the dense model). npw::Error from a set that cannot select.
    std::vector<npw::WorkbenchSelection> selectionsAtKnobs();
    const std::vector<npw::LayerPruneReport>& layerReports() const { return layerReports_; }
    const std::vector<npw::SweepRow>& sweepRows() const { return sweepRows_; }

    // Long jobs; each returns false (and does nothing) while another job runs.
    bool openModel(const QString& reference, const QString& device = QStringLiteral("cpu"));
    bool runScoring();  // calibrates when stale, then scores the settings' method
    // What the views show no longer matches what was asked: other calibration settings than the
    // scores' statistics, or a box-constrained set whose ρ/λ moved (its z is solved per ρ and λ).
    // Empty when nothing needs a new solve; else a sentence for the window to show.
    QString recomputeReason() const;
    // Calibrates when stale and computes every score set shown again (box-constrained ones at the
    // knobs' ρ and λ); the current set stays current.
    bool recompute();
    // In RAM: runSweep; layer by layer: `npw sweep`'s layer-wise road (runSweepLayerwise), after
    // refusing (signal refused, core's reason) what it cannot run: the baselines, lstar-kl, a
    // zero-shot task, speed rows.
    bool runSweep(const SweepRequest& request);
    // Of `methods`, those this model's sweep cannot run (none in RAM), with core's reason for each.
    QStringList sweepMethodsRefused(const std::vector<std::string>& methods, QStringList* reasons = nullptr) const;
    // Why the layer-wise road: the bytes in RAM against the RAM (a sentence for that road's messages).
    QString roadWhy() const;
    bool exportPrunedModel(const QString& dir);
    bool openWorkspace(const QString& path);
    // Quick and synchronous; throw npw::Error naming the file. `images`: the Images tab's part
    // (ImageSession::workspaceState), null when none; a workspace needs a model in either.
    // `imageSource`: the image model's checkpoint path, never written over (as the language
    // model's). Nothing is written when a path is refused.
    void saveWorkspace(const QString& path, const nlohmann::json& images = nullptr,
                       const std::string& imageSource = {}, const nlohmann::json& text = nullptr) const;
    void exportSweepCsv(const QString& path) const;
    // Scores or sweep rows computed since the model or workspace was opened or last saved (the
    // window offers to save them before quitting).
    bool hasUnsavedResults() const { return unsaved_; }
    // Every file this session reads (the model, the Run settings' calibration text, the last
    // sweep's evaluation texts): what no output of the session may be (core/util/output_guard.h).
    npw::OutputGuard outputGuard() const;

public slots:
    // Re-scores in closed form when λ moved (numerical), re-selects, emits selectionChanged
    // and starts the per-layer losses for the new mask.
    void setKnobs(const studio::SelectionKnobs& knobs);
    void setCurrentMethod(const QString& method);
    void cancel() { jobs_.cancel(); }

signals:
    void modelChanged();
    // An open's checkpoint headers are read (openingHeaders): its architecture can be shown while
    // the weights are checked.
    void headersRead();
    void settingsChanged();
    void scoresChanged();  // score sets added, replaced or cleared
    void selectionChanged(const SelectionView& view);
    // Per-layer reconstruction losses of the current mask (core's applyMask), a moment later.
    void layerReportsAvailable(const std::vector<npw::LayerPruneReport>& reports);
    void sweepCleared();
    // Each row as the sweep finishes it (JobRunner's typed channel), then kept in sweepRows().
    void sweepRowAvailable(const npw::SweepRow& row);
    void logMessage(const QString& text);
    // An action refused before it started (no calibration text for a model without defaults):
    // the window shows it as an error.
    void refused(const QString& what, const QString& message);
    // A reopened workspace's Images part (JSON text) for the Images tab to restore.
    void imageWorkspaceRestored(const QByteArray& state);
    // A reopened workspace's Text part (JSON text): the Text tab's prompts and sampling.
    void textWorkspaceRestored(const QByteArray& state);

private:
    void resetModelState();
    bool runScoringFor(std::vector<npw::ScoreRequest> list, const QString& keepCurrent);
    bool runLayerwiseScoring(const std::vector<npw::ScoreRequest>& list, const QString& method, const QString& keepCurrent);
    void addScores(npw::ComputedScores scores);
    void reselect();
    void reselectOrThrow();
    void startLayerReports();
    bool exportBaseline(const QString& dir);  // a baseline's selection in its own structure
    bool exportLayerwise(const QString& dir);  // the selection written layer by layer from layerwise_
    void applyRestored(npw::LoadedWorkspace restored);
    void addSweepRow(npw::SweepRow row);  // a row from the sweep's partial-result channel

    JobRunner jobs_;
    // Model, statistics and score sets live in core; this class adds Qt: jobs, signals, and the
    // Run settings a calibration came from.
    npw::LanguagePruningWorkbench workbench_;
    npw::PruneRoad road_;
    // The layer-wise road's statistics (the Gram triangles in a scratch file, removed with it);
    // null in RAM (workbench_'s calibration holds them there).
    std::shared_ptr<const npw::LayerwiseStatistics> layerwise_;
    std::shared_ptr<const npw::LlamaCheckpoint> openingHeaders_;
    QString openingRef_;
    QString modelRef_, device_ = QStringLiteral("cpu");
    studio::RunSettings settings_;
    studio::SelectionKnobs knobs_;
    std::optional<studio::CalibrationSettings> statsCalibration_;  // what stats_ was computed from
    QString current_;
    std::optional<SelectionView> view_;  // core's selection of current_ at the knobs, and the studio's additions
    std::vector<npw::LayerPruneReport> layerReports_;
    std::atomic<quint64> reportGeneration_{0};  // stale loss results are dropped (read by the loss job)
    std::vector<npw::SweepRow> sweepRows_;
    std::vector<std::string> sweepEvalSources_;
    mutable bool unsaved_ = false;  // saveWorkspace (const: it changes no result) clears it  // the last sweep's --eval specs (outputGuard)
};
