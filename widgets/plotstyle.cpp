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

} // namespace

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
