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

// Every command keeps the mapped views in the file's dtype (the runtime reads float32, bfloat16
// and float16 matrices as they are: llama.h), so a 7B in bf16 costs its page cache, not a 27 GB
// float32 copy. No step writes into a model's weights: calibration and scoring read them (score
// and compensation widen one projection at a time to float64), applyMask builds a new pruned
// checkpoint (float32, widened a layer at a time: apply.cpp) and shares the unchanged tensors,
// the baselines slice, rotate or copy into new tensors (LLM-Pruner's gradients go to float32
// leaf copies of each block). The views are read-only (PROT_READ): a write would fault, not
// change the file. LlamaModel checks the values of a mapped checkpoint as it takes them
// (weight_values.h). Formats that do not map (Meta .pth, llama2.c checkpoints, GGUF) load owned.
LanguageModel openLlama(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile,
                        bool allowSmallVocab) {
    LanguageModel lm;
    lm.name = model;
    LlamaCheckpoint ckpt = loadLlamaCheckpoint(model, WeightStorage::Mapped);
    useTokenizerFile(ckpt, tokenizerFile);
    lm.tokenizer = openTokenizerOf(ckpt, allowSmallVocab);
    lm.model = std::make_shared<LlamaModel>(std::move(ckpt), runtime);
    return lm;
}

} // namespace

LanguageModel openLanguageModel(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile,
                                bool allowSmallVocab) {
    return openLlama(model, runtime, tokenizerFile, allowSmallVocab);
}

LanguageModel openCausalLanguageModel(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile,
                                      bool allowSmallVocab) {
    if (locateCheckpoint(model).layout != CheckpointLayout::SlicedDirectory)
        return openLlama(model, runtime, tokenizerFile, allowSmallVocab);
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
