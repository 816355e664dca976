#include "core/eval/layerwise_perplexity.h"

#include "core/models/weight_values.h"
#include "core/eval/perplexity_windows.h"
#include "core/models/llama.h"
#include "core/util/error.h"
#include "core/util/finite.h"
#include "core/models/non_finite.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <chrono>
#include <cmath>
#include <limits>

namespace npw {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void checkWeights(const LlamaCheckpoint& checkpoint) {
    const LlamaWeights& w = checkpoint.weights;
    if (static_cast<int64_t>(w.layers.size()) != checkpoint.config.num_layers || !w.embed.defined() ||
        !w.final_norm.defined() || !w.lm_head.defined())
        throw Error("layer-wise evaluation of '" + checkpoint.source + "': the weights have " +
                    std::to_string(w.layers.size()) + " layers (config: " + std::to_string(checkpoint.config.num_layers) +
                    ") or lack the embedding, final norm or classifier");
}

} // namespace

int64_t modelRuntimeBytes(const LlamaConfig& config, const Runtime& runtime) {
    return config.parameterCount() * static_cast<int64_t>(c10::elementSize(runtime.dtype));
}

bool evaluationBelongsLayerwise(const LlamaConfig& config, const Runtime& runtime, int64_t physicalBytes) {
    return physicalBytes > 0 &&
           static_cast<double>(modelRuntimeBytes(config, runtime)) > kModelRamFraction * static_cast<double>(physicalBytes);
}

int64_t modelRuntimeBytes(const LlamaCheckpoint& checkpoint, const Runtime& runtime) {
    LlamaWeights weights = checkpoint.weights;  // handles (no tensor data copied), for namedTensors
    int64_t bytes = 0;
    for (const auto& [name, tensor] : namedTensors(weights)) {
        if (!tensor->defined()) continue;
        const auto size = llamaKeepsStoredDtype(*tensor, runtime) ? tensor->element_size()
                                                                    : static_cast<int64_t>(c10::elementSize(runtime.dtype));
        bytes += tensor->numel() * static_cast<int64_t>(size);
    }
    return bytes;
}

bool evaluationBelongsLayerwise(const LlamaCheckpoint& checkpoint, const Runtime& runtime, int64_t physicalBytes) {
    return physicalBytes > 0 && static_cast<double>(modelRuntimeBytes(checkpoint, runtime)) >
                                    kModelRamFraction * static_cast<double>(physicalBytes);
}

int64_t layerwiseEvalHiddenBytes(const LlamaConfig& config, const Runtime& runtime, int64_t windows, int64_t seqlen) {
    return windows * seqlen * config.hidden_size * static_cast<int64_t>(c10::elementSize(runtime.dtype));
}

PerplexityResult evaluatePerplexityLayerwise(const LlamaCheckpoint& checkpoint, const Runtime& runtime,
                                             const std::vector<int32_t>& ids, const PerplexityOptions& options,
                                             const DecodeFn& decode, const ProgressFn& progress) {
    const LlamaConfig& config = checkpoint.config;
    checkWeights(checkpoint);
    const int64_t seqlen = options.seqlen;
    const int64_t windows = evaluationWindowCount(config, ids, options);
    const int64_t batch = std::max<int64_t>(1, options.batchWindows);
    const int64_t layers = config.num_layers;
    const double total = static_cast<double>((layers + 1) * windows);
    const char* stage = "perplexity (layer-wise)";

    c10::InferenceMode guard;
    PerplexityResult r;
    r.seqlen = seqlen;
    r.windows = windows;
    r.path = "layerwise";
    const auto start = Clock::now();
    const at::TensorOptions onRuntime = at::TensorOptions().dtype(runtime.dtype).device(runtime.device);

    // Rows gathered from the stored table, then cast: the same numbers as gathering from a
    // converted table (a cast is elementwise), without converting the whole table.
    // Values are checked (finite) as each block is first read: a Mapped load read none.
    checkWeightValues(checkpoint, "model.embed_tokens.weight", checkpoint.weights.embed);
    std::vector<at::Tensor> hidden;
    for (int64_t w0 = 0; w0 < windows; w0 += batch) {
        const int64_t nb = std::min(batch, windows - w0);
        hidden.push_back(at::embedding(checkpoint.weights.embed, evaluationWindowIds(ids, seqlen, w0, nb)).to(onRuntime));
    }
    const LlamaPositionTables tables = llamaPositionTables(config, 0, seqlen, onRuntime);
    reportProgress(progress, stage, 0, total);
    for (int64_t l = 0; l < layers; ++l) {
        checkLayerValues(checkpoint, l);
        const LlamaLayerWeights block = llamaLayerOnRuntime(checkpoint.weights.layers[static_cast<size_t>(l)], runtime);
        int64_t done = 0;
        for (at::Tensor& x : hidden) {
            x = llamaBlockForward(config, block, l, x, tables);
            // The hidden states are gone once the next layer runs: where they first become
            // non-finite is told now. A float64 sum (no temporary the size of x; it cannot
            // overflow on float32 values) is non-finite exactly when a value is.
            if (!std::isfinite(x.sum(at::kDouble).item<double>())) {
                const int64_t first = done;
                for (int64_t b = 0; b < x.size(0); ++b)
                    if (const std::string values = nonFiniteValues(x[b]); !values.empty())
                        throw Error("layer " + std::to_string(l) + "'s output became non-finite (" + values +
                                    ") in window " + std::to_string(first + b + 1) + " of " + std::to_string(windows) +
                                    " (layer-wise evaluation)" + kNonFiniteHint);
            }
            done += x.size(0);
            reportProgress(progress, stage, static_cast<double>(l * windows + done), total);
        }
    }
    checkWeightValues(checkpoint, "model.norm.weight", checkpoint.weights.final_norm);
    checkWeightValues(checkpoint, "lm_head.weight", checkpoint.weights.lm_head);
    const at::Tensor finalNorm = llamaTensorOnRuntime(checkpoint.weights.final_norm, runtime);
    // A bfloat16 / float16 classifier stays as stored (widened a block at a time as it is read).
    const at::Tensor lmHead = llamaTensorOnRuntime(checkpoint.weights.lm_head, runtime);
    double decodeSeconds = 0;
    int64_t w0 = 0;
    for (at::Tensor& x : hidden) {
        const int64_t nb = x.size(0);
        const at::Tensor input = evaluationWindowIds(ids, seqlen, w0, nb).to(runtime.device);
        // As LlamaModel::logits: the classifier's output in float32 before the float64 scoring.
        r.totalNll += windowsNll(llamaOutputLogits(config, finalNorm, lmHead, x).to(at::kFloat), input, w0, windows);
        x = at::Tensor();  // this batch's hidden states are done with
        if (decode) {
            const auto t0 = Clock::now();
            r.bytes += windowsScoredBytes(decode, ids, seqlen, w0, nb);
            decodeSeconds += since(t0);
        }
        w0 += nb;
        reportProgress(progress, stage, static_cast<double>(layers * windows + w0), total);
    }
    r.seconds = since(start) - decodeSeconds;
    finishPerplexity(r, std::numeric_limits<double>::quiet_NaN());
    return r;
}

} // namespace npw
