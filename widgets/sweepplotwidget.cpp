#include "widgets/sweepplotwidget.h"

#include "widgets/logaxisticker.h"
#include "widgets/plotstyle.h"

#include <QFileInfo>
#include <QSvgGenerator>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

SweepPlotWidget::SweepPlotWidget(QWidget* parent)
    : QWidget(parent), plot_(new QCustomPlot(this)), densePerplexity_(std::numeric_limits<double>::quiet_NaN()) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_);

    plot_->xAxis->setLabel(tr("achieved sparsity (% of parameters removed)"));
    plot_->yAxis->setLabel(tr("perplexity (log scale)"));
    plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
    plot_->yAxis->setTicker(QSharedPointer<LogAxisTicker>(new LogAxisTicker));
    plot_->xAxis->setRange(0, 50);
    plot_->yAxis->setRange(1, 100);

    denseLine_ = new QCPItemStraightLine(plot_);
    denseLine_->setVisible(false);
    denseLegendEntry_ = new QCPGraph(plot_->xAxis, plot_->yAxis);
    denseLegendEntry_->setName(tr("dense model"));
    denseLegendEntry_->removeFromLegend();

    // The legend gets its own row above the plot (as the score views'), so the axis needs no
    // headroom for it and the curves use the height.
    plot_->legend->setVisible(true);
    plotstyle::placeLegendAbovePlot(*plot_, 0);
    title_ = plotstyle::addTitle(*plot_, tr("Perplexity against sparsity"));
    emptyNote_ = new QCPItemText(plot_);
    emptyNote_->position->setType(QCPItemPosition::ptAxisRectRatio);
    emptyNote_->position->setCoords(0.5, 0.5);
    emptyNote_->setPositionAlignment(Qt::AlignCenter);
    emptyNote_->setTextAlignment(Qt::AlignCenter);
    // Short lines: the Images tab gives the plot a third of a laptop's width.
    emptyNote_->setText(tr("No results yet:\nRun sweep adds a point\nper method and ratio\nas each finishes."));
    setMinimumSize(300, 220);
    restyle();
    showEmptyStateIfEmpty();
}

