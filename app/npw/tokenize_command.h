#pragma once
// `npw tokenize`, which needs no tensor: npw-run registers it (commands_tokenize.cpp) and npw-text
// (app/text) runs it without LibTorch. The only thing it may need from a model beyond its files
// is the vocabulary size of a model whose config does not say it (for a llama2.c tokenizer.bin,
// which holds that many pieces): the caller supplies how that is read from the tensors.
#include "app/npw/cli_args.h"

#include <cstdint>
#include <functional>
#include <string>

namespace npw::cli {

inline constexpr const char* kTokenizeUsage =
    "MODEL|TOKENIZER (--text FILE | --string S) [--tokenizer FILE] [--no-bos] [--json]";
inline constexpr const char* kTokenizeSummary =
    "Token ids and pieces of a text with a model's tokenizer or a tokenizer file (tokenizer.json, "
    "tokenizer.model, tokenizer.bin), to compare with other tools.";

// The vocabulary size of MODEL from its tensors' shapes (Meta's release, llama2.c's ckpt.pt).
using VocabularyFromTensors = std::function<int64_t(const std::string& model)>;
int runTokenize(const Args& args, const VocabularyFromTensors& vocabularyFromTensors);

} // namespace npw::cli
