#pragma once
// The open model's architecture as core reads it (LlamaConfig): layers, heads, KV groups,
// sizes and parameter counts, model-wide and per layer. Shows values; computes nothing.
#include <QWidget>

namespace npw {
struct LanguageModel;
}
class QLabel;
class QTreeWidget;

class ArchitecturePanel : public QWidget {
    Q_OBJECT
public:
    explicit ArchitecturePanel(QWidget* parent = nullptr);
    void showModel(const QString& reference, const npw::LanguageModel& model);
    void clear();
    QTreeWidget* tree() const { return tree_; }

private:
    QLabel* title_;
    QTreeWidget* tree_;
};
