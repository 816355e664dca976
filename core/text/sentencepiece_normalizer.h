#pragma once
// SentencePiece's text normalizer (google/sentencepiece src/normalizer.cc, 0.1.97), reimplemented:
//  - the precompiled character map (the NFKC-style rules spm_train compiles into the model: a
//    darts-clone double-array trie of source strings, whose values point into a blob of
//    NUL-terminated replacements), applied longest match first;
//  - user-defined symbols copied unnormalized (SentencePiece's prefix matcher);
//  - malformed UTF-8 becomes U+FFFD, one per bad byte;
//  - remove_extra_whitespaces (leading, trailing and repeated spaces), the dummy prefix
//    (add_dummy_prefix) and whitespace escaping to U+2581 (escape_whitespaces).
#include "core/text/sentencepiece_model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace npw::sentencepiece {

// A byte trie of strings, each with a value: longest-prefix and all-prefix lookups
// (SentencePiece uses darts-clone for the same; only the results matter).
class PieceTrie {
public:
    void insert(std::string_view key, int32_t value);
    bool empty() const { return nodes_.size() <= 1; }
    // Calls visit(length, value) for every key that is a prefix of `text`, shortest first.
    template <class Visit>
    void forEachPrefix(std::string_view text, Visit visit) const {
        uint32_t node = 0;
        for (std::size_t i = 0; i < text.size(); ++i) {
            const auto it = children_.find(edgeKey(node, static_cast<unsigned char>(text[i])));
            if (it == children_.end())
                return;
            node = it->second;
            if (nodes_[node] >= 0)
                visit(i + 1, nodes_[node]);
        }
    }
    // Length of the longest key that is a prefix of `text`, 0 when none.
    std::size_t longestPrefix(std::string_view text) const;

private:
    static uint64_t edgeKey(uint32_t node, unsigned char byte) { return (uint64_t{node} << 8) | byte; }
    std::vector<int32_t> nodes_{-1};  // value per node, -1 when no key ends there
    std::unordered_map<uint64_t, uint32_t> children_;
};

// The precompiled_charsmap blob: <u32 trie size in bytes><darts-clone double array><replacements>.
class CharsMap {
public:
    // Throws npw::Error naming `field` (e.g. "normalizer_spec.precompiled_charsmap") when the
    // blob is malformed: too short, a trie size past the end or not a multiple of 4, a rule
    // pointing outside the replacement strings.
    CharsMap(std::string_view blob, const std::string& source, const std::string& field);

    // The longest rule matching a prefix of `text`: its source length (0 when none) and the
    // replacement (the string up to the next NUL in the replacement blob).
    std::size_t longestMatch(std::string_view text, std::string_view& replacement) const;

private:
    std::vector<uint32_t> units_;
    std::string replacements_;
    std::string source_, field_;
};

class Normalizer {
public:
    // `userDefined`: the user-defined pieces, which are never normalized.
    Normalizer(const NormalizerSpec& spec, const std::vector<std::string>& userDefined, const std::string& source,
               const std::string& field);
    std::string normalize(std::string_view input) const;

private:
    // SentencePiece's NormalizePrefix: the normalized text of the next unit of `input` and how
    // many input bytes it consumes.
    std::pair<std::string_view, std::size_t> normalizePrefix(std::string_view input) const;

    NormalizerSpec spec_;
    std::unique_ptr<CharsMap> charsMap_;
    PieceTrie userDefined_;
};

} // namespace npw::sentencepiece
