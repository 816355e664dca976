#pragma once
// The Text page's logic without widgets: the dense model the studio holds and pruned versions of
// it (every score set's mask at the current ρ/α/λ, and saved exports) continue the same
// prompts side by side (core/eval/compare), on the job runner, streamed token by token through
// its typed partial-result channel. Keeps the comparison, says when moving the knobs made it
// stale, and renders it as HTML (per-token log-probability as shading, the first divergent token
// marked, per-model KL and NLL) and as plain text. Kept apart from StudioSession on purpose.
#include "app/studio/studiosession.h"
#include "core/eval/compare.h"

#include <QObject>
#include <QString>
#include <QStringList>
#include <vector>

struct TextRequest {
    // One continuation each; empty: from BOS. The demo models' prompt comes with them
    // (core's modelDefaults), not with the request.
    QStringList prompts;
    int tokens = 32;
    double temperature = 0;  // 0: greedy
    double topP = 1;
    quint64 seed = 0;
    bool currentMask = true;  // every score set the session holds, at its ρ/α/λ
    QStringList exports;      // saved pruned models (npw prune --out folders)
};

// A token of a prompt's comparison as streamed: which prompt, and the step of every model.
struct TextStep {
    int prompt = 0;
    npw::TokenStep step;
};

// The workspace file's "text" part: prompts, tokens, temperature, top_p, seed, current_mask,
// exports. textRequestFromJson throws npw::Error naming the field and what was expected.
nlohmann::json textRequestJson(const TextRequest& request);
TextRequest textRequestFromJson(const nlohmann::json& j);

class TextSession : public QObject {
    Q_OBJECT
public:
    explicit TextSession(StudioSession* session, QObject* parent = nullptr);

    TextRequest request() const { return request_; }
    // Starts the comparison (false while another job runs or without a model).
    bool run(const TextRequest& request);
    // True when the knobs moved since the comparison that is shown (Regenerate offers itself).
    bool stale() const { return stale_; }
    bool hasResult() const { return !results_.empty(); }
    const std::vector<npw::TextComparison>& results() const { return results_; }

    // The comparison so far (streamed steps while running), as the page shows it.
    QString html() const;
    QString plainText() const;
    // .html or .txt by suffix, atomically; npw::Error naming the path.
    void save(const QString& path) const;

signals:
    void stepAvailable(const TextStep& step);
    void comparisonChanged();
    void staleChanged(bool stale);
    // A reopened workspace's Text part (StudioSession::textWorkspaceRestored), parsed.
    void requestRestored(const TextRequest& request);
    void logMessage(const QString& text);  // e.g. a Text part that could not be restored

private:
    void onStep(const TextStep& step);
    std::vector<std::string> pieces(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) const;

    StudioSession* session_;
    TextRequest request_;
    std::vector<std::vector<int32_t>> promptIds_;
    std::vector<std::vector<TextStep>> live_;  // per prompt, while running
    std::vector<npw::TextComparison> results_;
    QString knobsLabel_;
    bool stale_ = false;
};
