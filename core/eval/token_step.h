#pragma once
// One step of text continuations generated side by side (the studio's Text page, `npw compare`):
// the same prompt continued by several models (dense and pruned ones), one token each per step.
// What a job streams to the GUI token by token (app/studio/jobrunner.h, PartialResults<TokenStep>),
// and what a comparison collects. Plain data: no Qt, no tensors.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace npw {

struct TokenStep {
    // Per model, in the order the comparison lists its models.
    struct Continuation {
        std::string model;      // e.g. "dense", "numerical ρ=0.3"
        int32_t token = -1;     // the id chosen at this step; -1 when this model had stopped already
        std::string piece;      // its text (may be empty: a byte-fallback token mid-character)
        std::string text;       // the continuation so far, decoded whole (a piece alone can split UTF-8)
        // log p(token | prompt, earlier tokens) under this model, natural log; NaN when stopped.
        double logProb = std::numeric_limits<double>::quiet_NaN();
        // log p of the same token under the reference model (the dense one), for a per-token
        // comparison of what pruning changed; NaN when not computed.
        double referenceLogProb = std::numeric_limits<double>::quiet_NaN();
        bool stopped = false;   // reached the stop token or its token budget
    };
    int64_t index = 0;  // 0 for the first new token
    std::vector<Continuation> models;
};

} // namespace npw
