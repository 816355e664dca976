#include "core/text/bpe_trainer.h"
#include "core/text/json_output.h"

#include "core/text/utf8.h"
#include "core/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

namespace npw {
namespace {

constexpr std::string_view metaspace = "\u2581";
constexpr int32_t specialCount = 3;  // <unk>, <s>, </s>
constexpr int32_t reservedCount = specialCount + 256;
constexpr int32_t outsideAlphabet = -1;  // a character too rare to be a piece: never merged

std::string byteTokenName(int byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    return name;
}

// Training words of one line, as SentencePiece-style BPE encodes it: "▁" before the line,
// spaces as "▁", a new word at each "▁" that follows another character. A run of spaces
// gives a word of its own ("▁▁▁"), its last "▁" staying with the next word.
void countWords(const std::string& line, std::unordered_map<std::string, int64_t>& counts) {
    if (line.empty())
        return;  // Prepend leaves empty text alone: nothing to encode
    std::string normalized(metaspace);
    for (char c : line)
        c == ' ' ? normalized.append(metaspace) : normalized.append(1, c);
    const std::size_t m = metaspace.size();
    auto isMetaspaceAt = [&](std::size_t pos) {
        return pos + m <= normalized.size() && normalized.compare(pos, m, metaspace) == 0;
    };
    std::size_t start = 0;
    for (std::size_t pos = m; pos < normalized.size(); ++pos) {
        if (!isMetaspaceAt(pos))
            continue;
        const bool continuesRun = isMetaspaceAt(pos - m);
        const bool startsWord = pos + m < normalized.size() && !isMetaspaceAt(pos + m);
        if (continuesRun && !startsWord)
            continue;
        ++counts[normalized.substr(start, pos - start)];
        start = pos;
    }
    ++counts[normalized.substr(start)];
}

struct Word {
    std::vector<int32_t> symbols;
    int64_t count = 0;
};

uint64_t pairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t leftOf(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t rightOf(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// Most frequent pair first; ties go to the pair of older (lower) symbol ids, so the result
// depends on the corpus alone, not on hash-map order.
struct Candidate {
    int64_t count;
    uint64_t pair;
    bool operator<(const Candidate& other) const {
        if (count != other.count)
            return count < other.count;
        return pair > other.pair;
    }
};

class Trainer {
public:
    Trainer(const std::vector<std::string>& lines, const BpeTrainOptions& options) : options_(options) {
        if (options.vocabSize < reservedCount + 1)
            throw Error("BPE vocabulary size " + std::to_string(options.vocabSize) + " is too small: at least " +
                        std::to_string(reservedCount + 1) + " (3 special tokens, 256 byte tokens and \"▁\")");
        if (options.minFrequency < 1)
            throw Error("BPE minimum frequency must be at least 1, not " + std::to_string(options.minFrequency));
        std::unordered_map<std::string, int64_t> wordCounts;
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (const std::size_t bad = utf8::findInvalid(lines[i]); bad != std::string::npos)
                throw Error("BPE training text: line " + std::to_string(i + 1) + " is not valid UTF-8 (byte offset " +
                            std::to_string(bad) + ")");
            countWords(lines[i], wordCounts);
        }
        // Sorted, so that symbol ids and ties do not depend on hash order.
        const std::map<std::string, int64_t> sortedWords(wordCounts.begin(), wordCounts.end());
        chooseAlphabet(sortedWords);
        for (const auto& [text, count] : sortedWords)
            words_.push_back({splitIntoSymbols(text), count});
    }

    void run() {
        for (std::size_t w = 0; w < words_.size(); ++w)
            addPairs(static_cast<int32_t>(w), +1);
        for (const auto& [pair, count] : pairCounts_)
            queue_.push({count, pair});
        const auto target = static_cast<std::size_t>(options_.vocabSize - reservedCount);
        while (pieces_.size() < target && !queue_.empty()) {
            const Candidate top = queue_.top();
            queue_.pop();
            if (banned_.count(top.pair))
                continue;
            const int64_t current = pairCounts_[top.pair];
            // Rising counts are queued as they rise, so a stale entry means the count fell.
            if (current != top.count) {
                if (current >= options_.minFrequency)
                    queue_.push({current, top.pair});
                continue;
            }
            if (current < options_.minFrequency)
                break;
            merge(top.pair);
        }
    }

    std::string toJson() const;

private:
    void chooseAlphabet(const std::map<std::string, int64_t>& words) {
        std::map<char32_t, int64_t> characterCounts;
        for (const auto& [text, count] : words)
            for (std::size_t pos = 0; pos < text.size(); pos += utf8::charLength(text, pos))
                characterCounts[utf8::decodeAt(text, pos)] += count;
        std::vector<std::pair<char32_t, int64_t>> frequent;
        for (const auto& [character, count] : characterCounts)
            if (count >= options_.minFrequency && character != U'\u2581')
                frequent.emplace_back(character, count);
        std::stable_sort(frequent.begin(), frequent.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
        // "▁" always: decoding turns it into the space, which a byte token could not.
        addPiece(std::string(metaspace));
        const auto room = static_cast<std::size_t>(options_.vocabSize - reservedCount);
        for (const auto& [character, count] : frequent) {
            if (pieces_.size() >= room)
                break;
            std::string piece;
            utf8::append(piece, character);
            addPiece(piece);
        }
    }

    int32_t addPiece(const std::string& piece) {
        const auto [it, inserted] = idOfPiece_.emplace(piece, static_cast<int32_t>(pieces_.size()));
        if (inserted)
            pieces_.push_back(piece);
        return it->second;
    }

    std::vector<int32_t> splitIntoSymbols(const std::string& word) const {
        std::vector<int32_t> symbols;
        for (std::size_t pos = 0; pos < word.size();) {
            const std::size_t length = utf8::charLength(word, pos);
            const auto it = idOfPiece_.find(word.substr(pos, length));
            symbols.push_back(it == idOfPiece_.end() ? outsideAlphabet : it->second);
            pos += length;
        }
        return symbols;
    }

    // Adds (sign +1) or removes (-1) the pairs of one word from the pair counts.
    void addPairs(int32_t wordIndex, int sign) {
        const Word& word = words_[wordIndex];
        for (std::size_t i = 0; i + 1 < word.symbols.size(); ++i) {
            if (word.symbols[i] == outsideAlphabet || word.symbols[i + 1] == outsideAlphabet)
                continue;
            const uint64_t pair = pairKey(word.symbols[i], word.symbols[i + 1]);
            pairCounts_[pair] += sign * word.count;
            if (sign > 0)
                wordsWithPair_[pair].push_back(wordIndex);
        }
    }

    void merge(uint64_t pair) {
        const int32_t left = leftOf(pair), right = rightOf(pair);
        const std::string merged = pieces_[left] + pieces_[right];
        if (isReservedName(merged)) {
            // The text would read as a special or byte token ("<s>", "<0x41>"): never a piece.
            banned_.insert(pair);
            return;
        }
        const int32_t mergedId = addPiece(merged);
        merges_.emplace_back(left, right);

        std::vector<int32_t> affected = std::move(wordsWithPair_[pair]);
        wordsWithPair_.erase(pair);
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
        std::set<uint64_t> grown;  // pairs with the new piece, queued once their counts are final
        for (int32_t w : affected) {
            std::vector<int32_t>& symbols = words_[w].symbols;
            std::vector<int32_t> replaced;
            replaced.reserve(symbols.size());
            for (std::size_t i = 0; i < symbols.size(); ++i) {
                if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
                    replaced.push_back(mergedId);
                    ++i;
                } else {
                    replaced.push_back(symbols[i]);
                }
            }
            if (replaced.size() == symbols.size())
                continue;  // a stale entry: an earlier merge already took this pair apart
            addPairs(w, -1);
            symbols = std::move(replaced);
            addPairs(w, +1);
            for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
                if ((symbols[i] == mergedId || symbols[i + 1] == mergedId) && symbols[i] != outsideAlphabet &&
                    symbols[i + 1] != outsideAlphabet)
                    grown.insert(pairKey(symbols[i], symbols[i + 1]));
        }
        for (uint64_t grownPair : grown)
            queue_.push({pairCounts_[grownPair], grownPair});
    }

    static bool isReservedName(const std::string& piece) {
        if (piece == "<unk>" || piece == "<s>" || piece == "</s>")
            return true;
        if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>')
            return false;
        auto isHex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
        return isHex(piece[3]) && isHex(piece[4]);
    }

    BpeTrainOptions options_;
    std::vector<Word> words_;
    std::vector<std::string> pieces_;  // the alphabet, then merged pieces; id = position
    std::unordered_map<std::string, int32_t> idOfPiece_;
    std::vector<std::pair<int32_t, int32_t>> merges_;
    std::unordered_map<uint64_t, int64_t> pairCounts_;
    std::unordered_map<uint64_t, std::vector<int32_t>> wordsWithPair_;  // may list a word twice or stale
    std::priority_queue<Candidate> queue_;
    std::set<uint64_t> banned_;
};

// LLaMA-2's tokenizer.json layout, so that npw, Hugging Face tokenizers and transformers.js
// all read the result.
std::string Trainer::toJson() const {
    using Json = nlohmann::ordered_json;
    auto special = [](int32_t id, const char* content) {
        return Json{{"id", id},       {"content", content}, {"single_word", false}, {"lstrip", false},
                    {"rstrip", false}, {"normalized", false}, {"special", true}};
    };
    Json vocab = Json::object();
    vocab["<unk>"] = 0;
    vocab["<s>"] = 1;
    vocab["</s>"] = 2;
    for (int byte = 0; byte < 256; ++byte)
        vocab[byteTokenName(byte)] = specialCount + byte;
    for (std::size_t i = 0; i < pieces_.size(); ++i)
        vocab[pieces_[i]] = reservedCount + static_cast<int32_t>(i);
    Json merges = Json::array();
    for (const auto& [left, right] : merges_)
        merges.push_back(pieces_[left] + " " + pieces_[right]);

    Json root;
    root["version"] = "1.0";
    root["truncation"] = nullptr;
    root["padding"] = nullptr;
    root["added_tokens"] = Json::array({special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")});
    root["normalizer"] = {{"type", "Sequence"},
                          {"normalizers", Json::array({{{"type", "Prepend"}, {"prepend", metaspace}},
                                                       {{"type", "Replace"},
                                                        {"pattern", {{"String", " "}}},
                                                        {"content", metaspace}}})}};
    root["pre_tokenizer"] = nullptr;
    auto specialItem = [](int typeId) { return Json{{"SpecialToken", {{"id", "<s>"}, {"type_id", typeId}}}}; };
    auto sequenceItem = [](const char* id, int typeId) { return Json{{"Sequence", {{"id", id}, {"type_id", typeId}}}}; };
    root["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", Json::array({specialItem(0), sequenceItem("A", 0)})},
        {"pair", Json::array({specialItem(0), sequenceItem("A", 0), specialItem(1), sequenceItem("B", 1)})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", Json::array({1})}, {"tokens", Json::array({"<s>"})}}}}}};
    root["decoder"] = {{"type", "Sequence"},
                       {"decoders", Json::array({{{"type", "Replace"}, {"pattern", {{"String", metaspace}}}, {"content", " "}},
                                                 {{"type", "ByteFallback"}},
                                                 {{"type", "Fuse"}},
                                                 {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
    root["model"] = {{"type", "BPE"},
                     {"dropout", nullptr},
                     {"unk_token", "<unk>"},
                     {"continuing_subword_prefix", nullptr},
                     {"end_of_word_suffix", nullptr},
                     {"fuse_unk", true},
                     {"byte_fallback", true},
                     {"vocab", std::move(vocab)},
                     {"merges", std::move(merges)}};
    return json_fields::dumpJson(root, 2, "the trained tokenizer.json") + "\n";
}

} // namespace

std::string trainSentencePieceBpe(const std::vector<std::string>& lines, const BpeTrainOptions& options) {
    Trainer trainer(lines, options);
    trainer.run();
    return trainer.toJson();
}

} // namespace npw
