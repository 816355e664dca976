// Core first: Qt's `slots` macro must not meet ATen's headers.
#include "core/models/language_model.h"
#include "core/models/llamagen.h"
#include "core/models/parameter_count.h"
#include "core/models/vq_model.h"
#include "core/prune/pruner.h"

#include "app/studio/architecturepanel.h"

#include <QHeaderView>
#include <map>
#include <QLabel>
#include <QLocale>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace {

QString count(int64_t n) { return QLocale().toString(qlonglong(n)); }

QTreeWidgetItem* row(QTreeWidgetItem* parent, const QString& name, const QString& value) {
    auto* item = new QTreeWidgetItem(parent, {name, value});
    item->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

} // namespace

ArchitecturePanel::ArchitecturePanel(QWidget* parent) : QWidget(parent) {
    title_ = new QLabel(tr("No model open. File ▸ Open, drop a checkpoint here, or pick a demo."));
    title_->setWordWrap(true);
    tree_ = new QTreeWidget;
    tree_->setObjectName(QStringLiteral("architectureTree"));
    tree_->setColumnCount(2);
    tree_->setHeaderLabels({tr("Property"), tr("Value")});
    tree_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    tree_->header()->setStretchLastSection(true);
    tree_->setRootIsDecorated(true);
    tree_->setUniformRowHeights(true);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(title_);
    layout->addWidget(tree_, 1);
}

void ArchitecturePanel::clear() {
    tree_->clear();
    title_->setText(tr("No model open."));
}

void ArchitecturePanel::showModel(const QString& reference, const npw::LanguageModel& lm, const QString& road) {
    showCheckpoint(reference, lm.model->checkpoint(), QString::fromStdString(lm.model->runtime().describe()), QString(),
                   road);
    // The tokenizer as opened (showCheckpoint knows only whether a file is there).
    const auto found = tree_->findItems(tr("Tokenizer"), Qt::MatchExactly, 0);
    if (!found.isEmpty()) found.front()->setText(1, lm.tokenizer ? tr("yes") : tr("none (token ids only)"));
}

void ArchitecturePanel::showCheckpoint(const QString& reference, const npw::LlamaCheckpoint& checkpoint,
                                       const QString& runtime, const QString& status, const QString& road) {
    tree_->clear();
    const npw::LlamaConfig& c = checkpoint.config;
    QString title = tr("<b>%1</b> on %2").arg(reference.toHtmlEscaped(), runtime.toHtmlEscaped());
    if (!status.isEmpty()) title += QStringLiteral("<br><i>%1</i>").arg(status.toHtmlEscaped());
    title_->setText(title);
    auto* root = tree_->invisibleRootItem();
    const bool uniform = c.isUniform();
    row(root, tr("Parameters"), count(npw::checkpointParameters(checkpoint)));
    row(root, tr("Prunable (attn + MLP)"), count(npw::prunableParameters(c)));
    // The weights as stored: a mapped file keeps its dtype (no float32 copy is made).
    if (!checkpoint.origins.empty()) {
        std::map<std::string, uint64_t> bytesByDtype;
        for (const auto& [name, origin] : checkpoint.origins) bytesByDtype[origin.dtype] += origin.bytes;
        QStringList parts;
        for (const auto& [dtype, bytes] : bytesByDtype)
            parts << QStringLiteral("%1 %2").arg(QString::fromStdString(dtype), QLocale().formattedDataSize(qint64(bytes)));
        row(root, tr("Weights in the file"), parts.join(QStringLiteral(", ")));
    }
    if (!road.isEmpty()) row(root, tr("Pruning road"), road);
    row(root, tr("Layers"), QString::number(c.num_layers));
    row(root, tr("Hidden size"), QString::number(c.hidden_size));
    row(root, tr("Head dim"), QString::number(c.head_dim));
    if (uniform && c.num_layers > 0) {
        row(root, tr("Query heads"), QString::number(c.num_heads[0]));
        const int64_t kv = c.num_kv_heads[0];
        row(root, tr("KV heads (groups)"),
            kv == c.num_heads[0] ? tr("%1 (MHA)").arg(kv) : tr("%1 (GQA, %2 queries each)").arg(kv).arg(c.num_heads[0] / kv));
        row(root, tr("MLP width"), QString::number(c.intermediate_size[0]));
    }
    row(root, tr("Vocabulary"), QString::number(c.vocab_size));
    row(root, tr("Context"), QString::number(c.max_position_embeddings));
    row(root, tr("Tied classifier"), c.tie_word_embeddings ? tr("yes") : tr("no"));
    row(root, tr("Tokenizer"), checkpoint.tokenizerPath.empty() ? tr("none (token ids only)") : tr("yes"));
    auto* layers = row(root, tr("Per layer"), uniform ? tr("uniform") : tr("pruned / non-uniform"));
    for (int64_t l = 0; l < c.num_layers; ++l)
        row(layers, tr("layer %1").arg(l),
            tr("%1 q / %2 kv heads, %3 MLP").arg(c.num_heads[l]).arg(c.num_kv_heads[l]).arg(c.intermediate_size[l]));
    layers->setExpanded(!uniform);
}

