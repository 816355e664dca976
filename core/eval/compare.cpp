#include "core/eval/compare.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <algorithm>
#include <random>

namespace npw {

namespace {

void checkPrompt(const LlamaModel& model, const std::string& name, const std::vector<int32_t>& prompt) {
    if (prompt.empty()) throw Error("compare: the prompt needs at least one token (e.g. BOS)");
    const LlamaConfig& c = model.config();
    c.checkAttentionSpan(static_cast<int64_t>(prompt.size()), "the prompt");
    if (static_cast<int64_t>(prompt.size()) >= c.attentionSpan())
        throw Error("compare: the prompt has " + std::to_string(prompt.size()) + " tokens; model '" + name +
                    "' has a context of " + std::to_string(c.attentionSpan()));
    for (int32_t id : prompt)
        if (id < 0 || id >= c.vocab_size)
            throw Error("compare: prompt token id " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(c.vocab_size) + " of model '" + name + "'");
}

// The same loop as generate() (same rng use, so the same tokens for the same seed), keeping the
// log-probability of each chosen token under the model's untempered distribution.
void generateWithLogProbs(const LlamaModel& model, const std::vector<int32_t>& prompt, const SamplingOptions& o,
                          size_t index, ComparedContinuation& out, const ComparisonTokenFn& onToken) {
    std::mt19937_64 rng(o.seed);
    KvCache cache;
    at::Tensor ids = at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), at::kLong).unsqueeze(0);
    at::Tensor last = model.logits(ids, &cache).select(1, -1).squeeze(0);
    const int64_t budget =
        std::min(o.maxNewTokens, model.config().attentionSpan() - static_cast<int64_t>(prompt.size()));
    for (int64_t i = 0; i < budget; ++i) {
        const int32_t next = sampleToken(last, o, rng);
        const double lp = at::log_softmax(last.to(at::kDouble), -1)[next].item<double>();
        out.tokens.push_back(next);
        out.logProbs.push_back(lp);
        if (onToken && !onToken(index, i, next, lp)) throw Cancelled();
        if (next == o.stopToken || i + 1 == budget) break;
        at::Tensor step = at::full({1, 1}, static_cast<int64_t>(next), at::kLong);
        last = model.logits(step, &cache).select(1, -1).squeeze(0);
    }
}

// Log-softmax rows [n, vocab] (float64) predicting the n continuation tokens after the prompt.
at::Tensor teacherForcedLogProbs(const LlamaModel& model, const std::vector<int32_t>& prompt,
                                 const std::vector<int32_t>& continuation) {
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    ids.insert(ids.end(), continuation.begin(), continuation.end() - 1);  // the last token predicts nothing we score
    at::Tensor logits = model.logits(at::tensor(ids, at::kLong).unsqueeze(0)).squeeze(0);
    const int64_t p = static_cast<int64_t>(prompt.size()), n = static_cast<int64_t>(continuation.size());
    return at::log_softmax(logits.slice(0, p - 1, p - 1 + n).to(at::kDouble), -1);
}

} // namespace

std::vector<std::string> tokenPieces(const std::function<std::string(const std::vector<int32_t>&)>& decode,
                                     const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
    std::vector<std::string> pieces;
    std::vector<int32_t> ids = prompt;
    std::string before = decode(ids);
    for (int32_t t : tokens) {
        ids.push_back(t);
        std::string now = decode(ids);
        // Decoding is not always prefix-stable (a partial UTF-8 sequence becomes U+FFFD until its
        // last byte arrives): take what follows the longest common prefix.
        size_t common = 0;
        while (common < before.size() && common < now.size() && before[common] == now[common]) ++common;
        while (common > 0 && common < now.size() && (static_cast<unsigned char>(now[common]) & 0xC0) == 0x80)
            --common;  // never split a UTF-8 character
        pieces.push_back(now.substr(common));
        before = std::move(now);
    }
    return pieces;
}

int64_t firstDivergence(const std::vector<int32_t>& dense, const std::vector<int32_t>& other) {
    const size_t n = std::min(dense.size(), other.size());
    for (size_t i = 0; i < n; ++i)
        if (dense[i] != other[i]) return static_cast<int64_t>(i);
    return dense.size() == other.size() ? -1 : static_cast<int64_t>(n);
}

TextComparison compareContinuations(const ComparedModel& dense, const std::vector<ComparedModel>& pruned,
                                    const std::vector<int32_t>& prompt, const SamplingOptions& options,
                                    const ComparisonTokenFn& onToken) {
    if (!dense.model) throw Error("compare: no dense model");
    std::vector<ComparedModel> all{dense};
    all.insert(all.end(), pruned.begin(), pruned.end());
    const int64_t vocab = dense.model->config().vocab_size;
    for (const ComparedModel& m : all) {
        if (!m.model) throw Error("compare: model '" + m.name + "' is missing");
        if (m.model->config().vocab_size != vocab)
            throw Error("compare: model '" + m.name + "' has a vocabulary of " +
                        std::to_string(m.model->config().vocab_size) + " tokens; the dense model '" + dense.name +
                        "' has " + std::to_string(vocab) + " (expected the same tokenizer)");
        checkPrompt(*m.model, m.name, prompt);
    }
    c10::InferenceMode guard;
    TextComparison r;
    r.prompt = prompt;
    for (size_t k = 0; k < all.size(); ++k) {
        ComparedContinuation c;
        c.name = all[k].name;
        generateWithLogProbs(*all[k].model, prompt, options, k, c, onToken);
        r.models.push_back(std::move(c));
    }
    const std::vector<int32_t>& reference = r.models[0].tokens;
    if (reference.empty()) return r;
    const at::Tensor target = at::tensor(std::vector<int64_t>(reference.begin(), reference.end()), at::kLong);
    const at::Tensor denseLogP = teacherForcedLogProbs(*dense.model, prompt, reference);
    const at::Tensor denseP = denseLogP.exp();
    for (size_t k = 0; k < all.size(); ++k) {
        ComparedContinuation& c = r.models[k];
        c.divergence = k == 0 ? -1 : firstDivergence(reference, c.tokens);
        const at::Tensor logP = k == 0 ? denseLogP : teacherForcedLogProbs(*all[k].model, prompt, reference);
        const at::Tensor picked = logP.gather(1, target.unsqueeze(1)).squeeze(1).contiguous();
        c.denseLogProbs.assign(picked.data_ptr<double>(), picked.data_ptr<double>() + picked.numel());
        c.nll = -picked.mean().item<double>();
        // KL(dense ‖ model) = Σ p_dense (log p_dense − log p_model); exactly 0 for the dense model.
        c.kl = k == 0 ? 0.0 : (denseP * (denseLogP - logP)).sum(1).mean().item<double>();
    }
    return r;
}

} // namespace npw
