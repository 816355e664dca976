#pragma once
// Trains a SentencePiece-style BPE with byte fallback on a text corpus and writes it as a
// standard tokenizer.json (the same loader reads it and real LLaMA-2 tokenizers).
#include <cstdint>
#include <string>
#include <vector>

namespace npw {

struct BpeTrainOptions {
    int32_t vocabSize = 2048;  // total: 3 specials (<unk>, <s>, </s>) + 256 byte tokens + pieces
    int32_t minFrequency = 2;  // a pair seen fewer times is never merged
};

// Returns tokenizer.json text. Deterministic for a given corpus and options.
// `lines` are documents/lines of the training text (each one is prefixed with "▁" like
// SentencePiece's add_dummy_prefix; spaces become "▁").
std::string trainSentencePieceBpe(const std::vector<std::string>& lines, const BpeTrainOptions& options);

} // namespace npw
