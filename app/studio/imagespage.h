#pragma once
// The Images tab: dense and pruned samples of a class-conditional image model side by side
// (same classes, same seeds), and image metrics, speed and memory against sparsity. Wires the
// form and the views to an ImageSession; every number and pixel comes from core through it.
#include "app/studio/imagesession.h"

#include <QWidget>

class ImagePairWidget;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class ScientificSpinBox;
class SweepPlotWidget;

class ImagesPage : public QWidget {
    Q_OBJECT
public:
    explicit ImagesPage(ImageSession* session, QWidget* parent = nullptr);

    ImageSession* session() const { return session_; }
    ImagePairWidget* pair() const { return pair_; }
    SweepPlotWidget* plot() const { return plot_; }
    QComboBox* metricSelector() const { return metric_; }

    ImageCompareRequest compareRequest() const;
    void setCompareRequest(const ImageCompareRequest& request);
    ImageSweepRequest sweepRequest() const;
    void setSweepRequest(const ImageSweepRequest& request);

    // Opens the model in the model field (demo:c2i unless changed).
    bool openModel(const QString& reference);
    bool generate() { return session_->compare(compareRequest()); }
    bool runSweep() { return session_->runSweep(sweepRequest()); }
    bool saveComparison(const QString& path) const;
    // The metric plot as .png, .pdf or .svg by suffix.
    bool exportPlot(const QString& path);
    void setBusy(bool busy);  // buttons off while a job runs

signals:
    // A refused save or export (the window logs it and shows its error dialog).
    void errorOccurred(const QString& what, const QString& message);

private:
    void onModelChanged();
    void onComparison();
    void redrawPlot();

    ImageSession* session_;
    QLineEdit* model_;
    QPushButton* open_;
    QLabel* about_;
    QComboBox *method_, *classes_, *metric_;
    QDoubleSpinBox *ratio_, *cfg_;
    ScientificSpinBox* lambda_;
    QSpinBox *perClass_, *seed_, *zoom_, *calibPerClass_, *samples_;
    QPushButton *generate_, *save_, *sweepRun_, *exportModel_, *exportCsv_;
    QLineEdit *sweepMethods_, *sweepRatios_;
    QLabel* comparisonSummary_;
    ImagePairWidget* pair_;
    SweepPlotWidget* plot_;
};
