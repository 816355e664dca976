#pragma once
// The selection's knobs: ρ (how much to prune), α (head/channel balance of eq. 7) and how α is
// read, and λ (the numerical score's regularisation). Each is a slider beside a spin box that
// stay in step; ρ and λ re-score in closed form and α only re-selects (nothing is re-solved),
// so the receiver can follow every move. Holds values only; what they mean is core/prune/selection.h's and
// core/prune/numerical_score.h's.
#include "core/prune/select.h"

#include <QMetaType>
#include <QTimer>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QPushButton;
class QSlider;
class ScientificSpinBox;

Q_DECLARE_METATYPE(npw::AlphaMode)

class SparsityControls : public QWidget {
    Q_OBJECT
public:
    explicit SparsityControls(QWidget* parent = nullptr);

    static constexpr double kMaxRho = 0.95;

    double rho() const;
    double alpha() const;
    npw::AlphaMode alphaMode() const;
    double lambda() const;
    double defaultAlpha() const { return defaultAlpha_; }

public slots:
    void setRho(double rho);      // clamped to [0, kMaxRho]
    void setAlpha(double alpha);  // clamped to the α range
    void setAlphaMode(npw::AlphaMode mode);
    void setLambda(double lambda);  // clamped to the λ range
    // The model's α (npw::defaultAlpha: parameters of a unit / parameters of a channel);
    // the reset button returns to it. Widens the α range when it lies outside.
    void setDefaultAlpha(double alpha);
    void resetAlpha() { setAlpha(defaultAlpha_); }
    // Whether α, its reading and λ take part (a method that selects by ρ alone: off, greyed).
    void setAlphaAndLambdaEnabled(bool enabled);
    // Whether λ takes part: only the numerical score has one (FLAP, Wanda-sp, … ignore it).
    void setLambdaEnabled(bool enabled);
    bool lambdaEnabled() const;

signals:
    // After one or more settings changed: once per event-loop turn, with all four values, and
    // only when they differ from the last ones sent (dragging a slider sends each new position
    // once; a slider and its spin box moving together send once).
    void settingsChanged(double rho, double alpha, npw::AlphaMode mode, double lambda);

private:
    void scheduleSettingsChanged();
    void sendSettingsChanged();
    void updateDefaultButton();

    QSlider* rhoSlider_;
    QDoubleSpinBox* rhoSpin_;
    QSlider* alphaSlider_;
    ScientificSpinBox* alphaSpin_;
    QPushButton* alphaDefault_;
    QComboBox* alphaMode_;
    QSlider* lambdaSlider_;
    ScientificSpinBox* lambdaSpin_;
    QTimer sendTimer_;
    double defaultAlpha_ = 1.0;
    struct Sent {
        double rho, alpha;
        npw::AlphaMode mode;
        double lambda;
        bool operator==(const Sent& o) const {
            return rho == o.rho && alpha == o.alpha && mode == o.mode && lambda == o.lambda;
        }
    } lastSent_{};
};
