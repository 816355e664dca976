#pragma once
// llama2.c's tokenizer.bin (karpathy/llama2.c: written by tokenizer.py's export, read by run.c's
// build_tokenizer): a u32 max_token_length, then per token a f32 score, a u32 length and the
// bytes (SentencePiece pieces with U+2581 written as a space, BOS/EOS as "\n<s>\n"/"\n</s>\n").
//
// encode() is run.c's encode, step for step: a " " token first for non-empty text (the dummy
// prefix), one token per UTF-8 character found in the vocabulary, else its bytes as ids byte + 3,
// then the adjacent pair whose concatenation is in the vocabulary with the highest score
// (strictly above -1e10, leftmost on ties) is merged until none is left; BOS (id 1) takes part
// in the merging as in run.c. The text ends at its first NUL byte, as a C string does.
// tests/tst_sentencepiece.cpp checks the ids against run.c itself.
#include "core/text/tokenizer.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace npw {

class Llama2cTokenizer final : public Tokenizer {
public:
    // `vocabSize` < 0: read tokens up to the end of the file (it must end after a whole token).
    // `vocabSize` >= 0: read exactly that many, as run.c does with the model's vocab_size, and
    // ignore what follows. Throws npw::Error naming the file, the token and the field on a
    // truncated file, a negative or oversized length, a NaN score, a piece with a NUL byte or
    // invalid UTF-8, a vocabulary larger than npw's limit.
    static std::shared_ptr<Llama2cTokenizer> fromFile(const std::string& path, int64_t vocabSize = -1);
    static std::shared_ptr<Llama2cTokenizer> fromBytes(std::string_view bytes, const std::string& sourceName,
                                                       int64_t vocabSize = -1);
    // True when `bytes` starts like a tokenizer.bin: a max_token_length of 1..65535 (whose two
    // high bytes are zero, which a protobuf or JSON file never starts with).
    static bool looksLikeTokenizerBin(std::string_view bytes);

    static constexpr std::size_t maxTokens = std::size_t{1} << 22;
    static constexpr uint32_t maxTokenLength = 65535;

    Kind kind() const override { return Kind::Llama2c; }
    std::vector<int32_t> encode(const std::string& text, bool addBos) const override { return encode(text, addBos, false); }
    // run.c's encode(text, bos, eos).
    std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const;
    // Pieces joined as run.c's decode prints them: BOS (1) and EOS (2) are skipped, a piece
    // right after BOS or at the start loses its leading space (the dummy prefix), <0xNN> pieces
    // are their byte. Bytes that do not form UTF-8 are kept as they are.
    std::string decode(const std::vector<int32_t>& ids) const override;
    int32_t vocabSize() const override { return static_cast<int32_t>(pieces_.size()); }
    std::string tokenText(int32_t id) const override;
    int32_t bosId() const override { return vocabSize() > 1 ? 1 : -1; }  // run.c's fixed ids
    int32_t eosId() const override { return vocabSize() > 2 ? 2 : -1; }
    float score(int32_t id) const;
    uint32_t maxTokenLengthOfFile() const { return maxTokenLength_; }

    Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores, uint32_t maxTokenLength,
                     std::string sourceName);

private:
    int32_t lookup(std::string_view piece) const;  // run.c's str_lookup (-1 when absent)
    void checkId(int32_t id) const;

    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::vector<int32_t> sorted_;  // ids sorted by piece bytes, then id (glibc's stable qsort)
    uint32_t maxTokenLength_ = 0;
    std::string sourceName_;
};

} // namespace npw
