// compare: the continuations of a dense model and of pruned versions of it, side by side
// (core/eval/compare): where each pruned one leaves the dense one, per-model KL and NLL.
#include "app/npw/commands.h"
#include "core/eval/compare.h"
#include "core/models/language_model.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace npw::cli {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> promptsFrom(const Args& args) {
    if (args.has("prompt") && args.has("prompts"))
        throw Error("'npw compare' takes --prompt TEXT or --prompts FILE, not both");
    if (!args.has("prompts")) return {args.has("prompt") ? args.get("prompt") : std::string()};
    const std::string path = args.get("prompts");
    requireRegularFile(path, "--prompts file");  // a FIFO is refused, never waited on
    std::ifstream in(path);
    if (!in) throw Error("--prompts '" + path + "': cannot open the file");
    std::vector<std::string> prompts;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) prompts.push_back(line);
    }
    if (prompts.empty()) throw Error("--prompts '" + path + "': no prompts (expected one prompt per non-empty line)");
    return prompts;
}

nlohmann::json finiteOrNull(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

// Characters, not bytes (labels carry "ρ"), so the columns line up.
size_t displayWidth(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

// Pieces joined, the first divergent one in ⟦ ⟧.
std::string marked(const std::vector<std::string>& pieces, int64_t divergence) {
    std::string s;
    for (size_t i = 0; i < pieces.size(); ++i) {
        if (int64_t(i) == divergence) s += "⟦";
        s += pieces[i];
        if (int64_t(i) == divergence) s += "⟧";
    }
    if (divergence == int64_t(pieces.size())) s += "⟦end⟧";
    for (char& c : s)
        if (c == '\n') c = ' ';  // one line per model keeps the continuations aligned
    return s;
}

int runCompare(const Args& args) {
    const auto& pos = args.positional();
    if (pos.size() < 2)
        throw Error("'npw compare' takes a dense MODEL and at least one PRUNED model, got " + std::to_string(pos.size()));
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    std::vector<LanguageModel> models;
    models.reserve(pos.size());
    // Any of them may be a SliceGPT export (sliced_llama.h): all run through CausalLm.
    for (const std::string& m : pos) models.push_back(openCausalLanguageModel(m, runtime, args.get("tokenizer"), args.flag("allow-small-vocab")));
    const LanguageModel& dense = models.front();
    SamplingOptions o;
    o.maxNewTokens = args.getInt("tokens");
    o.temperature = args.has("temperature") ? args.getDouble("temperature") : 0.0;
    o.topP = args.getDouble("top-p");
    o.seed = static_cast<uint64_t>(args.getInt("seed"));
    if (!args.flag("no-stop")) o.stopToken = dense.causal().config().eos_token_id;
    std::vector<std::string> labels;
    labels.reserve(pos.size());
    for (const std::string& m : pos) labels.push_back(modelLabel(m));
    std::vector<ComparedModel> pruned;
    for (size_t k = 1; k < models.size(); ++k) pruned.push_back({labels[k], &models[k].causal()});
    auto decode = [&](const std::vector<int32_t>& ids) { return dense.decode(ids); };

    nlohmann::json results = nlohmann::json::array();
    std::vector<TextComparison> comparisons;
    for (const std::string& text : promptsFrom(args)) {
        std::vector<int32_t> prompt;
        if (dense.tokenizer)
            prompt = dense.encode(text, /*addBos=*/true);
        else if (text.empty())
            prompt = {static_cast<int32_t>(dense.causal().config().bos_token_id)};  // ids only: start from BOS
        else
            throw Error("'npw compare': model '" + pos[0] + "' has no tokenizer, so --prompt text cannot be encoded "
                        "(give --tokenizer FILE, or no prompt to start from BOS)");
        TextComparison c = compareContinuations({labels[0], &dense.causal()}, pruned, prompt, o);
        nlohmann::json entry = {{"prompt", text}, {"prompt_ids", prompt}};
        nlohmann::json list = nlohmann::json::array();
        for (const ComparedContinuation& m : c.models) {
            nlohmann::json mj = {{"name", m.name},           {"ids", m.tokens},
                                 {"log_probs", m.logProbs},  {"divergence", m.divergence},
                                 {"kl", finiteOrNull(m.kl)}, {"nll", finiteOrNull(m.nll)},
                                 {"dense_log_probs", m.denseLogProbs}};
            if (dense.tokenizer) {
                mj["pieces"] = tokenPieces(decode, prompt, m.tokens);
                std::string joined;
                for (const auto& p : mj["pieces"]) joined += p.get<std::string>();
                mj["text"] = joined;
            }
            list.push_back(mj);
        }
        entry["models"] = list;
        results.push_back(entry);
        comparisons.push_back(std::move(c));
    }
    nlohmann::json j = {{"models", pos},  {"labels", labels},  {"temperature", o.temperature},
                        {"top_p", o.topP}, {"seed", o.seed},   {"tokens", o.maxNewTokens},
                        {"prompts", results},
                        {"kl_meaning", "mean KL(dense || model) over the dense continuation's positions, teacher-forced (nats)"},
                        {"nll_meaning", "mean NLL of the dense continuation under the model (nats per token)"}};
    printResult(args, j, [&] {
        size_t width = 5;
        for (size_t k = 1; k < labels.size(); ++k) width = std::max(width, displayWidth(labels[k]));
        auto pad = [&](const std::string& s) { return s + std::string(width - displayWidth(s) + 2, ' '); };
        for (size_t p = 0; p < comparisons.size(); ++p) {
            const nlohmann::json& e = results[p];
            std::cout << (p ? "\n" : "") << "prompt: " << e["prompt"].get<std::string>() << "\n";
            for (size_t k = 0; k < comparisons[p].models.size(); ++k) {
                const ComparedContinuation& m = comparisons[p].models[k];
                std::string text;
                if (dense.tokenizer) {
                    text = marked(e["models"][k]["pieces"].get<std::vector<std::string>>(), m.divergence);
                } else {
                    for (size_t i = 0; i < m.tokens.size(); ++i)
                        text += std::string(i ? " " : "") + (int64_t(i) == m.divergence ? "⟦" : "") +
                                std::to_string(m.tokens[i]) + (int64_t(i) == m.divergence ? "⟧" : "");
                }
                std::cout << "  " << pad(k ? m.name : "dense") << text << "\n";
            }
            std::cout << "\n  " << pad("model") << "diverges at   KL(dense‖model)   NLL(dense text)   mean log p (own)\n";
            for (size_t k = 0; k < comparisons[p].models.size(); ++k) {
                const ComparedContinuation& m = comparisons[p].models[k];
                double mean = 0;
                for (double lp : m.logProbs) mean += lp / double(m.logProbs.size());
                std::ostringstream row;
                row << std::fixed << std::setprecision(4) << "  " << pad(k ? m.name : "dense")
                    << std::setw(11) << (k == 0 ? std::string("-") : m.divergence < 0 ? std::string("never")
                                                                                  : "token " + std::to_string(m.divergence))
                    << "   " << std::setw(15) << m.kl << "   " << std::setw(15) << m.nll << "   " << std::setw(16)
                    << mean;
                std::cout << row.str() << "\n";
            }
        }
        std::cout << "\n⟦ ⟧ marks the first token where a pruned continuation leaves the dense one. KL and NLL are means "
                     "over the dense continuation, teacher-forced (nats).\n";
    });
    return 0;
}

} // namespace

void addCompareCommand(std::vector<Command>& out) {
    out.push_back({"compare",
                   "MODEL PRUNED... [--prompt TEXT | --prompts FILE] [--tokens N] [--temperature T --top-p P --seed S] [--json]",
                   "Continuations of a dense model and pruned ones side by side: the first divergent token, per-model KL "
                   "to the dense model and NLL of the dense continuation.",
                   flagsFor("compare"), runCompare});
}

} // namespace npw::cli
