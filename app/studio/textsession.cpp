#include "app/studio/textsession.h"

#include "core/prune/apply.h"
#include "core/prune/settings.h"
#include "core/util/atomic_file.h"
#include "core/text/json_fields.h"
#include "core/models/tokenizer_advice.h"
#include "core/util/error.h"

#include <QFileInfo>
#include <cmath>
#include <ostream>

namespace {

// A saved export as its row is labelled: "flap ρ=0.30 (folder)" from its npw-manifest.json (the
// method and ratio npw prune wrote), else the folder's name.
std::string exportLabel(const std::string& dir) {
    std::string folder = QFileInfo(QString::fromStdString(dir)).fileName().toStdString();
    try {
        const std::string manifest = dir + "/npw-manifest.json";
        if (!QFileInfo::exists(QString::fromStdString(manifest))) return folder;
        const nlohmann::json j = npw::json_fields::readJsonFile(manifest, "the export's manifest");
        if (!j.is_object() || !j.contains("method") || !j["method"].is_string()) return folder;
        std::string label = j["method"].get<std::string>();
        if (j.contains("ratio") && j["ratio"].is_number())
            label += QStringLiteral(" ρ=%1").arg(j["ratio"].get<double>(), 0, 'f', 2).toStdString();
        return label + " (" + folder + ")";
    } catch (const std::exception&) {
        return folder;  // the model itself opened: its label is only a name
    }
}

QString qs(const std::string& s) { return QString::fromStdString(s); }

// Shading of a token by its probability under the model that chose it: white when sure, a
// deepening amber as p falls (log p of −6 and below: the deepest).
QString shade(double logProb) {
    if (!std::isfinite(logProb)) return QStringLiteral("#ffffff");
    const double t = std::min(1.0, std::max(0.0, -logProb / 6.0));
    const int r = 255, g = int(255 - 105 * t), b = int(255 - 200 * t);
    return QStringLiteral("#%1%2%3").arg(r, 2, 16, QChar('0')).arg(g, 2, 16, QChar('0')).arg(b, 2, 16, QChar('0'));
}

QString number(double x, int digits = 3) { return std::isfinite(x) ? QString::number(x, 'f', digits) : QStringLiteral("–"); }

} // namespace

nlohmann::json textRequestJson(const TextRequest& r) {
    nlohmann::json prompts = nlohmann::json::array(), exports = nlohmann::json::array();
    for (const QString& p : r.prompts) prompts.push_back(p.toStdString());
    for (const QString& e : r.exports) exports.push_back(e.toStdString());
    return {{"prompts", prompts}, {"tokens", r.tokens},     {"temperature", r.temperature}, {"top_p", r.topP},
            {"seed", r.seed},     {"current_mask", r.currentMask}, {"exports", exports}};
}

