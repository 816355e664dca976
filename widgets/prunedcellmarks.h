#pragma once
// A QCustomPlot plottable that draws a cross over each pruned cell of a grid of unit-sized
// cells centred on integer coordinates (the head map's QCPColorMap cells). The cross has a
// dark halo under a light stroke so that it reads on every colour of the map; being a
// plottable, it gets a legend entry with the same mark as its icon.
#include <QPointF>
#include <QVector>
#include <qcustomplot.h>

class PrunedCellMarks : public QCPAbstractPlottable {
    Q_OBJECT
public:
    PrunedCellMarks(QCPAxis* keyAxis, QCPAxis* valueAxis);

    // Cell centres (key, value) to mark.
    void setCells(QVector<QPointF> cells);
    int cellCount() const { return static_cast<int>(cells_.size()); }

    double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;
    QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
    QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                           const QCPRange& inKeyRange = QCPRange()) const override;

protected:
    void draw(QCPPainter* painter) override;
    void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

private:
    void drawCross(QCPPainter* painter, const QRectF& cell) const;

    QVector<QPointF> cells_;
};
