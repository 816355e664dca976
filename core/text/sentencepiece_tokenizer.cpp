#include "core/text/sentencepiece_tokenizer.h"

#include "core/text/sentencepiece_normalizer.h"
#include "core/text/utf8.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <queue>
#include <sstream>

namespace npw {

using sentencepiece::ModelType;
using sentencepiece::PieceType;

namespace {

constexpr std::string_view spaceSymbol = "\xE2\x96\x81";  // U+2581
constexpr std::string_view replacementCharacter = "\xEF\xBF\xBD";  // U+FFFD
constexpr float unkPenalty = 10.0f;  // unigram: an unknown character scores min score - 10

// SentencePiece's string_util::OneCharLen: the length a UTF-8 lead byte announces.
std::size_t oneCharLen(char lead) {
    return static_cast<std::size_t>("\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(static_cast<unsigned char>(lead)) >> 4]);
}

std::string readWholeFile(const std::string& path, std::size_t limit, const char* what) {
    if (std::filesystem::is_directory(path))
        throw Error(std::string(what) + " '" + path + "' is a folder; give the file in it");
    requireRegularFile(path, what);  // a FIFO is refused, never waited on
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file)
        throw Error(std::string("cannot open ") + what + " '" + path + "': " + std::strerror(errno));
    const std::streamoff size = file.tellg();
    if (size < 0)
        throw Error(std::string("cannot read ") + what + " '" + path + "'");
    if (static_cast<uint64_t>(size) > limit)
        throw Error(std::string(what) + " '" + path + "' is " + std::to_string(size) + " bytes, more than npw reads (" +
                    std::to_string(limit >> 20) + " MiB)");
    std::string content(static_cast<std::size_t>(size), '\0');
    file.seekg(0);
    if (!file.read(content.data(), size))
        throw Error(std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno));
    return content;
}

} // namespace

struct SentencePieceTokenizer::Symbol {
    int32_t prev;
    int32_t next;
    bool freeze;  // a user-defined symbol: never merged
    std::string_view piece;
};

std::shared_ptr<SentencePieceTokenizer> SentencePieceTokenizer::fromFile(const std::string& path) {
    const std::string bytes = readWholeFile(path, sentencepiece::maxModelBytes, "SentencePiece model");
    return fromBytes(bytes, path);
}

std::shared_ptr<SentencePieceTokenizer> SentencePieceTokenizer::fromBytes(std::string_view bytes, const std::string& sourceName) {
    const std::string source = "SentencePiece model '" + sourceName + "'";
    return std::make_shared<SentencePieceTokenizer>(sentencepiece::parseModelProto(bytes, source), sourceName);
}