void ArchitecturePanel::showImageModel(const QString& reference, const npw::LlamaGenModel& gpt, const npw::VqModel& vq) {
    tree_->clear();
    const npw::LlamaGenConfig& g = gpt.config();
    const npw::LlamaConfig& c = g.transformer;
    title_->setText(tr("<b>%1</b> (image model) on %2")
                        .arg(reference.toHtmlEscaped(), QString::fromStdString(gpt.runtime().describe())));
    auto* root = tree_->invisibleRootItem();
    const npw::LlamaGenCheckpoint& ck = gpt.checkpoint();
    auto* transformer = row(root, tr("GPT (%1)").arg(QString::fromStdString(g.name)),
                            count(npw::checkpointParameters(ck.transformer()) + ck.classEmbedding.numel()));
    row(transformer, tr("Prunable (attn + MLP)"), count(npw::prunableParameters(c)));
    row(transformer, tr("Layers"), QString::number(c.num_layers));
    row(transformer, tr("Hidden size"), QString::number(c.hidden_size));
    row(transformer, tr("Head dim"), QString::number(c.head_dim));
    if (c.isUniform() && c.num_layers > 0) {
        row(transformer, tr("Heads"), tr("%1 (MHA)").arg(c.num_heads[0]));
        row(transformer, tr("MLP width"), QString::number(c.intermediate_size[0]));
    }
    row(transformer, tr("Classes"), QString::number(g.num_classes));
    row(transformer, tr("Class embedding"), tr("(%1 + 1) × %2").arg(g.num_classes).arg(c.hidden_size))
        ->setToolTip(1, tr("One row per class and one for the unconditional (classifier-free guidance) input"));
    row(transformer, tr("Image tokens"), tr("%1 × %1 = %2").arg(g.grid).arg(g.blockSize()));
    row(transformer, tr("Image size"), tr("%1 × %1 px").arg(g.image_size));
    auto* layers = row(transformer, tr("Per layer"), c.isUniform() ? tr("uniform") : tr("pruned / non-uniform"));
    for (int64_t l = 0; l < c.num_layers; ++l)
        row(layers, tr("layer %1").arg(l), tr("%1 heads, %2 MLP").arg(c.num_heads[l]).arg(c.intermediate_size[l]));
    layers->setExpanded(!c.isUniform());
    transformer->setExpanded(true);

    const npw::VqConfig& v = vq.config();
    int64_t vqParameters = 0;
    for (const auto& [name, shape] : npw::vqTensorShapes(v)) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        vqParameters += n;
    }
    auto* tokenizer = row(root, tr("VQ tokenizer (not pruned)"), count(vqParameters));
    row(tokenizer, tr("Codebook"), tr("%1 × %2%3").arg(v.codebookSize).arg(v.embedDim).arg(v.l2Norm ? tr(" (L2)") : QString()))
        ->setToolTip(1, v.l2Norm ? tr("Codes and encoder outputs are compared after L2 normalisation") : QString());
    row(tokenizer, tr("Downsample"), tr("%1× (%2 levels)").arg(v.downsample()).arg(v.decoderChannels.size()));
    row(tokenizer, tr("Channels"), tr("%1 → %2, z %3").arg(v.inChannels).arg(v.outChannels).arg(v.zChannels));
    row(tokenizer, tr("Encoder"), v.hasEncoder() ? tr("yes") : tr("none (decoder only)"));
    tokenizer->setExpanded(true);
}
