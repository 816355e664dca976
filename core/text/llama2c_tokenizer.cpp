#include "core/text/llama2c_tokenizer.h"

#include "core/text/utf8.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <queue>

namespace npw {
namespace {

constexpr std::size_t maxFileBytes = std::size_t{256} << 20;

uint32_t readU32(std::string_view bytes, std::size_t pos) {
    uint32_t value;
    std::memcpy(&value, bytes.data() + pos, 4);  // little-endian, as llama2.c writes it on x86/ARM
    return value;
}

// run.c's decode turns "<0x%02hhX>" pieces into their byte (sscanf: "<0x" then one or two hex
// digits; what follows them is not checked).
int scannedByte(std::string_view piece) {
    if (piece.size() < 4 || piece.substr(0, 3) != "<0x")
        return -1;
    auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    const int high = hex(piece[3]);
    if (high < 0)
        return -1;
    const int low = piece.size() > 4 ? hex(piece[4]) : -1;
    return low < 0 ? high : high * 16 + low;
}

} // namespace

bool Llama2cTokenizer::looksLikeTokenizerBin(std::string_view bytes) {
    if (bytes.size() < 4)
        return false;
    const uint32_t maxLength = readU32(bytes, 0);
    return maxLength >= 1 && maxLength <= maxTokenLength;
}

std::shared_ptr<Llama2cTokenizer> Llama2cTokenizer::fromFile(const std::string& path, int64_t vocabSize) {
    if (std::filesystem::is_directory(path))
        throw Error("llama2.c tokenizer '" + path + "' is a folder; give the tokenizer.bin file in it");
    requireRegularFile(path, "llama2.c tokenizer");  // a FIFO is refused, never waited on
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file)
        throw Error("cannot open llama2.c tokenizer '" + path + "': " + std::strerror(errno));
    const std::streamoff size = file.tellg();
    if (size < 0 || static_cast<uint64_t>(size) > maxFileBytes)
        throw Error("llama2.c tokenizer '" + path + "' is " + std::to_string(size) + " bytes, more than npw reads (" +
                    std::to_string(maxFileBytes >> 20) + " MiB)");
    std::string content(static_cast<std::size_t>(size), '\0');
    file.seekg(0);
    if (!file.read(content.data(), size))
        throw Error("cannot read llama2.c tokenizer '" + path + "': " + std::strerror(errno));
    return fromBytes(content, path, vocabSize);
}

