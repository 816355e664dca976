#include "widgets/sparsitycontrols.h"

#include "widgets/scientificspinbox.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <algorithm>
#include <initializer_list>
#include <cmath>

namespace {

constexpr int kRhoSteps = 950;  // ρ in steps of 0.001 up to kMaxRho
constexpr int kLogSteps = 1000;

// Log-scale sliders: position 0 … kLogSteps spans [lo, hi] in equal ratios. Positions map to
// values with three significant digits, so that a dragged value reads as a round number.
double roundToSignificant(double value, int digits) {
    if (value == 0 || !std::isfinite(value)) return value;
    const double magnitude = std::pow(10.0, std::floor(std::log10(std::abs(value))) - (digits - 1));
    return std::round(value / magnitude) * magnitude;
}
double logSliderValue(int position, double lo, double hi) {
    return roundToSignificant(lo * std::pow(hi / lo, double(position) / kLogSteps), 3);
}
int logSliderPosition(double value, double lo, double hi) {
    return static_cast<int>(std::lround(kLogSteps * std::log(value / lo) / std::log(hi / lo)));
}

QSlider* makeSlider(int maximum, const QString& name) {
    auto* slider = new QSlider(Qt::Horizontal);
    slider->setRange(0, maximum);
    slider->setObjectName(name);
    slider->setMinimumWidth(160);
    return slider;
}

const char* kRhoHelp =
    QT_TRANSLATE_NOOP("SparsityControls",
                      "ρ, the pruning ratio: the fraction of attention + MLP parameters to remove.\n"
                      "In the paper reading of α (eq. 7) it counts units (heads and channels) instead;\n"
                      "the achieved parameter reduction is reported with the results.\n"
                      "Moving it re-scores in closed form and re-selects: nothing is re-solved.");
const char* kAlphaHelp =
    QT_TRANSLATE_NOOP("SparsityControls",
                      "α, the head/channel scaling factor of eq. 7: balances attention units against\n"
                      "MLP channels in the one global ranking.\n"
                      "Paper reading: unit scores are multiplied by α before ranking.\n"
                      "Budget reading: a unit weighs α channels in the parameter budget.\n"
                      "Default: parameters of one unit / parameters of one channel = (2g + 2)·D_h / 3.");
const char* kModeHelp = QT_TRANSLATE_NOOP("SparsityControls",
                                          "How α is read.\n"
                                          "Paper: eq. 7 as written; ρ counts units, α scales the unit scores.\n"
                                          "Budget: FLAP's code; ρ counts parameters, α is the weight of a unit.");
const char* kLambdaHelp =
    QT_TRANSLATE_NOOP("SparsityControls",
                      "λ_rel, the regularisation of the numerical score relative to the model: λ = λ_rel / median c\n"
                      "(c = 1ᵀA⁻¹1 per layer), the weight of ½λ(⟨1, z⟩ − r)² in the score's objective.\n"
                      "Closed form: a new λ re-scores at once, no re-solve. Small λ keeps each layer's\n"
                      "absolute error scale; large λ makes every layer's mean score 1 − ρ. With the default\n"
                      "ranking (lstar: across layers by Theorem 3's L*) it changes only the z shown.");

} // namespace

