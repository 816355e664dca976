#pragma once
// Perplexity as GPTQ, FLAP, LLM-Pruner and SliceGPT measure it (notes/reference.md §3): the
// corpus tokenized once, cut into floor(N/seqlen) non-overlapping windows, each scored
// independently; PPL = exp(mean next-token NLL over all windows). Also the KL divergence
// from a reference model and, for text, bits per byte.
#include "core/eval/evaluation_protocol.h"
#include "core/models/llama.h"
#include "core/util/progress.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace npw {

struct PerplexityOptions {
    int64_t seqlen = kProtocolSeqlen;  // capped at the model's context by the caller (perplexityOptions)
    int64_t maxWindows = 0;   // 0 = all windows
    int64_t batchWindows = 4; // windows per forward pass
};

struct PerplexityResult {
    double ppl = 0;
    double nll = 0;          // mean NLL per predicted token (nats)
    double totalNll = 0;     // summed NLL (nats)
    int64_t tokens = 0;      // predicted (scored) tokens
    int64_t windows = 0;
    int64_t seqlen = 0;
    int64_t bytes = 0;       // UTF-8 bytes of the scored text (0 when no tokenizer)
    double bitsPerByte = std::numeric_limits<double>::quiet_NaN();
    double kl = std::numeric_limits<double>::quiet_NaN();  // mean KL(reference || model), nats
    double seconds = 0;      // forward passes and scoring (no loading, no reference, no decoding)
    std::string path;        // "whole-model" or "layerwise" (layerwise_perplexity.h)
    // Tokens through the model (windows · seqlen) per second of `seconds`; 0 when not timed.
    double tokensPerSecond() const;
};

// Decodes a token span to text; used to count the bytes of the scored text.
using DecodeFn = std::function<std::string(const std::vector<int32_t>&)>;

// Scores `ids` (exactly as given: no BOS added here). With `reference`, also the mean
// KL(reference || model) over the same predicted positions. With `decode`, also bits per
// byte: total NLL in bits over the bytes of the predicted tokens' text.
PerplexityResult evaluatePerplexity(const CausalLm& model, const std::vector<int32_t>& ids,
                                    const PerplexityOptions& options, const CausalLm* reference = nullptr,
                                    const DecodeFn& decode = nullptr, const ProgressFn& progress = nullptr);

// Any model that turns ids [B, T] (on `device`) into logits [B, T, vocab] (any float dtype, any
// device); `config` gives the vocabulary, the context and the attention span.
struct LogitsSource {
    const LlamaConfig* config = nullptr;
    c10::Device device{c10::kCPU};
    std::function<at::Tensor(const at::Tensor& ids)> logits;
};
LogitsSource logitsSourceOf(const CausalLm& model);
PerplexityResult evaluatePerplexity(const LogitsSource& model, const std::vector<int32_t>& ids,
                                    const PerplexityOptions& options, const LogitsSource* reference = nullptr,
                                    const DecodeFn& decode = nullptr, const ProgressFn& progress = nullptr);
// min(requested, model context); requested <= 0 means the protocol's 2048 (EvaluationProtocol::seqlenFor).
int64_t effectiveSeqlen(int64_t requested, const LlamaConfig& config);
// The options that score `protocol` on a model of `config` (window length capped at its context,
// the window cap); the batch stays the default.
PerplexityOptions perplexityOptions(const EvaluationProtocol& protocol, const LlamaConfig& config);

} // namespace npw