SentencePieceTokenizer::SentencePieceTokenizer(sentencepiece::ModelProto model, const std::string& sourceName)
    : model_(std::move(model)), sourceName_(sourceName) {
    const std::string source = "SentencePiece model '" + sourceName_ + "'";
    const ModelType type = model_.trainer.modelType;
    if (type != ModelType::Bpe && type != ModelType::Unigram)
        throw Error(source + ": trainer_spec.model_type is " + sentencepiece::modelTypeName(type) +
                    "; npw reads SentencePiece bpe models (LLaMA-1/2, Mistral) and unigram models, not word or char models");
    if (model_.trainer.treatWhitespaceAsSuffix)
        throw Error(source + ": trainer_spec.treat_whitespace_as_suffix is true (U+2581 ends words instead of "
                             "starting them); npw does not support it");
    if (model_.hasDenormalizer && !model_.denormalizer.precompiledCharsmap.empty())
        throw Error(source + ": denormalizer_spec has compiled rules (a decode-time normalizer); npw does not support it");

    std::vector<std::string> userDefined;
    std::fill(std::begin(byteIds_), std::end(byteIds_), -1);
    minScore_ = FLT_MAX;
    maxScore_ = FLT_MIN;  // as SentencePiece's unigram model starts it (the smallest positive float)
    for (std::size_t i = 0; i < model_.pieces.size(); ++i) {
        const sentencepiece::Piece& piece = model_.pieces[i];
        const auto id = static_cast<int32_t>(i);
        const bool normalGroup =
            piece.type == PieceType::Normal || piece.type == PieceType::UserDefined || piece.type == PieceType::Unused;
        (normalGroup ? normalIds_ : reservedIds_).emplace(piece.text, id);
        if (piece.type == PieceType::UserDefined)
            userDefined.push_back(piece.text);
        if (piece.type == PieceType::Unknown)
            unkId_ = id;
        if (piece.type == PieceType::Byte)
            byteIds_[sentencepiece::pieceToByte(piece.text)] = id;
        if (piece.type == PieceType::Normal) {
            minScore_ = std::min(minScore_, piece.score);
            maxScore_ = std::max(maxScore_, piece.score);
        }
    }
    if (!userDefined.empty()) {
        userDefined_ = std::make_unique<sentencepiece::PieceTrie>();
        for (const std::string& symbol : userDefined)
            userDefined_->insert(symbol, 0);
    }
    if (type == ModelType::Unigram) {
        if (normalIds_.empty())
            throw Error(source + ": a unigram model with no normal, user-defined or unused pieces cannot encode anything");
        unigramTrie_ = std::make_unique<sentencepiece::PieceTrie>();
        for (const auto& [text, id] : normalIds_)
            unigramTrie_->insert(text, id);
    }
    normalizer_ = std::make_unique<sentencepiece::Normalizer>(model_.normalizer, userDefined, source, "normalizer_spec");
    hasCharsMap_ = !model_.normalizer.precompiledCharsmap.empty();  // kept: a GGUF export ("t5") writes it

    // SentencePieceProcessor::bos_id() and friends: the id of the named piece when it has the
    // expected type, else -1 (the piece names default when the trainer spec leaves them empty).
    auto named = [&](const std::string& name, const char* fallback, PieceType expected) {
        const int32_t id = pieceToId(name.empty() ? std::string_view(fallback) : std::string_view(name));
        return isType(id, expected) ? id : -1;
    };
    bosId_ = named(model_.trainer.bosPiece, "<s>", PieceType::Control);
    eosId_ = named(model_.trainer.eosPiece, "</s>", PieceType::Control);
    padId_ = named(model_.trainer.padPiece, "<pad>", PieceType::Control);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Tokenizer::Kind SentencePieceTokenizer::kind() const {
    return model_.trainer.modelType == ModelType::Unigram ? Kind::SentencePieceUnigram : Kind::SentencePieceBpe;
}

int32_t SentencePieceTokenizer::pieceToId(std::string_view piece) const {
    if (const auto it = reservedIds_.find(piece); it != reservedIds_.end())
        return it->second;
    if (const auto it = normalIds_.find(piece); it != normalIds_.end())
        return it->second;
    return unkId_;
}

void SentencePieceTokenizer::checkId(int32_t id) const {
    if (id < 0 || id >= vocabSize())
        throw Error("tokenizer '" + sourceName_ + "': token id " + std::to_string(id) +
                    " is out of range (the vocabulary has ids 0.." + std::to_string(vocabSize() - 1) + ")");
}

std::string SentencePieceTokenizer::tokenText(int32_t id) const {
    checkId(id);
    return model_.pieces[id].text;
}

std::string SentencePieceTokenizer::normalize(const std::string& text) const { return normalizer_->normalize(text); }

// bpe::Model::SampleEncode with no dropout: one symbol per character (a user-defined symbol is
// one frozen symbol), then repeatedly the adjacent pair whose joined text is a piece of the
// highest score is merged, leftmost first; unused pieces are split back into what made them.
SentencePieceTokenizer::EncodeResult SentencePieceTokenizer::encodeBpe(std::string_view normalized) const {
    struct Pair {
        int32_t left;
        int32_t right;
        float score;
        std::size_t size;
    };
    struct Lower {
        bool operator()(const Pair& a, const Pair& b) const {
            return a.score < b.score || (a.score == b.score && a.left > b.left);
        }
    };
    std::priority_queue<Pair, std::vector<Pair>, Lower> agenda;
    std::vector<Symbol> symbols;
    symbols.reserve(normalized.size());
    std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> reverseMerges;

    auto addPair = [&](int32_t left, int32_t right) {
        if (left == -1 || right == -1 || symbols[left].freeze || symbols[right].freeze)
            return;
        const std::string_view piece(symbols[left].piece.data(), symbols[left].piece.size() + symbols[right].piece.size());
        const auto it = normalIds_.find(piece);
        if (it == normalIds_.end())
            return;
        agenda.push({left, right, model_.pieces[it->second].score, piece.size()});
        if (model_.pieces[it->second].type == PieceType::Unused)
            reverseMerges[piece] = {symbols[left].piece, symbols[right].piece};
    };

    for (std::string_view rest = normalized; !rest.empty();) {
        Symbol symbol{};
        std::size_t length = userDefined_ ? userDefined_->longestPrefix(rest) : 0;
        symbol.freeze = length > 0;
        if (length == 0)
            length = std::min(rest.size(), oneCharLen(rest.front()));
        const auto index = static_cast<int32_t>(symbols.size());
        symbol.piece = rest.substr(0, length);
        symbol.prev = index - 1;
        rest.remove_prefix(length);
        symbol.next = rest.empty() ? -1 : index + 1;
        symbols.push_back(symbol);
    }
    if (symbols.empty())
        return {};
    for (std::size_t i = 1; i < symbols.size(); ++i)
        addPair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

    while (!agenda.empty()) {
        const Pair top = agenda.top();
        agenda.pop();
        Symbol& left = symbols[top.left];
        Symbol& right = symbols[top.right];
        if (left.piece.empty() || right.piece.empty() || left.piece.size() + right.piece.size() != top.size)
            continue;  // one of them was merged since
        left.piece = std::string_view(left.piece.data(), left.piece.size() + right.piece.size());
        left.next = right.next;
        if (right.next >= 0)
            symbols[right.next].prev = top.left;
        right.piece = std::string_view();
        addPair(left.prev, top.left);
        addPair(top.left, left.next);
    }

    EncodeResult output;
    std::vector<std::string_view> stack;
    for (int32_t index = 0; index != -1; index = symbols[index].next) {
        stack.push_back(symbols[index].piece);
        while (!stack.empty()) {  // SentencePiece's recursive resegment, left part first
            const std::string_view piece = stack.back();
            stack.pop_back();
            const int32_t id = pieceToId(piece);
            const auto split = isType(id, PieceType::Unused) ? reverseMerges.find(piece) : reverseMerges.end();
            if (split == reverseMerges.end()) {
                output.emplace_back(piece, id);
                continue;
            }
            stack.push_back(split->second.second);
            stack.push_back(split->second.first);
        }
    }
    return output;
}

// unigram::Model::EncodeOptimized: Viterbi over byte positions; at each character start every
// piece that begins there extends the best path ending at its start; a character no
// one-character piece covers gets the unknown piece at min score - 10. Float and double are
// mixed exactly as SentencePiece mixes them, so ties fall the same way.
SentencePieceTokenizer::EncodeResult SentencePieceTokenizer::encodeUnigram(std::string_view normalized) const {
    struct BestPathNode {
        int32_t id = -1;
        float bestPathScore = 0;
        int64_t startsAt = -1;
    };
    const std::size_t size = normalized.size();
    const float unkScore = minScore_ - unkPenalty;
    std::vector<BestPathNode> bestPathEndsAt(size + 1);
    std::size_t startsAt = 0;
    while (startsAt < size) {
        const float bestPathScoreTillHere = bestPathEndsAt[startsAt].bestPathScore;
        bool hasSingleNode = false;
        const std::size_t mblen = std::min(oneCharLen(normalized[startsAt]), size - startsAt);
        unigramTrie_->forEachPrefix(normalized.substr(startsAt), [&](std::size_t length, int32_t id) {
            const sentencepiece::Piece& piece = model_.pieces[id];
            if (piece.type == PieceType::Unused)
                return;
            BestPathNode& target = bestPathEndsAt[startsAt + length];
            const double score = piece.type == PieceType::UserDefined
                                     ? static_cast<double>(static_cast<float>(length) * maxScore_) - 0.1
                                     : static_cast<double>(piece.score);
            const double candidate = score + static_cast<double>(bestPathScoreTillHere);
            if (target.startsAt == -1 || candidate > static_cast<double>(target.bestPathScore)) {
                target.bestPathScore = static_cast<float>(candidate);
                target.startsAt = static_cast<int64_t>(startsAt);
                target.id = id;
            }
            if (!hasSingleNode && length == mblen)
                hasSingleNode = true;
        });
        if (!hasSingleNode) {
            BestPathNode& target = bestPathEndsAt[startsAt + mblen];
            const float candidate = unkScore + bestPathScoreTillHere;
            if (target.startsAt == -1 || candidate > target.bestPathScore) {
                target.bestPathScore = candidate;
                target.startsAt = static_cast<int64_t>(startsAt);
                target.id = unkId_;
            }
        }
        startsAt += mblen;
    }
    EncodeResult results;
    for (std::size_t endsAt = size; endsAt > 0;) {
        const BestPathNode& node = bestPathEndsAt[endsAt];
        const auto begin = static_cast<std::size_t>(node.startsAt);
        results.emplace_back(normalized.substr(begin, endsAt - begin), node.id);
        endsAt = begin;
    }
    std::reverse(results.begin(), results.end());
    return results;
}

std::vector<int32_t> SentencePieceTokenizer::encode(const std::string& text, bool addBos) const {
    const std::string normalized = normalizer_->normalize(text);
    if (normalized.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max() / 2))
        throw Error("tokenizer '" + sourceName_ + "': the text is too long to encode at once (" +
                    std::to_string(text.size()) + " bytes)");
    const EncodeResult result =
        model_.trainer.modelType == ModelType::Unigram ? encodeUnigram(normalized) : encodeBpe(normalized);

    // SentencePieceProcessor::PopulateSentencePieceText: unknown pieces become their UTF-8 bytes
    // with byte fallback; without it, a run of unknown pieces is one unknown id.
    std::vector<int32_t> ids;
    ids.reserve(result.size() + 1);
    if (addBos && bosId_ >= 0)
        ids.push_back(bosId_);
    bool previousUnknown = false;
    for (const auto& [piece, id] : result) {
        const bool unknown = isType(id, PieceType::Unknown);
        const bool control = isType(id, PieceType::Control);
        if (!control && unknown && model_.trainer.byteFallback) {
            for (unsigned char byte : piece)
                ids.push_back(byteIds_[byte]);
        } else if (control || !(previousUnknown && unknown)) {
            ids.push_back(id);
        }
        previousUnknown = unknown;
    }
    return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
    // SentencePieceProcessor::Decode(ids): ids become pieces and pieces ids again (so a piece
    // that is both normal and reserved decodes as the reserved one).
    std::vector<std::pair<std::string_view, int32_t>> pieces;
    pieces.reserve(ids.size());
    for (int32_t id : ids) {
        checkId(id);
        const std::string_view piece = model_.pieces[id].text;
        pieces.emplace_back(piece, pieceToId(piece));
    }
    std::string text;
    auto appendBytes = [&](std::size_t begin, std::size_t end) {
        std::string bytes;
        for (std::size_t i = begin; i < end; ++i)
            bytes += static_cast<char>(sentencepiece::pieceToByte(pieces[i].first));
        for (std::size_t offset = 0; offset < bytes.size();) {
            const std::size_t length = utf8::charLength(bytes, offset);
            if (length == 0) {
                text += replacementCharacter;
                ++offset;
            } else {
                text.append(bytes, offset, length);
                offset += length;
            }
        }
    };
    const std::string& unkSurface = model_.trainer.unkSurface;  // the default " ⁇ " unless the file sets it
    const sentencepiece::NormalizerSpec& spec = model_.normalizer;
    // The leading U+2581 of the first pieces is the dummy prefix: dropped from the first piece
    // that has one, or, with remove_extra_whitespaces, from every piece until text appears.
    bool atStart = true, startSpaceSeen = false;
    std::size_t byteStart = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const auto [piece, id] = pieces[i];
        if (isType(id, PieceType::Byte))
            continue;
        appendBytes(byteStart, i);
        byteStart = i + 1;
        if (startSpaceSeen || !text.empty())
            atStart = false;
        startSpaceSeen = false;
        if (isType(id, PieceType::Control))
            continue;
        if (isType(id, PieceType::Unknown)) {
            text += piece == model_.pieces[id].text ? std::string_view(unkSurface) : piece;
            continue;
        }
        std::string_view rest = piece;
        if (atStart && (spec.addDummyPrefix || spec.removeExtraWhitespaces) &&
            rest.substr(0, spaceSymbol.size()) == spaceSymbol) {
            rest.remove_prefix(spaceSymbol.size());
            startSpaceSeen = !spec.removeExtraWhitespaces;
        }
        for (std::size_t hit; (hit = rest.find(spaceSymbol)) != std::string_view::npos;) {
            text.append(rest.substr(0, hit));
            text += ' ';
            rest.remove_prefix(hit + spaceSymbol.size());
        }
        text.append(rest);
    }
    appendBytes(byteStart, pieces.size());
    return text;
}

} // namespace npw