std::shared_ptr<Llama2cTokenizer> Llama2cTokenizer::fromBytes(std::string_view bytes, const std::string& sourceName,
                                                              int64_t vocabSize) {
    const std::string source = "llama2.c tokenizer '" + sourceName + "'";
    if (bytes.size() < 4)
        throw Error(source + " is " + std::to_string(bytes.size()) + " bytes, too short for its max_token_length header");
    if (bytes.size() > maxFileBytes)
        throw Error(source + " is " + std::to_string(bytes.size()) + " bytes, more than npw reads");
    if (vocabSize > static_cast<int64_t>(maxTokens))
        throw Error(source + ": a vocabulary of " + std::to_string(vocabSize) + " tokens is more than npw reads (" +
                    std::to_string(maxTokens) + ")");
    const uint32_t maxLength = readU32(bytes, 0);
    if (maxLength == 0 || maxLength > maxTokenLength)
        throw Error(source + ": header field max_token_length is " + std::to_string(maxLength) + "; expected 1.." +
                    std::to_string(maxTokenLength) + " (is this a llama2.c tokenizer.bin?)");

    std::vector<std::string> pieces;
    std::vector<float> scores;
    const std::size_t estimate = (bytes.size() - 4) / 8;
    const std::size_t expected = vocabSize >= 0 ? static_cast<std::size_t>(vocabSize) : estimate;
    pieces.reserve(std::min(expected, estimate));
    scores.reserve(std::min(expected, estimate));
    std::size_t pos = 4;
    for (std::size_t i = 0;; ++i) {
        if (vocabSize >= 0 ? i == static_cast<std::size_t>(vocabSize) : pos == bytes.size())
            break;
        const std::string where = source + ": token " + std::to_string(i) + " at byte " + std::to_string(pos);
        if (i >= maxTokens)
            throw Error(source + ": more than " + std::to_string(maxTokens) + " tokens; npw refuses vocabularies that large");
        if (bytes.size() - pos < 8) {
            if (vocabSize >= 0)
                throw Error(where + ": the file ends before its score and length (the model's vocabulary has " +
                            std::to_string(vocabSize) + " tokens, the file only " + std::to_string(i) + ")");
            throw Error(where + ": " + std::to_string(bytes.size() - pos) +
                        " trailing bytes, too few for a score and a length (truncated file?)");
        }
        float score;
        std::memcpy(&score, bytes.data() + pos, 4);
        const uint32_t length = readU32(bytes, pos + 4);
        if (std::isnan(score))
            throw Error(where + ": field 'score' is NaN");
        if (length > maxLength)
            throw Error(where + ": field 'length' is " + std::to_string(length) + ", more than the header's max_token_length " +
                        std::to_string(maxLength) + (length > INT32_MAX ? " (negative as run.c's int)" : "") +
                        "; run.c would overflow its merge buffer");
        pos += 8;
        if (bytes.size() - pos < length)
            throw Error(where + ": its " + std::to_string(length) + " bytes run past the end of the file (" +
                        std::to_string(bytes.size() - pos) + " left; truncated file?)");
        const std::string_view piece = bytes.substr(pos, length);
        if (piece.find('\0') != std::string_view::npos)
            throw Error(where + ": the piece holds a NUL byte (run.c would cut it there)");
        if (const std::size_t bad = utf8::findInvalid(piece); bad != std::string_view::npos)
            throw Error(where + ": the piece is not valid UTF-8 (byte " + std::to_string(bad) + " of it)");
        pieces.emplace_back(piece);
        scores.push_back(score);
        pos += length;
    }
    if (pieces.empty())
        throw Error(source + " holds no tokens");
    return std::make_shared<Llama2cTokenizer>(std::move(pieces), std::move(scores), maxLength, sourceName);
}

Llama2cTokenizer::Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores, uint32_t maxTokenLength,
                                   std::string sourceName)
    : pieces_(std::move(pieces)), scores_(std::move(scores)), maxTokenLength_(maxTokenLength),
      sourceName_(std::move(sourceName)) {
    sorted_.resize(pieces_.size());
    for (std::size_t i = 0; i < sorted_.size(); ++i)
        sorted_[i] = static_cast<int32_t>(i);
    // run.c sorts with qsort(strcmp); glibc's qsort is a merge sort, stable, so equal pieces stay
    // in id order. std::string compares bytes as unsigned char, like strcmp.
    std::stable_sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b]; });
}

int32_t Llama2cTokenizer::lookup(std::string_view piece) const {
    // glibc's bsearch, probe for probe, so that duplicate pieces resolve to the same id.
    std::size_t low = 0, high = sorted_.size();
    while (low < high) {
        const std::size_t middle = (low + high) / 2;
        const int comparison = piece.compare(pieces_[sorted_[middle]]);
        if (comparison < 0)
            high = middle;
        else if (comparison > 0)
            low = middle + 1;
        else
            return sorted_[middle];
    }
    return -1;
}

void Llama2cTokenizer::checkId(int32_t id) const {
    if (id < 0 || id >= vocabSize())
        throw Error("tokenizer '" + sourceName_ + "': token id " + std::to_string(id) +
                    " is out of range (the vocabulary has ids 0.." + std::to_string(vocabSize() - 1) + ")");
}

std::string Llama2cTokenizer::tokenText(int32_t id) const {
    checkId(id);
    return pieces_[id];
}

