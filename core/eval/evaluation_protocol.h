#pragma once
// The one protocol for evaluation and calibration that every path uses (`npw eval`, `npw
// prune`, `npw sweep`, `npw compare`, `npw demo`, the studio): the numbers each default means
// are defined here once, and the paths take them from here, not from copies.
//
// Evaluation, as GPTQ, SparseGPT, FLAP, LLM-Pruner and SliceGPT measure perplexity: the text
// tokenized once, cut into floor(N / seqlen) non-overlapping windows of 2048 tokens (capped at
// the model's context), every window scored. A window cap (maxWindows) scores only the first K
// windows — quicker, and recorded in every result row so that a number says what it measured.
//
// Calibration: 128 windows (GPTQ, SparseGPT, Wanda, the paper) of the model's context, at most
// 2048 tokens — the same length the evaluation windows have, so that the statistics see the
// positions the evaluation scores. No Qt, no LibTorch.
#include <cstdint>

namespace npw {

// The papers' evaluation window, before the cap at the model's context.
inline constexpr int64_t kProtocolSeqlen = 2048;
// Calibration windows and their length (0: the model's context at most kProtocolSeqlen;
// calibrationSeqlen in core/experiments/language_workbench.h applies it).
inline constexpr int64_t kDefaultCalibrationSamples = 128;
inline constexpr int64_t kDefaultCalibrationSeqlen = 0;

struct EvaluationProtocol {
    int64_t seqlen = kProtocolSeqlen;  // window length asked for (≤ 0: kProtocolSeqlen); capped at the context
    int64_t maxWindows = 0;            // the window cap: the first K windows only; 0 = every window

    // What a text of `textTokens` tokens gives on a model of `context` positions.
    struct Resolved {
        int64_t seqlen = 0;            // the window length used
        int64_t windows = 0;           // windows scored
        int64_t availableWindows = 0;  // floor(textTokens / seqlen): every window
        int64_t tokens = 0;            // predicted tokens: windows · (seqlen − 1)
        int64_t maxWindows = 0;        // the cap as asked (0: none)
        bool capped() const { return windows < availableWindows; }
    };
    int64_t seqlenFor(int64_t context) const;
    Resolved resolve(int64_t context, int64_t textTokens) const;

    bool operator==(const EvaluationProtocol& o) const { return seqlen == o.seqlen && maxWindows == o.maxWindows; }
};

} // namespace npw
