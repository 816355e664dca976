#pragma once
// The "model" step of a Hugging Face BPE tokenizer: one pre-token (a word) in, ids out.
// Same algorithm as tokenizers' BPE: start from one symbol per character (unknown characters
// become <0xNN> byte tokens with byte fallback, else the unknown token), then repeatedly merge
// the adjacent pair with the lowest merge rank, leftmost first.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace npw {

struct BpeModelOptions {
    std::string unkToken;       // empty: characters not in the vocabulary are dropped
    bool fuseUnk = false;       // consecutive unknown characters give one unknown token
    bool byteFallback = false;  // unknown characters become their UTF-8 bytes as <0xNN>
    bool ignoreMerges = false;  // a word that is itself in the vocabulary is taken whole
};

class BpeModel {
public:
    // Throws npw::Error when a merge names a piece, or makes one, that is not in `vocab`.
    BpeModel(std::unordered_map<std::string, int32_t> vocab,
             const std::vector<std::pair<std::string, std::string>>& merges, BpeModelOptions options);

    // Appends the ids of `word` to `out`.
    void tokenize(std::string_view word, std::vector<int32_t>& out) const;

private:
    int32_t idOf(const std::string& token) const;  // -1 when not in the vocabulary
    struct Merge {
        int32_t rank;
        int32_t mergedId;
    };
    static uint64_t pairKey(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    std::vector<int32_t> initialSymbols(std::string_view word) const;
    void mergeByRank(std::vector<int32_t>& symbols) const;

    std::unordered_map<std::string, int32_t> vocab_;
    std::unordered_map<uint64_t, Merge> merges_;
    BpeModelOptions options_;
    int32_t unkId_ = -1;
    int32_t byteTokenIds_[256];  // id of <0xNN>, -1 where the vocabulary lacks it
};

} // namespace npw
