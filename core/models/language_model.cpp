#include "core/models/language_model.h"
#include "core/models/model_loader.h"
#include "core/util/error.h"

namespace npw {

std::vector<int32_t> LanguageModel::encode(const std::string& text, bool addBos) const {
    if (!tokenizer)
        throw Error("model '" + name + "' has no tokenizer.json beside it; give token ids instead");
    return tokenizer->encode(text, addBos);
}

std::string LanguageModel::decode(const std::vector<int32_t>& ids) const {
    if (!tokenizer) throw Error("model '" + name + "' has no tokenizer.json beside it");
    return tokenizer->decode(ids);
}

LanguageModel openLanguageModel(const std::string& model, const Runtime& runtime) {
    LanguageModel lm;
    lm.name = model;
    LlamaCheckpoint ckpt = loadLlamaCheckpoint(model);
    if (!ckpt.tokenizerPath.empty()) {
        lm.tokenizer = Tokenizer::fromFile(ckpt.tokenizerPath);
        if (lm.tokenizer->vocabSize() > ckpt.config.vocab_size)
            throw Error("tokenizer '" + ckpt.tokenizerPath + "' has " + std::to_string(lm.tokenizer->vocabSize()) +
                        " tokens but the model's vocabulary is " + std::to_string(ckpt.config.vocab_size));
    }
    lm.model = std::make_shared<LlamaModel>(std::move(ckpt), runtime);
    return lm;
}

} // namespace npw
