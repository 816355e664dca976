#pragma once
// A language model as users open it: the runtime model plus its tokenizer when one ships
// beside the checkpoint (llama2.c files often have none: then only token ids work).
#include "core/models/llama.h"
#include "core/text/tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace npw {

struct LanguageModel {
    std::shared_ptr<LlamaModel> model;
    std::shared_ptr<Tokenizer> tokenizer;  // null when the checkpoint has none
    std::string name;                      // as the user gave it (e.g. "demo:lm")

    // Text → ids; throws a clear error when there is no tokenizer.
    std::vector<int32_t> encode(const std::string& text, bool addBos) const;
    std::string decode(const std::vector<int32_t>& ids) const;
};

LanguageModel openLanguageModel(const std::string& model, const Runtime& runtime);

} // namespace npw
