#include "widgets/plotstyle.h"

#include <algorithm>
#include <array>

namespace plotstyle {

namespace {

void styleAxis(QCPAxis* axis, const QPalette& palette) {
    const QColor text = palette.color(QPalette::Text);
    QColor line = text;
    line.setAlphaF(0.7);
    QColor grid = text;
    grid.setAlphaF(0.12);
    axis->setBasePen(QPen(line, 1));
    axis->setTickPen(QPen(line, 1));
    axis->setSubTickPen(QPen(line, 1));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::SolidLine));
    axis->grid()->setSubGridPen(QPen(grid, 1, Qt::DotLine));
    axis->grid()->setZeroLinePen(Qt::NoPen);
}

// `text` broken into lines at spaces so that each line is at most `room` pixels wide (a word
// longer than that stays whole).
QString breakIntoLines(const QString& text, const QFont& font, int room) {
    const QFontMetrics fm(font);
    if (room <= 0 || fm.horizontalAdvance(text) <= room) return text;
    QStringList lines;
    QString line;
    for (const QString& word : text.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
        const QString longer = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
        if (!line.isEmpty() && fm.horizontalAdvance(longer) > room) {
            lines << line;
            line = word;
        } else {
            line = longer;
        }
    }
    if (!line.isEmpty()) lines << line;
    return lines.join(QLatin1Char('\n'));
}

// The text an element was given, and the lines it was last broken into: a text set since (the
// widget's own, e.g. a new title) is the new whole text.
QString wholeText(QObject* owner, const QString& shown) {
    const QString broken = owner->property("npwBrokenText").toString();
    if (shown != broken || !owner->property("npwWholeText").isValid()) owner->setProperty("npwWholeText", shown);
    return owner->property("npwWholeText").toString();
}

void setBroken(QObject* owner, const QString& text) { owner->setProperty("npwBrokenText", text); }

// An axis's label broken into lines of at most `room` pixels, and its ticks thinned to what
// `room` holds without their labels touching (the widget's own tick count when there is room).
bool fitAxis(QCPAxis* axis, int room) {
    bool changed = false;
    if (!axis->label().isEmpty() || axis->property("npwWholeText").isValid()) {
        const QString whole = wholeText(axis, axis->label());
        const QString broken = breakIntoLines(whole, axis->labelFont(), room - 8);
        setBroken(axis, broken);
        if (broken != axis->label()) {
            axis->setLabel(broken);
            changed = true;
        }
    }
    QSharedPointer<QCPAxisTicker> ticker = axis->ticker();
    if (!ticker || !axis->visible() || !axis->tickLabels() || room <= 0) return changed;
    // A new ticker (the widget set one) brings its own tick count: remember it.
    const auto id = quintptr(ticker.data());
    if (axis->property("npwTicker").value<quintptr>() != id) {
        axis->setProperty("npwTicker", QVariant::fromValue(id));
        axis->setProperty("npwTickCount", ticker->tickCount());
    }
    const QFontMetrics fm(axis->tickLabelFont());
    int labelSize = fm.height();
    if (axis->orientation() == Qt::Horizontal) {
        labelSize = fm.horizontalAdvance(QStringLiteral("0.00"));
        for (const QString& label : axis->tickVectorLabels()) labelSize = std::max(labelSize, fm.horizontalAdvance(label));
    }
    const int fits = std::max(2, room / (labelSize + (axis->orientation() == Qt::Horizontal ? 16 : 10)));
    const int count = std::min(axis->property("npwTickCount").toInt(), fits);
    if (ticker->tickCount() != count) {
        ticker->setTickCount(count);
        changed = true;
    }
    return changed;
}

