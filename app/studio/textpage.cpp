#include "app/studio/textpage.h"

#include "core/util/error.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QTextBrowser>
#include <QVBoxLayout>

TextPage::TextPage(TextSession* session, QWidget* parent) : QWidget(parent), session_(session) {
    prompts_ = new QPlainTextEdit;
    prompts_->setObjectName(QStringLiteral("textPrompts"));
    prompts_->setPlaceholderText(tr("One prompt per line, in your model's language and domain (empty: continue "
                                    "from BOS)"));
    prompts_->setMaximumHeight(90);
    tokens_ = new QSpinBox;
    tokens_->setRange(1, 4096);
    temperature_ = new QDoubleSpinBox;
    temperature_->setRange(0, 10);
    temperature_->setSingleStep(0.1);
    temperature_->setToolTip(tr("0: greedy (argmax); above 0: seeded sampling, the same seed for every model"));
    topP_ = new QDoubleSpinBox;
    topP_->setRange(0.01, 1);
    topP_->setSingleStep(0.05);
    seed_ = new QSpinBox;
    seed_->setRange(0, 1 << 30);
    currentMask_ = new QCheckBox(tr("every score set's mask at ρ/α/λ"));
    exports_ = new QLineEdit;
    exports_->setObjectName(QStringLiteral("textExports"));
    exports_->setPlaceholderText(tr("saved pruned models (npw prune --out folders), comma-separated"));
    auto* browse = new QPushButton(tr("Add…"));
    generate_ = new QPushButton(tr("Generate"));
    generate_->setObjectName(QStringLiteral("textGenerate"));
    save_ = new QPushButton(tr("Save…"));
    save_->setToolTip(tr("The comparison as HTML (.html) or plain text (.txt)"));
    regenerate_ = new QPushButton(tr("Regenerate"));
    staleNote_ = new QLabel(tr("ρ/α/λ moved: the pruned continuation shown is of the previous mask."));
    staleNote_->setStyleSheet(QStringLiteral("color:#8a5a00"));
    view_ = new QTextBrowser;
    view_->setObjectName(QStringLiteral("textView"));
    view_->setOpenLinks(false);

    auto* form = new QFormLayout;
    form->addRow(tr("Prompts"), prompts_);
    auto* sampling = new QHBoxLayout;
    for (auto [label, w] : {std::pair<QString, QWidget*>{tr("tokens"), tokens_}, {tr("temperature"), temperature_},
                            {tr("top-p"), topP_}, {tr("seed"), seed_}}) {
        sampling->addWidget(new QLabel(label));
        sampling->addWidget(w);
    }
    sampling->addStretch(1);
    form->addRow(tr("Sampling"), sampling);
    auto* models = new QHBoxLayout;
    models->addWidget(currentMask_);
    models->addWidget(exports_, 1);
    models->addWidget(browse);
    form->addRow(tr("Pruned"), models);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(generate_);
    buttons->addWidget(save_);
    buttons->addSpacing(16);
    buttons->addWidget(staleNote_);
    buttons->addWidget(regenerate_);
    buttons->addStretch(1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addLayout(buttons);
    layout->addWidget(view_, 1);

    setRequest(TextRequest{});
    staleNote_->hide();
    regenerate_->hide();
    save_->setEnabled(false);

    connect(generate_, &QPushButton::clicked, this, [this] { generate(); });
    connect(regenerate_, &QPushButton::clicked, this, [this] { generate(); });
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("A pruned model (npw prune --out)"));
        if (!dir.isEmpty()) exports_->setText(exports_->text().isEmpty() ? dir : exports_->text() + ", " + dir);
    });
    connect(save_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save the comparison"), QStringLiteral("comparison.html"),
                                                          tr("HTML (*.html);;Plain text (*.txt)"));
        if (!path.isEmpty()) save(path);
    });
    connect(session_, &TextSession::requestRestored, this, &TextPage::setRequest);
    connect(session_, &TextSession::stepAvailable, this, &TextPage::redraw);
    connect(session_, &TextSession::comparisonChanged, this, [this] {
        save_->setEnabled(session_->hasResult());
        redraw();
    });
    connect(session_, &TextSession::staleChanged, this, [this](bool stale) {
        staleNote_->setVisible(stale);
        regenerate_->setVisible(stale);
    });
}

TextRequest TextPage::request() const {
    TextRequest r;
    r.prompts = prompts_->toPlainText().split('\n', Qt::SkipEmptyParts);
    r.tokens = tokens_->value();
    r.temperature = temperature_->value();
    r.topP = topP_->value();
    r.seed = quint64(seed_->value());
    r.currentMask = currentMask_->isChecked();
    r.exports.clear();
    for (const QString& e : exports_->text().split(',', Qt::SkipEmptyParts))
        if (!e.trimmed().isEmpty()) r.exports << e.trimmed();
    return r;
}

void TextPage::setRequest(const TextRequest& r) {
    prompts_->setPlainText(r.prompts.join('\n'));
    tokens_->setValue(r.tokens);
    temperature_->setValue(r.temperature);
    topP_->setValue(r.topP);
    seed_->setValue(int(r.seed));
    currentMask_->setChecked(r.currentMask);
    exports_->setText(r.exports.join(QStringLiteral(", ")));
}

bool TextPage::save(const QString& path) {
    try {
        session_->save(path);
        return true;
    } catch (const std::exception& e) {
        emit errorOccurred(tr("Save the comparison"), QString::fromUtf8(e.what()));
        return false;
    }
}

void TextPage::setModelDefaults(const npw::ModelDefaults& defaults) {
    const QString prompts = prompts_->toPlainText().trimmed();
    const QString next = QString::fromStdString(defaults.prompt);
    if (prompts.isEmpty() || prompts == defaultPrompt_) prompts_->setPlainText(next);
    defaultPrompt_ = next;
}

void TextPage::setBusy(bool busy) {
    generate_->setEnabled(!busy);
    regenerate_->setEnabled(!busy);
}

void TextPage::redraw() {
    const int scroll = view_->verticalScrollBar()->value();
    view_->setHtml(session_->html());
    view_->verticalScrollBar()->setValue(scroll);
}
