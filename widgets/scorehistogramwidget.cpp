#include "widgets/scorehistogramwidget.h"

#include "core/prune/score_view.h"
#include "widgets/layerselection.h"
#include "widgets/plotstyle.h"

#include <QStringList>
#include <QVBoxLayout>
#include <cmath>
#include <numeric>
#include <qcustomplot.h>

struct ScoreHistogramWidget::Data {
    std::vector<npw::LayerScores> scores;
    npw::Mask mask;
    double threshold = std::nan("");
};

ScoreHistogramWidget::ScoreHistogramWidget(LayerSelection* selection, QWidget* parent)
    : QWidget(parent), selection_(selection), plot_(new QCustomPlot(this)), data_(std::make_unique<Data>()) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_);

    plot_->xAxis->setLabel(tr("MLP channel score (higher = more important)"));
    plot_->yAxis->setLabel(tr("channels"));
    plot_->xAxis->grid()->setVisible(false);
    keptBars_ = new QCPBars(plot_->xAxis, plot_->yAxis);
    keptBars_->setName(tr("kept"));
    keptBars_->setWidthType(QCPBars::wtPlotCoords);
    prunedBars_ = new QCPBars(plot_->xAxis, plot_->yAxis);
    prunedBars_->setName(tr("pruned"));
    prunedBars_->setWidthType(QCPBars::wtPlotCoords);
    // Stacked: a bin the threshold cuts shows both parts.
    keptBars_->moveAbove(prunedBars_);

    thresholdLine_ = new QCPItemStraightLine(plot_);
    // A graph without data: it gives the threshold line a legend entry with its value, where
    // a label beside the line would cover bars.
    thresholdEntry_ = new QCPGraph(plot_->xAxis, plot_->yAxis);
    thresholdEntry_->removeFromLegend();
    plotstyle::placeLegendAbovePlot(*plot_, 0);
    title_ = plotstyle::addTitle(*plot_, QString());
    // The outlier note gets a row of its own under the axis: inside the plot, its corner is where
    // the edge bar that holds the outliers stands (LLM-Pruner's scores have many far ones), and
    // the note covered it.
    QFont noteFont = plot_->font();
    noteFont.setPointSizeF(noteFont.pointSizeF() * 0.9);
    outlierNote_ = new QCPTextElement(plot_, QString(), noteFont);
    outlierNote_->setVisible(false);

    connect(selection_, &LayerSelection::currentLayerChanged, this, &ScoreHistogramWidget::showLayer);
    setMinimumSize(260, 150);
    restyle();
    showLayer(selection_->currentLayer());
}

ScoreHistogramWidget::~ScoreHistogramWidget() = default;

void ScoreHistogramWidget::setData(const std::vector<npw::LayerScores>& scores, const npw::Mask& mask,
                                   double threshold) {
    npw::channelScoresOf(scores, mask, -1);  // refuses a mismatched mask before anything is kept
    data_->scores = scores;
    data_->mask = mask;
    data_->threshold = threshold;
    showLayer(selection_->currentLayer());
}

int ScoreHistogramWidget::binCount() const { return keptBars_->data()->size(); }

bool ScoreHistogramWidget::thresholdShown() const { return thresholdLine_->visible(); }

QString ScoreHistogramWidget::outlierNote() const { return outlierNote_->visible() ? outlierNote_->text() : QString(); }