// Before each replot of a plot: the legend takes as many columns as fit its width, and each text
// longer than its room (the title, an axis label, the colour scale's label) breaks into lines,
// so that nothing is cut at a laptop's window size and every text is whole again when there is room.
void fitTexts(QCustomPlot& plot) {
    const int width = plot.viewport().width() - 12, height = plot.viewport().height() - 12;
    if (width <= 0 || height <= 0) return;
    bool changed = false;
    for (QCPLayoutElement* element : plot.plotLayout()->elements(true)) {
        if (auto* title = qobject_cast<QCPTextElement*>(element)) {
            const QString whole = wholeText(title, title->text());
            const QString broken = breakIntoLines(whole, title->font(), width);
            setBroken(title, broken);
            if (broken != title->text()) {
                title->setText(broken);
                changed = true;
            }
        } else if (auto* legend = qobject_cast<QCPLegend*>(element)) {
            // Columns first, each as wide as its widest item: the most columns whose widths fit.
            const int count = legend->itemCount();
            int columns = std::max(1, count);
            for (; columns > 1; --columns) {
                int total = legend->margins().left() + legend->margins().right();
                for (int c = 0; c < columns; ++c) {
                    int widest = 0;
                    for (int i = c; i < count; i += columns)
                        if (QCPAbstractLegendItem* item = legend->item(i))
                            widest = std::max(widest, item->minimumOuterSizeHint().width());
                    total += widest + (c > 0 ? legend->columnSpacing() : 0);
                }
                if (total <= width) break;
            }
            if (legend->wrap() != columns) {
                legend->setWrap(columns);
                changed = true;
            }
        } else if (auto* scale = qobject_cast<QCPColorScale*>(element)) {
            changed |= fitAxis(scale->axis(), scale->rect().height() > 0 ? scale->rect().height() : height);
        }
        if (auto* rect = qobject_cast<QCPAxisRect*>(element)) {
            for (QCPAxis* axis : rect->axes()) {
                const bool horizontal = axis->orientation() == Qt::Horizontal;
                const int room = horizontal ? (rect->width() > 0 ? rect->width() : width)
                                            : (rect->height() > 0 ? rect->height() : height);
                changed |= fitAxis(axis, room);
            }
        }
    }
    // The sizes above are of the last layout: when a text changed, draw once more with the new one.
    if (changed) plot.replot(QCustomPlot::rpQueuedReplot);
}

} // namespace

void fitTextsToSize(QCustomPlot& plot) {
    if (plot.property("npwFitsTexts").toBool()) return;
    plot.setProperty("npwFitsTexts", true);
    // The layout's own minimum is the texts' unbroken width: the plot may be narrower, and then
    // breaks them.
    plot.setMinimumSize(200, 120);
    QObject::connect(&plot, &QCustomPlot::beforeReplot, &plot, [&plot] { fitTexts(plot); });
}

bool isDark(const QPalette& palette) { return palette.color(QPalette::Base).lightness() < 128; }

QColor keptColor(const QPalette& palette) {
    return isDark(palette) ? QColor(0x56, 0xB4, 0xE9) : QColor(0x00, 0x72, 0xB2);
}

QColor prunedColor(const QPalette& palette) {
    return isDark(palette) ? QColor(0xF0, 0x8A, 0x3C) : QColor(0xD5, 0x5E, 0x00);
}

QColor thresholdColor(const QPalette& palette) { return palette.color(QPalette::Text); }

QColor highlightColor(const QPalette& palette) {
    return isDark(palette) ? QColor(0xF0, 0xE4, 0x42) : QColor(0xCC, 0x79, 0xA7).darker(130);
}

QColor seriesColor(int index, const QPalette& palette) {
    static const std::array<QColor, 7> light = {
        QColor(0x00, 0x72, 0xB2), QColor(0xD5, 0x5E, 0x00), QColor(0x00, 0x9E, 0x73), QColor(0xCC, 0x79, 0xA7),
        QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9), QColor(0x99, 0x99, 0x99)};
    static const std::array<QColor, 7> dark = {
        QColor(0x56, 0xB4, 0xE9), QColor(0xF0, 0x8A, 0x3C), QColor(0x2E, 0xC4, 0x9A), QColor(0xE0, 0x9C, 0xC4),
        QColor(0xF0, 0xE4, 0x42), QColor(0x9A, 0xD0, 0xF5), QColor(0xBB, 0xBB, 0xBB)};
    const auto& colors = isDark(palette) ? dark : light;
    return colors[static_cast<size_t>(index) % colors.size()];
}

