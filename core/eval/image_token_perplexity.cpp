#include "core/eval/image_token_perplexity.h"
#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <cmath>
#include <vector>

namespace npw {

HeldOutCodes encodeHeldOutImages(const VqModel& vq, const at::Tensor& images, const at::Tensor& labels,
                                 const std::string& source, const ProgressFn& progress) {
    if (!vq.config().hasEncoder())
        throw Error("the VQ model '" + vq.source() + "' has no encoder weights: it cannot encode '" + source + "'");
    if (images.dim() != 4 || labels.dim() != 1 || images.size(0) != labels.size(0))
        throw Error("'" + source + "': expected N images [N, C, H, W] and N labels, got " + std::to_string(images.size(0)) +
                    " images and " + std::to_string(labels.numel()) + " labels");
    std::vector<at::Tensor> parts;
    const int64_t n = images.size(0), batch = 500;
    for (int64_t i = 0; i < n; i += batch) {
        parts.push_back(vq.encode(images.narrow(0, i, std::min(batch, n - i))).reshape({std::min(batch, n - i), -1}));
        reportProgress(progress, "encode", double(std::min(i + batch, n)), double(n));
    }
    return {at::cat(parts, 0).to(at::kLong), labels.to(at::kLong), source};
}

TokenPerplexity classConditionalTokenPerplexity(const LlamaGenModel& model, const HeldOutCodes& held, int64_t batch,
                                                const ProgressFn& progress) {
    const LlamaGenConfig& c = model.config();
    const int64_t T = c.blockSize();
    if (held.codes.dim() != 2 || held.codes.size(1) != T || held.labels.dim() != 1 ||
        held.labels.size(0) != held.codes.size(0) || held.codes.size(0) == 0)
        throw Error("'" + held.source + "': codes: expected [N, " + std::to_string(T) + "] (the model's " +
                    std::to_string(c.grid) + "×" + std::to_string(c.grid) + " grid) and N labels");
    if (held.codes.min().item<int64_t>() < 0 || held.codes.max().item<int64_t>() >= c.transformer.vocab_size)
        throw Error("'" + held.source + "': codes: expected ids in [0, " + std::to_string(c.transformer.vocab_size) +
                    ") (the GPT's vocabulary)");
    if (held.labels.min().item<int64_t>() < 0 || held.labels.max().item<int64_t>() >= c.num_classes)
        throw Error("'" + held.source + "': labels: expected classes in [0, " + std::to_string(c.num_classes) + ")");
    const int64_t n = held.codes.size(0);
    batch = std::max<int64_t>(1, batch);
    double sum = 0;
    for (int64_t i = 0; i < n; i += batch) {
        const int64_t b = std::min(batch, n - i);
        const at::Tensor x = held.codes.narrow(0, i, b);
        // Position 0 is the class token, so the last code is never an input (as in training).
        const at::Tensor logits = model.logits(held.labels.narrow(0, i, b), x.narrow(1, 0, T - 1));  // [b, T, V]
        const at::Tensor logp = at::log_softmax(logits.to(at::kDouble), -1);
        const double batchNll = -logp.gather(2, x.unsqueeze(2)).sum().item<double>();
        requireFinite(batchNll, "the image-token NLL of held-out sequences " + std::to_string(i + 1) + "-" +
                                    std::to_string(i + b) + " of '" + held.source + "'", kNonFiniteHint);
        sum += batchNll;
        reportProgress(progress, "token ppl", double(i + b), double(n));
    }
    TokenPerplexity r;
    r.sequences = n;
    r.tokens = n * T;
    r.nll = sum / double(r.tokens);
    r.ppl = std::exp(r.nll);
    requireFinite(r.ppl, "the image-token perplexity of '" + held.source + "'", kNonFiniteHint);
    return r;
}

} // namespace npw
