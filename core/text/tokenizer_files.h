#pragma once
// Telling tokenizer files apart by their content (issue 14): Tokenizer::fromAnyFile uses it, and
// a CLI can name what it found. A tokenizer.model may be SentencePiece protobuf (LLaMA-1/2,
// Mistral) or tiktoken text (Meta's LLaMA-3 release), so names alone cannot decide.
#include "core/text/tokenizer.h"

#include <string>
#include <string_view>

namespace npw {

enum class TokenizerFileKind {
    TokenizerJson,  // Hugging Face tokenizer.json
    SentencePiece,  // SentencePiece ModelProto (tokenizer.model)
    Llama2cBin,     // llama2.c tokenizer.bin
    Tiktoken,       // base64 piece and rank per line (LLaMA-3's tokenizer.model): tiktoken.h
    Unknown,
};

TokenizerFileKind detectTokenizerFile(std::string_view bytes);
const char* tokenizerFileKindName(TokenizerFileKind kind);

// A tokenizer file's bytes (at most 1 GiB); npw::Error naming the path when it cannot be read
// or is a folder.
std::string readTokenizerFileBytes(const std::string& path);

// The name a model folder gives a tokenizer of this kind: tokenizer.json, tokenizer.model
// (SentencePiece and tiktoken), tokenizer.bin; "" for Unknown. An export writes the tokenizer
// under this name, so that the folder reopens with it.
const char* tokenizerFileNameFor(TokenizerFileKind kind);

// The tokenizer file of a model folder: tokenizer.json, else tokenizer.model, else
// tokenizer.bin (tokenizer.json wins: a Hugging Face folder of LLaMA-2 or Mistral ships both,
// and its tokenizer.json also carries the added tokens); "" when the folder has none of them.
std::string findTokenizerFile(const std::string& dir);

// "sentencepiece-bpe", "byte-level-bpe", "sentencepiece-unigram", "llama2c".
const char* tokenizerKindName(Tokenizer::Kind kind);

// The tokenizer a user gives with --tokenizer FILE: npw::Error when there is no such file.
void requireGivenTokenizerFile(const std::string& path);

// A model's tokenizer from `path`, read with the model's vocabulary size (a tokenizer.bin holds
// that many pieces, as run.c reads it). npw::Error when it names more tokens than the model has
// embedding rows, or — unless allowSmallVocab — fewer than kMinTokenizerCoverage of them: many
// real models pad the embedding table beyond their tokenizer (Code Llama, Qwen: a few percent),
// but a tokenizer far smaller is another model's, and its ids mean other tokens (perplexity in
// the tens of thousands, without a word). No LibTorch: npw info runs it in npw-text too.
inline constexpr double kMinTokenizerCoverage = 0.9;
std::shared_ptr<Tokenizer> openModelTokenizer(const std::string& path, int64_t modelVocab, bool allowSmallVocab);

} // namespace npw
