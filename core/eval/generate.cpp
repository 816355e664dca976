#include "core/eval/generate.h"
#include "core/util/error.h"
#include "core/models/non_finite.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <algorithm>
#include <chrono>
#include <sys/resource.h>
#include "core/models/torch_compat.h"

namespace npw {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int32_t sampleToken(const at::Tensor& logits, const SamplingOptions& o, std::mt19937_64& rng) {
    at::Tensor row = logits.to(at::kDouble).contiguous();
    if (o.temperature <= 0) return static_cast<int32_t>(row.argmax().item<int64_t>());
    at::Tensor probs = at::softmax(row / o.temperature, -1);
    auto [sorted, order] = probs.sort(-1, /*descending=*/true);
    const double* p = sorted.data_ptr<double>();
    const int64_t* idx = order.data_ptr<int64_t>();
    const int64_t n = sorted.numel();
    // Keep the smallest prefix whose mass reaches topP (at least one token).
    int64_t keep = n;
    if (o.topP < 1.0) {
        double mass = 0;
        for (int64_t i = 0; i < n; ++i) {
            mass += p[i];
            if (mass >= o.topP) { keep = i + 1; break; }
        }
    }
    double total = 0;
    for (int64_t i = 0; i < keep; ++i) total += p[i];
    const double u = std::uniform_real_distribution<double>(0.0, total)(rng);
    double acc = 0;
    for (int64_t i = 0; i < keep; ++i) {
        acc += p[i];
        if (u < acc) return static_cast<int32_t>(idx[i]);
    }
    return static_cast<int32_t>(idx[keep - 1]);
}

GenerationResult generate(const CausalLm& model, const std::vector<int32_t>& prompt, const SamplingOptions& o,
                          const std::function<void(int32_t)>& onToken) {
    if (prompt.empty()) throw Error("generation needs a prompt of at least one token (e.g. BOS)");
    const int64_t ctx = model.config().attentionSpan();  // generation stops there
    model.config().checkAttentionSpan(static_cast<int64_t>(prompt.size()), "the prompt");
    if (static_cast<int64_t>(prompt.size()) >= ctx)
        throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens; the model's context is " +
                    std::to_string(ctx));
    for (int32_t id : prompt)
        if (id < 0 || id >= model.config().vocab_size)
            throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(model.config().vocab_size));
    c10::InferenceMode guard;
    std::mt19937_64 rng(o.seed);
    GenerationResult r;
    r.promptTokens = static_cast<int64_t>(prompt.size());
    KvCache cache;
    at::Tensor ids = at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), at::kLong).unsqueeze(0);
    auto t0 = std::chrono::steady_clock::now();
    const at::Tensor prefill = model.logits(ids, &cache);
    at::Tensor last = prefill.select(1, -1).squeeze(0);
    r.prefillSeconds = secondsSince(t0);
    if (o.keepPromptLogits) r.promptLogits = prefill.squeeze(0).clone();
    t0 = std::chrono::steady_clock::now();
    const int64_t budget = std::min(o.maxNewTokens, ctx - r.promptTokens);
    std::vector<int32_t> context = prompt;
    for (int64_t i = 0; i < budget; ++i) {
        requireFiniteLogits(model, last, context, "the next-token logits");
        const int32_t next = sampleToken(last, o, rng);
        context.push_back(next);
        r.tokens.push_back(next);
        if (onToken) onToken(next);
        if (next == o.stopToken || i + 1 == budget) break;
        at::Tensor step = at::full({1, 1}, static_cast<int64_t>(next), at::kLong);
        last = model.logits(step, &cache).select(1, -1).squeeze(0);
    }
    r.decodeSeconds = secondsSince(t0);
    return r;
}

