#include "widgets/layeroverviewwidget.h"

#include "core/prune/score_view.h"
#include "widgets/layerselection.h"
#include "widgets/plotstyle.h"

#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

struct LayerOverviewWidget::Data {
    std::vector<npw::BoxQuantiles> boxes;
    std::vector<npw::LayerKeptCounts> kept;
    double threshold = std::nan("");
};

LayerOverviewWidget::LayerOverviewWidget(LayerSelection* selection, QWidget* parent)
    : QWidget(parent), selection_(selection), plot_(new QCustomPlot(this)), data_(std::make_unique<Data>()) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_);
    plot_->setMouseTracking(true);

    plotstyle::setIntegerTicks(*plot_->xAxis, 16);
    plot_->xAxis->grid()->setVisible(false);
    plot_->xAxis->setLabel(tr("layer"));
    plot_->yAxis->setLabel(tr("MLP channel score"));
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setLabel(tr("kept MLP channels"));
    plot_->yAxis2->grid()->setVisible(false);

    // Created first so that it lies under the bars and boxes.
    currentLayerBand_ = new QCPItemRect(plot_);
    currentLayerBand_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
    currentLayerBand_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
    currentLayerBand_->setVisible(false);

    keptBars_ = new QCPBars(plot_->xAxis, plot_->yAxis2);
    keptBars_->setName(tr("kept MLP channels (right axis)"));
    keptBars_->setWidth(0.8);
    boxes_ = new QCPStatisticalBox(plot_->xAxis, plot_->yAxis);
    boxes_->setName(tr("channel scores: quartiles, whiskers at 1.5 IQR"));
    boxes_->setWidth(0.5);
    boxes_->setWhiskerWidth(0.3);

    thresholdLine_ = new QCPItemStraightLine(plot_);
    // A graph without data: the threshold's legend entry (a label on the line would cover boxes).
    thresholdEntry_ = new QCPGraph(plot_->xAxis, plot_->yAxis);
    thresholdEntry_->removeFromLegend();

    plotstyle::placeLegendAbovePlot(*plot_, 0);
    title_ = plotstyle::addTitle(*plot_, tr("Layers (no scores yet)"));

    connect(plot_, &QCustomPlot::mouseMove, this, &LayerOverviewWidget::onMouseMove);
    connect(plot_, &QCustomPlot::mousePress, this, &LayerOverviewWidget::onMousePress);
    connect(selection_, &LayerSelection::currentLayerChanged, this, &LayerOverviewWidget::showCurrentLayer);
    setMinimumSize(260, 150);
    restyle();
}

LayerOverviewWidget::~LayerOverviewWidget() = default;