TextRequest textRequestFromJson(const nlohmann::json& j) {
    auto fail = [](const std::string& field, const std::string& expected) {
        throw npw::Error("the workspace's 'text." + field + "': expected " + expected);
    };
    if (!j.is_object()) fail("", "an object");
    TextRequest r;
    auto strings = [&](const char* field, QStringList& out) {
        if (!j.contains(field)) return;
        if (!j[field].is_array()) fail(field, "an array of strings");
        out.clear();
        for (const auto& v : j[field]) {
            if (!v.is_string()) fail(field, "an array of strings");
            out << qs(v.get<std::string>());
        }
    };
    strings("prompts", r.prompts);
    strings("exports", r.exports);
    if (j.contains("tokens")) {
        if (!j["tokens"].is_number_integer() || j["tokens"].get<int64_t>() < 1 || j["tokens"].get<int64_t>() > 4096)
            fail("tokens", "an integer in [1, 4096]");
        r.tokens = j["tokens"].get<int>();
    }
    auto real = [&](const char* field, double lo, double hi, double& out) {
        if (!j.contains(field)) return;
        if (!j[field].is_number() || !(j[field].get<double>() >= lo && j[field].get<double>() <= hi))
            fail(field, "a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        out = j[field].get<double>();
    };
    real("temperature", 0, 10, r.temperature);
    real("top_p", 0.01, 1, r.topP);
    if (j.contains("seed")) {
        if (!j["seed"].is_number_unsigned()) fail("seed", "a non-negative integer");
        r.seed = j["seed"].get<quint64>();
    }
    if (j.contains("current_mask")) {
        if (!j["current_mask"].is_boolean()) fail("current_mask", "true or false");
        r.currentMask = j["current_mask"].get<bool>();
    }
    return r;
}

TextSession::TextSession(StudioSession* session, QObject* parent) : QObject(parent), session_(session) {
    // The knobs moved: the pruned continuations shown were made with another mask.
    connect(session_, &StudioSession::selectionChanged, this, [this](const SelectionView&) {
        if (!results_.empty() && request_.currentMask && !stale_) {
            stale_ = true;
            emit staleChanged(true);
        }
    });
    // A reopened workspace's Text part: the page shows its prompts and sampling again.
    connect(session_, &StudioSession::textWorkspaceRestored, this, [this](const QByteArray& state) {
        try {
            emit requestRestored(textRequestFromJson(
                npw::json_fields::parseJsonLimited(state.toStdString(), "the workspace's Text part")));
        } catch (const std::exception& e) {
            emit logMessage(tr("The workspace's Text part was not restored: %1").arg(QString::fromUtf8(e.what())));
        }
    });
}

std::vector<std::string> TextSession::pieces(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) const {
    const npw::LanguageModel& lm = session_->model();
    if (!lm.tokenizer) {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        for (int32_t t : tokens) out.push_back(" " + std::to_string(t));
        return out;
    }
    return npw::tokenPieces([&](const std::vector<int32_t>& ids) { return lm.decode(ids); }, prompt, tokens);
}

bool TextSession::run(const TextRequest& request) {
    if (!session_->hasModel() || session_->jobs()->isRunning()) return false;
    const npw::LanguageModel lm = session_->model();
    std::vector<std::vector<int32_t>> prompts;
    for (const QString& p : request.prompts) {
        if (p.trimmed().isEmpty()) continue;
        if (!lm.tokenizer) {
            // Never continue from BOS in place of a prompt that was given (npw generate refuses too):
            // said as any failed job is, in the error box and the log.
            const std::string message = "the prompt \"" + p.toStdString() + "\" cannot be encoded: " +
                                        npw::noTokenizerMessage(lm.name, lm.causal().config().vocab_size) +
                                        "; or clear the prompts to continue from BOS";
            return session_->jobs()->start<int>(
                tr("Compare continuations"), [message](const npw::ProgressFn&) -> int { throw npw::Error(message); },
                [](int) {});
        }
        prompts.push_back(lm.encode(p.toStdString(), true));
    }
    if (prompts.empty()) prompts.push_back({int32_t(lm.model->config().bos_token_id)});
    // What the worker needs, copied: every score set's mask at the current ρ/α/λ and how to apply it.
    struct MaskToApply {
        std::string name;
        npw::Mask mask;
        npw::PruneSettings settings;
        std::optional<npw::WorkbenchSelection> baseline;  // a baseline's: applied in its own structure
    };
    std::shared_ptr<const npw::ModelStats> stats;
    std::vector<MaskToApply> masks;
    QString maskName;
    if (request.currentMask && session_->selection() && session_->workbenchSelection() && session_->pruneRoad().layerwise)
        // The pruned models would be whole models compensated from every layer's statistics at once.
        emit logMessage(tr("Text: only the dense model continues: pruning this model runs layer by layer, so the "
                           "studio does not build its pruned models (export one with npw prune and open it)."));
    else if (request.currentMask && session_->selection() && session_->workbenchSelection()) {
        const studio::SelectionKnobs k = session_->knobs();
        for (const npw::WorkbenchSelection& sel : session_->selectionsAtKnobs()) {
            if (sel.baseline) {
                MaskToApply m;
                m.baseline = sel;
                m.name = QStringLiteral("%1 ρ=%2").arg(QString::fromStdString(sel.method)).arg(k.rho, 0, 'f', 2).toStdString();
                masks.push_back(std::move(m));
                continue;
            }
            MaskToApply m;
            m.settings = sel.scores->settings;
            m.settings.compensation = session_->settings().prune.compensation;
            m.settings.damp = session_->settings().prune.damp;
            m.settings.ratio = k.rho;
            m.settings.alphaMode = k.mode;
            if (!std::isnan(k.alpha)) m.settings.alpha = k.alpha;
            m.mask = sel.selection.mask;
            m.name = QStringLiteral("%1 ρ=%2").arg(QString::fromStdString(sel.method)).arg(k.rho, 0, 'f', 2).toStdString();
            masks.push_back(std::move(m));
        }
        // The statistics stay alive with the session's own pointer for the job's length: a copy.
        if (session_->stats()) stats = std::make_shared<npw::ModelStats>(*session_->stats());
        maskName = QStringLiteral("ρ=%1").arg(k.rho, 0, 'f', 2);
    }
    request_ = request;
    promptIds_ = prompts;
    live_.assign(prompts.size(), {});
    results_.clear();
    knobsLabel_ = maskName;
    if (stale_) {
        stale_ = false;
        emit staleChanged(false);
    }
    emit comparisonChanged();
    npw::SamplingOptions o;
    o.maxNewTokens = request.tokens;
    o.temperature = request.temperature;
    o.topP = request.topP;
    o.seed = request.seed;
    o.stopToken = lm.model->config().eos_token_id;
    const QStringList exports = request.exports;
    return session_->jobs()->startWithPartials<std::vector<npw::TextComparison>, TextStep>(
        tr("Compare continuations"),
        [=](const npw::ProgressFn& progress, const PartialResults<TextStep>& sink) {
            std::vector<npw::LanguageModel> owned;
            std::vector<npw::ComparedModel> pruned;
            std::vector<std::shared_ptr<const npw::CausalLm>> built;
            for (const MaskToApply& m : masks) {
                npw::reportProgress(progress, "apply mask " + m.name, 0, 1);
                if (m.baseline) {  // LLM-Pruner, block influence: a LLaMA of today's structure; SliceGPT: sliced
                    npw::BaselineRun run = npw::LanguagePruningWorkbench::applyBaseline(*lm.model, *m.baseline);
                    if (run.sliced) built.push_back(run.sliced);
                    else built.push_back(std::make_shared<npw::LlamaModel>(run.pruned, lm.model->runtime()));
                    pruned.push_back({m.name, built.back().get()});
                    continue;
                }
                npw::PrunedModel p = npw::applyMask(lm.model->checkpoint(), *stats, m.mask, m.settings);
                built.push_back(std::make_shared<npw::LlamaModel>(p.checkpoint, lm.model->runtime()));
                pruned.push_back({m.name, built.back().get()});
            }
            for (const QString& e : exports) {
                npw::reportProgress(progress, "open " + e.toStdString(), 0, 1);
                owned.push_back(npw::openLanguageModel(e.toStdString(), lm.model->runtime()));
                pruned.push_back({exportLabel(e.toStdString()), owned.back().model.get()});
            }
            std::vector<npw::TextComparison> out;
            for (size_t i = 0; i < prompts.size(); ++i) {
                int64_t steps = 0;
                out.push_back(npw::compareContinuations(
                    {"dense", lm.model.get()}, pruned, prompts[i], o,
                    [&](const npw::TokenStep& step) {
                        sink.emitPartial(TextStep{int(i), step});
                        npw::reportProgress(progress, "generate", double(int64_t(i) * o.maxNewTokens + ++steps),
                                            double(int64_t(prompts.size()) * o.maxNewTokens));
                        return true;
                    }));
            }
            return out;
        },
        [this](const TextStep& step) { onStep(step); },
        [this](std::vector<npw::TextComparison> r) {
            results_ = std::move(r);
            live_.assign(promptIds_.size(), {});
            emit comparisonChanged();
        });
}

void TextSession::onStep(const TextStep& step) {
    if (step.prompt < 0 || size_t(step.prompt) >= live_.size()) return;
    live_[size_t(step.prompt)].push_back(step);
    emit stepAvailable(step);
}

QString TextSession::html() const {
    QString h = QStringLiteral("<html><body style='font-family: sans-serif'>");
    auto esc = [](const std::string& s) { return qs(s).toHtmlEscaped().replace('\n', QStringLiteral("↵")); };
    for (size_t p = 0; p < promptIds_.size(); ++p) {
        const npw::LanguageModel& lm = session_->model();
        const std::string promptText = lm.tokenizer ? lm.decode(promptIds_[p]) : std::string("BOS");
        h += QStringLiteral("<p style='margin-top:10px'><b>Prompt:</b> <i>%1</i></p>").arg(esc(promptText));
        h += QStringLiteral("<table cellspacing='0' cellpadding='4' style='border-collapse:collapse'>");
        h += QStringLiteral("<tr><th align='left'>model</th><th align='left'>continuation</th><th>diverges at</th>"
                            "<th>KL(dense‖model)</th><th>NLL(dense text)</th></tr>");
        if (p < results_.size()) {
            const npw::TextComparison& c = results_[p];
            for (const npw::ComparedContinuation& m : c.models) {
                const std::vector<std::string> ps = pieces(c.prompt, m.tokens);
                QString text;
                for (size_t i = 0; i < ps.size(); ++i) {
                    const bool div = int64_t(i) == m.divergence;
                    text += QStringLiteral("<span style='background:%1;%2' title='log p = %3'>%4</span>")
                                .arg(shade(m.logProbs[i]),
                                     div ? QStringLiteral("color:#b00020; font-weight:bold; text-decoration:underline")
                                         : QString(),
                                     number(m.logProbs[i], 2), esc(ps[i]));
                }
                h += QStringLiteral("<tr><td valign='top'><b>%1</b></td><td>%2</td><td align='center' valign='top'>%3</td>"
                                    "<td align='right' valign='top'>%4</td><td align='right' valign='top'>%5</td></tr>")
                         .arg(qs(m.name).toHtmlEscaped(), text,
                              &m == &c.models.front() ? QStringLiteral("—")
                              : m.divergence < 0       ? tr("never")
                                                       : tr("token %1").arg(m.divergence),
                              number(m.kl, 4), number(m.nll, 3));
            }
        } else if (!live_[p].empty()) {
            const npw::TokenStep& last = live_[p].back().step;
            for (size_t k = 0; k < last.models.size(); ++k) {
                QString text;
                for (const TextStep& s : live_[p])
                    if (k < s.step.models.size() && s.step.models[k].token >= 0)
                        text += QStringLiteral("<span style='background:%1'>%2</span>")
                                    .arg(shade(s.step.models[k].logProb), esc(s.step.models[k].piece));
                h += QStringLiteral("<tr><td valign='top'><b>%1</b></td><td>%2▌</td><td></td><td></td><td></td></tr>")
                         .arg(qs(last.models[k].model).toHtmlEscaped(), text);
            }
        }
        h += QStringLiteral("</table>");
    }
    if (!results_.empty())
        h += tr("<p style='color:#555'>Shading: the log-probability of each token under the model that chose it "
                "(white: sure; amber: log p ≤ −6). <span style='color:#b00020'><b><u>Red</u></b></span>: the first token "
                "where a pruned continuation leaves the dense one. KL and NLL: means over the dense continuation, "
                "teacher-forced (nats).</p>");
    return h + QStringLiteral("</body></html>");
}

QString TextSession::plainText() const {
    QString t;
    for (const npw::TextComparison& c : results_) {
        const npw::LanguageModel& lm = session_->model();
        t += QStringLiteral("prompt: %1\n").arg(qs(lm.tokenizer ? lm.decode(c.prompt) : std::string("BOS")));
        for (const npw::ComparedContinuation& m : c.models) {
            const std::vector<std::string> ps = pieces(c.prompt, m.tokens);
            QString text;
            for (size_t i = 0; i < ps.size(); ++i)
                text += int64_t(i) == m.divergence ? QStringLiteral("⟦%1⟧").arg(qs(ps[i])) : qs(ps[i]);
            t += QStringLiteral("  %1: %2\n").arg(qs(m.name), text.replace('\n', ' '));
        }
        t += QStringLiteral("  model | diverges at | KL(dense‖model) | NLL(dense text)\n");
        for (const npw::ComparedContinuation& m : c.models)
            t += QStringLiteral("  %1 | %2 | %3 | %4\n")
                     .arg(qs(m.name), m.divergence < 0 ? QStringLiteral("never") : QString::number(m.divergence),
                          number(m.kl, 4), number(m.nll, 3));
        t += '\n';
    }
    return t;
}

void TextSession::save(const QString& path) const {
    const std::string text =
        (path.endsWith(QLatin1String(".html"), Qt::CaseInsensitive) || path.endsWith(QLatin1String(".htm")) ? html()
                                                                                                              : plainText())
            .toStdString();
    // The session's model, calibration and evaluation texts, and the exports compared.
    npw::OutputGuard guard = session_->outputGuard();
    for (const QString& e : request_.exports) guard.addModel(e.toStdString(), "the compared export");
    guard.check(path.toStdString(), "the saved comparison");
    npw::writeFileAtomically(path.toStdString(), [&](std::ostream& out) { out << text; });
}