SparsityControls::SparsityControls(QWidget* parent) : QWidget(parent) {
    rhoSlider_ = makeSlider(kRhoSteps, QStringLiteral("rhoSlider"));
    rhoSpin_ = new QDoubleSpinBox;
    rhoSpin_->setObjectName(QStringLiteral("rhoSpinBox"));
    rhoSpin_->setRange(0, kMaxRho);
    rhoSpin_->setDecimals(3);
    rhoSpin_->setSingleStep(0.01);

    alphaSlider_ = makeSlider(kLogSteps, QStringLiteral("alphaSlider"));
    alphaSpin_ = new ScientificSpinBox;
    alphaSpin_->setObjectName(QStringLiteral("alphaSpinBox"));
    alphaSpin_->setRange(0.1, 1000);
    alphaDefault_ = new QPushButton(tr("Default"));
    alphaDefault_->setObjectName(QStringLiteral("alphaDefaultButton"));
    alphaMode_ = new QComboBox;
    alphaMode_->setObjectName(QStringLiteral("alphaModeComboBox"));
    alphaMode_->addItem(tr("paper (eq. 7): ρ counts units"), QVariant::fromValue(npw::AlphaMode::Paper));
    alphaMode_->addItem(tr("budget (FLAP): ρ counts parameters"), QVariant::fromValue(npw::AlphaMode::Budget));

    lambdaSlider_ = makeSlider(kLogSteps, QStringLiteral("lambdaSlider"));
    lambdaSpin_ = new ScientificSpinBox;
    lambdaSpin_->setObjectName(QStringLiteral("lambdaSpinBox"));
    lambdaSpin_->setRange(1e-4, 1e4);

    for (QAbstractSpinBox* spin : {static_cast<QAbstractSpinBox*>(rhoSpin_), static_cast<QAbstractSpinBox*>(alphaSpin_),
                                   static_cast<QAbstractSpinBox*>(lambdaSpin_)}) {
        spin->setKeyboardTracking(false);  // typed numbers count on Enter, not per keystroke
        spin->setMinimumWidth(90);
        spin->setAlignment(Qt::AlignRight);
    }

    auto* grid = new QGridLayout(this);
    grid->setColumnStretch(1, 1);
    // Tight rows: on a laptop's screen every pixel of height goes to the plots below.
    grid->setContentsMargins(0, 2, 0, 2);
    grid->setVerticalSpacing(2);
    auto addRow = [grid](int row, const QString& label, const char* help, QWidget* slider, QWidget* spin) {
        auto* name = new QLabel(label);
        name->setBuddy(spin);
        grid->addWidget(name, row, 0);
        grid->addWidget(slider, row, 1);
        grid->addWidget(spin, row, 2);
        for (QWidget* w : {static_cast<QWidget*>(name), slider, spin}) w->setToolTip(tr(help));
    };
    addRow(0, tr("ρ  pruning ratio"), kRhoHelp, rhoSlider_, rhoSpin_);
    addRow(1, tr("α  head/channel scale"), kAlphaHelp, alphaSlider_, alphaSpin_);
    grid->addWidget(alphaDefault_, 1, 3);
    auto* modeLabel = new QLabel(tr("α reading"));
    modeLabel->setBuddy(alphaMode_);
    modeLabel->setToolTip(tr(kModeHelp));
    alphaMode_->setToolTip(tr(kModeHelp));
    grid->addWidget(modeLabel, 2, 0);
    grid->addWidget(alphaMode_, 2, 1, 1, 3);
    addRow(3, tr("λ_rel  score regularisation"), kLambdaHelp, lambdaSlider_, lambdaSpin_);

    connect(rhoSlider_, &QSlider::valueChanged, this, [this](int position) {
        const QSignalBlocker block(rhoSpin_);
        rhoSpin_->setValue(double(position) / 1000.0);
        scheduleSettingsChanged();
    });
    connect(rhoSpin_, &QDoubleSpinBox::valueChanged, this, [this](double value) {
        const QSignalBlocker block(rhoSlider_);
        rhoSlider_->setValue(static_cast<int>(std::lround(value * 1000.0)));
        scheduleSettingsChanged();
    });
    connect(alphaSlider_, &QSlider::valueChanged, this, [this](int position) {
        const QSignalBlocker block(alphaSpin_);
        alphaSpin_->setValue(logSliderValue(position, alphaSpin_->minimum(), alphaSpin_->maximum()));
        updateDefaultButton();
        scheduleSettingsChanged();
    });
    connect(alphaSpin_, &QDoubleSpinBox::valueChanged, this, [this](double value) {
        const QSignalBlocker block(alphaSlider_);
        alphaSlider_->setValue(logSliderPosition(value, alphaSpin_->minimum(), alphaSpin_->maximum()));
        updateDefaultButton();
        scheduleSettingsChanged();
    });
    connect(lambdaSlider_, &QSlider::valueChanged, this, [this](int position) {
        const QSignalBlocker block(lambdaSpin_);
        lambdaSpin_->setValue(logSliderValue(position, lambdaSpin_->minimum(), lambdaSpin_->maximum()));
        scheduleSettingsChanged();
    });
    connect(lambdaSpin_, &QDoubleSpinBox::valueChanged, this, [this](double value) {
        const QSignalBlocker block(lambdaSlider_);
        lambdaSlider_->setValue(logSliderPosition(value, lambdaSpin_->minimum(), lambdaSpin_->maximum()));
        scheduleSettingsChanged();
    });
    connect(alphaMode_, &QComboBox::currentIndexChanged, this, &SparsityControls::scheduleSettingsChanged);
    connect(alphaDefault_, &QPushButton::clicked, this, &SparsityControls::resetAlpha);

    sendTimer_.setSingleShot(true);
    sendTimer_.setInterval(0);
    connect(&sendTimer_, &QTimer::timeout, this, &SparsityControls::sendSettingsChanged);

    {
        // Start values; nothing is sent for them.
        const QSignalBlocker b1(rhoSpin_), b2(alphaSpin_), b3(lambdaSpin_);
        rhoSpin_->setValue(0.2);
        alphaSpin_->setValue(defaultAlpha_);
        lambdaSpin_->setValue(1.0);
    }
    {
        const QSignalBlocker b1(rhoSlider_), b2(alphaSlider_), b3(lambdaSlider_);
        rhoSlider_->setValue(static_cast<int>(std::lround(rho() * 1000.0)));
        alphaSlider_->setValue(logSliderPosition(alpha(), alphaSpin_->minimum(), alphaSpin_->maximum()));
        lambdaSlider_->setValue(logSliderPosition(lambda(), lambdaSpin_->minimum(), lambdaSpin_->maximum()));
    }
    lastSent_ = {rho(), alpha(), alphaMode(), lambda()};
    updateDefaultButton();
}