float Llama2cTokenizer::score(int32_t id) const {
    checkId(id);
    return scores_[id];
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool bos, bool eos) const {
    text = text.substr(0, std::min(text.find('\0'), text.size()));  // a C string ends at NUL
    std::vector<int32_t> tokens;
    tokens.reserve(text.size() + 3);
    if (bos)
        tokens.push_back(1);
    if (!text.empty()) {
        const int32_t dummyPrefix = lookup(" ");
        if (dummyPrefix < 0)
            throw Error("tokenizer '" + sourceName_ + "': the vocabulary has no \" \" piece, which run.c's encode "
                        "puts before the text (it would read outside its vocabulary)");
        tokens.push_back(dummyPrefix);
    }
    // One token per UTF-8 character (run.c's grouping: a lead or ASCII byte starts a group,
    // continuation bytes join it up to 4 bytes), else the group's bytes as ids byte + 3.
    std::string group;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if ((byte & 0xC0) != 0x80)
            group.clear();
        group += static_cast<char>(byte);
        const auto nextByte = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
        if ((nextByte & 0xC0) == 0x80 && group.size() < 4)
            continue;
        if (const int32_t id = lookup(group); id >= 0) {
            tokens.push_back(id);
        } else {
            for (unsigned char b : group) {
                const int32_t id = static_cast<int32_t>(b) + 3;
                if (id >= vocabSize())
                    throw Error("tokenizer '" + sourceName_ + "': byte fallback gives byte 0x" +
                                std::string(1, "0123456789ABCDEF"[b >> 4]) + std::string(1, "0123456789ABCDEF"[b & 15]) +
                                " the id " + std::to_string(id) + ", past the vocabulary of " + std::to_string(vocabSize()) +
                                " (run.c would read outside it; this tokenizer.bin has no byte pieces)");
                tokens.push_back(id);
            }
        }
        group.clear();
    }

    // run.c merges the best-scoring pair (score > -1e10, leftmost on ties) until none is left,
    // rescanning the whole sequence each time. The same choices, with a heap over a linked list.
    struct Candidate {
        float score;
        int32_t left;  // position; positions keep their order, so smaller is further left
        int32_t leftId, rightId, mergedId;
    };
    struct Lower {
        bool operator()(const Candidate& a, const Candidate& b) const {
            return a.score < b.score || (a.score == b.score && a.left > b.left);
        }
    };
    const auto count = static_cast<int32_t>(tokens.size());
    std::vector<int32_t> next(count), prev(count);
    for (int32_t i = 0; i < count; ++i) {
        next[i] = i + 1 < count ? i + 1 : -1;
        prev[i] = i - 1;
    }
    std::priority_queue<Candidate, std::vector<Candidate>, Lower> queue;
    std::string joined;
    auto consider = [&](int32_t left) {
        if (left < 0 || next[left] < 0)
            return;
        const int32_t right = next[left];
        joined.assign(pieces_[tokens[left]]).append(pieces_[tokens[right]]);
        const int32_t id = lookup(joined);
        if (id >= 0 && scores_[id] > -1e10f)
            queue.push({scores_[id], left, tokens[left], tokens[right], id});
    };
    for (int32_t i = 0; i + 1 < count; ++i)
        consider(i);
    while (!queue.empty()) {
        const Candidate top = queue.top();
        queue.pop();
        const int32_t right = next[top.left];
        if (tokens[top.left] != top.leftId || right < 0 || tokens[right] != top.rightId)
            continue;  // stale: a neighbour changed since
        tokens[top.left] = top.mergedId;
        tokens[right] = -1;
        next[top.left] = next[right];
        if (next[right] >= 0)
            prev[next[right]] = top.left;
        consider(prev[top.left]);
        consider(top.left);
    }
    std::vector<int32_t> ids;
    ids.reserve(tokens.size() + 1);
    for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = next[i])
        ids.push_back(tokens[i]);
    if (eos)
        ids.push_back(2);
    return ids;
}

std::string Llama2cTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string text;
    int32_t previous = -1;
    bool first = true;  // the first piece holds the dummy prefix even without BOS before it
    for (const int32_t id : ids) {
        checkId(id);
        const int32_t before = previous;
        previous = id;
        if (id == bosId() || id == eosId())
            continue;
        std::string_view piece = pieces_[id];
        if ((before == 1 || first) && !piece.empty() && piece.front() == ' ')
            piece.remove_prefix(1);
        first = false;
        if (const int byte = scannedByte(piece); byte >= 0)
            text += static_cast<char>(byte);
        else
            text.append(piece);
    }
    return text;
}

} // namespace npw
