#include "core/text/token_decoder.h"

#include "core/text/json_fields.h"
#include "core/text/pre_tokenizer.h"
#include "core/text/utf8.h"
#include "core/util/error.h"

namespace npw {

struct TokenDecoder::Step {
    virtual ~Step() = default;
    virtual void apply(std::vector<std::string>& tokens) const = 0;
};

namespace {

using json_fields::Json;

struct ReplaceLiteral final : TokenDecoder::Step {
    std::string from, to;
    void apply(std::vector<std::string>& tokens) const override {
        if (from.empty())
            return;
        for (std::string& token : tokens)
            for (std::size_t hit = token.find(from); hit != std::string::npos; hit = token.find(from, hit + to.size()))
                token.replace(hit, from.size(), to);
    }
};

// <0xNN> tokens become bytes; a run of them that is not valid UTF-8 becomes one U+FFFD per
// byte, as in Hugging Face's ByteFallback.
struct ByteFallback final : TokenDecoder::Step {
    static int byteOf(const std::string& token) {
        if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
            return -1;
        auto hexDigit = [](char c) {
            return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        };
        const int high = hexDigit(token[3]), low = hexDigit(token[4]);
        return high < 0 || low < 0 ? -1 : high * 16 + low;
    }
    void apply(std::vector<std::string>& tokens) const override {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string bytes;
        auto flushBytes = [&] {
            if (bytes.empty())
                return;
            if (utf8::findInvalid(bytes) == std::string::npos)
                out.push_back(bytes);
            else
                out.insert(out.end(), bytes.size(), "\xEF\xBF\xBD");
            bytes.clear();
        };
        for (std::string& token : tokens) {
            if (const int byte = byteOf(token); byte >= 0) {
                bytes += static_cast<char>(byte);
                continue;
            }
            flushBytes();
            out.push_back(std::move(token));
        }
        flushBytes();
        tokens = std::move(out);
    }
};

struct Fuse final : TokenDecoder::Step {
    void apply(std::vector<std::string>& tokens) const override {
        std::string joined;
        for (const std::string& token : tokens)
            joined += token;
        tokens.clear();
        tokens.push_back(std::move(joined));
    }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
struct Strip final : TokenDecoder::Step {
    std::string character;
    int64_t start = 0, stop = 0;
    void apply(std::vector<std::string>& tokens) const override {
        for (std::string& token : tokens) {
            std::size_t begin = 0, end = token.size();
            for (int64_t i = 0; i < start && token.compare(begin, character.size(), character) == 0; ++i)
                begin += character.size();
            for (int64_t i = 0; i < stop && end >= begin + character.size() &&
                                token.compare(end - character.size(), character.size(), character) == 0;
                 ++i)
                end -= character.size();
            token = token.substr(begin, end - begin);
        }
    }
};

// The replacement character becomes a space, except in the first token where it is dropped
// (it was the prefix the pre-tokenizer added) unless prepend_scheme is "never".
struct Metaspace final : TokenDecoder::Step {
    std::string replacement;
    bool dropInFirstToken = true;
    void apply(std::vector<std::string>& tokens) const override {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            const std::string space = i == 0 && dropInFirstToken ? "" : " ";
            std::string& token = tokens[i];
            for (std::size_t hit = token.find(replacement); hit != std::string::npos;
                 hit = token.find(replacement, hit + space.size()))
                token.replace(hit, replacement.size(), space);
        }
    }
};

// Byte-level characters back to bytes, all tokens into one string. A token holding any other
// character (an added token such as "<|eot_id|>" is fine, its characters all map) keeps its
// UTF-8 bytes, as in Hugging Face.
struct ByteLevel final : TokenDecoder::Step {
    void apply(std::vector<std::string>& tokens) const override {
        std::string bytes;
        for (const std::string& token : tokens) {
            const std::size_t before = bytes.size();
            bool allMapped = true;
            for (std::size_t pos = 0; pos < token.size();) {
                const std::size_t length = utf8::charLength(token, pos);
                const int byte = length == 0 ? -1 : byteOfByteLevelCharacter(utf8::decodeAt(token, pos));
                if (byte < 0) {
                    allMapped = false;
                    break;
                }
                bytes += static_cast<char>(byte);
                pos += length;
            }
            if (!allMapped) {
                bytes.resize(before);
                bytes += token;
            }
        }
        tokens.assign(1, utf8::toValidLossy(bytes));
    }
};

void appendSteps(const Json& node, const std::string& path, std::vector<std::shared_ptr<const TokenDecoder::Step>>& steps, int depth = 0) {
    const std::string type = json_fields::typeOf(node, path);
    if (type == "Sequence") {
        json_fields::forEachSequenceStep(node, "decoders", path, depth, [&](const Json& step, const std::string& stepPath) {
            appendSteps(step, stepPath, steps, depth + 1);
        });
    } else if (type == "Replace") {
        auto step = std::make_shared<ReplaceLiteral>();
        step->from = json_fields::literalPattern(node, path);
        step->to = json_fields::requiredString(node, "content", path);
        steps.push_back(step);
    } else if (type == "ByteFallback") {
        steps.push_back(std::make_shared<ByteFallback>());
    } else if (type == "Fuse") {
        steps.push_back(std::make_shared<Fuse>());
    } else if (type == "Strip") {
        auto step = std::make_shared<Strip>();
        step->character = json_fields::requiredString(node, "content", path);
        step->start = json_fields::intOr(node, "start", 0, path);
        step->stop = json_fields::intOr(node, "stop", 0, path);
        if (step->character.empty())
            throw Error("'" + path + ".content' must be one character");
        steps.push_back(step);
    } else if (type == "Metaspace") {
        auto step = std::make_shared<Metaspace>();
        step->replacement = json_fields::stringOr(node, "replacement", "\u2581", path);
        const bool addPrefixSpace = json_fields::boolOr(node, "add_prefix_space", true, path);
        step->dropInFirstToken =
            json_fields::stringOr(node, "prepend_scheme", addPrefixSpace ? "always" : "never", path) != "never";
        if (step->replacement.empty())
            throw Error("'" + path + ".replacement' must be one character");
        steps.push_back(step);
    } else if (type == "ByteLevel") {
        steps.push_back(std::make_shared<ByteLevel>());
    } else {
        throw Error("decoder type '" + type + "' at '" + path +
                    "' is not supported (supported: Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel)");
    }
}

} // namespace

TokenDecoder TokenDecoder::fromJson(const nlohmann::json& node, const std::string& path) {
    TokenDecoder decoder;
    if (node.is_null())
        decoder.joinWithSpaces_ = true;
    else
        appendSteps(node, path, decoder.steps_);
    return decoder;
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
    for (const auto& step : steps_)
        step->apply(tokens);
    std::string text;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0 && joinWithSpaces_)
            text += ' ';
        text += tokens[i];
    }
    return text;
}

} // namespace npw
