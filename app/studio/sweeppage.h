#pragma once
// The Sweep tab: the form of a perplexity sweep (methods, ratios, seeds, held-out texts, the
// ablation axes, zero-shot accuracy, speed and memory) and its plots, which grow as rows arrive:
// perplexity, and beside it zero-shot accuracy over speed and memory. Wires them to a
// StudioSession; the means over seeds and which rows form one curve come from core.
#include "app/studio/studiosession.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLineEdit;
class QPushButton;
class QSettings;
class QSpinBox;
class QSplitter;
class SweepPlotWidget;

class SweepPage : public QWidget {
    Q_OBJECT
public:
    explicit SweepPage(StudioSession* session, QWidget* parent = nullptr);

    SweepPlotWidget* sweepPlot() const { return sweepPlot_; }
    SweepPlotWidget* accuracyPlot() const { return accuracyPlot_; }
    SweepPlotWidget* speedPlot() const { return speedPlot_; }

    // The sweep the form describes.
    SweepRequest sweepRequest() const;
    void setSweepRequest(const SweepRequest& request);
    bool runSweep() { return session_->runSweep(sweepRequest()); }
    // The perplexity plot as .png, .pdf or .svg by suffix.
    bool exportPlot(const QString& path);
    void setBusy(bool busy);  // Run sweep off while a job runs or no model is open
    // A newly opened model: the demo's held-out text as the hint and its zero-shot task offered
    // (ticked) for a demo model; for any other model the field asks for a text and the demo's
    // task is off.
    void setModelDefaults(const npw::ModelDefaults& defaults);
    QCheckBox* zeroShotBox() const { return zeroShot_; }
    QLineEdit* evalTextsField() const { return evalTexts_; }
    // The form in the user's settings (the window's QSettings).
    void restoreSettings(const QSettings& settings);
    void saveSettings(QSettings& settings) const;

private:
    void redraw();

    StudioSession* session_;
    QLineEdit* methods_;
    QLineEdit* ratios_;
    QSpinBox* seeds_;
    QLineEdit* evalTexts_;  // held-out texts, comma-separated
    QSpinBox* windows_;
    QLineEdit* samples_;  // ablation axes: empty = the Run settings / Selection value
    QLineEdit* seqlens_;
    QLineEdit* lambdas_;
    QCheckBox* zeroShot_;
    QCheckBox* speed_;
    QPushButton* run_;
    SweepPlotWidget* sweepPlot_;
    SweepPlotWidget* accuracyPlot_;  // zero-shot accuracy, shown when a sweep has some
    SweepPlotWidget* speedPlot_;     // memory and speed (Figure 5), shown when a sweep has some
    QComboBox* speedShow_;
    QComboBox* pplShow_;  // perplexity relative to dense, or absolute on a log axis
    QWidget* speedPanel_;
    QSplitter* splitter_;  // perplexity | accuracy over speed
    bool sideColumnShown_ = false;
};
