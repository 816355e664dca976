#include "widgets/layerselection.h"

#include <algorithm>

LayerSelection::LayerSelection(QObject* parent) : QObject(parent) {}

void LayerSelection::setCurrentLayer(int layer) {
    layer = std::max(layer, -1);
    if (layer == currentLayer_) return;
    currentLayer_ = layer;
    emit currentLayerChanged(layer);
}

void LayerSelection::setHoveredUnit(int layer, int unit) {
    if (layer < 0 || unit < 0) layer = unit = -1;
    if (layer == hoveredLayer_ && unit == hoveredUnit_) return;
    hoveredLayer_ = layer;
    hoveredUnit_ = unit;
    emit hoveredUnitChanged(layer, unit);
}
