#pragma once
// Zero-shot multiple choice as lm-evaluation-harness scores it (formats.md, "Zero-shot"):
// every choice is scored by the summed log-probability of its continuation after the context;
// `acc` takes the argmax, `acc_norm` the argmax of log-probability ÷ the choice's length in
// characters. WinoGrande is "partial scoring": the two options fill the blank in the context
// and the shared rest of the sentence is the scored continuation.
//
// Tasks are read from local JSONL files in each dataset's public field layout (the datasets
// cannot be downloaded here; users bring them). The prompt of each task is lm-eval's.
#include "core/models/language_model.h"
#include "core/util/progress.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// One question. Either one context and a continuation per choice (most tasks), or a context
// per choice and one shared continuation (WinoGrande).
struct MultipleChoiceItem {
    std::vector<std::string> contexts;       // 1, or one per choice
    std::vector<std::string> continuations;  // one per choice, or 1
    std::vector<std::string> choices;        // the choice texts: their lengths normalise acc_norm
    int gold = 0;

    size_t choiceCount() const { return choices.size(); }
    const std::string& context(size_t choice) const { return contexts.size() == 1 ? contexts[0] : contexts[choice]; }
    const std::string& continuation(size_t choice) const {
        return continuations.size() == 1 ? continuations[0] : continuations[choice];
    }
};

struct ZeroShotTask {
    std::string name;  // as the user named it, e.g. "piqa"
    std::string kind;  // the prompt format: boolq, piqa, hellaswag, winogrande, arc, openbookqa, mc
    std::string source;
    bool reportsAccNorm = true;  // lm-eval reports only acc for BoolQ and WinoGrande
    std::vector<MultipleChoiceItem> items;
};

// The task kinds npw knows and the JSONL fields each reads, for help texts and errors.
std::string zeroShotTaskKinds();

// Choices per item at most: the supported tasks have 2 to 5 (HellaSwag 4, ARC up to 5).
inline constexpr int kMaxZeroShotChoices = 16;

// Parses one JSON line of `kind` into an item (lm-eval's prompt and choices). Throws npw::Error
// naming the missing or malformed field, an item of more than kMaxZeroShotChoices choices, and a
// choice that is empty or only whitespace (by its index, from 0).
MultipleChoiceItem parseZeroShotItem(const std::string& kind, const std::string& jsonLine);

// Reads a JSONL task file. `name` picks the kind: boolq, piqa, hellaswag, winogrande,
// arc_easy / arc_challenge / arc, openbookqa, or mc (npw's generic layout: {"context",
// "choices", "gold"}; the task is then named after the file's stem). Errors name the file and the line. limit > 0 keeps the first `limit`.
ZeroShotTask loadZeroShotTask(const std::string& name, const std::string& path, int64_t limit = 0);

// "NAME:FILE[,NAME:FILE…]" as `--task` and `--zeroshot` take it.
std::vector<ZeroShotTask> loadZeroShotTasks(const std::string& spec, int64_t limit = 0);

// lm-eval's _encode_pair: whitespace at the end of the context moves to the continuation; the
// continuation's tokens are those of encode(context + continuation) after encode(context)'s.
struct EncodedPair {
    std::vector<int32_t> context, continuation;
};
EncodedPair encodeContinuationPair(const Tokenizer& tokenizer, const std::string& context,
                                   const std::string& continuation);

struct ZeroShotOptions {
    int64_t limit = 0;        // items per task, 0 = all
    int64_t batchRows = 16;   // sequences per forward pass
};

// Summed log-probability (nats) of each choice's continuation, per item. Sequences longer than
// the model's context are cut from the left, as lm-eval does; an empty context is preceded by
// BOS (lm-eval's prefix token).
std::vector<std::vector<double>> scoreChoices(const LanguageModel& model, const std::vector<MultipleChoiceItem>& items,
                                              const ZeroShotOptions& options = {},
                                              const ProgressFn& progress = nullptr);

struct ZeroShotResult {
    std::string task;
    int64_t items = 0;
    double acc = 0, accStderr = 0;
    double accNorm = 0, accNormStderr = 0;  // NaN when the task does not report it
};

// acc and acc_norm from per-choice log-probabilities, with lm-eval's standard error of the
// mean (sample standard deviation / √n).
ZeroShotResult summariseZeroShot(const ZeroShotTask& task, const std::vector<std::vector<double>>& logProbs);

ZeroShotResult evaluateZeroShot(const LanguageModel& model, const ZeroShotTask& task,
                                const ZeroShotOptions& options = {}, const ProgressFn& progress = nullptr);

// The demo task: "which ending completes this verse?" built from a text with one verse per
// line (the held-out New Testament): the first three quarters of a verse (by words) are the
// context; its true last quarter and the same number of last words of three other verses are
// the choices, in seeded order.
// Returns JSONL lines in the `mc` layout.
std::vector<std::string> buildVerseEndingTask(const std::string& text, int64_t count, uint64_t seed);

} // namespace npw
