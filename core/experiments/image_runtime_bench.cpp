#include "core/experiments/image_runtime_bench.h"
#include "core/eval/image_eval.h"
#include "core/eval/image_generate.h"
#include "core/experiments/pruning_bench.h"
#include "core/experiments/runtime_bench.h"
#include "core/models/compute_threads.h"
#include "core/models/gemv_kernel.h"
#include "core/models/llama_init.h"
#include "core/models/runtime.h"
#include "core/models/vq_model.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>

namespace npw {

namespace fs = std::filesystem;

LlamaGenCheckpoint syntheticLlamaGen(const LlamaGenConfig& config, uint64_t seed) {
    LlamaGenCheckpoint ck;
    ck.config = config;
    ck.weights = initLlamaWeights(config.transformer, seed);
    at::manual_seed(seed + 7919);
    ck.classEmbedding = at::randn({config.num_classes + 1, config.transformer.hidden_size}) * 0.02;
    ck.source = "synthetic";
    return ck;
}

StepCost imageStepCost(const LlamaConfig& c, int64_t rows, int64_t context) {
    StepCost s;
    double weights = double(c.vocab_size) * double(c.hidden_size), norms = double(c.hidden_size), kv = 0, attn = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const double q = double(c.num_heads[l] * c.head_dim), kvw = double(c.num_kv_heads[l] * c.head_dim);
        weights += double(c.hidden_size) * (2 * q + 2 * kvw) + 3.0 * double(c.hidden_size) * double(c.intermediate_size[l]);
        norms += 2.0 * double(c.hidden_size);
        kv += 2.0 * kvw * double(context);     // K and V of every cached position, per row
        attn += 4.0 * q * double(context);     // q·kᵀ and p·v, per row
    }
    s.bytes = 4.0 * (weights + norms + double(rows) * kv);
    s.flops = double(rows) * (2.0 * weights + attn);
    return s;
}

ImageBounds imageGenerationBounds(const LlamaGenConfig& config, int64_t batch, bool guided, double bandwidthGBs,
                                  double gemmGflops) {
    const int64_t rows = guided ? 2 * batch : batch;
    double bandwidthSeconds = 0, gemmSeconds = 0, rooflineSeconds = 0;
    for (int64_t i = 0; i < config.blockSize(); ++i) {  // forward i: the class token (i = 0) or image token i
        const StepCost s = imageStepCost(config.transformer, rows, i + 1);
        const double b = s.bytes / (bandwidthGBs * 1e9), g = s.flops / (gemmGflops * 1e9);
        bandwidthSeconds += b;
        gemmSeconds += g;
        rooflineSeconds += std::max(b, g);
    }
    ImageBounds out;
    if (bandwidthGBs > 0 && gemmGflops > 0) {
        out.bandwidth = double(batch) / bandwidthSeconds;
        out.gemm = double(batch) / gemmSeconds;
        out.roofline = double(batch) / rooflineSeconds;
    }
    return out;
}

