#pragma once
// The Sweep tab: the form of a perplexity sweep (methods, ratios, seeds, held-out texts, the
// ablation axes, zero-shot accuracy, speed and memory) and its plots, which grow as rows arrive:
// perplexity, and beside it zero-shot accuracy over speed and memory. Wires them to a
// StudioSession; the means over seeds and which rows form one curve come from core.
#include "app/studio/studiosession.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
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
    QCheckBox* speedBox() const { return speed_; }
    QLineEdit* methodsField() const { return methods_; }
    // Which road the open model's sweep takes and what that road does not offer.
    QLabel* roadLabel() const { return road_; }
    QLineEdit* evalTextsField() const { return evalTexts_; }
    // The form in the user's settings (the window's QSettings).
    void restoreSettings(const QSettings& settings);
    void saveSettings(QSettings& settings) const;

private:
    void redraw();
    // The open model's road: on the layer-wise road said above the plots, and the methods, the
    // zero-shot task and speed rows it cannot run are taken out of the form, the label saying why.
    void updateRoad();

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
    QLabel* road_;
    QString methodsTip_, speedTip_;  // the in-RAM road's tooltips
    SweepPlotWidget* sweepPlot_;
    SweepPlotWidget* accuracyPlot_;  // zero-shot accuracy, shown when a sweep has some
    SweepPlotWidget* speedPlot_;     // memory and speed (Figure 5), shown when a sweep has some
    QComboBox* speedShow_;
    QComboBox* pplShow_;  // perplexity relative to dense, or absolute on a log axis
    QWidget* speedPanel_;
    QSplitter* splitter_;  // perplexity | accuracy over speed
    bool sideColumnShown_ = false;
};
