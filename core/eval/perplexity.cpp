#include "core/eval/perplexity.h"
#include "core/eval/perplexity_windows.h"
#include "core/util/error.h"
#include "core/models/non_finite.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <chrono>
#include <cmath>

namespace npw {

int64_t effectiveSeqlen(int64_t requested, const LlamaConfig& config) {
    return EvaluationProtocol{requested}.seqlenFor(config.max_position_embeddings);
}

double PerplexityResult::tokensPerSecond() const {
    return seconds > 0 ? static_cast<double>(windows * seqlen) / seconds : 0.0;
}

int64_t evaluationWindowCount(const LlamaConfig& config, const std::vector<int32_t>& ids, const PerplexityOptions& options) {
    const int64_t seqlen = options.seqlen;
    if (seqlen < 2) throw Error("sequence length must be at least 2 (got " + std::to_string(seqlen) + ")");
    if (seqlen > config.max_position_embeddings)
        throw Error("sequence length " + std::to_string(seqlen) + " exceeds the model's context of " +
                    std::to_string(config.max_position_embeddings));
    config.checkAttentionSpan(seqlen, "the evaluation window");
    int64_t windows = static_cast<int64_t>(ids.size()) / seqlen;
    if (windows == 0)
        throw Error("the evaluation text has " + std::to_string(ids.size()) + " tokens, fewer than one window of " +
                    std::to_string(seqlen) + " (use a longer text or shorter windows)");
    if (options.maxWindows > 0) windows = std::min(windows, options.maxWindows);
    for (int64_t i = 0; i < windows * seqlen; ++i)
        if (ids[i] < 0 || ids[i] >= config.vocab_size)
            throw Error("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is outside the vocabulary of " + std::to_string(config.vocab_size));
    return windows;
}

at::Tensor evaluationWindowIds(const std::vector<int32_t>& ids, int64_t seqlen, int64_t first, int64_t count) {
    at::Tensor input = at::empty({count, seqlen}, at::kLong);
    auto acc = input.accessor<int64_t, 2>();
    for (int64_t b = 0; b < count; ++b)
        for (int64_t t = 0; t < seqlen; ++t) acc[b][t] = ids[(first + b) * seqlen + t];
    return input;
}

namespace {

std::string windowName(int64_t window, int64_t windows) {
    return "window " + std::to_string(window + 1) + " of " + std::to_string(windows);
}

// The error for a non-finite result of window `window`: where the forward first became
// non-finite when `locate` can tell (else the logits were finite and the scoring overflowed).
[[noreturn]] void nonFiniteWindow(const std::string& what, double value, const at::Tensor& windowIds, int64_t window,
                                  int64_t windows, const LocateNonFiniteFn& locate) {
    std::string where = locate ? locate(windowIds.unsqueeze(0)) : "";
    throw Error(what + " became non-finite (" + nonFiniteName(value) + ") in " + windowName(window, windows) +
                (where.empty() ? std::string() : ": " + where) + kNonFiniteHint);
}

} // namespace

double windowsNll(const at::Tensor& logits, const at::Tensor& ids, int64_t first, int64_t windows,
                  const LocateNonFiniteFn& locate) {
    const int64_t seqlen = ids.size(1);
    // Position t predicts token t+1: seqlen-1 predictions per window. One window at a time: the
    // float64 log-softmax of a whole batch is 16 bytes per logit (4 × 2048 × 32000 × 16 B = 4 GiB),
    // more than the rest of a layer-wise evaluation holds.
    double nll = 0;
    for (int64_t b = 0; b < logits.size(0); ++b) {
        at::Tensor logp = at::log_softmax(logits[b].narrow(0, 0, seqlen - 1).to(at::kDouble), -1);
        const double windowNll = -logp.gather(-1, ids[b].narrow(0, 1, seqlen - 1).unsqueeze(-1)).sum().item<double>();
        if (!std::isfinite(windowNll))
            nonFiniteWindow("the negative log-likelihood", windowNll, ids[b].cpu(), first + b, windows, locate);
        nll += windowNll;
    }
    return nll;
}

int64_t windowsScoredBytes(const DecodeFn& decode, const std::vector<int32_t>& ids, int64_t seqlen, int64_t first,
                           int64_t count) {
    int64_t bytes = 0;
    for (int64_t b = 0; b < count; ++b) {
        const auto begin = ids.begin() + (first + b) * seqlen;
        // Bytes of tokens 1..seqlen-1 = bytes(decode(window)) - bytes(decode(first token)):
        // decoding with the context token keeps the predicted text's leading space.
        bytes += static_cast<int64_t>(decode(std::vector<int32_t>(begin, begin + seqlen)).size()) -
                 static_cast<int64_t>(decode(std::vector<int32_t>(begin, begin + 1)).size());
    }
    return bytes;
}

void finishPerplexity(PerplexityResult& r, double totalKl) {
    r.tokens = r.windows * (r.seqlen - 1);
    r.nll = r.totalNll / static_cast<double>(r.tokens);
    r.ppl = std::exp(r.nll);
    // Every window's NLL was finite: a perplexity past float64 (a mean NLL above 709 nats) is
    // what is left to refuse here.
    requireFinite(r.ppl, "the perplexity (exp of a mean NLL of " + std::to_string(r.nll) + " nats)", kNonFiniteHint);
    if (std::isfinite(totalKl)) r.kl = totalKl / static_cast<double>(r.tokens);
    if (r.bytes > 0) r.bitsPerByte = r.totalNll / std::log(2.0) / static_cast<double>(r.bytes);
}

LogitsSource logitsSourceOf(const CausalLm& model) {
    return {&model.config(), model.runtime().device,
            [&model](const at::Tensor& ids) { return model.logits(ids, nullptr, true); }};
}

namespace {

// evaluatePerplexity; `locate` / `locateReference` say where a model's forward first became
// non-finite when a window's result is not finite (null for a bare LogitsSource).
PerplexityResult evaluateWindows(const LogitsSource& model, const std::vector<int32_t>& ids,
                                 const PerplexityOptions& options, const LogitsSource* reference,
                                 const DecodeFn& decode, const ProgressFn& progress, const LocateNonFiniteFn& locate,
                                 const LocateNonFiniteFn& locateReference);

LocateNonFiniteFn locatorOf(const CausalLm& model) {
    return [&model](const at::Tensor& ids) { return locateNonFinite(model, ids); };
}

} // namespace

PerplexityResult evaluatePerplexity(const CausalLm& model, const std::vector<int32_t>& ids,
                                    const PerplexityOptions& options, const CausalLm* reference,
                                    const DecodeFn& decode, const ProgressFn& progress) {
    const LogitsSource source = logitsSourceOf(model);
    if (!reference) return evaluateWindows(source, ids, options, nullptr, decode, progress, locatorOf(model), nullptr);
    const LogitsSource referenceSource = logitsSourceOf(*reference);
    return evaluateWindows(source, ids, options, &referenceSource, decode, progress, locatorOf(model),
                           locatorOf(*reference));
}

PerplexityResult evaluatePerplexity(const LogitsSource& model, const std::vector<int32_t>& ids,
                                    const PerplexityOptions& options, const LogitsSource* reference,
                                    const DecodeFn& decode, const ProgressFn& progress) {
    return evaluateWindows(model, ids, options, reference, decode, progress, nullptr, nullptr);
}

namespace {

PerplexityResult evaluateWindows(const LogitsSource& model, const std::vector<int32_t>& ids,
                                 const PerplexityOptions& options, const LogitsSource* reference,
                                 const DecodeFn& decode, const ProgressFn& progress, const LocateNonFiniteFn& locate,
                                 const LocateNonFiniteFn& locateReference) {
    const int64_t seqlen = options.seqlen;
    const int64_t windows = evaluationWindowCount(*model.config, ids, options);
    if (reference && reference->config->vocab_size != model.config->vocab_size)
        throw Error("the reference model's vocabulary (" + std::to_string(reference->config->vocab_size) +
                    ") differs from the model's (" + std::to_string(model.config->vocab_size) + ")");

    c10::InferenceMode guard;
    PerplexityResult r;
    r.seqlen = seqlen;
    r.windows = windows;
    r.path = "whole-model";
    double totalKl = 0;
    const int64_t batch = std::max<int64_t>(1, options.batchWindows);
    for (int64_t w0 = 0; w0 < windows; w0 += batch) {
        const int64_t nb = std::min(batch, windows - w0);
        const auto start = std::chrono::steady_clock::now();
        at::Tensor input = evaluationWindowIds(ids, seqlen, w0, nb);
        at::Tensor inputDev = input.to(model.device);
        at::Tensor logits = model.logits(inputDev);
        r.totalNll += windowsNll(logits, inputDev, w0, windows, locate);
        r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (reference) {
            at::Tensor logp = at::log_softmax(logits.narrow(1, 0, seqlen - 1).to(at::kDouble), -1);
            at::Tensor refLogp = at::log_softmax(
                reference->logits(input.to(reference->device))
                    .narrow(1, 0, seqlen - 1).to(at::kDouble).to(logp.device()), -1);
            // Per window, so that a non-finite divergence names its window (the model's own
            // log-probabilities are finite here: its NLL was checked above).
            const at::Tensor windowKl = (refLogp.exp() * (refLogp - logp)).sum({1, 2}).cpu();
            for (int64_t b = 0; b < nb; ++b) {
                const double kl = windowKl[b].item<double>();
                if (!std::isfinite(kl))
                    nonFiniteWindow("the KL divergence from the reference model", kl, input[b], w0 + b, windows,
                                    locateReference);
                totalKl += kl;
            }
        }
        if (decode) r.bytes += windowsScoredBytes(decode, ids, seqlen, w0, nb);
        reportProgress(progress, "perplexity", static_cast<double>(w0 + nb), static_cast<double>(windows));
    }
    finishPerplexity(r, reference ? totalKl : std::numeric_limits<double>::quiet_NaN());
    return r;
}

} // namespace

} // namespace npw
