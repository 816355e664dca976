#pragma once
// The "decoder" of a tokenizer.json: token strings back to text, step by step as Hugging Face's
// decode_chain does. Supported: Sequence, Replace (String pattern), ByteFallback (<0xNN>
// tokens to bytes), Fuse, Strip, Metaspace, ByteLevel. No decoder joins tokens with spaces,
// as Hugging Face does.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace npw {

class TokenDecoder {
public:
    // Throws npw::Error for unsupported or malformed steps.
    static TokenDecoder fromJson(const nlohmann::json& node, const std::string& path);

    std::string decode(std::vector<std::string> tokens) const;

    struct Step;

private:
    std::vector<std::shared_ptr<const Step>> steps_;
    bool joinWithSpaces_ = false;  // the file has no decoder
};

} // namespace npw
