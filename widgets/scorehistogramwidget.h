#pragma once
// Histogram of the MLP channel scores of the current layer of the shared LayerSelection (all
// layers when none is current): kept and pruned channels as stacked bars in two colours, the
// selection threshold as a vertical line. Far outliers are counted in the edge bars, with a
// note, so that the bulk of the scores gets the width. Shows npw::keptPrunedHistogram
// (core/prune/score_view.h); computes nothing.
#include <QString>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <vector>

namespace npw {
struct LayerScores;
struct Mask;
} // namespace npw

class LayerSelection;
class QCPBars;
class QCPGraph;
class QCPItemStraightLine;
class QCPTextElement;
class QCustomPlot;

class ScoreHistogramWidget : public QWidget {
    Q_OBJECT
public:
    // `selection` is shared with the other views and must outlive this widget.
    explicit ScoreHistogramWidget(LayerSelection* selection, QWidget* parent = nullptr);
    ~ScoreHistogramWidget() override;

    // Every layer's scores, the selection's mask and its threshold (SelectionResult::threshold:
    // channels below it are pruned); a non-finite threshold (nothing or everything pruned, or
    // per-layer baselines without one global threshold) draws no line. Keeps a copy, so that
    // a change of layer needs no new data. Throws npw::Error when the mask does not match.
    void setData(const std::vector<npw::LayerScores>& scores, const npw::Mask& mask, double threshold);

    int shownLayer() const { return shownLayer_; }  // −1: all layers
    int binCount() const;
    int64_t shownKeptCount() const { return shownKept_; }
    int64_t shownPrunedCount() const { return shownPruned_; }
    bool thresholdShown() const;
    QString outlierNote() const;  // "" when the edge bars hold no far outlier

protected:
    void changeEvent(QEvent* event) override;

private:
    struct Data;
    void showLayer(int layer);
    void restyle();

    LayerSelection* selection_;
    QCustomPlot* plot_;
    QCPBars* keptBars_;
    QCPBars* prunedBars_;
    QCPItemStraightLine* thresholdLine_;
    QCPGraph* thresholdEntry_;  // no data: the threshold's legend entry
    QCPTextElement* outlierNote_;  // how many far outliers the edge bars hold (a row under the axis)
    QCPTextElement* title_;
    std::unique_ptr<Data> data_;
    int shownLayer_ = -1;
    int64_t shownKept_ = 0;
    int64_t shownPruned_ = 0;
};
