#pragma once
// The settings a Run computes from: the calibration (source, samples, sequence length, seed)
// and the method (method, Newton steps T, dampening γ, compensation). λ, ρ and α are the
// selection knobs (SparsityControls): they need no new run. Holds values only.
#include "app/studio/runsettings.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

class RunSettingsPanel : public QWidget {
    Q_OBJECT
public:
    explicit RunSettingsPanel(QWidget* parent = nullptr);
    studio::RunSettings settings() const;
    void setSettings(const studio::RunSettings& settings);  // emits nothing
    // Says whether Run will calibrate again (other calibration settings, or none yet).
    void setCalibrationStale(bool stale, bool haveModel);
    void setBusy(bool busy);  // disables Run while a job runs
    // The open model's defaults: the demo's corpus as the calibration field's hint, or (any other
    // model) a hint that the field is required.
    void setModelDefaults(const npw::ModelDefaults& defaults);

signals:
    void settingsEdited(const studio::RunSettings& settings);
    void runRequested();

private:
    void browseSource();
    void emitEdited();
    void updateEnabled();

    QLineEdit* source_;
    QCheckBox* sourceIsIds_;
    QSpinBox* samples_;
    QSpinBox* seqlen_;
    QSpinBox* seed_;
    QComboBox* method_;
    QSpinBox* iters_;
    QDoubleSpinBox* damp_;
    QCheckBox* compensate_;
    QCheckBox* box_;
    QComboBox* ranking_;
    QLabel* status_;
    QPushButton* run_;
    bool busy_ = false;
    bool haveModel_ = false;
};
