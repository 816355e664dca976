#pragma once
// The "pre_tokenizer" of a tokenizer.json: cuts normalized text into the words BPE sees.
// Supported: Sequence; Metaspace (LLaMA's "▁" form, old add_prefix_space and newer
// prepend_scheme/split fields); ByteLevel (GPT-2 byte-to-unicode mapping, optionally with
// GPT-2's own split regex); Split with a Regex or String pattern and "Isolated" behaviour
// (LLaMA-3). Regexes run on ICU, which has the Unicode classes (\p{L}, \p{N}) and the
// (?i:...) groups that these patterns use.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace npw {

struct PreToken {
    std::string text;
    bool atTextStart = false;  // begins the whole input text (Metaspace's prepend_scheme "first")
};

class PreTokenizer {
public:
    // `node` is the "pre_tokenizer" value; null keeps each stretch of text as one word.
    // Throws npw::Error for unsupported or malformed steps (and regexes ICU rejects).
    static PreTokenizer fromJson(const nlohmann::json& node, const std::string& path);

    // The words of one stretch of normalized text (the text between two added tokens).
    std::vector<PreToken> apply(std::string text, bool atTextStart) const;

    bool hasByteLevel() const { return hasByteLevel_; }

    struct Step;

private:
    std::vector<std::shared_ptr<const Step>> steps_;
    bool hasByteLevel_ = false;
};

// The byte a character of GPT-2's byte-to-unicode map stands for ("Ġ" -> ' '); -1 for a
// character outside the map.
int byteOfByteLevelCharacter(char32_t character);

} // namespace npw
