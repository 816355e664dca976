#pragma once
// The one selection every score view shares (hotspot's filter object): which layer is current
// and which attention unit the pointer is over. Views set it on click/hover and listen to its
// signals; they never talk to each other. Not owned by the views.
#include <QObject>

class LayerSelection : public QObject {
    Q_OBJECT
public:
    explicit LayerSelection(QObject* parent = nullptr);

    // −1: no layer (views that can, show all layers).
    int currentLayer() const { return currentLayer_; }
    // −1 when the pointer is over no unit.
    int hoveredLayer() const { return hoveredLayer_; }
    int hoveredUnit() const { return hoveredUnit_; }

public slots:
    // Emits currentLayerChanged only on a real change. Values below −1 are taken as −1.
    void setCurrentLayer(int layer);
    // Emits hoveredUnitChanged only on a real change; (−1, −1) clears.
    void setHoveredUnit(int layer, int unit);
    void clearHover() { setHoveredUnit(-1, -1); }

signals:
    void currentLayerChanged(int layer);
    void hoveredUnitChanged(int layer, int unit);

private:
    int currentLayer_ = -1;
    int hoveredLayer_ = -1;
    int hoveredUnit_ = -1;
};
