#pragma once
// A language model as users open it: the runtime model plus its tokenizer when one ships
// beside the checkpoint (llama2.c files often have none: then only token ids work).
#include "core/models/llama.h"
#include "core/models/sliced_llama.h"
#include "core/text/tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace npw {

struct LanguageModel {
    std::shared_ptr<LlamaModel> model;     // the LLaMA; null for a SliceGPT-sliced model
    std::shared_ptr<Tokenizer> tokenizer;  // null when the checkpoint has none
    std::string name;                      // as the user gave it (e.g. "demo:lm")
    // A SliceGPT-sliced model (openCausalLanguageModel), else null. Last, so that {model,
    // tokenizer, name} still initialises a LLaMA's.
    std::shared_ptr<SlicedLlama> sliced;

    // What runs text: the sliced model when there is one, else the LLaMA. npw::Error when
    // neither is there.
    const CausalLm& causal() const;

    // Text → ids; throws a clear error when there is no tokenizer.
    std::vector<int32_t> encode(const std::string& text, bool addBos) const;
    std::string decode(const std::vector<int32_t>& ids) const;
};

// `tokenizerFile`: a tokenizer to use instead of the model's own (`--tokenizer FILE`); "" takes
// the one beside the checkpoint (tokenizerFileOfModel in model_loader.h).
// `allowSmallVocab`: accept a tokenizer that covers less than kMinTokenizerCoverage of the
// model's vocabulary (openTokenizerOf).
LanguageModel openLanguageModel(const std::string& model, const Runtime& runtime, const std::string& tokenizerFile = "",
                                bool allowSmallVocab = false);
// The weights stay memory-mapped in the file's dtype where the format maps (safetensors, llama2.c
// .bin): read-only views, never a float32 copy of the whole model (no step writes into a model's
// weights; language_model.cpp says what each reads).
// The same, or a SliceGPT-sliced directory (sliced_llama.h) into `sliced`: for what only needs
// to run text (generate, compare, zeroshot, bench, eval). Commands that need a LLaMA's structure
// (prune, calibrate, export-gguf) open with openLanguageModel, which refuses the sliced model by name.
LanguageModel openCausalLanguageModel(const std::string& model, const Runtime& runtime,
                                      const std::string& tokenizerFile = "", bool allowSmallVocab = false);

// checkpoint.tokenizerPath = tokenizerFile (when not empty); npw::Error when there is no such file.
void useTokenizerFile(LlamaCheckpoint& checkpoint, const std::string& tokenizerFile);
// The checkpoint's tokenizer, whatever its kind; null when it has none. openModelTokenizer
// (core/text/tokenizer_files.h) with the model's vocabulary: it says what is refused and why.
std::shared_ptr<Tokenizer> openTokenizerOf(const LlamaCheckpoint& checkpoint, bool allowSmallVocab = false);

} // namespace npw
