#include "core/models/language_model.h"
#include "core/models/model_loader.h"
#include "core/util/error.h"

#include <filesystem>

namespace npw {

namespace {

std::string noTokenizer(const std::string& name) {
    return "model '" + name + "' has no tokenizer (no tokenizer.json, tokenizer.model or tokenizer.bin beside it); give one "
           "with --tokenizer FILE";
}

} // namespace

const CausalLm& LanguageModel::causal() const {
    if (sliced) return *sliced;
    if (model) return *model;
    throw Error("model '" + name + "' is not loaded");
}

std::vector<int32_t> LanguageModel::encode(const std::string& text, bool addBos) const {
    if (!tokenizer) throw Error(noTokenizer(name) + ", or token ids instead of text");
    return tokenizer->encode(text, addBos);
}

std::string LanguageModel::decode(const std::vector<int32_t>& ids) const {
    if (!tokenizer) throw Error(noTokenizer(name));
    return tokenizer->decode(ids);
}

void useTokenizerFile(LlamaCheckpoint& checkpoint, const std::string& tokenizerFile) {
    if (tokenizerFile.empty()) return;
    std::error_code ec;
    if (!std::filesystem::exists(tokenizerFile, ec))
        throw Error("--tokenizer '" + tokenizerFile + "': there is no such file (expected a tokenizer.json, tokenizer.model "
                    "or tokenizer.bin)");
    checkpoint.tokenizerPath = tokenizerFile;
}

std::shared_ptr<Tokenizer> openTokenizerOf(const LlamaCheckpoint& checkpoint, bool allowSmallVocab) {
    if (checkpoint.tokenizerPath.empty()) return nullptr;
    const int64_t vocab = checkpoint.config.vocab_size;
    std::shared_ptr<Tokenizer> tokenizer = Tokenizer::fromAnyFile(checkpoint.tokenizerPath, vocab);
    if (tokenizer->vocabSize() > vocab)
        throw Error("tokenizer '" + checkpoint.tokenizerPath + "' has " + std::to_string(tokenizer->vocabSize()) +
                    " tokens but the model's vocabulary is " + std::to_string(vocab) +
                    " (is it the tokenizer of another model?)");
    if (!allowSmallVocab && double(tokenizer->vocabSize()) < kMinTokenizerCoverage * double(vocab))
        throw Error("tokenizer '" + checkpoint.tokenizerPath + "' has " + std::to_string(tokenizer->vocabSize()) +
                    " tokens but the model's vocabulary is " + std::to_string(vocab) + ": it covers " +
                    std::to_string(int(100.0 * double(tokenizer->vocabSize()) / double(vocab))) +
                    " %, less than 90 % (is it the tokenizer of another model? --allow-small-vocab uses it anyway)");
    return tokenizer;
}

namespace {

// `ownedWeights`: the commands that change weights (prune, sweep, the studio) get owned float32
// copies; the ones that only run the model keep the mapped views in the file's dtype (the
// runtime reads float32, bfloat16 and float16 matrices as they are: llama.h), so a 7B in bf16
// costs its page cache, not a 27 GB float32 copy. LlamaModel checks the values of a mapped
// checkpoint as it takes them (weight_values.h).
LanguageModel openLlama(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile,
                        bool allowSmallVocab, bool ownedWeights) {
    LanguageModel lm;
    lm.name = model;
    // Mapped: the file's headers only; with owned weights, one conversion to float32 that reads
    // (and checks) each tensor once; a Copy load would be the same copy made while parsing.
    LlamaCheckpoint ckpt = loadLlamaCheckpoint(model, WeightStorage::Mapped);
    if (ownedWeights) copyWeightsIntoMemory(ckpt);
    useTokenizerFile(ckpt, tokenizerFile);
    lm.tokenizer = openTokenizerOf(ckpt, allowSmallVocab);
    lm.model = std::make_shared<LlamaModel>(std::move(ckpt), runtime);
    return lm;
}

} // namespace

LanguageModel openLanguageModel(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile,
                                bool allowSmallVocab) {
    return openLlama(model, runtime, tokenizerFile, allowSmallVocab, /*ownedWeights=*/true);
}

LanguageModel openCausalLanguageModel(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile,
                                      bool allowSmallVocab) {
    if (!SlicedLlama::isSlicedDirectory(model))
        return openLlama(model, runtime, tokenizerFile, allowSmallVocab, /*ownedWeights=*/false);
    LanguageModel lm;
    lm.name = model;
    lm.sliced = std::make_shared<SlicedLlama>(SlicedLlama::load(model, runtime));
    // The tokenizer copied into the export (or --tokenizer), checked against the vocabulary as a
    // LLaMA's is.
    LlamaCheckpoint tokenizerOnly;
    tokenizerOnly.config = lm.sliced->config();
    tokenizerOnly.tokenizerPath = lm.sliced->tokenizerPath();
    useTokenizerFile(tokenizerOnly, tokenizerFile);
    lm.tokenizer = openTokenizerOf(tokenizerOnly, allowSmallVocab);
    return lm;
}

} // namespace npw
