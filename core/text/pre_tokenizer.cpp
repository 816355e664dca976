#include "core/text/pre_tokenizer.h"

#include "core/text/json_fields.h"
#include "core/text/utf8.h"
#include "core/util/error.h"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include <algorithm>
#include <array>
#include <climits>
#include <ctime>

namespace npw {

struct PreTokenizer::Step {
    virtual ~Step() = default;
    virtual void apply(std::vector<PreToken>& pieces) const = 0;
};

namespace {

using json_fields::Json;

struct ByteLevelTables {
    std::array<std::string, 256> characterOfByte;
    std::array<char32_t, 256> codePointOfByte;
};

double threadCpuSeconds() {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// ICU calls this about once per step of a long match; false stops the match.
UBool withinCpuBudget(const void* deadline, int32_t) {
    return static_cast<UBool>(threadCpuSeconds() < *static_cast<const double*>(deadline));
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// take the code points from U+0100 on, in byte order.
const ByteLevelTables& byteLevelTables() {
    static const ByteLevelTables tables = [] {
        ByteLevelTables t;
        char32_t next = 256;
        for (int byte = 0; byte < 256; ++byte) {
            const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
            t.codePointOfByte[byte] = printable ? static_cast<char32_t>(byte) : next++;
            utf8::append(t.characterOfByte[byte], t.codePointOfByte[byte]);
        }
        return t;
    }();
    return tables;
}

// Cuts each piece at the matches of `pattern`, keeping matches and the text between them as
// pieces of their own (Hugging Face's SplitDelimiterBehavior::Isolated).
//
// The regex comes from the file, so every match runs under limits: a pattern that backtracks
// catastrophically ("(a+)+$") fails with an error naming it instead of hanging, and one that
// needs deep backtracking fails instead of exhausting memory. Three limits, all proportional
// to the text: ICU's step limit per piece (setTimeLimit, deterministic), ICU's backtracking
// stack per piece (setStackLimit), and a budget of this thread's CPU time for the whole call
// (a match callback), so that many pieces each just under the step limit cannot add up to a
// hang either. The real pre-tokenizer patterns use a small fraction of them: LLaMA-3's and
// Qwen's take ~400 steps (~0.3 s) for 1 MB of text, and 1 MB of spaces needs ~20 MB of stack
// (tests/tst_tokenizer.cpp runs both).
class IsolatingSplit {
public:
    // ICU counts time in steps of its match engine (roughly a millisecond each).
    static int32_t stepLimit(std::size_t bytes) { return static_cast<int32_t>(std::min<std::size_t>(1000 + bytes / 64, INT32_MAX)); }
    static int32_t stackLimit(std::size_t bytes) {
        return static_cast<int32_t>(std::min<std::size_t>((std::size_t{16} << 20) + 64 * bytes, INT32_MAX));
    }
    static double cpuBudgetSeconds(std::size_t bytes) { return 2.0 + 8.0 * static_cast<double>(bytes) / (1 << 20); }

    IsolatingSplit(const std::string& pattern, uint32_t flags, const std::string& path) : path_(path) {
        UErrorCode status = U_ZERO_ERROR;
        UParseError where{};
        pattern_.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), flags, where, status));
        if (U_FAILURE(status))
            throw Error("'" + path + "': ICU rejects the regex (" + u_errorName(status) + " at offset " +
                        std::to_string(where.offset) + "): " + pattern.substr(0, 200) + (pattern.size() > 200 ? "…" : ""));
    }

