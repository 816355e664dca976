#pragma once
// Added tokens (tokenizer.json "added_tokens": <s>, <|begin_of_text|>, ...) are found in the
// input text and split out before normalization and BPE, as Hugging Face tokenizers do, so
// "<s>" written in the text becomes the one BOS id. Matching is leftmost-longest, on the raw
// text: right for LLaMA's tokens ("normalized": false); a token marked "normalized": true
// whose text the normalizer would change is not found as Hugging Face would find it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace npw {

struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool special = false;     // skipped by decode
    bool singleWord = false;  // only matched when not inside a word
    bool lstrip = false;      // the match swallows whitespace on its left
    bool rstrip = false;      // ... and on its right
};

struct TextSegment {
    std::size_t begin = 0;      // byte offsets into the input text
    std::size_t end = 0;
    int32_t addedTokenId = -1;  // -1: ordinary text for the normalizer and the model
};

class AddedTokenMatcher {
public:
    explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

    // The whole of `text`, cut into ordinary text and added tokens, in order; no empty segment.
    std::vector<TextSegment> split(std::string_view text) const;

private:
    struct Match {
        std::size_t begin, end;
        int32_t tokenIndex;
    };
    // Longest token starting at `pos` (tokenIndex -1 when none).
    Match longestAt(std::string_view text, std::size_t pos) const;

    struct TrieNode {
        std::map<unsigned char, int32_t> children;
        int32_t tokenIndex = -1;
    };
    std::vector<TrieNode> trie_;
    std::vector<AddedToken> tokens_;
};

} // namespace npw