double SparsityControls::rho() const { return rhoSpin_->value(); }
double SparsityControls::alpha() const { return alphaSpin_->value(); }
npw::AlphaMode SparsityControls::alphaMode() const { return alphaMode_->currentData().value<npw::AlphaMode>(); }
double SparsityControls::lambda() const { return lambdaSpin_->value(); }

void SparsityControls::setRho(double rho) { rhoSpin_->setValue(std::clamp(rho, 0.0, kMaxRho)); }
void SparsityControls::setAlpha(double alpha) { alphaSpin_->setValue(alpha); }
void SparsityControls::setLambda(double lambda) { lambdaSpin_->setValue(lambda); }

void SparsityControls::setAlphaMode(npw::AlphaMode mode) {
    alphaMode_->setCurrentIndex(alphaMode_->findData(QVariant::fromValue(mode)));
}

void SparsityControls::setDefaultAlpha(double alpha) {
    if (!(alpha > 0) || !std::isfinite(alpha)) return;
    defaultAlpha_ = alpha;
    if (alpha < alphaSpin_->minimum() || alpha > alphaSpin_->maximum()) {
        const double current = alphaSpin_->value();
        alphaSpin_->setRange(std::min(alphaSpin_->minimum(), alpha / 10), std::max(alphaSpin_->maximum(), alpha * 10));
        const QSignalBlocker block(alphaSlider_);
        alphaSlider_->setValue(logSliderPosition(current, alphaSpin_->minimum(), alphaSpin_->maximum()));
    }
    updateDefaultButton();
}

void SparsityControls::setAlphaAndLambdaEnabled(bool enabled) {
    for (QWidget* w : std::initializer_list<QWidget*>{alphaSlider_, alphaSpin_, alphaMode_, lambdaSlider_, lambdaSpin_})
        w->setEnabled(enabled);
    updateDefaultButton();  // enabled only with α, and away from the default
}

void SparsityControls::setLambdaEnabled(bool enabled) {
    lambdaSlider_->setEnabled(enabled);
    lambdaSpin_->setEnabled(enabled);
}

bool SparsityControls::lambdaEnabled() const { return lambdaSpin_->isEnabled(); }

void SparsityControls::updateDefaultButton() {
    // The spin box rounds to its decimals: compare with a relative tolerance.
    alphaDefault_->setEnabled(alphaSpin_->isEnabled() && std::abs(alpha() - defaultAlpha_) > 1e-9 * defaultAlpha_);
    alphaDefault_->setToolTip(tr("Set α to this model's default, %1: the parameters of one attention unit "
                                 "per parameter of one MLP channel")
                                  .arg(defaultAlpha_, 0, 'g', 5));
}

void SparsityControls::scheduleSettingsChanged() {
    if (!sendTimer_.isActive()) sendTimer_.start();
}

void SparsityControls::sendSettingsChanged() {
    const Sent now{rho(), alpha(), alphaMode(), lambda()};
    if (now == lastSent_) return;
    lastSent_ = now;
    emit settingsChanged(now.rho, now.alpha, now.mode, now.lambda);
}
