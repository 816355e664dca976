#include "core/eval/image_generate.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace npw {

void ImageSamplingOptions::validate() const {
    if (!(cfgScale > 0) || !std::isfinite(cfgScale)) throw Error("cfg scale must be positive, got " + std::to_string(cfgScale));
    if (cfgInterval < -1) throw Error("cfg interval must be -1 (always) or ≥ 0, got " + std::to_string(cfgInterval));
    if (!std::isfinite(temperature)) throw Error("temperature must be finite");
    if (topK < 0) throw Error("top-k must be ≥ 0, got " + std::to_string(topK));
    if (!(topP > 0 && topP <= 1)) throw Error("top-p must be in (0, 1], got " + std::to_string(topP));
    if (batchSize <= 0) throw Error("batch size must be positive");
}

int64_t sampleImageToken(const at::Tensor& logits, const ImageSamplingOptions& o, std::mt19937_64& rng) {
    at::Tensor row = logits.to(at::kDouble).contiguous().view(-1);
    // The draw happens whatever the temperature, so a generator's stream advances identically.
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    if (o.temperature <= 0) return row.argmax().item<int64_t>();
    row = row / std::max(o.temperature, 1e-5);
    const int64_t n = row.numel();
    const double minusInf = -std::numeric_limits<double>::infinity();
    if (o.topK > 0 && o.topK < n) {
        const double kth = std::get<0>(row.topk(o.topK)).min().item<double>();
        row = row.masked_fill(row < kth, minusInf);
    }
    auto [sortedLogits, order] = row.sort(-1, /*descending=*/true);
    at::Tensor sortedProbs = at::softmax(sortedLogits, -1);
    const double* p = sortedProbs.data_ptr<double>();
    const int64_t* idx = order.data_ptr<int64_t>();
    int64_t keep = n;
    if (o.topP < 1.0) {
        // Hugging Face's filter: remove tokens whose cumulative mass exceeds p, shifted by one so
        // that the token crossing p stays.
        double mass = 0;
        for (int64_t i = 0; i < n; ++i) {
            mass += p[i];
            if (mass > o.topP) {
                keep = i + 1;
                break;
            }
        }
    }
    double total = 0;
    for (int64_t i = 0; i < keep; ++i) total += p[i];
    const double target = u * total;
    double acc = 0;
    for (int64_t i = 0; i < keep; ++i) {
        acc += p[i];
        if (target < acc) return idx[i];
    }
    return idx[keep - 1];
}

namespace {

// Guided logits of the newest position: rows [0, n) conditional, [n, 2n) null when guided.
at::Tensor combine(const at::Tensor& logits, int64_t n, bool guided, bool applyGuidance, double scale) {
    at::Tensor last = logits.select(1, logits.size(1) - 1);  // [rows, vocab]
    if (!guided) return last;
    at::Tensor c = last.narrow(0, 0, n), u = last.narrow(0, n, n);
    return applyGuidance ? u + (c - u) * scale : c;
}

} // namespace

ImageTokens generateImageTokens(const LlamaGenModel& model, const std::vector<int64_t>& classes,
                                const ImageSamplingOptions& o, int64_t firstIndex, const ProgressFn& progress) {
    o.validate();
    const LlamaGenConfig& cfg = model.config();
    for (int64_t c : classes)
        if (c < 0 || c >= cfg.num_classes)
            throw Error("class " + std::to_string(c) + " is outside 0.." + std::to_string(cfg.num_classes - 1));
    const int64_t N = static_cast<int64_t>(classes.size()), steps = cfg.blockSize();
    const bool guided = o.cfgScale > 1.0;  // as LlamaGen: scale 1 runs the conditional batch only
    ImageTokens out;
    out.classes = classes;
    out.tokens = at::zeros({N, steps}, at::kLong);
    const auto t0 = std::chrono::steady_clock::now();
    c10::InferenceMode guard;
    for (int64_t begin = 0; begin < N; begin += o.batchSize) {
        const int64_t n = std::min(o.batchSize, N - begin);
        std::vector<std::mt19937_64> rngs;
        for (int64_t i = 0; i < n; ++i) rngs.emplace_back(o.seed + static_cast<uint64_t>(firstIndex + begin + i));
        at::Tensor cls = at::tensor(std::vector<int64_t>(classes.begin() + begin, classes.begin() + begin + n), at::kLong);
        if (guided) cls = at::cat({cls, at::full({n}, cfg.num_classes, at::kLong)});
        KvCache cache;
        at::Tensor logits = model.logits(cls, at::Tensor(), &cache);
        at::Tensor chosen = at::zeros({n}, at::kLong);
        for (int64_t step = 0; step < steps; ++step) {
            // Decode step i (LlamaGen's decode_n_tokens) produces token i + 1.
            const bool applyGuidance = step == 0 || o.cfgInterval < 0 || step - 1 <= o.cfgInterval;
            at::Tensor next = combine(logits, n, guided, applyGuidance, o.cfgScale).to(at::kDouble);
            int64_t* picked = chosen.data_ptr<int64_t>();
            for (int64_t i = 0; i < n; ++i) picked[i] = sampleImageToken(next[i], o, rngs[static_cast<size_t>(i)]);
            out.tokens.narrow(0, begin, n).select(1, step).copy_(chosen);
            reportProgress(progress, "generate", static_cast<double>(begin * steps + (step + 1) * n),
                           static_cast<double>(N * steps));
            if (step + 1 == steps) break;
            at::Tensor input = (guided ? at::cat({chosen, chosen}) : chosen).unsqueeze(1);
            logits = model.logits(at::Tensor(), input, &cache);
        }
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.tokensPerSecond = out.seconds > 0 ? static_cast<double>(N * steps) / out.seconds : 0;
    return out;
}

} // namespace npw
