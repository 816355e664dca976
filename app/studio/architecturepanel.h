#pragma once
// The open model's architecture as core reads it (LlamaConfig; LlamaGenConfig and VqConfig for
// image models): layers, heads, KV groups, sizes and parameter counts, model-wide and per
// layer. Shows values; computes nothing.
#include <QWidget>

namespace npw {
struct LanguageModel;
struct LlamaCheckpoint;
class LlamaGenModel;
class VqModel;
}
class QLabel;
class QTreeWidget;

class ArchitecturePanel : public QWidget {
    Q_OBJECT
public:
    explicit ArchitecturePanel(QWidget* parent = nullptr);
    void showModel(const QString& reference, const npw::LanguageModel& model, const QString& road = QString());
    // The same from the checkpoint's headers alone, while its weights are still being checked
    // (a 7B's architecture at once): `status` says so under the title. `road`: how its pruning
    // runs ("in RAM" / "layer by layer"), empty when not known.
    void showCheckpoint(const QString& reference, const npw::LlamaCheckpoint& checkpoint, const QString& runtime,
                        const QString& status, const QString& road = QString());
    // A class-conditional image model: its GPT (the transformer that is pruned) and its VQ tokenizer.
    void showImageModel(const QString& reference, const npw::LlamaGenModel& gpt, const npw::VqModel& vq);
    void clear();
    QTreeWidget* tree() const { return tree_; }

private:
    QLabel* title_;
    QTreeWidget* tree_;
};