    void apply(std::vector<PreToken>& pieces) const {
        UErrorCode status = U_ZERO_ERROR;
        // Matchers hold match state, so each call (and thread) gets its own.
        std::unique_ptr<icu::RegexMatcher> matcher(pattern_->matcher(status));
        if (U_FAILURE(status))
            throw Error("'" + path_ + "': ICU cannot make a matcher (" + u_errorName(status) + ")");
        std::size_t totalBytes = 0;
        for (const PreToken& piece : pieces)
            totalBytes += piece.text.size();
        const double deadline = threadCpuSeconds() + cpuBudgetSeconds(totalBytes);
        matcher->setMatchCallback(withinCpuBudget, &deadline, status);
        std::vector<PreToken> out;
        out.reserve(pieces.size());
        for (PreToken& piece : pieces) {
            const std::string& text = piece.text;
            bool first = piece.atTextStart;
            auto emit = [&](std::size_t begin, std::size_t end) {
                if (begin < end) {
                    out.push_back({text.substr(begin, end - begin), first});
                    first = false;
                }
            };
            // UTF-8 UText: match positions come back as byte offsets into `text`.
            icu::LocalUTextPointer utext(utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status));
            matcher->reset(utext.getAlias());
            matcher->setTimeLimit(stepLimit(text.size()), status);
            matcher->setStackLimit(stackLimit(text.size()), status);
            std::size_t done = 0;
            while (matcher->find(status) && U_SUCCESS(status)) {
                const auto begin = static_cast<std::size_t>(matcher->start64(status));
                const auto end = static_cast<std::size_t>(matcher->end64(status));
                if (begin == end)
                    continue;
                emit(done, begin);
                emit(begin, end);
                done = end;
            }
            emit(done, text.size());
            if (U_SUCCESS(status) && threadCpuSeconds() > deadline)
                status = U_REGEX_STOPPED_BY_CALLER;
            if (status == U_REGEX_TIME_OUT || status == U_REGEX_STOPPED_BY_CALLER || status == U_REGEX_STACK_OVERFLOW)
                throw Error("'" + path_ + "': the regex " +
                            (status == U_REGEX_STACK_OVERFLOW ? std::string("ran past its backtracking memory limit")
                                                              : std::string("ran past its time limit")) +
                            " on a piece of " + std::to_string(text.size()) + " bytes (" +
                            std::to_string(totalBytes) +
                            " in all): catastrophic backtracking, the tokenizer file's pattern cannot be used on this text");
            if (U_FAILURE(status))
                throw Error("'" + path_ + "': the pre-tokenizer regex failed (" + u_errorName(status) + ")");
        }
        pieces = std::move(out);
    }

private:
    std::string path_;
    std::shared_ptr<icu::RegexPattern> pattern_;
};

struct Split final : PreTokenizer::Step {
    explicit Split(IsolatingSplit split) : split(std::move(split)) {}
    IsolatingSplit split;
    void apply(std::vector<PreToken>& pieces) const override { split.apply(pieces); }
};

struct ByteLevel final : PreTokenizer::Step {
    bool addPrefixSpace = true;
    std::unique_ptr<IsolatingSplit> gpt2Split;  // null when use_regex is false

    void apply(std::vector<PreToken>& pieces) const override {
        if (addPrefixSpace)
            for (PreToken& piece : pieces)
                if (piece.text.empty() || piece.text.front() != ' ')
                    piece.text.insert(0, 1, ' ');
        if (gpt2Split)
            gpt2Split->apply(pieces);
        const ByteLevelTables& tables = byteLevelTables();
        for (PreToken& piece : pieces) {
            std::string mapped;
            mapped.reserve(piece.text.size() * 2);
            for (unsigned char byte : piece.text)
                mapped += tables.characterOfByte[byte];
            piece.text = std::move(mapped);
        }
    }
};

struct Metaspace final : PreTokenizer::Step {
    enum class Prepend { Always, First, Never };
    std::string replacement;
    Prepend prepend = Prepend::Always;
    bool split = true;

    void apply(std::vector<PreToken>& pieces) const override {
        std::vector<PreToken> out;
        for (PreToken& piece : pieces) {
            std::string text;
            for (char c : piece.text)
                c == ' ' ? text.append(replacement) : text.append(1, c);
            const bool needsPrefix = text.compare(0, replacement.size(), replacement) != 0;
            if (needsPrefix && (prepend == Prepend::Always || (prepend == Prepend::First && piece.atTextStart)))
                text.insert(0, replacement);
            if (!split) {
                out.push_back({std::move(text), piece.atTextStart});
                continue;
            }
            // Each replacement character starts a new word (SplitDelimiterBehavior::MergedWithNext).
            std::size_t start = 0;
            for (std::size_t hit = text.find(replacement, 1); hit != std::string::npos;
                 hit = text.find(replacement, hit + replacement.size())) {
                out.push_back({text.substr(start, hit - start), piece.atTextStart && start == 0});
                start = hit;
            }
            out.push_back({text.substr(start), piece.atTextStart && start == 0});
        }
        pieces = std::move(out);
    }
};

