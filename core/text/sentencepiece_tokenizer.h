#pragma once
// A SentencePiece tokenizer.model (LLaMA-1/2, Mistral, models trained with spm_train), encoded
// and decoded as Debian's libsentencepiece 0.1.97 does it (tests/tst_sentencepiece.cpp checks id
// for id against python3-sentencepiece), read by npw's own code (sentencepiece_model.h).
//
// Supported: BPE (merges the adjacent pair whose merged piece has the highest score, leftmost
// on ties) and unigram (Viterbi over the pieces' log-probabilities) models; byte fallback;
// the precompiled normalization charsmap (nmt_nfkc, nfkc, nmt_nfkc_cf, ...); user-defined,
// control, unused and byte pieces; add_dummy_prefix, remove_extra_whitespaces,
// escape_whitespaces. Refused by name: word and char models, treat_whitespace_as_suffix and a
// denormalizer (denormalizer_spec with rules).
#include "core/text/sentencepiece_model.h"
#include "core/text/tokenizer.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace npw {

namespace sentencepiece {
class Normalizer;
class PieceTrie;
}

class SentencePieceTokenizer final : public Tokenizer {
public:
    static std::shared_ptr<SentencePieceTokenizer> fromFile(const std::string& path);
    // `bytes`: a serialized ModelProto; `sourceName` names it in errors.
    static std::shared_ptr<SentencePieceTokenizer> fromBytes(std::string_view bytes, const std::string& sourceName);

    SentencePieceTokenizer(sentencepiece::ModelProto model, const std::string& sourceName);
    ~SentencePieceTokenizer() override;

    Kind kind() const override;
    // Text that is not valid UTF-8 is encoded as SentencePiece encodes it: each bad byte as U+FFFD.
    std::vector<int32_t> encode(const std::string& text, bool addBos) const override;
    // SentencePiece's DecodeIds: control pieces vanish, <unk> becomes the model's unk_surface
    // (" ⁇ " by default), byte pieces are joined into UTF-8 (U+FFFD per invalid byte), U+2581
    // becomes a space and the first piece loses its leading U+2581 (the dummy prefix).
    std::string decode(const std::vector<int32_t>& ids) const override;
    int32_t vocabSize() const override { return static_cast<int32_t>(model_.pieces.size()); }
    std::string tokenText(int32_t id) const override;
    int32_t bosId() const override { return bosId_; }
    int32_t eosId() const override { return eosId_; }
    int32_t unkId() const { return unkId_; }
    int32_t padId() const { return padId_; }

    // The text after SentencePiece's normalizer (what the model splits into pieces).
    std::string normalize(const std::string& text) const;
    // Pieces (text with U+2581, score, type), the trainer's and normalizer's settings: what a
    // GGUF export writes as llama.cpp's "llama" tokenizer.
    const std::vector<sentencepiece::Piece>& pieces() const { return model_.pieces; }
    const sentencepiece::TrainerSpec& trainerSpec() const { return model_.trainer; }
    const sentencepiece::NormalizerSpec& normalizerSpec() const { return model_.normalizer; }
    bool hasCharsMap() const { return hasCharsMap_; }
    const std::string& sourceName() const { return sourceName_; }

private:
    struct Symbol;
    // (piece text inside the normalized string, id) per piece, as the models return them.
    using EncodeResult = std::vector<std::pair<std::string_view, int32_t>>;
    EncodeResult encodeBpe(std::string_view normalized) const;
    EncodeResult encodeUnigram(std::string_view normalized) const;
    int32_t pieceToId(std::string_view piece) const;  // reserved pieces first, then the rest, else unk
    bool isType(int32_t id, sentencepiece::PieceType type) const {
        return id >= 0 && id < vocabSize() && model_.pieces[id].type == type;
    }
    void checkId(int32_t id) const;

    sentencepiece::ModelProto model_;
    std::string sourceName_;
    std::unique_ptr<sentencepiece::Normalizer> normalizer_;
    std::unique_ptr<sentencepiece::PieceTrie> userDefined_;  // frozen symbols of BPE
    std::unique_ptr<sentencepiece::PieceTrie> unigramTrie_;
    std::unordered_map<std::string_view, int32_t> normalIds_;    // normal, user-defined, unused
    std::unordered_map<std::string_view, int32_t> reservedIds_;  // unknown, control, byte
    int32_t byteIds_[256];
    bool hasCharsMap_ = false;
    int32_t unkId_ = -1, bosId_ = -1, eosId_ = -1, padId_ = -1;
    float minScore_ = 0.0f, maxScore_ = 0.0f;  // over normal pieces (unigram's unknown and user-defined scores)
};

} // namespace npw
