#pragma once
// The "normalizer" of a tokenizer.json, applied to each stretch of text between added tokens.
// Supported: Sequence, Prepend (only to non-empty text, like Hugging Face), Replace with a
// String pattern (LLaMA-2's " " -> "▁"), and the Unicode forms NFC, NFD, NFKC, NFKD.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace npw {

class Normalizer {
public:
    // `node` is the "normalizer" value; null gives a normalizer that changes nothing.
    // Throws npw::Error for unsupported or malformed steps.
    static Normalizer fromJson(const nlohmann::json& node, const std::string& path);

    std::string apply(std::string text) const;

    struct Step;

private:
    std::vector<std::shared_ptr<const Step>> steps_;
};

} // namespace npw
