// Tokenizer::fromAnyFile (issue 14): dispatch on a tokenizer file's content.
#include "core/text/tokenizer_files.h"

#include "core/text/llama2c_tokenizer.h"
#include "core/text/sentencepiece_model.h"
#include "core/text/sentencepiece_tokenizer.h"
#include "core/text/tiktoken.h"
#include "core/text/tokenizer.h"
#include "core/util/error.h"
#include "core/util/front_end.h"
#include "core/util/regular_file.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace npw {
namespace {

constexpr std::size_t maxTokenizerFileBytes = std::size_t{1} << 30;  // 1 GiB (Gemma's tokenizer.json is 34 MB)

bool isBase64(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '=';
}

// tiktoken's .tiktoken / LLaMA-3 tokenizer.model: "<base64> <rank>\n" lines. Checks the first few.
bool looksLikeTiktoken(std::string_view bytes) {
    std::size_t pos = 0;
    int lines = 0;
    while (pos < bytes.size() && lines < 4) {
        std::size_t end = bytes.find('\n', pos);
        if (end == std::string_view::npos)
            end = bytes.size();
        std::string_view line = bytes.substr(pos, end - pos);
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        const std::size_t space = line.find(' ');
        if (space == 0 || space == std::string_view::npos || space + 1 == line.size())
            return false;
        for (char c : line.substr(0, space))
            if (!isBase64(c))
                return false;
        for (char c : line.substr(space + 1))
            if (c < '0' || c > '9')
                return false;
        ++lines;
        pos = end + 1;
    }
    return lines > 0;
}

} // namespace

std::string readTokenizerFileBytes(const std::string& path) {
    if (std::filesystem::is_directory(path))
        throw Error("tokenizer '" + path + "' is a folder; give the tokenizer file in it (tokenizer.json, tokenizer.model or tokenizer.bin)");
    requireRegularFile(path, "tokenizer");  // a FIFO is refused, never waited on
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file)
        throw Error("cannot open tokenizer '" + path + "': " + std::strerror(errno));
    const std::streamoff size = file.tellg();
    if (size < 0)
        throw Error("cannot read tokenizer '" + path + "'");
    if (static_cast<uint64_t>(size) > maxTokenizerFileBytes)
        throw Error("tokenizer '" + path + "' is " + std::to_string(size) + " bytes, more than npw reads as a tokenizer (1 GiB)");
    std::string content(static_cast<std::size_t>(size), '\0');
    file.seekg(0);
    if (!file.read(content.data(), size))
        throw Error("cannot read tokenizer '" + path + "': " + std::strerror(errno));
    return content;
}

TokenizerFileKind detectTokenizerFile(std::string_view bytes) {
    // llama2.c first: its header's two high bytes are zero, which no JSON, text or protobuf
    // tokenizer file has at offsets 2 and 3.
    if (Llama2cTokenizer::looksLikeTokenizerBin(bytes))
        return TokenizerFileKind::Llama2cBin;
    std::string_view text = bytes;
    if (text.substr(0, 3) == "\xEF\xBB\xBF")
        text.remove_prefix(3);
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && text[first] == '{')
        return TokenizerFileKind::TokenizerJson;
    if (looksLikeTiktoken(bytes))
        return TokenizerFileKind::Tiktoken;
    if (sentencepiece::looksLikeModelProto(bytes))
        return TokenizerFileKind::SentencePiece;
    return TokenizerFileKind::Unknown;
}

const char* tokenizerFileKindName(TokenizerFileKind kind) {
    switch (kind) {
    case TokenizerFileKind::TokenizerJson: return "tokenizer.json";
    case TokenizerFileKind::SentencePiece: return "SentencePiece model";
    case TokenizerFileKind::Llama2cBin: return "llama2.c tokenizer.bin";
    case TokenizerFileKind::Tiktoken: return "tiktoken BPE file";
    case TokenizerFileKind::Unknown: return "unknown";
    }
    return "unknown";
}

const char* tokenizerFileNameFor(TokenizerFileKind kind) {
    switch (kind) {
    case TokenizerFileKind::TokenizerJson: return "tokenizer.json";
    case TokenizerFileKind::SentencePiece:
    case TokenizerFileKind::Tiktoken: return "tokenizer.model";
    case TokenizerFileKind::Llama2cBin: return "tokenizer.bin";
    case TokenizerFileKind::Unknown: break;
    }
    return "";
}

std::string findTokenizerFile(const std::string& dir) {
    std::error_code ec;
    for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin"}) {
        const std::filesystem::path candidate = std::filesystem::path(dir) / name;
        if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
    }
    return "";
}

const char* tokenizerKindName(Tokenizer::Kind kind) {
    switch (kind) {
    case Tokenizer::Kind::SentencePieceBpe: return "sentencepiece-bpe";
    case Tokenizer::Kind::ByteLevelBpe: return "byte-level-bpe";
    case Tokenizer::Kind::SentencePieceUnigram: return "sentencepiece-unigram";
    case Tokenizer::Kind::Llama2c: return "llama2c";
    }
    return "unknown";
}

std::shared_ptr<Tokenizer> Tokenizer::fromAnyFile(const std::string& path, int64_t modelVocabSize) {
    const std::string content = readTokenizerFileBytes(path);
    switch (detectTokenizerFile(content)) {
    case TokenizerFileKind::TokenizerJson:
        return fromJson(content, path);
    case TokenizerFileKind::SentencePiece:
        return SentencePieceTokenizer::fromBytes(content, path);
    case TokenizerFileKind::Llama2cBin:
        return Llama2cTokenizer::fromBytes(content, path, modelVocabSize);
    case TokenizerFileKind::Tiktoken:
        return fromJsonValue(tiktokenAsTokenizerJson(content, path), path);
    case TokenizerFileKind::Unknown:
        break;
    }
    if (content.empty())
        throw Error("tokenizer '" + path + "' is empty");
    throw Error("tokenizer '" + path + "' is none of the tokenizer files npw reads: not JSON (tokenizer.json), not a "
                "SentencePiece model (tokenizer.model, protobuf), not LLaMA-3's tiktoken tokenizer.model (base64 and rank "
                "per line), not a llama2.c tokenizer.bin");
}

void requireGivenTokenizerFile(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw Error("--tokenizer '" + path + "': there is no such file (expected a tokenizer.json, tokenizer.model "
                    "or tokenizer.bin)");
}

std::shared_ptr<Tokenizer> openModelTokenizer(const std::string& path, int64_t vocab, bool allowSmallVocab) {
    std::shared_ptr<Tokenizer> tokenizer = Tokenizer::fromAnyFile(path, vocab);
    if (tokenizer->vocabSize() > vocab)
        throw Error("tokenizer '" + path + "' has " + std::to_string(tokenizer->vocabSize()) +
                    " tokens but the model's vocabulary is " + std::to_string(vocab) +
                    " (is it the tokenizer of another model?)");
    if (!allowSmallVocab && double(tokenizer->vocabSize()) < kMinTokenizerCoverage * double(vocab))
        throw Error("tokenizer '" + path + "' has " + std::to_string(tokenizer->vocabSize()) +
                    " tokens but the model's vocabulary is " + std::to_string(vocab) + ": it covers " +
                    std::to_string(int(100.0 * double(tokenizer->vocabSize()) / double(vocab))) +
                    " %, less than 90 % (is it the tokenizer of another model? " +
                    (frontEnd() == FrontEnd::Studio
                         ? std::string("`npw` with --allow-small-vocab uses it anyway; the studio does not)")
                         : std::string("--allow-small-vocab uses it anyway)")));
    return tokenizer;
}

} // namespace npw

