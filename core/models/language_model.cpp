#include "core/models/language_model.h"
#include "core/models/model_loader.h"
#include "core/text/tokenizer_files.h"
#include "core/util/error.h"
#include "core/models/tokenizer_advice.h"
#include "core/util/front_end.h"

#include <filesystem>

namespace npw {

namespace {

// How a tokenizer is given, as the program speaking takes it (core/util/front_end.h).
std::string giveATokenizer(int64_t vocab) {
    if (frontEnd() == FrontEnd::Studio)
        return "put its tokenizer beside the checkpoint (tokenizer.json, tokenizer.model or tokenizer.bin; for a llama2.c "
               ".bin also tok" + std::to_string(vocab) + ".bin or tok" + std::to_string(vocab) +
               ".model) and open the model again";
    return "give one with --tokenizer FILE";
}

} // namespace

std::string noTokenizerMessage(const std::string& name, int64_t vocab) {
    return "model '" + name + "' has no tokenizer (no tokenizer.json, tokenizer.model or tokenizer.bin beside it); " +
           giveATokenizer(vocab);
}

const CausalLm& LanguageModel::causal() const {
    if (sliced) return *sliced;
    if (model) return *model;
    throw Error("model '" + name + "' is not loaded");
}

std::vector<int32_t> LanguageModel::encode(const std::string& text, bool addBos) const {
    if (!tokenizer)
        throw Error(noTokenizerMessage(name, causal().config().vocab_size) +
                    (frontEnd() == FrontEnd::Studio ? ", or use token ids instead of text (the \"ids\" box beside the file)"
                                                    : ", or token ids instead of text"));
    return tokenizer->encode(text, addBos);
}

std::string LanguageModel::decode(const std::vector<int32_t>& ids) const {
    if (!tokenizer) throw Error(noTokenizerMessage(name, causal().config().vocab_size));
    return tokenizer->decode(ids);
}

void useTokenizerFile(LlamaCheckpoint& checkpoint, const std::string& tokenizerFile) {
    if (tokenizerFile.empty()) return;
    requireGivenTokenizerFile(tokenizerFile);
    checkpoint.tokenizerPath = tokenizerFile;
}

std::shared_ptr<Tokenizer> openTokenizerOf(const LlamaCheckpoint& checkpoint, bool allowSmallVocab) {
    if (checkpoint.tokenizerPath.empty()) return nullptr;
    return openModelTokenizer(checkpoint.tokenizerPath, checkpoint.config.vocab_size, allowSmallVocab);
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
