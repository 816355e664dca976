#pragma once
// The Text tab: prompts, sampling, which pruned models; the dense and pruned continuations side
// by side as they stream in (TextSession renders them), Regenerate when the knobs moved, Save as
// HTML or plain text. Widgets only: the logic is TextSession's and core's.
#include "app/studio/textsession.h"

#include <QWidget>

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTextBrowser;

class TextPage : public QWidget {
    Q_OBJECT
public:
    explicit TextPage(TextSession* session, QWidget* parent = nullptr);

    TextSession* session() const { return session_; }
    QTextBrowser* view() const { return view_; }
    TextRequest request() const;
    void setRequest(const TextRequest& request);
    // The workspace file's "text" part: the request on the page (textRequestJson).
    nlohmann::json workspaceState() const { return textRequestJson(request()); }
    bool generate() { return session_->run(request()); }
    bool save(const QString& path);
    void setBusy(bool busy);
    // A newly opened model: the demo's prompt for a demo model, no prompt (and a hint) for any
    // other; prompts the user wrote stay.
    void setModelDefaults(const npw::ModelDefaults& defaults);

signals:
    void errorOccurred(const QString& what, const QString& message);

private:
    void redraw();

    TextSession* session_;
    QPlainTextEdit* prompts_;
    QSpinBox *tokens_, *seed_;
    QDoubleSpinBox *temperature_, *topP_;
    QCheckBox* currentMask_;
    QLineEdit* exports_;
    QPushButton *generate_, *save_, *regenerate_;
    QLabel* staleNote_;
    QTextBrowser* view_;
    QString defaultPrompt_;  // the last model's default prompt: replaced when the model changes
};
