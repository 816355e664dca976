#pragma once
// The held-out likelihood of a class-conditional image GPT (issue 15's c2i metric): real images
// (the Fashion-MNIST test set for demo:c2i) encoded by the VQ tokenizer into code sequences, and
// the GPT's teacher-forced class-conditional NLL of those codes — the class token at position 0,
// the logits at position p predicting code p, no classifier-free guidance. Perplexity = exp of
// the mean NLL over every code token of every image. Unlike FID it needs no sampling, so it is
// cheap and deterministic, and it measures the model on data it was not trained on.
#include "core/models/llamagen.h"
#include "core/models/vq_model.h"
#include "core/util/progress.h"

#include <ATen/core/Tensor.h>
#include <string>

namespace npw {

struct HeldOutCodes {
    at::Tensor codes;    // [N, grid²] int64, raster order
    at::Tensor labels;   // [N] int64 class ids
    std::string source;  // what was encoded, for messages and reports
};

// images [N, C, H, W] in [0, 1] and labels [N] → their codes (vq.encode, in batches of 500).
// Throws npw::Error (naming `source`) when the VQ has no encoder or the counts disagree.
HeldOutCodes encodeHeldOutImages(const VqModel& vq, const at::Tensor& images, const at::Tensor& labels,
                                 const std::string& source, const ProgressFn& progress = nullptr);

struct TokenPerplexity {
    double nll = 0;         // mean over all code tokens, nats
    double ppl = 0;         // exp(nll)
    int64_t tokens = 0;     // N · grid²
    int64_t sequences = 0;  // N
};

// Teacher-forced NLL of `held` under `model` (sums in float64). Throws npw::Error naming
// held.source when a sequence is not grid² codes long, a code lies outside the vocabulary or a
// label outside the model's classes. Progress "token ppl".
TokenPerplexity classConditionalTokenPerplexity(const LlamaGenModel& model, const HeldOutCodes& held,
                                                int64_t batch = 250, const ProgressFn& progress = nullptr);

} // namespace npw
