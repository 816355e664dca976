#pragma once
// Export of a LLaMA-family checkpoint, dense or pruned, to a GGUF file llama.cpp runs.
//
//  - Uniform models (every layer the same heads, KV heads and MLP width) as architecture
//    `llama`; non-uniform pruned ones as `deci` (Nemotron-NAS), the llama.cpp architecture
//    that reads per-layer `attention.head_count`, `attention.head_count_kv` and
//    `feed_forward_length` arrays (plain `llama` builds every layer with layer 0's sizes).
//  - Q/K rows go from Hugging Face's half-split rotary layout to llama.cpp's adjacent pairs;
//    llama2.c / Meta-layout checkpoints are already in it.
//  - Families: Mistral as `llama`; Llama 3.1+'s llama3 RoPE scaling as `rope_freqs.weight`,
//    linear scaling as `rope.scaling.*`; Qwen2 / Qwen3 (dense or pruned uniformly per layer) as
//    `qwen2` / `qwen3`, whose graphs rotate halves as Hugging Face does (no permutation); a Qwen2
//    with pruned heads padded back with zero heads (its q_proj must be hidden × hidden there).
//    Refused by name: non-uniform Qwen (deci lacks q/k/v biases and q/k norms), FLAP's biases on
//    Qwen, q/k/v biases where the llama/deci graphs cannot take them.
//  - Tokenizer metadata from the checkpoint's tokenizer.json, SentencePiece tokenizer.model or
//    llama2.c tokenizer.bin: `llama` (SentencePiece-style: tokens, scores, token types) or `gpt2`
//    (byte-level: tokens, types, merges); or, asked for, a placeholder vocabulary (ids only).
//  - The file is written atomically; the source checkpoint is never overwritten.
#include "core/io/gguf.h"
#include "core/models/llama_weights.h"

#include <string>
#include <vector>

namespace npw {

enum class GgufDtype { F32, F16, BF16 };
GgufDtype parseGgufDtype(const std::string& name);  // "f32" | "f16" | "bf16"; npw::Error listing the choices

struct GgufExportOptions {
    GgufDtype dtype = GgufDtype::F32;  // of the 2-D weights; norms and biases stay F32 (llama.cpp expects it)
    std::string name;                  // general.name; empty: the checkpoint's folder or file name
    // No tokenizer in the file: a placeholder vocabulary (one control token "<id:N>" per row), for
    // llama.cpp to run on token ids. Taken even when the checkpoint has a tokenizer.
    bool placeholderVocabulary = false;
};

struct GgufLayerShape {
    int64_t heads = 0, kvHeads = 0, feedForward = 0;  // as written (after padding)
    bool paddedHead = false;     // one zero head added (see gguf_export.cpp)
    bool paddedChannel = false;  // one zero MLP channel added
};

struct GgufExportReport {
    std::string path;
    std::string architecture;    // "llama", "deci", "qwen2" or "qwen3"
    std::string tokenizerModel;  // "llama", "gpt2" or "none (placeholder ids)"
    std::string dtype;           // "f32", "f16" or "bf16"
    int64_t tensors = 0;
    int64_t parameters = 0;      // elements written (padding included)
    uint64_t bytes = 0;          // file size
    std::vector<GgufLayerShape> layers;
    std::vector<std::string> notes;  // padding and other facts a user should know
};

// The metadata and tensors (not yet written) for a checkpoint. Each tensor is made, converted
// and checked (finite; f16: in range) only when writeGguf writes it, one at a time, so a
// memory-mapped checkpoint (WeightStorage::Mapped) is exported without ever being whole in memory;
// the plan keeps the checkpoint's tensors alive. Throws npw::Error, naming the
// checkpoint and the reason, for what llama.cpp cannot run exactly: no tokenizer.json, a
// tokenizer vocabulary larger than the model's, head_dim odd, F16 overflow of a weight.
struct GgufExportPlan {
    GgufMetadata metadata;
    std::vector<GgufTensorToWrite> tensors;
    GgufExportReport report;
};
GgufExportPlan planGgufExport(const LlamaCheckpoint& checkpoint, const GgufExportOptions& options);

GgufExportReport exportGguf(const LlamaCheckpoint& checkpoint, const std::string& outPath,
                            const GgufExportOptions& options = {});

// The tokenizer.ggml.* metadata of a tokenizer file for a model with vocabSize embedding rows:
// a tokenizer.json or LLaMA-3's tiktoken tokenizer.model ("llama" or "gpt2"), a SentencePiece
// BPE tokenizer.model ("llama"; unigram models, precompiled charsmaps and unescaped whitespace
// are refused by name). `notes` receives what llama.cpp will do differently (extra whitespace
// kept, no byte fallback, ...). A llama2.c tokenizer.bin as "llama" (types from run.c's layout).
GgufMetadata ggufTokenizerMetadata(const std::string& tokenizerPath, int64_t vocabSize, std::string* modelName = nullptr,
                                   std::vector<std::string>* notes = nullptr);

} // namespace npw
