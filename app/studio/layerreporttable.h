#pragma once
// Per layer: attention units and MLP channels kept (from the selection, at once) and the
// reconstruction loss of o_proj and down_proj with the compensation (core's applyMask, a
// moment later). Shows values; computes nothing.
#include "core/prune/pruner.h"
#include "core/prune/score_view.h"

#include <QTableWidget>
#include <vector>

class LayerReportTable : public QTableWidget {
    Q_OBJECT
public:
    explicit LayerReportTable(QWidget* parent = nullptr);
    void setKept(const std::vector<npw::LayerKeptCounts>& kept, const QString& unitName);
    // Losses of the current mask; shown as pending ("…") between setKept and this.
    void setReports(const std::vector<npw::LayerPruneReport>& reports);
    // The baselines compensate nothing and are not solved from the statistics: no losses ("–").
    void setNoLosses(const QString& why);
    // Emitted when a row is clicked: the shared LayerSelection follows.
    void selectLayer(int layer);

signals:
    void layerClicked(int layer);
};
