#include "core/eval/perplexity.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <cmath>
#include <fstream>

namespace npw {

int64_t effectiveSeqlen(int64_t requested, const LlamaConfig& config) {
    const int64_t want = requested > 0 ? requested : 2048;
    return std::min(want, config.max_position_embeddings);
}

LogitsSource logitsSourceOf(const LlamaModel& model) {
    return {&model.config(), model.runtime().device,
            [&model](const at::Tensor& ids) { return model.logits(ids, nullptr, true); }};
}

PerplexityResult evaluatePerplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                    const PerplexityOptions& options, const LlamaModel* reference,
                                    const DecodeFn& decode, const ProgressFn& progress) {
    const LogitsSource source = logitsSourceOf(model);
    if (!reference) return evaluatePerplexity(source, ids, options, nullptr, decode, progress);
    const LogitsSource referenceSource = logitsSourceOf(*reference);
    return evaluatePerplexity(source, ids, options, &referenceSource, decode, progress);
}

PerplexityResult evaluatePerplexity(const LogitsSource& model, const std::vector<int32_t>& ids,
                                    const PerplexityOptions& options, const LogitsSource* reference,
                                    const DecodeFn& decode, const ProgressFn& progress) {
    const int64_t seqlen = options.seqlen;
    if (seqlen < 2) throw Error("sequence length must be at least 2 (got " + std::to_string(seqlen) + ")");
    if (seqlen > model.config->max_position_embeddings)
        throw Error("sequence length " + std::to_string(seqlen) + " exceeds the model's context of " +
                    std::to_string(model.config->max_position_embeddings));
    model.config->checkAttentionSpan(seqlen, "the evaluation window");
    int64_t windows = static_cast<int64_t>(ids.size()) / seqlen;
    if (windows == 0)
        throw Error("the evaluation text has " + std::to_string(ids.size()) + " tokens, fewer than one window of " +
                    std::to_string(seqlen) + " (use a longer text or shorter windows)");
    if (options.maxWindows > 0) windows = std::min(windows, options.maxWindows);
    if (reference && reference->config->vocab_size != model.config->vocab_size)
        throw Error("the reference model's vocabulary (" + std::to_string(reference->config->vocab_size) +
                    ") differs from the model's (" + std::to_string(model.config->vocab_size) + ")");
    for (int64_t i = 0; i < windows * seqlen; ++i)
        if (ids[i] < 0 || ids[i] >= model.config->vocab_size)
            throw Error("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is outside the vocabulary of " + std::to_string(model.config->vocab_size));

    c10::InferenceMode guard;
    PerplexityResult r;
    r.seqlen = seqlen;
    r.windows = windows;
    double totalKl = 0;
    const int64_t batch = std::max<int64_t>(1, options.batchWindows);
    for (int64_t w0 = 0; w0 < windows; w0 += batch) {
        const int64_t nb = std::min(batch, windows - w0);
        at::Tensor input = at::empty({nb, seqlen}, at::kLong);
        auto acc = input.accessor<int64_t, 2>();
        for (int64_t b = 0; b < nb; ++b)
            for (int64_t t = 0; t < seqlen; ++t) acc[b][t] = ids[(w0 + b) * seqlen + t];
        at::Tensor inputDev = input.to(model.device);
        // Position t predicts token t+1: seqlen-1 predictions per window.
        at::Tensor logp = at::log_softmax(model.logits(inputDev).narrow(1, 0, seqlen - 1).to(at::kDouble), -1);
        at::Tensor targets = inputDev.narrow(1, 1, seqlen - 1).unsqueeze(-1);
        r.totalNll += -logp.gather(-1, targets).sum().item<double>();
        if (reference) {
            at::Tensor refLogp = at::log_softmax(
                reference->logits(input.to(reference->device))
                    .narrow(1, 0, seqlen - 1).to(at::kDouble).to(logp.device()), -1);
            totalKl += (refLogp.exp() * (refLogp - logp)).sum().item<double>();
        }
        if (decode) {
            for (int64_t b = 0; b < nb; ++b) {
                const auto begin = ids.begin() + (w0 + b) * seqlen;
                // Bytes of tokens 1..seqlen-1 = bytes(decode(window)) - bytes(decode(first token)):
                // decoding with the context token keeps the predicted text's leading space.
                r.bytes += static_cast<int64_t>(decode(std::vector<int32_t>(begin, begin + seqlen)).size()) -
                           static_cast<int64_t>(decode(std::vector<int32_t>(begin, begin + 1)).size());
            }
        }
        reportProgress(progress, "perplexity", static_cast<double>(w0 + nb), static_cast<double>(windows));
    }
    r.tokens = windows * (seqlen - 1);
    r.nll = r.totalNll / r.tokens;
    r.ppl = std::exp(r.nll);
    if (reference) r.kl = totalKl / r.tokens;
    if (decode && r.bytes > 0) r.bitsPerByte = r.totalNll / std::log(2.0) / r.bytes;
    return r;
}


} // namespace npw
