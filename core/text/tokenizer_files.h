#pragma once
// Telling tokenizer files apart by their content (issue 14): Tokenizer::fromAnyFile uses it, and
// a CLI can name what it found. A tokenizer.model may be SentencePiece protobuf (LLaMA-1/2,
// Mistral) or tiktoken text (Meta's LLaMA-3 release), so names alone cannot decide.
#include <string_view>

namespace npw {

enum class TokenizerFileKind {
    TokenizerJson,  // Hugging Face tokenizer.json
    SentencePiece,  // SentencePiece ModelProto (tokenizer.model)
    Llama2cBin,     // llama2.c tokenizer.bin
    Tiktoken,       // base64 piece and rank per line (LLaMA-3's tokenizer.model): refused
    Unknown,
};

TokenizerFileKind detectTokenizerFile(std::string_view bytes);
const char* tokenizerFileKindName(TokenizerFileKind kind);

} // namespace npw