namespace {

// LlamaGen's VQ-16 decoder (vq_ds16_c2i: ch 128, ch_mult 1,1,2,2,4, z 256, codebook 16384×8,
// three ResnetBlocks per level), random weights: speed does not depend on them.
std::shared_ptr<VqModel> syntheticVq16(uint64_t seed) {
    VqConfig c;
    c.decoderChannels = {128, 128, 256, 256, 512};
    c.decoderResBlocks = 3;
    at::manual_seed(seed);
    std::map<std::string, at::Tensor> tensors;
    for (const auto& [name, shape] : vqTensorShapes(c)) tensors[name] = at::randn(shape) * 0.02;
    return VqModel::fromTensors(tensors, "synthetic VQ-16");
}

double processCpuSeconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double secondsOf(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct BenchModel {
    ImageRuntimeModel info;
    std::unique_ptr<LlamaGenModel> gpt;
    std::shared_ptr<VqModel> vq;
    int decoderRuns = 1;  // best of: the small demo decoder's first call pays for allocations
};

} // namespace

ImageRuntimeBenchReport runImageRuntimeBench(const ImageRuntimeBenchOptions& o, const ProgressFn& progress) {
    if (o.batches.empty()) throw Error("--suite image-runtime: no batch sizes");
    for (int64_t b : o.batches)
        if (b < 1) throw Error("--suite image-runtime: batch sizes must be positive, got " + std::to_string(b));
    ImageRuntimeBenchReport r;
    // As the runtime suite: LibTorch's pool and OpenBLAS's own at o.threads (setComputeThreads).
    const Runtime runtime = chooseRuntime("cpu", "float32");
    const ScopedComputeThreads computeThreads(o.threads);
    r.gemvIsa = gemvF32Isa();

    reportProgress(progress, "image runtime: building the models", 0, 1);
    const LlamaGenConfig config = llamaGenNamedConfig(o.gptModel, 256);
    r.steps = config.blockSize();
    std::vector<BenchModel> models;
    const auto add = [&](const std::string& name, LlamaGenCheckpoint ck, std::shared_ptr<VqModel> vq,
                         const std::string& decoderNote, int decoderRuns) {
        BenchModel m;
        m.info.name = name;
        m.info.description = ck.config.describe();
        m.info.parameters = ck.config.transformer.parameterCount() + ck.classEmbedding.numel();
        m.info.weightBytes = imageStepCost(ck.config.transformer, 0, 0).bytes;
        m.info.decoderNote = decoderNote;
        m.gpt = std::make_unique<LlamaGenModel>(std::move(ck), runtime);
        m.vq = std::move(vq);
        m.decoderRuns = decoderRuns;
        models.push_back(std::move(m));
    };
    const std::string shape = config.name;
    add(shape + " (random)", syntheticLlamaGen(config, 1), o.decoder ? syntheticVq16(3) : nullptr,
        o.decoder ? "LlamaGen's VQ-16 decoder (random weights), 16×16 codes → 256×256 pixels" : "not timed", 1);
    if (o.prunedRatio > 0) {
        LlamaGenConfig pruned = config;
        pruned.transformer = prunedByShape(config.transformer, o.prunedRatio);
        add(shape + " pruned " + std::to_string(std::lround(o.prunedRatio * 100)) + " % (by shape)",
            syntheticLlamaGen(pruned, 2), nullptr, "the dense model's", 0);
    }
    if (o.demo) {
        try {
            const std::string dir = resolveModelPath("demo:c2i");
            std::shared_ptr<VqModel> vq = o.decoder ? VqModel::load((fs::path(dir) / "vq").string(), runtime) : nullptr;
            add("demo:c2i", loadLlamaGenCheckpoint("demo:c2i"), vq, o.decoder ? "the demo's VQ decoder" : "not timed", 3);
        } catch (const Error& e) {
            r.demoSkipped = e.what();
        }
    }

    // Rounds alternate every (model, batch) with the bandwidth kernel so that the figures that
    // form a ratio (a pruned model's speed-up, the ratio to the roofline) compare equally
    // disturbed runs; each figure is the best of its rounds.
    std::vector<double> best(models.size() * o.batches.size(), 0.0), bestCpu(best.size(), 0.0);
    const double total = double(o.repeats) * double(best.size());
    double done = 0;
    for (int round = 0; round < std::max(1, o.repeats); ++round) {
        r.bandwidthGBs = std::max(r.bandwidthGBs, measureStreamBandwidth(int64_t{1} << 30, 2));
        for (size_t b = 0; b < o.batches.size(); ++b)
            for (size_t m = 0; m < models.size(); ++m) {
                const LlamaGenModel& gpt = *models[m].gpt;
                ImageSamplingOptions s;
                s.cfgScale = o.cfgScale;
                s.batchSize = o.batches[b];
                const std::vector<int64_t> classes = balancedClasses(o.batches[b], gpt.config().num_classes);
                const double cpu0 = processCpuSeconds();
                const ImageTokens t = generateImageTokens(gpt, classes, s);
                const double cpu = processCpuSeconds() - cpu0;
                double& seconds = best[m * o.batches.size() + b];
                seconds = seconds > 0 ? std::min(seconds, t.seconds) : t.seconds;
                double& cpuSeconds = bestCpu[m * o.batches.size() + b];
                cpuSeconds = cpuSeconds > 0 ? std::min(cpuSeconds, cpu) : cpu;
                reportProgress(progress, "image runtime: generation rounds", ++done, total);
            }
    }
    r.bandwidthGBs = std::max(r.bandwidthGBs, measureStreamBandwidth(int64_t{1} << 30, 2));
    const LlamaConfig& t = config.transformer;
    r.gemmGflops = measureGemmRate(1024, t.hidden_size, t.intermediate_size[0], std::max(2, o.repeats + 1));

    const bool guided = o.cfgScale > 1.0;
    for (size_t m = 0; m < models.size(); ++m) {
        const LlamaGenConfig& c = models[m].gpt->config();
        for (size_t b = 0; b < o.batches.size(); ++b) {
            ImageRuntimeRow row;
            row.model = models[m].info.name;
            row.batch = o.batches[b];
            row.rows = guided ? 2 * row.batch : row.batch;
            row.seconds = best[m * o.batches.size() + b];
            row.imagesPerSecond = double(row.batch) / row.seconds;
            row.cpuSeconds = bestCpu[m * o.batches.size() + b];
            row.imagesPerCpuSecond = row.cpuSeconds > 0 ? double(row.batch) / row.cpuSeconds : 0;
            row.tokensPerSecond = row.imagesPerSecond * double(c.blockSize());
            row.weightGBs = models[m].info.weightBytes * double(c.blockSize()) / row.seconds / 1e9;
            const ImageBounds bounds = imageGenerationBounds(c, row.batch, guided, r.bandwidthGBs, r.gemmGflops);
            row.bandwidthBound = bounds.bandwidth;
            row.gemmBound = bounds.gemm;
            row.roofline = bounds.roofline;
            r.rows.push_back(row);
        }
    }

    // The VQ decoders last, once, one image each (best of three for the small demo decoder).
    reportProgress(progress, "image runtime: VQ decoders", 0, 1);
    for (BenchModel& m : models) {
        if (!m.vq) continue;
        const int64_t g = m.gpt->config().grid;
        const at::Tensor codes = at::randint(0, m.vq->config().codebookSize, {1, g, g}, at::kLong);
        double seconds = 0;
        for (int i = 0; i < m.decoderRuns; ++i) {
            const double s = secondsOf([&] { m.vq->decode(codes); });
            seconds = i == 0 ? s : std::min(seconds, s);
        }
        m.info.decoderSecondsPerImage = seconds;
    }
    for (const BenchModel& m : models) r.models.push_back(m.info);
    reportProgress(progress, "image runtime", 1, 1);
    return r;
}

} // namespace npw