QCPColorGradient viridisGradient() {
    QCPColorGradient gradient;
    gradient.clearColorStops();
    // Nine samples of matplotlib's viridis; linear RGB interpolation between them is close
    // enough for display.
    const std::array<QColor, 9> stops = {QColor(0x44, 0x01, 0x54), QColor(0x47, 0x2C, 0x7A), QColor(0x3B, 0x51, 0x8B),
                                         QColor(0x2C, 0x71, 0x8E), QColor(0x21, 0x90, 0x8D), QColor(0x27, 0xAD, 0x81),
                                         QColor(0x5C, 0xC8, 0x63), QColor(0xAA, 0xDC, 0x32), QColor(0xFD, 0xE7, 0x25)};
    for (size_t i = 0; i < stops.size(); ++i)
        gradient.setColorStopAt(static_cast<double>(i) / static_cast<double>(stops.size() - 1), stops[i]);
    gradient.setColorInterpolation(QCPColorGradient::ciRGB);
    gradient.setNanHandling(QCPColorGradient::nhTransparent);
    gradient.setLevelCount(256);
    return gradient;
}

void applyPalette(QCustomPlot& plot, const QPalette& palette) {
    const QColor text = palette.color(QPalette::Text);
    plot.setBackground(palette.brush(QPalette::Base));
    for (QCPLayoutElement* element : plot.plotLayout()->elements(true)) {
        if (auto* rect = qobject_cast<QCPAxisRect*>(element)) {
            rect->setBackground(Qt::NoBrush);
            for (QCPAxis* axis : rect->axes()) styleAxis(axis, palette);
        } else if (auto* scale = qobject_cast<QCPColorScale*>(element)) {
            styleAxis(scale->axis(), palette);
        } else if (auto* legend = qobject_cast<QCPLegend*>(element)) {
            legend->setTextColor(text);
            legend->setBrush(Qt::NoBrush);
            legend->setBorderPen(Qt::NoPen);
            legend->setIconBorderPen(Qt::NoPen);
        } else if (auto* title = qobject_cast<QCPTextElement*>(element)) {
            title->setTextColor(text);
        }
    }
}

QCPTextElement* addTitle(QCustomPlot& plot, const QString& text) {
    plot.plotLayout()->insertRow(0);
    QFont font = plot.font();
    font.setBold(true);
    auto* title = new QCPTextElement(&plot, text, font);
    plot.plotLayout()->addElement(0, 0, title);
    plot.plotLayout()->setRowStretchFactor(0, 0.001);
    return title;
}

void placeLegendAbovePlot(QCustomPlot& plot, int row) {
    plot.legend->setVisible(true);
    if (plot.axisRect()->insetLayout()->elements(false).contains(plot.legend))
        plot.axisRect()->insetLayout()->take(plot.legend);
    plot.plotLayout()->insertRow(row);
    // Empty cells on both sides take the spare width, so the entries sit together, centred.
    auto* legendRow = new QCPLayoutGrid;
    plot.plotLayout()->addElement(row, 0, legendRow);
    legendRow->addElement(0, 0, new QCPLayoutElement(&plot));
    legendRow->addElement(0, 1, plot.legend);
    legendRow->addElement(0, 2, new QCPLayoutElement(&plot));
    legendRow->setColumnStretchFactors({1, 0.001, 1});
    plot.legend->setFillOrder(QCPLegend::foColumnsFirst);
    fitTextsToSize(plot);  // the legend's columns follow the width
    plot.legend->setWrap(6);
    plot.legend->setMargins(QMargins(4, 0, 4, 0));
    plot.legend->setRowSpacing(0);
    plot.legend->setColumnSpacing(18);
    // The legend row takes only the height it needs.
    plot.plotLayout()->setRowStretchFactor(row, 0.001);
}

void styleLabel(QCPItemText& label, const QPalette& palette) {
    label.setColor(palette.color(QPalette::Text));
    QColor background = palette.color(QPalette::Base);
    background.setAlphaF(0.8);
    label.setBrush(background);
    label.setPen(Qt::NoPen);
}

void setIntegerTicks(QCPAxis& axis, int count) {
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(1);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    // At most 16 labels: QCustomPlot does not thin labels that overlap.
    ticker->setTickCount(std::clamp(count, 2, 16));
    axis.setTicker(ticker);
    axis.setSubTicks(false);
}

} // namespace plotstyle