namespace {

// The bytes of the weights as the model holds them to run, by dtype (c10::toString's names:
// "Float", "BFloat16", "Half"): a LLaMA's runtime tensors, where a bfloat16 or float16 file's
// mapped matrices stay 2 bytes an element on a float32 CPU runtime (llama.h), a tied classifier
// once; another model (SliceGPT's, which holds converted copies) parameters × the runtime's size.
std::map<std::string, uint64_t> heldWeightBytes(const CausalLm& model) {
    const auto* llama = dynamic_cast<const LlamaModel*>(&model);
    if (!llama)
        return {{c10::toString(model.runtime().dtype),
                 static_cast<uint64_t>(model.parameters()) * c10::elementSize(model.runtime().dtype)}};
    LlamaWeights handles = llama->deviceWeights();  // namedTensors takes a mutable set: handles, not copies
    std::map<std::string, uint64_t> bytes;
    for (const auto& [name, tensor] : namedTensors(handles))
        if (tensor->defined()) bytes[c10::toString(tensor->scalar_type())] += static_cast<uint64_t>(tensor->nbytes());
    return bytes;
}

} // namespace

double peakResidentMiB() {
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

BenchResult benchmarkGeneration(const CausalLm& model, int64_t promptTokens, int64_t decodeTokens, int repeats,
                                const ProgressFn& progress) {
    const LlamaConfig& c = model.config();
    promptTokens = std::max<int64_t>(1, std::min(promptTokens, c.max_position_embeddings - decodeTokens - 1));
    if (promptTokens < 1 || decodeTokens < 1)
        throw Error("benchmark: the model's context of " + std::to_string(c.max_position_embeddings) +
                    " is too short for the requested prompt and decode lengths");
    // A fixed pseudo-random prompt: speed does not depend on the text.
    std::mt19937_64 rng(1234);
    std::vector<int32_t> prompt(promptTokens);
    for (auto& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.vocab_size));
    SamplingOptions greedy;
    greedy.maxNewTokens = decodeTokens;
    std::vector<double> prefill, decode;
#ifdef NPW_WITH_CUDA
    if (model.runtime().device.is_cuda())
        c10::cuda::CUDACachingAllocator::resetPeakStats(model.runtime().device.index());
#endif
    for (int i = 0; i <= repeats; ++i) {
        GenerationResult g = generate(model, prompt, greedy);
        if (i > 0) {  // run 0 warms up allocators and caches
            prefill.push_back(g.prefillSeconds);
            decode.push_back(g.decodeSeconds / static_cast<double>(std::max<size_t>(1, g.tokens.size() - 1)));
        }
        reportProgress(progress, "bench", i + 1, repeats + 1);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    BenchResult r;
    r.device = model.runtime().describe();
    r.promptTokens = promptTokens;
    r.decodeTokens = decodeTokens;
    r.repeats = repeats;
    r.prefillTokensPerSecond = static_cast<double>(promptTokens) / median(prefill);
    r.decodeTokensPerSecond = 1.0 / median(decode);
    r.bestPrefillTokensPerSecond = static_cast<double>(promptTokens) / *std::min_element(prefill.begin(), prefill.end());
    r.bestDecodeTokensPerSecond = 1.0 / *std::min_element(decode.begin(), decode.end());
    r.slowestPrefillTokensPerSecond = static_cast<double>(promptTokens) / *std::max_element(prefill.begin(), prefill.end());
    r.slowestDecodeTokensPerSecond = 1.0 / *std::max_element(decode.begin(), decode.end());
    r.peakMemoryMiB = peakResidentMiB();
    r.peakMemoryKind = "process peak RSS";
#ifdef NPW_WITH_CUDA
    if (model.runtime().device.is_cuda()) {
        r.peakMemoryMiB = torch_compat::cudaPeakAllocatedMiB(model.runtime().device.index());
        r.peakMemoryKind = "CUDA allocator peak";
    }
#endif
    r.parameters = model.parameters();
    // The bytes held, in the dtypes held: a bf16 file's mapped matrices are 2 bytes an element
    // on a float32 runtime, which parameters × 4 would double.
    for (const auto& [dtype, bytes] : heldWeightBytes(model)) {
        r.weightsMiBByDtype[dtype] = double(bytes) / (1024.0 * 1024.0);
        r.weightsMiB += double(bytes) / (1024.0 * 1024.0);
    }
    return r;
}

} // namespace npw
