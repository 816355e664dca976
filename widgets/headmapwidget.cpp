#include "widgets/headmapwidget.h"

#include "core/prune/score_view.h"
#include "widgets/layerselection.h"
#include "widgets/plotstyle.h"
#include "widgets/prunedcellmarks.h"

#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

HeadMapWidget::HeadMapWidget(LayerSelection* selection, QWidget* parent)
    : QWidget(parent), selection_(selection), plot_(new QCustomPlot(this)), grid_(std::make_unique<npw::HeadGrid>()) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_);
    plot_->setMouseTracking(true);
    plot_->installEventFilter(this);

    QCPAxis* x = plot_->xAxis;
    QCPAxis* y = plot_->yAxis;
    x->setLabel(tr("layer"));
    y->setRangeReversed(true);  // unit 0 on top, read like a table
    for (QCPAxis* axis : {x, y}) {
        plotstyle::setIntegerTicks(*axis, 16);
        axis->grid()->setVisible(false);
    }

    map_ = new QCPColorMap(x, y);
    map_->setInterpolate(false);
    map_->setTightBoundary(false);
    map_->removeFromLegend();
    scale_ = new QCPColorScale(plot_);
    scale_->setType(QCPAxis::atRight);
    scale_->setBarWidth(12);
    scale_->setLabel(tr("unit score (higher = more important)"));
    // QCPColorMap clamps values beyond the data range to the end colours.
    map_->setColorScale(scale_);
    QCPColorGradient gradient = plotstyle::viridisGradient();
    gradient.setNanHandling(QCPColorGradient::nhTransparent);  // units a method does not score
    map_->setGradient(gradient);
    plot_->plotLayout()->addElement(0, 1, scale_);
    // The colour bar spans exactly the grid's height.
    auto* margins = new QCPMarginGroup(plot_);
    plot_->axisRect()->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
    scale_->setMarginGroup(QCP::msTop | QCP::msBottom, margins);

    marks_ = new PrunedCellMarks(x, y);
    marks_->setName(tr("pruned"));

    // A light frame on a dark halo: visible on every colour of the map.
    currentLayerHalo_ = new QCPItemRect(plot_);
    currentLayerFrame_ = new QCPItemRect(plot_);
    for (QCPItemRect* frame : {currentLayerHalo_, currentLayerFrame_}) {
        frame->setClipToAxisRect(false);
        frame->setVisible(false);
        frame->setBrush(Qt::NoBrush);
    }
    currentLayerHalo_->setPen(QPen(QColor(0, 0, 0, 150), 5));

    plotstyle::placeLegendAbovePlot(*plot_, 0);
    title_ = plotstyle::addTitle(*plot_, tr("Attention units"));

    connect(plot_, &QCustomPlot::mouseMove, this, &HeadMapWidget::onMouseMove);
    connect(plot_, &QCustomPlot::mousePress, this, &HeadMapWidget::onMousePress);
    connect(selection_, &LayerSelection::currentLayerChanged, this, &HeadMapWidget::showCurrentLayer);

    setMinimumSize(260, 150);
    restyle();
    updateTitle();
}

HeadMapWidget::~HeadMapWidget() = default;

void HeadMapWidget::setData(const std::vector<npw::LayerScores>& scores, const npw::Mask& mask) {
    auto grid = std::make_unique<npw::HeadGrid>(npw::headGrid(scores, mask));
    grid_ = std::move(grid);
    const int layers = layerCount();
    const int units = unitCount();

    QVector<QPointF> pruned;
    map_->data()->setSize(layers, units);
    map_->data()->setRange(QCPRange(0, std::max(layers - 1, 0)), QCPRange(0, std::max(units - 1, 0)));
    for (int l = 0; l < layers; ++l)
        for (int u = 0; u < units; ++u) {
            const size_t i = grid_->index(l, u);
            map_->data()->setCell(l, u, grid_->score[i]);
            if (grid_->state[i] == npw::HeadGrid::Cell::Pruned) pruned.push_back(QPointF(l, u));
        }
    marks_->setCells(std::move(pruned));
    // Colours span the bulk of the scores: one far outlier would otherwise paint every other
    // cell the same. Cells beyond take the end colours; the tooltip has the exact score.
    const npw::ValueRange range = npw::nonDegenerate(npw::robustRange(grid_->score));
    map_->setDataRange(QCPRange(range.lo, range.hi));
    plot_->xAxis->setRange(-0.5, std::max(layers, 1) - 0.5);
    plot_->yAxis->setRange(-0.5, std::max(units, 1) - 0.5);
    plotstyle::setIntegerTicks(*plot_->xAxis, layers);
    plotstyle::setIntegerTicks(*plot_->yAxis, units);
    updateTitle();
    showCurrentLayer(selection_->currentLayer());
}

