// LLaMA-3's tiktoken tokenizer.model read as a byte-level BPE tokenizer.json (tiktoken.h).
#include "core/text/tiktoken.h"

#include "core/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace npw {

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

using nlohmann::json;

int base64Value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Standard base64 with padding (what tiktoken writes); false for anything else.
bool decodeBase64(std::string_view text, std::string& out) {
    out.clear();
    if (text.empty() || text.size() % 4 != 0) return false;
    std::size_t padding = 0;
    while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
    for (std::size_t i = 0; i < text.size(); i += 4) {
        uint32_t group = 0;
        for (std::size_t k = 0; k < 4; ++k) {
            const std::size_t at = i + k;
            const bool pad = at >= text.size() - padding;
            const int v = pad ? 0 : base64Value(text[at]);
            if (v < 0) return false;
            group = (group << 6) | static_cast<uint32_t>(v);
        }
        const std::size_t keep = i + 4 == text.size() ? 3 - padding : 3;
        for (std::size_t k = 0; k < keep; ++k) out.push_back(static_cast<char>((group >> (16 - 8 * k)) & 0xFF));
    }
    return true;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// for U+0100 onwards, in byte order. Returned as UTF-8.
std::vector<std::string> byteToUnicode() {
    std::vector<std::string> map(256);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        const int code = printable ? b : next++;
        std::string s;
        if (code < 0x80) {
            s.push_back(static_cast<char>(code));
        } else {
            s.push_back(static_cast<char>(0xC0 | (code >> 6)));
            s.push_back(static_cast<char>(0x80 | (code & 0x3F)));
        }
        map[b] = s;
    }
    return map;
}

// Meta's LLaMA-3 tokenizer.py (meta-llama/llama3): the special tokens after the 128,000 ranks.
std::vector<std::string> llama3SpecialTokens() {
    std::vector<std::string> tokens = {"<|begin_of_text|>",           "<|end_of_text|>",
                                       "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                                       "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
                                       "<|start_header_id|>",          "<|end_header_id|>",
                                       "<|reserved_special_token_4|>", "<|eot_id|>"};
    for (int i = 5; tokens.size() < static_cast<std::size_t>(kLlama3SpecialTokens); ++i)
        tokens.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
    return tokens;
}

} // namespace

