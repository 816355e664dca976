#pragma once
// The Scores tab: the Selection bar (score set, the knobs that only re-select, a summary), the
// Recompute line, and the score views of the current selection (head map, histogram, layer
// overview, per-layer table) around one LayerSelection. Wires them to a StudioSession; every
// number comes from core through it.
#include "app/studio/studiosession.h"

#include <QWidget>

class HeadMapWidget;
class LayerOverviewWidget;
class LayerReportTable;
class LayerSelection;
class QComboBox;
class QFrame;
class QLabel;
class QPushButton;
class ScoreHistogramWidget;
class SparsityControls;
class QStackedWidget;

class ScoresPage : public QWidget {
    Q_OBJECT
public:
    explicit ScoresPage(StudioSession* session, QWidget* parent = nullptr);

    LayerSelection* layerSelection() const { return layerSelection_; }
    SparsityControls* sparsityControls() const { return controls_; }
    QComboBox* methodSelector() const { return methodSelector_; }
    QLabel* summaryLabel() const { return summary_; }
    HeadMapWidget* headMap() const { return headMap_; }
    ScoreHistogramWidget* histogram() const { return histogram_; }
    LayerOverviewWidget* overview() const { return overview_; }
    LayerReportTable* layerTable() const { return layerTable_; }
    // The line that stands in for the views when a method has no per-unit scores (SliceGPT).
    QLabel* noScoresNote() const { return noScores_; }
    bool showsPerUnitViews() const;
    // No model open: a page that says what to open stands in for the (empty) views.
    bool showsEmptyState() const;
    QFrame* recomputeNotice() const { return recomputeNotice_; }
    QPushButton* recomputeButton() const { return recompute_; }
    bool recomputeOffered() const;  // the notice names a reason and Recompute can run

    // The Recompute line and its button follow the session (its reason, a job running).
    void updateRecomputeNotice();
    // The views together, as laid out on screen: .png, .pdf or .svg by suffix.
    bool exportPlot(const QString& path);

signals:
    void logMessage(const QString& text);
    // The empty state's buttons: the window opens the file dialog or the demo.
    void openModelRequested();
    void openDemoRequested(const QString& reference);

private:
    static constexpr int kEmptyState = 2;  // viewStack_: 0 the views, 1 noScores_, 2 the empty state
    QWidget* buildEmptyState();
    void showSelection(const SelectionView& view);
    void showKnobs(const studio::SelectionKnobs& knobs);  // the controls follow the session
    void onModelChanged();
    void onScoresChanged();
    void onControlsChanged(double rho, double alpha, npw::AlphaMode mode, double lambda);

    StudioSession* session_;
    LayerSelection* layerSelection_;
    QComboBox* methodSelector_;
    QLabel* methodLabel_;
    SparsityControls* controls_;
    QLabel* summary_;
    class QGroupBox* selectionBox_;
    QFrame* recomputeNotice_;  // "these views need a new solve" + Recompute
    QLabel* recomputeReason_;
    QLabel* recomputeIcon_;
    QPushButton* recompute_;
    HeadMapWidget* headMap_;
    ScoreHistogramWidget* histogram_;
    LayerOverviewWidget* overview_;
    LayerReportTable* layerTable_;
    QStackedWidget* viewStack_;  // the score views, or noScores_
    QLabel* noScores_;
    QString methodNote_;  // a baseline's sentence, shown in the notice line when it asks nothing
};
