#pragma once
// A quantity against achieved sparsity for a sweep over ρ — perplexity (log scale) by default;
// zero-shot accuracy, FID, IS, tokens/s… with setQuantity — one curve per method, a shaded band
// of mean ± standard deviation over seeds, the dense model as a dashed line, and a legend.
// Results arrive one by one (addPoint) as a sweep runs. Exports PNG, PDF, SVG.
#include <QMap>
#include <QString>
#include <QStringList>
#include <QWidget>

class QCPGraph;
class QCPItemStraightLine;
class QCPTextElement;
class QCustomPlot;

class SweepPlotWidget : public QWidget {
    Q_OBJECT
public:
    explicit SweepPlotWidget(QWidget* parent = nullptr);

    // One result of `method`: the achieved sparsity (fraction of the model's parameters
    // removed, 0…1) and the perplexity's mean and standard deviation over seeds (0 for one
    // seed). A new method gets the next colour and a legend entry; a second point at the same
    // sparsity is kept beside the first. Non-finite or non-positive perplexities are ignored.
    void addPoint(const QString& method, double sparsity, double meanPerplexity, double stdPerplexity = 0);
    // What the y axis shows: the plot's title, the axis label, and a log or linear scale (a
    // linear one also takes zero and negative values). Keeps the points; clear() them first
    // when they were of another quantity.
    void setQuantity(const QString& title, const QString& axisLabel, bool logScale);
    bool isLogScale() const { return logScale_; }
    // The unpruned model's perplexity; a non-finite value hides the line. `legendName`: the
    // legend's words for it (default "dense model (VALUE)").
    void setDenseBaseline(double perplexity, const QString& legendName = QString());
    void clear();

    QStringList methods() const { return order_; }
    int pointCount(const QString& method) const;
    // On a linear axis, points far above the rest (more than 3× the median of all points) are
    // drawn at the top edge with their value, so that they do not squeeze the others: how many.
    int clippedPointCount() const { return int(clipLabels_.size()); }
    bool denseBaselineShown() const;
    // What the plot says while it has nothing to show (no point, no dense line): in the middle of
    // the plot, with the legend and the tick labels hidden, so that an empty plot reads as empty.
    void setEmptyText(const QString& text);
    bool showsEmptyState() const;

    // The plot as a file; width/height 0 = the widget's current size. False when the file
    // cannot be written.
    bool savePng(const QString& path, int width = 0, int height = 0);
    bool savePdf(const QString& path, int width = 0, int height = 0);
    bool saveSvg(const QString& path, int width = 0, int height = 0);

protected:
    void changeEvent(QEvent* event) override;

private:
    struct Series {
        QCPGraph* mean = nullptr;
        QCPGraph* upper = nullptr;  // mean + std; filled down to `lower`
        QCPGraph* lower = nullptr;  // mean − std
        int colorIndex = 0;
    };
    Series& seriesFor(const QString& method);
    void styleSeries(Series& series);
    void updateRanges();
    void restyle();
    void showEmptyStateIfEmpty();

    QCustomPlot* plot_;
    QCPGraph* denseLegendEntry_;  // no data: gives the dense line a legend entry
    QCPItemStraightLine* denseLine_;
    QCPTextElement* title_;
    class QCPItemText* emptyNote_;      // "No results yet…" while there is nothing to plot
    QList<class QCPItemText*> clipLabels_;  // "▲ value" of the points above the axis
    QMap<QString, Series> series_;
    QStringList order_;  // methods in the order they arrived (legend and colour order)
    double densePerplexity_;
    bool logScale_ = true;
};
