#pragma once
// A QDoubleSpinBox for values spanning decades (λ from 1e-4 to 1e4): shows a few significant
// digits ("0.001", "2.5e+03") instead of a fixed number of decimals, and steps by a factor.
#include <QDoubleSpinBox>

class ScientificSpinBox : public QDoubleSpinBox {
    Q_OBJECT
public:
    explicit ScientificSpinBox(QWidget* parent = nullptr);

    QString textFromValue(double value) const override;
    double valueFromText(const QString& text) const override;
    QValidator::State validate(QString& text, int& position) const override;
    // One step multiplies or divides by 10^(1/4) (four steps per decade).
    void stepBy(int steps) override;
};
