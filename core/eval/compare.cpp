#include "core/eval/compare.h"
#include "core/models/non_finite.h"
#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <algorithm>
#include <random>

namespace npw {

namespace {

void checkPrompt(const CausalLm& model, const std::string& name, const std::vector<int32_t>& prompt) {
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

// One model's generation state: the same loop as generate() (same rng use, so the same tokens
// for the same seed), stepped from outside so that all models advance together.
struct Generator {
    const CausalLm* model;
    std::mt19937_64 rng;
    KvCache cache;
    at::Tensor last;  // logits [vocab] for the next token
    int64_t budget = 0;
    bool stopped = false;
};

// Log-softmax rows [n, vocab] (float64) predicting the n continuation tokens after the prompt.
at::Tensor teacherForcedLogProbs(const CausalLm& model, const std::vector<int32_t>& prompt,
                                 const std::vector<int32_t>& continuation) {
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    ids.insert(ids.end(), continuation.begin(), continuation.end() - 1);  // the last token predicts nothing we score
    at::Tensor logits = model.logits(at::tensor(ids, at::kLong).unsqueeze(0)).squeeze(0);
    const int64_t p = static_cast<int64_t>(prompt.size()), n = static_cast<int64_t>(continuation.size());
    return at::log_softmax(logits.slice(0, p - 1, p - 1 + n).to(at::kDouble), -1);
}

} // namespace

std::vector<std::string> tokenPieces(const TokenDecodeFn& decode,
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
                                    const ComparisonStepFn& onStep, const TokenDecodeFn& decode) {
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
    const at::Tensor promptIds =
        at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), at::kLong).unsqueeze(0);
    std::vector<Generator> gens;
    for (const ComparedModel& m : all) {
        Generator g{m.model, std::mt19937_64(options.seed), KvCache{}, at::Tensor(), 0, false};
        g.last = m.model->logits(promptIds, &g.cache).select(1, -1).squeeze(0);
        g.budget = std::min(options.maxNewTokens,
                            m.model->config().attentionSpan() - static_cast<int64_t>(prompt.size()));
        g.stopped = g.budget <= 0;
        gens.push_back(std::move(g));
        ComparedContinuation c;
        c.name = m.name;
        r.models.push_back(std::move(c));
    }
    for (int64_t i = 0;; ++i) {
        bool any = false;
        TokenStep step;
        step.index = i;
        for (size_t k = 0; k < gens.size(); ++k) {
            Generator& g = gens[k];
            ComparedContinuation& c = r.models[k];
            TokenStep::Continuation sc;
            sc.model = c.name;
            if (!g.stopped) {
                any = true;
                std::vector<int32_t> context = prompt;
                context.insert(context.end(), c.tokens.begin(), c.tokens.end());
                requireFiniteLogits(*g.model, g.last, context, "compare: the next-token logits of model '" + c.name + "'");
                const int32_t next = sampleToken(g.last, options, g.rng);
                const double lp = at::log_softmax(g.last.to(at::kDouble), -1)[next].item<double>();
                c.tokens.push_back(next);
                c.logProbs.push_back(lp);
                sc.token = next;
                sc.logProb = lp;
                if (next == options.stopToken || int64_t(c.tokens.size()) == g.budget) {
                    g.stopped = true;
                } else {
                    at::Tensor ids = at::full({1, 1}, static_cast<int64_t>(next), at::kLong);
                    g.last = g.model->logits(ids, &g.cache).select(1, -1).squeeze(0);
                }
            }
            sc.stopped = g.stopped;
            if (decode && !c.tokens.empty()) {
                std::vector<int32_t> ids = prompt;
                const std::string head = decode(ids);
                ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
                const std::string whole = decode(ids);
                sc.text = whole.rfind(head, 0) == 0 ? whole.substr(head.size()) : decode(c.tokens);
                if (sc.token >= 0) sc.piece = tokenPieces(decode, std::vector<int32_t>(ids.begin(), ids.end() - 1),
                                                          {sc.token}).front();
            }
            step.models.push_back(std::move(sc));
        }
        if (!any) break;
        if (onStep && !onStep(step)) throw Cancelled();
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
        // The generation's logits were finite; teacher forcing runs the whole continuation at
        // once (another kernel path), so its results are checked too.
        requireFinite(c.nll, "compare: the NLL of the dense model's continuation under model '" + c.name + "'", kNonFiniteHint);
        requireFinite(c.kl, "compare: the KL divergence from the dense model to model '" + c.name + "'", kNonFiniteHint);
    }
    return r;
}

} // namespace npw