void HeadMapWidget::setScoreLabel(const QString& label) {
    const QString text = label.isEmpty() ? tr("unit score (higher = more important)") : label;
    if (scale_->label() == text) return;
    scale_->setLabel(text);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void HeadMapWidget::setUnitName(const QString& name) {
    if (name == unitName_) return;  // the window sets it with every selection
    unitName_ = name;
    plot_->yAxis->setLabel(unitName_);
    updateTitle();
    plot_->replot();
}

int HeadMapWidget::layerCount() const { return static_cast<int>(grid_->layers); }
int HeadMapWidget::unitCount() const { return static_cast<int>(grid_->maxUnits); }
int64_t HeadMapWidget::prunedCellCount() const { return grid_->prunedCells; }
int64_t HeadMapWidget::keptCellCount() const { return grid_->keptCells; }

QPoint HeadMapWidget::cellCenter(int layer, int unit) const {
    const QPointF inPlot(plot_->xAxis->coordToPixel(layer), plot_->yAxis->coordToPixel(unit));
    return plot_->mapTo(this, inPlot.toPoint());
}

QString HeadMapWidget::cellToolTip(int layer, int unit) const {
    if (layer < 0 || unit < 0 || layer >= layerCount() || unit >= unitCount()) return {};
    const size_t i = grid_->index(layer, unit);
    if (grid_->state[i] == npw::HeadGrid::Cell::Absent) return {};
    const bool kept = grid_->state[i] == npw::HeadGrid::Cell::Kept;
    if (std::isnan(grid_->score[i]))
        return tr("Layer %1, %2 %3\nnot scored (outside the method's layers)\n%4")
            .arg(layer)
            .arg(unitName_)
            .arg(unit)
            .arg(kept ? tr("kept") : tr("pruned"));
    return tr("Layer %1, %2 %3\nscore %4\n%5")
        .arg(layer)
        .arg(unitName_)
        .arg(unit)
        .arg(grid_->score[i], 0, 'g', 6)
        .arg(kept ? tr("kept") : tr("pruned"));
}

QPoint HeadMapWidget::cellAt(const QPoint& plotPosition) const {
    if (!plot_->axisRect()->rect().contains(plotPosition)) return {-1, -1};
    const int layer = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(plotPosition.x())));
    const int unit = static_cast<int>(std::lround(plot_->yAxis->pixelToCoord(plotPosition.y())));
    if (layer < 0 || unit < 0 || layer >= layerCount() || unit >= unitCount()) return {-1, -1};
    return {layer, unit};
}

void HeadMapWidget::onMouseMove(QMouseEvent* event) {
    const QPoint cell = cellAt(event->position().toPoint());
    selection_->setHoveredUnit(cell.x(), cell.y());
    const QString text = cellToolTip(cell.x(), cell.y());
    if (text.isEmpty()) {
        QToolTip::hideText();
        return;
    }
    QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
}

void HeadMapWidget::onMousePress(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton) return;
    const QPoint cell = cellAt(event->position().toPoint());
    if (cell.x() >= 0) selection_->setCurrentLayer(cell.x());
}

void HeadMapWidget::showCurrentLayer(int layer) {
    const bool shown = layer >= 0 && layer < layerCount() && unitCount() > 0;
    for (QCPItemRect* frame : {currentLayerHalo_, currentLayerFrame_}) {
        frame->setVisible(shown);
        frame->topLeft->setCoords(layer - 0.5, -0.5);
        frame->bottomRight->setCoords(layer + 0.5, unitCount() - 0.5);
    }
    plot_->replot(QCustomPlot::rpQueuedReplot);  // merged with the other views' in one turn
}

void HeadMapWidget::updateTitle() {
    if (grid_->layers == 0) {
        title_->setText(tr("Attention units (no scores yet)"));
        return;
    }
    const int64_t total = grid_->keptCells + grid_->prunedCells;
    title_->setText(
        tr("Attention units per layer: %1 of %2 %3s pruned")
            .arg(QLocale().toString(qlonglong(grid_->prunedCells)), QLocale().toString(qlonglong(total)), unitName_));
}

void HeadMapWidget::restyle() {
    plotstyle::applyPalette(*plot_, palette());
    currentLayerFrame_->setPen(QPen(plotstyle::highlightColor(palette()), 2.5));
    plot_->yAxis->setLabel(unitName_);
    plot_->replot();
}

void HeadMapWidget::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange) restyle();
    QWidget::changeEvent(event);
}

bool HeadMapWidget::eventFilter(QObject* watched, QEvent* event) {
    if (watched == plot_ && event->type() == QEvent::Leave) selection_->clearHover();
    return QWidget::eventFilter(watched, event);
}