void LayerOverviewWidget::setScoreLabel(const QString& label) {
    const QString text = label.isEmpty() ? tr("MLP channel score") : label;
    if (plot_->yAxis->label() == text) return;
    plot_->yAxis->setLabel(text);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void LayerOverviewWidget::setData(const std::vector<npw::LayerScores>& scores, const npw::Mask& mask,
                                  double threshold) {
    npw::channelScoresOf(scores, mask, -1);  // refuses a mismatched mask
    data_->boxes = npw::channelQuantilesPerLayer(scores);
    data_->kept = npw::keptPerLayer(mask);
    data_->threshold = threshold;

    QVector<double> keptKeys, kept;
    npw::ValueRange scoreRange;  // of the whiskers: far outliers may fall off the axis
    int64_t widest = 0;
    boxes_->data()->clear();
    for (size_t l = 0; l < data_->boxes.size(); ++l) {
        const npw::BoxQuantiles& box = data_->boxes[l];
        keptKeys.push_back(static_cast<double>(l));
        kept.push_back(static_cast<double>(data_->kept[l].keptChannels));
        widest = std::max(widest, data_->kept[l].channels);
        if (box.count == 0) continue;  // a layer without MLP channels has no box
        // No outlier dots: a layer of 11008 channels has hundreds, which pile up into black
        // bars below the whiskers. The tooltip gives their count and the full range.
        boxes_->addData(static_cast<double>(l), box.lowWhisker, box.q1, box.median, box.q3, box.highWhisker);
        scoreRange.include(box.lowWhisker);
        scoreRange.include(box.highWhisker);
    }
    keptBars_->setData(keptKeys, kept, true);

    const bool lineShown = std::isfinite(threshold) && !boxes_->data()->isEmpty();
    if (lineShown) scoreRange.include(threshold);
    const npw::ValueRange range = npw::nonDegenerate(scoreRange);
    const double pad = 0.05 * (range.hi - range.lo);
    plot_->yAxis->setRange(range.lo - pad, range.hi + pad);
    plot_->yAxis2->setRange(0, std::max(static_cast<double>(widest), 1.0) * 1.05);
    plot_->xAxis->setRange(-0.5, std::max(layerCount(), 1) - 0.5);
    plotstyle::setIntegerTicks(*plot_->xAxis, layerCount());
    thresholdLine_->setVisible(lineShown);
    if (lineShown) {
        thresholdLine_->point1->setCoords(0, threshold);
        thresholdLine_->point2->setCoords(1, threshold);
        thresholdEntry_->setName(tr("threshold %1").arg(threshold, 0, 'g', 5));
        thresholdEntry_->addToLegend();
    } else {
        thresholdEntry_->removeFromLegend();
    }
    int64_t keptTotal = 0, channelsTotal = 0;
    for (const npw::LayerKeptCounts& k : data_->kept) keptTotal += k.keptChannels, channelsTotal += k.channels;
    title_->setText(tr("Layers: %1 of %2 MLP channels kept")
                        .arg(QLocale().toString(qlonglong(keptTotal)), QLocale().toString(qlonglong(channelsTotal))));
    showCurrentLayer(selection_->currentLayer());
}

int LayerOverviewWidget::layerCount() const { return static_cast<int>(data_->boxes.size()); }

int64_t LayerOverviewWidget::keptChannels(int layer) const {
    if (layer < 0 || layer >= layerCount()) return -1;
    return data_->kept[static_cast<size_t>(layer)].keptChannels;
}

QPoint LayerOverviewWidget::layerCenter(int layer) const {
    const QRect rect = plot_->axisRect()->rect();
    const QPointF inPlot(plot_->xAxis->coordToPixel(layer), rect.center().y());
    return plot_->mapTo(this, inPlot.toPoint());
}

QString LayerOverviewWidget::layerToolTip(int layer) const {
    if (layer < 0 || layer >= layerCount()) return {};
    const npw::LayerKeptCounts& kept = data_->kept[static_cast<size_t>(layer)];
    const npw::BoxQuantiles& box = data_->boxes[static_cast<size_t>(layer)];
    QString text = tr("Layer %1\nMLP channels kept: %2 of %3\nattention units kept: %4 of %5")
                       .arg(layer)
                       .arg(kept.keptChannels)
                       .arg(kept.channels)
                       .arg(kept.keptHeads)
                       .arg(kept.heads);
    if (box.count > 0)
        text += tr("\nchannel scores: median %1, quartiles %2 to %3\nrange %4 to %5, %6 outliers beyond the whiskers")
                    .arg(box.median, 0, 'g', 5)
                    .arg(box.q1, 0, 'g', 5)
                    .arg(box.q3, 0, 'g', 5)
                    .arg(box.min, 0, 'g', 5)
                    .arg(box.max, 0, 'g', 5)
                    .arg(box.outliers.size());
    return text;
}

int LayerOverviewWidget::layerAt(const QPoint& plotPosition) const {
    if (!plot_->axisRect()->rect().contains(plotPosition)) return -1;
    const int layer = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(plotPosition.x())));
    return layer >= 0 && layer < layerCount() ? layer : -1;
}

void LayerOverviewWidget::onMouseMove(QMouseEvent* event) {
    const QString text = layerToolTip(layerAt(event->position().toPoint()));
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
}

void LayerOverviewWidget::onMousePress(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton) return;
    const int layer = layerAt(event->position().toPoint());
    if (layer >= 0) selection_->setCurrentLayer(layer);
}

void LayerOverviewWidget::showCurrentLayer(int layer) {
    const bool shown = layer >= 0 && layer < layerCount();
    currentLayerBand_->setVisible(shown);
    if (shown) {
        currentLayerBand_->topLeft->setCoords(layer - 0.5, 0);
        currentLayerBand_->bottomRight->setCoords(layer + 0.5, 1);
    }
    plot_->replot(QCustomPlot::rpQueuedReplot);  // one replot per turn, however many updates
}

void LayerOverviewWidget::restyle() {
    const QPalette& pal = palette();
    plotstyle::applyPalette(*plot_, pal);
    const QColor text = pal.color(QPalette::Text);
    QColor keptFill = plotstyle::keptColor(pal);
    keptFill.setAlphaF(0.35);
    keptBars_->setBrush(keptFill);
    keptBars_->setPen(Qt::NoPen);
    QColor boxFill = pal.color(QPalette::Base);
    boxFill.setAlphaF(0.85);
    boxes_->setBrush(boxFill);
    boxes_->setPen(QPen(text, 1));
    boxes_->setWhiskerPen(QPen(text, 1, Qt::SolidLine));
    boxes_->setWhiskerBarPen(QPen(text, 1));
    boxes_->setMedianPen(QPen(text, 2.5));
    const QPen thresholdPen(plotstyle::thresholdColor(pal), 1.5, Qt::DashLine);
    thresholdLine_->setPen(thresholdPen);
    thresholdEntry_->setPen(thresholdPen);
    QColor band = plotstyle::highlightColor(pal);
    band.setAlphaF(0.22);
    currentLayerBand_->setBrush(band);
    currentLayerBand_->setPen(Qt::NoPen);
    plot_->replot();
}

void LayerOverviewWidget::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange) restyle();
    QWidget::changeEvent(event);
}
