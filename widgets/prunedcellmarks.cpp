#include "widgets/prunedcellmarks.h"

#include <algorithm>
#include <cmath>

PrunedCellMarks::PrunedCellMarks(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPAbstractPlottable(keyAxis, valueAxis) {
    setSelectable(QCP::stNone);
    setAntialiased(true);
}

void PrunedCellMarks::setCells(QVector<QPointF> cells) { cells_ = std::move(cells); }

double PrunedCellMarks::selectTest(const QPointF&, bool, QVariant*) const { return -1; }

QCPRange PrunedCellMarks::getKeyRange(bool& foundRange, QCP::SignDomain) const {
    foundRange = !cells_.isEmpty();
    if (!foundRange) return {};
    const auto [lo, hi] = std::minmax_element(cells_.begin(), cells_.end(),
                                              [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
    return {lo->x() - 0.5, hi->x() + 0.5};
}

QCPRange PrunedCellMarks::getValueRange(bool& foundRange, QCP::SignDomain, const QCPRange&) const {
    foundRange = !cells_.isEmpty();
    if (!foundRange) return {};
    const auto [lo, hi] = std::minmax_element(cells_.begin(), cells_.end(),
                                              [](const QPointF& a, const QPointF& b) { return a.y() < b.y(); });
    return {lo->y() - 0.5, hi->y() + 0.5};
}

void PrunedCellMarks::draw(QCPPainter* painter) {
    QCPAxis* keyAxis = mKeyAxis.data();
    QCPAxis* valueAxis = mValueAxis.data();
    if (!keyAxis || !valueAxis) return;
    applyDefaultAntialiasingHint(painter);
    for (const QPointF& c : cells_) {
        const QPointF a(keyAxis->coordToPixel(c.x() - 0.5), valueAxis->coordToPixel(c.y() - 0.5));
        const QPointF b(keyAxis->coordToPixel(c.x() + 0.5), valueAxis->coordToPixel(c.y() + 0.5));
        drawCross(painter, QRectF(a, b).normalized());
    }
}

void PrunedCellMarks::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
    // A cell of a low score (the usual pruned one) with its mark, as it looks on the map.
    const double side = std::min(rect.width(), rect.height());
    const QRectF cell(rect.center().x() - side / 2, rect.center().y() - side / 2, side, side);
    painter->setPen(Qt::NoPen);
    painter->setBrush(QColor(0x47, 0x2C, 0x7A));
    painter->drawRect(cell);
    drawCross(painter, cell);
}

void PrunedCellMarks::drawCross(QCPPainter* painter, const QRectF& cell) const {
    // A square cross centred in the cell (wide cells would stretch it into a bow tie); small
    // cells give it a bigger share of their side so that it stays visible.
    const double shortSide = std::min(cell.width(), cell.height());
    const double side = shortSide * (shortSide < 14 ? 0.8 : 0.6);
    const QRectF r(cell.center().x() - side / 2, cell.center().y() - side / 2, side, side);
    const double stroke = std::clamp(shortSide / 10.0, 1.0, 2.0);
    painter->setBrush(Qt::NoBrush);
    painter->setPen(QPen(QColor(0, 0, 0, 170), stroke + 2, Qt::SolidLine, Qt::RoundCap));
    painter->drawLine(r.topLeft(), r.bottomRight());
    painter->drawLine(r.bottomLeft(), r.topRight());
    painter->setPen(QPen(QColor(255, 255, 255, 235), stroke, Qt::SolidLine, Qt::RoundCap));
    painter->drawLine(r.topLeft(), r.bottomRight());
    painter->drawLine(r.bottomLeft(), r.topRight());
}