void SweepPlotWidget::setEmptyText(const QString& text) {
    emptyNote_->setText(text);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

bool SweepPlotWidget::showsEmptyState() const { return emptyNote_->visible(); }

// An empty legend draws its frame as a stray dash, and ticks 1–100 over no data look like data:
// while there is nothing, the plot says so instead.
void SweepPlotWidget::showEmptyStateIfEmpty() {
    const bool empty = order_.isEmpty() && !denseLine_->visible();
    emptyNote_->setVisible(empty);
    plot_->legend->setVisible(plot_->legend->itemCount() > 0);
    plot_->xAxis->setTickLabels(!empty);
    plot_->yAxis->setTickLabels(!empty);
}

SweepPlotWidget::Series& SweepPlotWidget::seriesFor(const QString& method) {
    auto found = series_.find(method);
    if (found != series_.end()) return *found;
    Series s;
    s.colorIndex = static_cast<int>(order_.size());
    // Band graphs first, so that the mean line is drawn over its band.
    s.lower = new QCPGraph(plot_->xAxis, plot_->yAxis);
    s.upper = new QCPGraph(plot_->xAxis, plot_->yAxis);
    s.upper->setChannelFillGraph(s.lower);
    s.lower->removeFromLegend();
    s.upper->removeFromLegend();
    s.mean = new QCPGraph(plot_->xAxis, plot_->yAxis);
    s.mean->setName(method);
    order_.push_back(method);
    styleSeries(s);
    return *series_.insert(method, s);
}

void SweepPlotWidget::styleSeries(Series& s) {
    const QColor color = plotstyle::seriesColor(s.colorIndex, palette());
    QColor band = color;
    band.setAlphaF(plotstyle::isDark(palette()) ? 0.28 : 0.2);
    s.mean->setPen(QPen(color, 2));
    // A shape per method, and earlier methods a little larger: two methods at the same sparsity
    // and value show both markers, one inside the other.
    static const QCPScatterStyle::ScatterShape shapes[] = {QCPScatterStyle::ssCircle, QCPScatterStyle::ssSquare,
                                                           QCPScatterStyle::ssTriangle, QCPScatterStyle::ssDiamond,
                                                           QCPScatterStyle::ssTriangleInverted, QCPScatterStyle::ssCross};
    const int shapeCount = int(sizeof(shapes) / sizeof(shapes[0]));
    const double size = std::max(6.0, 11.0 - 1.5 * (s.colorIndex % shapeCount));
    s.mean->setScatterStyle(
        QCPScatterStyle(shapes[s.colorIndex % shapeCount], QPen(color, 1.6), QBrush(Qt::NoBrush), size));
    s.upper->setPen(Qt::NoPen);
    s.lower->setPen(Qt::NoPen);
    s.upper->setBrush(band);
}

void SweepPlotWidget::addPoint(const QString& method, double sparsity, double meanPerplexity, double stdPerplexity) {
    if (!std::isfinite(meanPerplexity) || (logScale_ && meanPerplexity <= 0) || !std::isfinite(sparsity)) return;
    const double spread = std::isfinite(stdPerplexity) ? std::abs(stdPerplexity) : 0.0;
    Series& s = seriesFor(method);
    const double x = 100.0 * sparsity;
    s.mean->addData(x, meanPerplexity);
    s.upper->addData(x, meanPerplexity + spread);
    // On a log axis a band down to 0 would be infinitely tall: it stops at a tenth of the mean.
    s.lower->addData(x, logScale_ ? std::max(meanPerplexity - spread, 0.1 * meanPerplexity) : meanPerplexity - spread);
    updateRanges();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SweepPlotWidget::setDenseBaseline(double perplexity, const QString& legendName) {
    densePerplexity_ = perplexity;
    const bool shown = std::isfinite(perplexity) && (perplexity > 0 || !logScale_);
    denseLine_->setVisible(shown);
    if (shown) {
        denseLine_->point1->setCoords(0, perplexity);
        denseLine_->point2->setCoords(1, perplexity);
        denseLegendEntry_->setName(legendName.isEmpty() ? tr("dense model (%1)").arg(perplexity, 0, 'g', 4) : legendName);
        denseLegendEntry_->addToLegend();
    } else {
        denseLegendEntry_->removeFromLegend();
    }
    updateRanges();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SweepPlotWidget::setQuantity(const QString& title, const QString& axisLabel, bool logScale) {
    logScale_ = logScale;
    title_->setText(title);
    plot_->yAxis->setLabel(axisLabel);
    if (logScale) {
        plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
        plot_->yAxis->setTicker(QSharedPointer<LogAxisTicker>(new LogAxisTicker));
    } else {
        plot_->yAxis->setScaleType(QCPAxis::stLinear);
        plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    }
    updateRanges();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SweepPlotWidget::clear() {
    for (const Series& s : series_) {
        plot_->removeGraph(s.mean);
        plot_->removeGraph(s.upper);
        plot_->removeGraph(s.lower);
    }
    series_.clear();
    order_.clear();
    for (QCPItemText* label : clipLabels_) plot_->removeItem(label);
    clipLabels_.clear();
    setDenseBaseline(std::numeric_limits<double>::quiet_NaN());
}

int SweepPlotWidget::pointCount(const QString& method) const {
    const auto found = series_.find(method);
    return found == series_.end() ? 0 : found->mean->dataCount();
}

bool SweepPlotWidget::denseBaselineShown() const { return denseLine_->visible(); }

void SweepPlotWidget::updateRanges() {
    showEmptyStateIfEmpty();
    double xMax = 0, yMin = std::numeric_limits<double>::infinity(), yMax = -std::numeric_limits<double>::infinity();
    for (const Series& s : series_) {
        for (auto it = s.mean->data()->constBegin(); it != s.mean->data()->constEnd(); ++it)
            xMax = std::max(xMax, it->key);
        for (auto it = s.lower->data()->constBegin(); it != s.lower->data()->constEnd(); ++it)
            yMin = std::min(yMin, it->value);
        for (auto it = s.upper->data()->constBegin(); it != s.upper->data()->constEnd(); ++it)
            yMax = std::max(yMax, it->value);
    }
    if (denseLine_->visible()) {
        yMin = std::min(yMin, densePerplexity_);
        yMax = std::max(yMax, densePerplexity_);
    }
    if (!std::isfinite(yMin) || !std::isfinite(yMax) || (logScale_ && yMax <= 0)) return;  // nothing to show yet
    // Starts at 0% (the dense model); a little room above and below the data.
    plot_->xAxis->setRange(0, std::max(xMax, 5.0) * 1.05);
    for (QCPItemText* label : clipLabels_) plot_->removeItem(label);
    clipLabels_.clear();
    if (logScale_) {
        plot_->yAxis->setRange(yMin / 1.08, yMax * 1.08);
    } else {
        // Outliers (more than 3× the median point) would squeeze every other curve into a strip:
        // the axis stops above the rest, and each outlier is marked at the top edge with its value.
        std::vector<double> values;
        for (const Series& s : series_)
            for (auto it = s.mean->data()->constBegin(); it != s.mean->data()->constEnd(); ++it) values.push_back(it->value);
        if (values.size() >= 3) {
            std::vector<double> sorted = values;
            std::nth_element(sorted.begin(), sorted.begin() + long(sorted.size() / 2), sorted.end());
            const double median = sorted[sorted.size() / 2];
            const double cap = 3.0 * median;
            if (median > 0 && yMax > cap) {
                double kept = denseLine_->visible() ? densePerplexity_ : -std::numeric_limits<double>::infinity();
                for (double v : values)
                    if (v <= cap) kept = std::max(kept, v);
                yMax = kept;
                for (const Series& s : series_)
                    for (auto it = s.mean->data()->constBegin(); it != s.mean->data()->constEnd(); ++it) {
                        if (it->value <= cap) continue;
                        auto* label = new QCPItemText(plot_);
                        label->setClipToAxisRect(false);
                        label->position->setTypeX(QCPItemPosition::ptPlotCoords);
                        label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
                        label->position->setCoords(it->key, 0.0);
                        label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignTop);
                        label->setText(QStringLiteral("▲ %1").arg(it->value, 0, 'g', 4));
                        label->setColor(s.mean->pen().color());
                        clipLabels_.push_back(label);
                    }
            }
        }
        const double pad = std::max(0.06 * (yMax - yMin), 1e-3 * std::max(std::abs(yMax), 1.0));
        // Room at the top for the outliers' marks.
        plot_->yAxis->setRange(yMin - pad, yMax + pad * (clipLabels_.isEmpty() ? 1 : 3));
    }
}

bool SweepPlotWidget::savePng(const QString& path, int width, int height) {
    return plot_->savePng(path, width, height);
}

bool SweepPlotWidget::savePdf(const QString& path, int width, int height) {
    return plot_->savePdf(path, width, height);
}

bool SweepPlotWidget::saveSvg(const QString& path, int width, int height) {
    const QSize size(width > 0 ? width : plot_->width(), height > 0 ? height : plot_->height());
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    // The file states its size in mm; at CSS's 96 dpi browsers show it at `size` pixels.
    svg.setResolution(96);
    svg.setTitle(title_->text());
    QCPPainter painter;
    if (!painter.begin(&svg)) return false;
    plot_->toPainter(&painter, size.width(), size.height());
    painter.end();
    return QFileInfo(path).size() > 0;
}

void SweepPlotWidget::restyle() {
    const QPalette& pal = palette();
    plotstyle::applyPalette(*plot_, pal);
    QColor legendBackground = pal.color(QPalette::Base);
    legendBackground.setAlphaF(0.85);
    plot_->legend->setBrush(legendBackground);
    QColor legendBorder = pal.color(QPalette::Text);
    legendBorder.setAlphaF(0.3);
    plot_->legend->setBorderPen(QPen(legendBorder, 1));
    const QPen densePen(pal.color(QPalette::Text), 1.5, Qt::DashLine);
    denseLine_->setPen(densePen);
    denseLegendEntry_->setPen(densePen);
    for (Series& s : series_) styleSeries(s);
    emptyNote_->setColor(pal.color(QPalette::PlaceholderText));
    plot_->replot();
}

void SweepPlotWidget::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange) restyle();
    QWidget::changeEvent(event);
}
