#pragma once
// The head map: a layers × attention-units grid coloured by unit score (viridis), pruned units
// crossed out, a colour scale and a legend. Hovering a cell shows its layer, unit, score and
// state; clicking a cell makes its layer the current one in the shared LayerSelection, and the
// current layer is framed. Shows npw::headGrid (core/prune/score_view.h); computes nothing.
#include <QString>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <vector>

namespace npw {
struct LayerScores;
struct Mask;
struct HeadGrid;
} // namespace npw

class LayerSelection;
class PrunedCellMarks;
class QCPColorMap;
class QCPColorScale;
class QCPItemRect;
class QCPTextElement;
class QCustomPlot;
class QMouseEvent;

class HeadMapWidget : public QWidget {
    Q_OBJECT
public:
    // `selection` is shared with the other views and must outlive this widget.
    explicit HeadMapWidget(LayerSelection* selection, QWidget* parent = nullptr);
    ~HeadMapWidget() override;

    // The unit scores of every layer and the selection's mask (SelectionResult::mask).
    // Throws npw::Error when the mask does not match the scores.
    void setData(const std::vector<npw::LayerScores>& scores, const npw::Mask& mask);
    // What one attention unit is called in labels: "head" (default), or "KV group" for GQA.
    void setUnitName(const QString& name);
    // What the colours are (the colour scale's label); empty: "unit score (higher = more important)".
    void setScoreLabel(const QString& label);

    int layerCount() const;
    int unitCount() const;  // the widest layer's
    int64_t prunedCellCount() const;
    int64_t keptCellCount() const;
    // The centre of a cell in this widget's coordinates (for tests and for placing popups).
    QPoint cellCenter(int layer, int unit) const;
    // What the tooltip says over a cell; empty where there is no unit.
    QString cellToolTip(int layer, int unit) const;

protected:
    void changeEvent(QEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    // (layer, unit) under a point of the plot, or (−1, −1).
    QPoint cellAt(const QPoint& plotPosition) const;
    void onMouseMove(QMouseEvent* event);
    void onMousePress(QMouseEvent* event);
    void showCurrentLayer(int layer);
    void updateTitle();
    void restyle();

    LayerSelection* selection_;
    QCustomPlot* plot_;
    QCPColorMap* map_;
    QCPColorScale* scale_;
    PrunedCellMarks* marks_;
    QCPItemRect* currentLayerHalo_;
    QCPItemRect* currentLayerFrame_;
    QCPTextElement* title_;
    std::unique_ptr<npw::HeadGrid> grid_;
    QString unitName_ = QStringLiteral("head");
};