json tiktokenAsTokenizerJson(std::string_view bytes, const std::string& sourceName) {
    const auto fail = [&](const std::string& problem) -> void {
        throw Error("tokenizer '" + sourceName + "' (a tiktoken BPE file): " + problem);
    };
    std::vector<std::string> tokenOfRank;  // bytes of each rank
    std::vector<bool> seenRank;
    std::unordered_map<std::string, int32_t> rankOf;
    std::size_t pos = 0, lineNumber = 0;
    std::string token;
    while (pos < bytes.size()) {
        std::size_t end = bytes.find('\n', pos);
        if (end == std::string_view::npos) end = bytes.size();
        std::string_view line = bytes.substr(pos, end - pos);
        pos = end + 1;
        ++lineNumber;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;  // tiktoken's loader skips empty lines
        const std::string where = "line " + std::to_string(lineNumber);
        const std::size_t space = line.find(' ');
        if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
            fail(where + " is not \"<base64 token> <rank>\"");
        // Checked before decoding: a token's base64 is 4/3 of its bytes.
        if (space > (kTiktokenMaxTokenBytes + 2) / 3 * 4)
            fail(where + ": the token is about " + std::to_string(space / 4 * 3) + " bytes long; npw refuses tokens of more than " +
                 std::to_string(kTiktokenMaxTokenBytes) + " bytes (LLaMA-3's longest is 128)");
        if (!decodeBase64(line.substr(0, space), token)) fail(where + ": the token is not base64");
        if (token.size() > kTiktokenMaxTokenBytes)
            fail(where + ": the token is " + std::to_string(token.size()) + " bytes long; npw refuses tokens of more than " +
                 std::to_string(kTiktokenMaxTokenBytes) + " bytes (LLaMA-3's longest is 128)");
        const std::string_view rankText = line.substr(space + 1);
        int64_t rank = 0;
        if (rankText.empty() || rankText.size() > 9) fail(where + ": the rank is not an integer from 0 to 999999999");
        for (char c : rankText) {
            if (c < '0' || c > '9') fail(where + ": the rank '" + std::string(rankText.substr(0, 20)) + "' is not an integer");
            rank = rank * 10 + (c - '0');
        }
        if (rankOf.size() >= static_cast<std::size_t>(kLlama3BaseTokens))
            fail("it has more than the " + std::to_string(kLlama3BaseTokens) +
                 " ranks of LLaMA-3's tokenizer.model; npw reads no other tiktoken file (its pre-tokenizer pattern and "
                 "special tokens would be unknown): use the model's tokenizer.json");
        if (rank >= kLlama3BaseTokens) fail(where + ": rank " + std::to_string(rank) + " is not below " + std::to_string(kLlama3BaseTokens));
        if (tokenOfRank.empty()) {
            tokenOfRank.resize(kLlama3BaseTokens);
            seenRank.assign(kLlama3BaseTokens, false);
        }
        if (seenRank[static_cast<std::size_t>(rank)]) fail(where + ": rank " + std::to_string(rank) + " is given twice");
        if (!rankOf.emplace(token, static_cast<int32_t>(rank)).second)
            fail(where + ": its token is already ranked " + std::to_string(rankOf[token]));
        seenRank[static_cast<std::size_t>(rank)] = true;
        tokenOfRank[static_cast<std::size_t>(rank)] = token;
    }
    if (rankOf.size() != static_cast<std::size_t>(kLlama3BaseTokens))
        fail("it has " + std::to_string(rankOf.size()) + " ranks; npw reads LLaMA-3's tokenizer.model (" +
             std::to_string(kLlama3BaseTokens) + " ranks) and no other tiktoken file: use the model's tokenizer.json");
    for (int b = 0; b < 256; ++b)
        if (!rankOf.count(std::string(1, static_cast<char>(b))))
            fail("the single byte " + std::to_string(b) + " has no rank (a byte-level BPE needs all 256)");

    const std::vector<std::string> unicodeOfByte = byteToUnicode();
    const auto unicode = [&](std::string_view piece) {
        std::string s;
        for (char c : piece) s += unicodeOfByte[static_cast<unsigned char>(c)];
        return s;
    };

    // Every split of every token into two ranked tokens, by (token rank, left rank, right rank).
    struct Merge {
        int32_t rank, left, right;
    };
    std::vector<Merge> merges;
    merges.reserve(static_cast<std::size_t>(kLlama3BaseTokens) * 3);
    for (int32_t rank = 0; rank < kLlama3BaseTokens; ++rank) {
        const std::string& t = tokenOfRank[static_cast<std::size_t>(rank)];
        for (std::size_t cut = 1; cut < t.size(); ++cut) {
            const auto left = rankOf.find(t.substr(0, cut));
            if (left == rankOf.end()) continue;
            const auto right = rankOf.find(t.substr(cut));
            if (right != rankOf.end()) merges.push_back({rank, left->second, right->second});
        }
    }
    std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
        return std::tie(a.rank, a.left, a.right) < std::tie(b.rank, b.left, b.right);
    });

    json vocab = json::object();
    std::vector<std::string> unicodeOfRank(tokenOfRank.size());
    for (std::size_t rank = 0; rank < tokenOfRank.size(); ++rank) {
        unicodeOfRank[rank] = unicode(tokenOfRank[rank]);
        vocab[unicodeOfRank[rank]] = rank;
    }
    json mergeList = json::array();
    for (const Merge& m : merges)
        mergeList.push_back(json::array({unicodeOfRank[static_cast<std::size_t>(m.left)],
                                         unicodeOfRank[static_cast<std::size_t>(m.right)]}));

    json added = json::array();
    const std::vector<std::string> specials = llama3SpecialTokens();
    for (std::size_t i = 0; i < specials.size(); ++i)
        added.push_back({{"id", kLlama3BaseTokens + static_cast<int32_t>(i)},
                         {"content", specials[i]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});

    json root;
    root["version"] = "1.0";
    root["added_tokens"] = std::move(added);
    root["normalizer"] = nullptr;
    root["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}})}};
    // No template: BOS is <|begin_of_text|> by name (tokenizer.cpp), as for LLaMA-3's own tokenizer.json.
    root["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
    root["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
    root["model"] = {{"type", "BPE"},
                     {"dropout", nullptr},
                     {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr},
                     {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false},
                     {"byte_fallback", false},
                     {"ignore_merges", true},
                     {"vocab", std::move(vocab)},
                     {"merges", std::move(mergeList)}};
    return root;
}

} // namespace npw
