#include "widgets/scientificspinbox.h"

#include <QRegularExpression>
#include <algorithm>
#include <cmath>

ScientificSpinBox::ScientificSpinBox(QWidget* parent) : QDoubleSpinBox(parent) {
    // QDoubleSpinBox rounds values to `decimals`; keep enough for the smallest λ.
    setDecimals(12);
}

QString ScientificSpinBox::textFromValue(double value) const { return QString::number(value, 'g', 4); }

double ScientificSpinBox::valueFromText(const QString& text) const { return text.trimmed().toDouble(); }

QValidator::State ScientificSpinBox::validate(QString& text, int&) const {
    const QString t = text.trimmed();
    if (t.isEmpty()) return QValidator::Intermediate;
    bool ok = false;
    const double v = t.toDouble(&ok);
    if (ok) return v >= minimum() && v <= maximum() ? QValidator::Acceptable : QValidator::Intermediate;
    // Half-typed numbers such as "1e" or "2.": let the user go on.
    static const QRegularExpression partial(QStringLiteral("^[0-9]*\\.?[0-9]*([eE][+-]?[0-9]*)?$"));
    return partial.match(t).hasMatch() ? QValidator::Intermediate : QValidator::Invalid;
}

void ScientificSpinBox::stepBy(int steps) {
    const double factor = std::pow(10.0, 0.25 * steps);
    setValue(std::clamp(value() * factor, minimum(), maximum()));
    selectAll();
}
