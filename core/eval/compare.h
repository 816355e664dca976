#pragma once
// Language models side by side: the continuations of a dense model and of pruned versions of it
// from one prompt, with per-token log-probabilities, the first token where each pruned
// continuation leaves the dense one, and how far each model's next-token distribution drifts
// from the dense model's along the dense continuation (KL, teacher-forced) and how well it
// predicts that continuation (mean NLL). `npw compare` and the studio's Text page share this.
#include "core/eval/generate.h"
#include "core/eval/token_step.h"
#include "core/models/llama.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace npw {

struct ComparedModel {
    std::string name;            // as shown: "dense", "numerical ρ=0.30", a path...
    const CausalLm* model = nullptr;  // a LLaMA or a SliceGPT-sliced model
};

struct ComparedContinuation {
    std::string name;
    std::vector<int32_t> tokens;     // this model's own continuation (new tokens only)
    // log p(tokens[i] | prompt, tokens[<i]) under this model's raw distribution (temperature 1,
    // before top-p), so greedy and sampled runs shade on the same scale.
    std::vector<double> logProbs;
    // First index where `tokens` differs from the dense continuation (or where one of the two
    // ends first); -1 when they are identical. Always -1 for the dense model itself.
    int64_t divergence = -1;
    // Along the dense continuation, teacher-forced (one forward pass over prompt + dense tokens):
    // log p(dense token i | prompt, dense tokens <i) under this model...
    std::vector<double> denseLogProbs;
    // ...the mean KL(dense ‖ this model) over those positions (nats; 0 for the dense model)...
    double kl = std::numeric_limits<double>::quiet_NaN();
    // ...and the mean NLL of the dense continuation under this model (nats per token).
    double nll = std::numeric_limits<double>::quiet_NaN();
};

struct TextComparison {
    std::vector<int32_t> prompt;
    std::vector<ComparedContinuation> models;  // [0] is the dense model, then the pruned ones in order
};

using TokenDecodeFn = std::function<std::string(const std::vector<int32_t>&)>;
// Called after each step, when every model that has not stopped has chosen its next token
// (TokenStep: one entry per model, dense first; a stopped model's token is -1). Returning false
// stops the comparison (npw::Cancelled).
using ComparisonStepFn = std::function<bool(const TokenStep& step)>;

// Every model generates from `prompt` with the same options (and so the same seed: with
// sampling, identical distributions give identical continuations), all in lockstep so a viewer
// sees the columns grow together. All models must share the dense model's vocabulary;
// otherwise npw::Error naming the model. `decode` (optional) fills the steps' piece and text.
TextComparison compareContinuations(const ComparedModel& dense, const std::vector<ComparedModel>& pruned,
                                    const std::vector<int32_t>& prompt, const SamplingOptions& options,
                                    const ComparisonStepFn& onStep = nullptr, const TokenDecodeFn& decode = nullptr);

// The text each continuation token adds, decoded after the prompt and the tokens before it (so
// SentencePiece's leading spaces and multi-token characters come out as in the whole text; a
// piece that completes an earlier token's bytes carries them). pieces[i] belongs to tokens[i].
std::vector<std::string> tokenPieces(const TokenDecodeFn& decode,
                                     const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens);

// The first index where two continuations differ (a shorter one that is a prefix of the other
// differs where it ends); -1 when equal.
int64_t firstDivergence(const std::vector<int32_t>& dense, const std::vector<int32_t>& other);

} // namespace npw
