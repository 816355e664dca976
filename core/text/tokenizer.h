#pragma once
// Tokenizers read from a Hugging Face tokenizer.json, implemented here (SentencePiece's
// library cannot share a process with LibTorch: notes/environment.md).
//  - "sentencepiece-bpe": BPE over "▁"-prefixed text with byte fallback (<0xNN> tokens),
//    as LLaMA-1/2 (normalizer Prepend("▁") + Replace(" ", "▁") or Metaspace pre-tokenizer).
//  - "byte-level-bpe": GPT-2 style byte-to-unicode mapping, regex pre-tokenizer with Unicode
//    classes (ICU), merges by rank, as LLaMA-3.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace npw {

class Tokenizer {
public:
    // SentencePieceUnigram and Llama2c (issue 14): a tokenizer.model of unigram type, a llama2.c
    // tokenizer.bin; SentencePieceBpe is also a BPE tokenizer.model (sentencepiece_tokenizer.h).
    enum class Kind { SentencePieceBpe, ByteLevelBpe, SentencePieceUnigram, Llama2c };

    static std::shared_ptr<Tokenizer> fromFile(const std::string& tokenizerJsonPath);
    // Issue 14 (defined in tokenizer_files.cpp): any tokenizer file npw reads, told apart by its
    // content, not its name: tokenizer.json (JSON), SentencePiece tokenizer.model (protobuf),
    // Meta's LLaMA-3 tokenizer.model (tiktoken text, read as byte-level BPE: tiktoken.h),
    // llama2.c tokenizer.bin. `modelVocabSize` >= 0: a tokenizer.bin holds that many tokens (run.c
    // reads the model's vocab_size of them); the other kinds ignore it.
    static std::shared_ptr<Tokenizer> fromAnyFile(const std::string& path, int64_t modelVocabSize = -1);
    static std::shared_ptr<Tokenizer> fromJson(const std::string& json, const std::string& sourceName);
    // A parsed tokenizer.json (or one built in memory, as from a tiktoken file).
    static std::shared_ptr<Tokenizer> fromJsonValue(const nlohmann::json& root, const std::string& sourceName);
    virtual ~Tokenizer() = default;

    virtual Kind kind() const = 0;
    // Token ids of text; a BOS id first when addBos and the tokenizer has one.
    virtual std::vector<int32_t> encode(const std::string& text, bool addBos) const = 0;
    // Text of ids (special tokens such as BOS/EOS are skipped); decode(encode(t)) == t.
    virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
    virtual int32_t vocabSize() const = 0;
    virtual std::string tokenText(int32_t id) const = 0;  // the vocabulary string
    virtual int32_t bosId() const = 0;  // -1 when none
    virtual int32_t eosId() const = 0;  // -1 when none
};

} // namespace npw
