#include "app/studio/layerreporttable.h"

#include <QHeaderView>

namespace {

enum Column { Units, Channels, AttnLoss, MlpLoss, ColumnCount };

QTableWidgetItem* cell(const QString& text) {
    auto* item = new QTableWidgetItem(text);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
    return item;
}

QString loss(double value, bool pruned) { return pruned ? QString::number(value, 'e', 2) : QStringLiteral("–"); }

} // namespace

LayerReportTable::LayerReportTable(QWidget* parent) : QTableWidget(parent) {
    setObjectName(QStringLiteral("layerReportTable"));
    setColumnCount(ColumnCount);
    setHorizontalHeaderLabels({tr("heads"), tr("channels"), tr("attn loss"), tr("MLP loss")});
    horizontalHeaderItem(Units)->setToolTip(tr("Attention units kept / in the layer"));
    horizontalHeaderItem(Channels)->setToolTip(tr("MLP channels kept / in the layer"));
    horizontalHeaderItem(AttnLoss)->setToolTip(
        tr("‖X·ΔW‖²/N of o_proj after pruning, with the compensation (Theorem 3's L*, or FLAP's bias)"));
    horizontalHeaderItem(MlpLoss)->setToolTip(tr("‖X·ΔW‖²/N of down_proj after pruning, with the compensation"));
    horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    setMinimumWidth(340);  // "447 / 448" and "1.95e-03" whole in every column
    verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    setSelectionMode(QAbstractItemView::SingleSelection);
    setEditTriggers(QAbstractItemView::NoEditTriggers);
    setAlternatingRowColors(true);
    connect(this, &QTableWidget::cellClicked, this, [this](int row, int) { emit layerClicked(row); });
}

void LayerReportTable::setKept(const std::vector<npw::LayerKeptCounts>& kept, const QString& unitName) {
    setRowCount(int(kept.size()));
    horizontalHeaderItem(Units)->setText(tr("%1s").arg(unitName));
    for (int l = 0; l < rowCount(); ++l) {
        setVerticalHeaderItem(l, new QTableWidgetItem(tr("layer %1").arg(l)));
        const auto& k = kept[size_t(l)];
        setItem(l, Units, cell(QStringLiteral("%1 / %2").arg(k.keptHeads).arg(k.heads)));
        setItem(l, Channels, cell(QStringLiteral("%1 / %2").arg(k.keptChannels).arg(k.channels)));
        setItem(l, AttnLoss, cell(QStringLiteral("…")));
        setItem(l, MlpLoss, cell(QStringLiteral("…")));
    }
}

void LayerReportTable::setReports(const std::vector<npw::LayerPruneReport>& reports) {
    for (int l = 0; l < rowCount() && size_t(l) < reports.size(); ++l) {
        const auto& r = reports[size_t(l)];
        setItem(l, AttnLoss, cell(loss(r.attentionLoss, r.headsAfter != r.headsBefore)));
        setItem(l, MlpLoss, cell(loss(r.mlpLoss, r.channelsAfter != r.channelsBefore)));
    }
}

void LayerReportTable::setNoLosses(const QString& why) {
    for (int l = 0; l < rowCount(); ++l)
        for (int c : {AttnLoss, MlpLoss}) {
            QTableWidgetItem* item = cell(QStringLiteral("–"));
            item->setToolTip(why);
            setItem(l, c, item);
        }
}

void LayerReportTable::selectLayer(int layer) {
    if (layer < 0 || layer >= rowCount()) clearSelection();
    else selectRow(layer);
}