void ScoreHistogramWidget::showLayer(int layer) {
    // A layer the data does not have (data from a smaller model) shows all layers.
    shownLayer_ = layer < static_cast<int>(data_->scores.size()) ? layer : -1;
    const npw::ChannelScoresView view = npw::channelScoresOf(data_->scores, data_->mask, shownLayer_);
    const double threshold = data_->threshold;
    const bool lineShown = std::isfinite(threshold) && !view.scores.empty();
    // Bins span the bulk of the scores and the threshold; far outliers join the edge bars.
    npw::ValueRange binned = npw::robustRange(view.scores);
    if (lineShown) binned.include(threshold);
    const npw::ValueRange range = npw::nonDegenerate(binned);
    const npw::KeptPrunedHistogram histogram =
        npw::keptPrunedHistogram(view.scores, view.keep, npw::histogramBinCount(view.scores.size()), range.lo, range.hi,
                                 npw::HistogramOutliers::InEdgeBins);

    QVector<double> keys, kept, pruned;
    for (size_t b = 0; b < histogram.kept.counts.size(); ++b) {
        keys.push_back(histogram.kept.center(b));
        kept.push_back(static_cast<double>(histogram.kept.counts[b]));
        pruned.push_back(static_cast<double>(histogram.pruned.counts[b]));
    }
    keptBars_->setData(keys, kept, true);
    prunedBars_->setData(keys, pruned, true);
    keptBars_->setWidth(histogram.kept.width);
    prunedBars_->setWidth(histogram.kept.width);
    shownKept_ = std::accumulate(histogram.kept.counts.begin(), histogram.kept.counts.end(), int64_t(0));
    shownPruned_ = std::accumulate(histogram.pruned.counts.begin(), histogram.pruned.counts.end(), int64_t(0));

    const double pad = 0.04 * (range.hi - range.lo);
    plot_->xAxis->setRange(range.lo - pad, range.hi + pad);
    plot_->yAxis->rescale();
    plot_->yAxis->setRange(0, std::max(plot_->yAxis->range().upper * 1.08, 1.0));
    thresholdLine_->setVisible(lineShown);
    if (lineShown) {
        thresholdLine_->point1->setCoords(threshold, 0);
        thresholdLine_->point2->setCoords(threshold, 1);
        thresholdEntry_->setName(tr("threshold %1").arg(threshold, 0, 'g', 5));
        thresholdEntry_->addToLegend();
    } else {
        thresholdEntry_->removeFromLegend();
    }

    const int64_t below = histogram.kept.below + histogram.pruned.below;
    const int64_t above = histogram.kept.above + histogram.pruned.above;
    // The note's row is in the layout only while there is a note: an empty row would still take height.
    const bool noted = below + above > 0;
    QCPLayoutGrid* layout = plot_->plotLayout();
    if (noted && !outlierNote_->visible()) {
        layout->addElement(layout->rowCount(), 0, outlierNote_);
        layout->setRowStretchFactor(layout->rowCount() - 1, 0.001);
    } else if (!noted && outlierNote_->visible()) {
        layout->take(outlierNote_);
        layout->simplify();
    }
    outlierNote_->setVisible(noted);
    if (noted) {
        const npw::ValueRange all = npw::valueRange(view.scores);
        QStringList parts;
        if (below > 0) parts << tr("first bar includes %1 lower scores (min %2)").arg(below).arg(all.lo, 0, 'g', 4);
        if (above > 0) parts << tr("last bar includes %1 higher scores (max %2)").arg(above).arg(all.hi, 0, 'g', 4);
        outlierNote_->setText(parts.join(QStringLiteral("; ")));
    }

    const QString where = shownLayer_ < 0 ? tr("all layers") : tr("layer %1").arg(shownLayer_);
    title_->setText(data_->scores.empty() ? tr("MLP channel scores (no scores yet)")
                                          : tr("MLP channel scores, %1: %2 kept, %3 pruned")
                                                .arg(where, QLocale().toString(qlonglong(shownKept_)),
                                                     QLocale().toString(qlonglong(shownPruned_))));
    plot_->replot(QCustomPlot::rpQueuedReplot);  // one replot per turn, however many updates
}

void ScoreHistogramWidget::restyle() {
    const QPalette& pal = palette();
    plotstyle::applyPalette(*plot_, pal);
    const QColor base = pal.color(QPalette::Base);
    keptBars_->setBrush(plotstyle::keptColor(pal));
    keptBars_->setPen(QPen(base, 1));
    prunedBars_->setBrush(plotstyle::prunedColor(pal));
    prunedBars_->setPen(QPen(base, 1));
    const QPen thresholdPen(plotstyle::thresholdColor(pal), 1.5, Qt::DashLine);
    thresholdLine_->setPen(thresholdPen);
    thresholdEntry_->setPen(thresholdPen);
    outlierNote_->setTextColor(pal.color(QPalette::Text));
    plot_->replot();
}

void ScoreHistogramWidget::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange) restyle();
    QWidget::changeEvent(event);
}