Metaspace::Prepend prependScheme(const Json& node, const std::string& path) {
    // Files written before prepend_scheme existed say add_prefix_space (true: always).
    const bool addPrefixSpace = json_fields::boolOr(node, "add_prefix_space", true, path);
    const std::string scheme = json_fields::stringOr(node, "prepend_scheme", addPrefixSpace ? "always" : "never", path);
    if (scheme == "always")
        return Metaspace::Prepend::Always;
    if (scheme == "first")
        return Metaspace::Prepend::First;
    if (scheme == "never")
        return Metaspace::Prepend::Never;
    throw Error("'" + path + ".prepend_scheme' is '" + scheme + "'; expected always, first or never");
}

// GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true.
constexpr const char* gpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void appendSteps(const Json& node, const std::string& path, std::vector<std::shared_ptr<const PreTokenizer::Step>>& steps,
                 bool& hasByteLevel, int depth = 0) {
    if (node.is_null())
        return;
    const std::string type = json_fields::typeOf(node, path);
    if (type == "Sequence") {
        json_fields::forEachSequenceStep(node, "pretokenizers", path, depth, [&](const Json& step, const std::string& stepPath) {
            appendSteps(step, stepPath, steps, hasByteLevel, depth + 1);
        });
    } else if (type == "Metaspace") {
        auto step = std::make_shared<Metaspace>();
        step->replacement = json_fields::stringOr(node, "replacement", "\u2581", path);
        if (step->replacement.empty() || utf8::charLength(step->replacement, 0) != step->replacement.size())
            throw Error("'" + path + ".replacement' must be one character");
        step->prepend = prependScheme(node, path);
        step->split = json_fields::boolOr(node, "split", true, path);
        steps.push_back(step);
    } else if (type == "ByteLevel") {
        auto step = std::make_shared<ByteLevel>();
        step->addPrefixSpace = json_fields::boolOr(node, "add_prefix_space", true, path);
        if (json_fields::boolOr(node, "use_regex", true, path))
            step->gpt2Split = std::make_unique<IsolatingSplit>(gpt2Pattern, 0, path);
        steps.push_back(step);
        hasByteLevel = true;
    } else if (type == "Split") {
        const std::string behavior = json_fields::requiredString(node, "behavior", path);
        if (behavior != "Isolated")
            throw Error("'" + path + ".behavior' is '" + behavior + "'; only Isolated is supported");
        if (json_fields::boolOr(node, "invert", false, path))
            throw Error("'" + path + ".invert' is true; only false is supported");
        const json_fields::Pattern pattern = json_fields::pattern(node, path);
        steps.push_back(std::make_shared<Split>(IsolatingSplit(pattern.text, pattern.isRegex ? 0 : UREGEX_LITERAL, path)));
    } else {
        throw Error("pre-tokenizer type '" + type + "' at '" + path +
                    "' is not supported (supported: Sequence, Metaspace, ByteLevel, Split)");
    }
}

} // namespace

int byteOfByteLevelCharacter(char32_t character) {
    static const std::array<int, 324> byteOfCodePoint = [] {
        std::array<int, 324> table;
        table.fill(-1);
        const ByteLevelTables& tables = byteLevelTables();
        for (int byte = 0; byte < 256; ++byte)
            table[tables.codePointOfByte[byte]] = byte;
        return table;
    }();
    return character < byteOfCodePoint.size() ? byteOfCodePoint[character] : -1;
}

PreTokenizer PreTokenizer::fromJson(const nlohmann::json& node, const std::string& path) {
    PreTokenizer preTokenizer;
    appendSteps(node, path, preTokenizer.steps_, preTokenizer.hasByteLevel_);
    return preTokenizer;
}

std::vector<PreToken> PreTokenizer::apply(std::string text, bool atTextStart) const {
    std::vector<PreToken> pieces{{std::move(text), atTextStart}};
    for (const auto& step : steps_)
        step->apply(pieces);
    return pieces;
}

} // namespace npw
