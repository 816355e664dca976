#pragma once
// Every layer at a glance: a box plot of its MLP channel scores (quartiles, median, whiskers
// at 1.5 IQR; outliers are counted in the tooltip, not drawn, and the axis fits the whiskers)
// against the selection threshold, and the MLP channels it keeps as bars on a second axis.
// Clicking a layer makes it the current one in the shared LayerSelection, which is shaded.
// Shows npw::channelQuantilesPerLayer and npw::keptPerLayer (core/prune/score_view.h).
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
class QCPItemRect;
class QCPItemStraightLine;
class QCPStatisticalBox;
class QCPTextElement;
class QCustomPlot;
class QMouseEvent;

class LayerOverviewWidget : public QWidget {
    Q_OBJECT
public:
    // `selection` is shared with the other views and must outlive this widget.
    explicit LayerOverviewWidget(LayerSelection* selection, QWidget* parent = nullptr);
    ~LayerOverviewWidget() override;

    // As ScoreHistogramWidget::setData: a non-finite threshold draws no line. Throws
    // npw::Error when the mask does not match the scores.
    void setData(const std::vector<npw::LayerScores>& scores, const npw::Mask& mask, double threshold);
    // What the channel scores are (the left axis); empty: "MLP channel score".
    void setScoreLabel(const QString& label);

    int layerCount() const;
    int64_t keptChannels(int layer) const;  // −1 for a layer out of range
    // The centre of a layer's column in this widget's coordinates (for tests and popups).
    QPoint layerCenter(int layer) const;
    // What the tooltip says over a layer; empty out of range.
    QString layerToolTip(int layer) const;

protected:
    void changeEvent(QEvent* event) override;

private:
    struct Data;
    int layerAt(const QPoint& plotPosition) const;  // −1 outside the layers
    void onMouseMove(QMouseEvent* event);
    void onMousePress(QMouseEvent* event);
    void showCurrentLayer(int layer);
    void restyle();

    LayerSelection* selection_;
    QCustomPlot* plot_;
    QCPItemRect* currentLayerBand_;
    QCPBars* keptBars_;
    QCPStatisticalBox* boxes_;
    QCPItemStraightLine* thresholdLine_;
    QCPGraph* thresholdEntry_;  // no data: the threshold's legend entry
    QCPTextElement* title_;
    std::unique_ptr<Data> data_;
};
