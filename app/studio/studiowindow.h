#pragma once
// npw-studio's main window: wires the score views, the selection knobs, the run settings, the
// sweep plot and the log to one StudioSession, and the session's JobRunner to the progress bar
// and Cancel. Holds no pruning logic; every number it shows comes from core via the session.
#include "app/studio/studiosession.h"

#include <QMainWindow>

class ArchitecturePanel;
class HeadMapWidget;
class ImageSession;
class ImagesPage;
class LayerOverviewWidget;
class LayerReportTable;
class LayerSelection;
class QAction;
class QCheckBox;
class QComboBox;
class QFrame;
class QLabel;
class QLineEdit;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTabWidget;
class RunSettingsPanel;
class ScoreHistogramWidget;
class SparsityControls;
class SweepPlotWidget;

class StudioWindow : public QMainWindow {
    Q_OBJECT
public:
    // persistSettings: read and write QSettings (settings, layout, recent files); off for the
    // scripted demo and the tests, which must not depend on or change a user's settings.
    explicit StudioWindow(bool persistSettings = true, QWidget* parent = nullptr);
    ~StudioWindow() override;

    StudioSession* session() { return &session_; }
    LayerSelection* layerSelection() const { return layerSelection_; }
    SparsityControls* sparsityControls() const { return controls_; }
    HeadMapWidget* headMap() const { return headMap_; }
    ScoreHistogramWidget* histogram() const { return histogram_; }
    LayerOverviewWidget* overview() const { return overview_; }
    LayerReportTable* layerTable() const { return layerTable_; }
    SweepPlotWidget* sweepPlot() const { return sweepPlot_; }
    SweepPlotWidget* accuracyPlot() const { return accuracyPlot_; }
    SweepPlotWidget* speedPlot() const { return speedPlot_; }
    ArchitecturePanel* architecturePanel() const { return architecture_; }
    QFrame* recomputeNotice() const { return recomputeNotice_; }
    bool recomputeOffered() const;  // the notice names a reason and Recompute can run
    QPushButton* recomputeButton() const { return recompute_; }
    RunSettingsPanel* runSettings() const { return runSettings_; }
    QComboBox* methodSelector() const { return methodSelector_; }
    QLabel* summaryLabel() const { return summary_; }
    QProgressBar* progressBar() const { return progress_; }
    QPlainTextEdit* log() const { return log_; }
    ImagesPage* imagesPage() const { return imagesPage_; }
    ImageSession* imageSession() const { return imageSession_; }

    // The sweep the Sweep tab's form describes.
    SweepRequest sweepRequest() const;
    void setSweepRequest(const SweepRequest& request);
    void showTab(int index);  // 0 scores, 1 sweep, 2 images
    void setDark(bool dark);
    // Both tabs' state (npw::Error naming the file, or when no model is open in either).
    void saveWorkspace(const QString& path);
    // Writes the current tab's plots: .png, .pdf or .svg by suffix. False when it could not.
    bool exportPlot(const QString& path);

public slots:
    void openModel(const QString& reference);
    void appendLog(const QString& text);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildCentral();
    void buildDocks();
    void buildActions();
    void connectSession();
    void showSelection(const SelectionView& view);
    void showKnobs(const studio::SelectionKnobs& knobs);  // the controls follow the session
    void onModelChanged();
    void showArchitecture();  // of the current tab's model
    void onScoresChanged();
    void onSweepRow(const npw::SweepRow& row);
    void redrawSweep();
    void updateRunState();
    void updateRecomputeNotice();
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void restoreSettings();
    void saveSettings() const;
    // File dialogs behind the actions.
    void chooseModelFile();
    void chooseModelDirectory();
    void chooseWorkspaceToOpen();
    void chooseWorkspaceToSave();
    void chooseExportDir();
    void choosePlotFile();
    void chooseCsvFile();

    StudioSession session_;
    bool persist_;
    LayerSelection* layerSelection_;
    QTabWidget* tabs_;
    QComboBox* methodSelector_;
    QLabel* methodLabel_;
    SparsityControls* controls_;
    QLabel* summary_;
    HeadMapWidget* headMap_;
    ScoreHistogramWidget* histogram_;
    LayerOverviewWidget* overview_;
    LayerReportTable* layerTable_;
    SweepPlotWidget* sweepPlot_;
    SweepPlotWidget* accuracyPlot_;  // zero-shot accuracy, shown when a sweep has some
    QCheckBox* sweepZeroShot_;
    QFrame* recomputeNotice_;  // "these views need a new solve" + Recompute
    QLabel* recomputeReason_;
    QLabel* recomputeIcon_;
    QPushButton* recompute_;
    QCheckBox* sweepSpeed_;
    QLineEdit* sweepEval_;  // held-out texts, comma-separated
    SweepPlotWidget* speedPlot_;  // memory and speed (Figure 5), shown when a sweep has some
    QComboBox* speedShow_;
    QWidget* speedPanel_;
    QSplitter* sweepSplitter_;      // perplexity | accuracy over speed
    bool sideColumnShown_ = false;
    QLineEdit* sweepMethods_;
    QLineEdit* sweepRatios_;
    QSpinBox* sweepSeeds_;
    QSpinBox* sweepWindows_;
    QLineEdit* sweepSamples_;   // ablation axes: empty = the Run settings / Selection value
    QLineEdit* sweepSeqlens_;
    QLineEdit* sweepLambdas_;
    QPushButton* sweepRun_;
    ImageSession* imageSession_;
    ImagesPage* imagesPage_;
    ArchitecturePanel* architecture_;
    QComboBox* device_;
    RunSettingsPanel* runSettings_;
    QPlainTextEdit* log_;
    QLabel* stage_;
    QProgressBar* progress_;
    QLabel* eta_;
    QPushButton* cancel_;
    QMenu* recentMenu_;
    QAction* darkAction_;
    QStringList recent_;
};
