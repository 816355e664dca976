#include "core/experiments/runtime_bench.h"
#include "core/eval/generate.h"
#include "core/experiments/pruning_bench.h"
#include "core/models/compute_threads.h"
#include "core/models/gemv_kernel.h"
#include "core/models/llama.h"
#include "core/models/llama_init.h"
#include "core/models/model_loader.h"
#include "core/models/runtime.h"
#include "core/io/safetensors.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <ostream>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

namespace npw {

namespace fs = std::filesystem;

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string shellQuote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// Runs a shell command; returns its exit status and its output (stdout and stderr).
int runCommand(const std::string& command, std::string& output) {
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return -1;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    return ::pclose(pipe);
}

void writeFloats(std::ostream& out, const at::Tensor& t) {
    const at::Tensor c = t.to(at::kFloat).contiguous();
    out.write(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<std::streamsize>(c.numel() * 4));
}

// Every layer's tensor `pick` stacked in order, as llama2.c stores them ([layers, ...]).
template <class Pick>
void writeStacked(std::ostream& out, const LlamaWeights& w, Pick pick) {
    for (const LlamaLayerWeights& L : w.layers) writeFloats(out, pick(L));
}

// Tokens per second of the model on evaluation windows: logits of [windows, seqlen] in one
// forward (what perplexity evaluation runs per batch), best of `repeats` after a warm-up.
double evalTokensPerSecond(const LlamaModel& model, int64_t windows, int64_t seqlen, int repeats) {
    std::mt19937_64 rng(99);
    at::Tensor ids = at::empty({windows, seqlen}, at::kLong);
    auto* p = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) p[i] = static_cast<int64_t>(rng() % model.config().vocab_size);
    double best = 0;
    for (int i = 0; i <= repeats; ++i) {
        const double t0 = now();
        model.logits(ids);
        const double rate = double(ids.numel()) / (now() - t0);
        if (i > 0) best = std::max(best, rate);
    }
    return best;
}

// RssAnon of this process in MiB (anonymous pages only: a mapped file's pages are RssFile).
double rssAnonMiB() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("RssAnon:", 0) == 0) return std::stod(line.substr(8)) / 1024.0;
    return 0;
}

// Samples RssAnon every 5 ms on its own thread from construction to peakAbove(): the highest
// level reached above the level at construction.
class AnonPeakSampler {
public:
    AnonPeakSampler() : before_(rssAnonMiB()), peak_(before_) {
        thread_ = std::thread([this] {
            while (!stop_) {
                const double now = rssAnonMiB();
                double seen = peak_.load();
                while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        });
    }
    ~AnonPeakSampler() { finish(); }
    double peakAbove() {
        finish();
        return std::max(0.0, std::max(peak_.load(), rssAnonMiB()) - before_);
    }

private:
    void finish() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    double before_;
    std::atomic<double> peak_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

LlamaCheckpoint syntheticCheckpoint(const LlamaConfig& config, uint64_t seed) {
    LlamaCheckpoint ck;
    ck.config = config;
    // llama2.c's layout, so the .bin holds exactly this model and the GGUF export needs no permutation.
    ck.config.rope_layout = RopeLayout::AdjacentPairs;
    ck.weights = initLlamaWeights(ck.config, seed);
    ck.source = "synthetic";
    // The demo tokenizer (4k pieces, below the vocabulary), so that llama.cpp loads the GGUF.
    ck.tokenizerPath = (fs::path(resourcesDir()) / "demo" / "lm" / "tokenizer.json").string();
    return ck;
}

} // namespace

void writeLlama2cCheckpoint(const LlamaCheckpoint& ck, const std::string& path) {
    const LlamaConfig& c = ck.config;
    const LlamaWeights& w = ck.weights;
    const auto uniform = [&](const std::vector<int64_t>& v) {
        return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v.front(); });
    };
    if (c.num_layers < 1 || !uniform(c.num_heads) || !uniform(c.num_kv_heads) || !uniform(c.intermediate_size))
        throw Error("llama2.c .bin '" + path + "': every layer must have the same heads, KV heads and MLP width");
    if (c.rope_layout != RopeLayout::AdjacentPairs || c.rope_theta != 10000.0)
        throw Error("llama2.c .bin '" + path + "': run.c rotates adjacent pairs with θ = 10000");
    if (c.num_heads[0] * c.head_dim != c.hidden_size)
        throw Error("llama2.c .bin '" + path + "': heads × head_dim must equal the hidden size");
    for (const LlamaLayerWeights& L : w.layers)
        if (L.wq_bias.defined() || L.wk_bias.defined() || L.wv_bias.defined() || L.wo_bias.defined() ||
            L.w_down_bias.defined() || L.q_norm.defined() || L.k_norm.defined())
            throw Error("llama2.c .bin '" + path + "': the format has no biases or q/k norms");
    const bool shared = w.lm_head.is_same(w.embed);
    const int64_t hd = c.head_dim, seq = c.max_position_embeddings;
    writeFileAtomically(path, [&](std::ostream& out) {
        const int32_t header[7] = {int32_t(c.hidden_size),        int32_t(c.intermediate_size[0]), int32_t(c.num_layers),
                                   int32_t(c.num_heads[0]),       int32_t(c.num_kv_heads[0]),
                                   int32_t(shared ? c.vocab_size : -c.vocab_size), int32_t(seq)};
        out.write(reinterpret_cast<const char*>(header), sizeof header);
        writeFloats(out, w.embed);
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.attn_norm; });
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.wq; });
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.wk; });
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.wv; });
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.wo; });
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.ffn_norm; });
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.w_gate; });  // w1
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.w_down; });  // w2
        writeStacked(out, w, [](const LlamaLayerWeights& L) { return L.w_up; });    // w3
        writeFloats(out, w.final_norm);
        // freq_cis_real / imag [seq, hd/2] (read past by today's run.c, kept for the format).
        const at::Tensor inv = 1.0 / at::pow(10000.0, at::arange(0, hd, 2, at::kDouble) / double(hd));
        const at::Tensor angles = at::outer(at::arange(seq, at::kDouble), inv);
        writeFloats(out, angles.cos());
        writeFloats(out, angles.sin());
        if (!shared) writeFloats(out, w.lm_head);
    });
    // tokenizer.bin: max piece length, then per piece (score, length, bytes): the special
    // tokens, the 256 byte pieces, printable ASCII, then filler pieces (for timing only).
    const std::string tokPath = (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0
                                     ? path.substr(0, path.size() - 4)
                                     : path) +
                                ".tokenizer.bin";
    writeFileAtomically(tokPath, [&](std::ostream& out) {
        std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
        char hex[8];
        for (int b = 0; b < 256; ++b) {
            std::snprintf(hex, sizeof hex, "<0x%02X>", b);
            pieces.emplace_back(hex);
        }
        for (int ch = 32; ch < 127; ++ch) pieces.emplace_back(1, char(ch));
        for (int64_t i = int64_t(pieces.size()); i < c.vocab_size; ++i) pieces.push_back("t" + std::to_string(i));
        pieces.resize(static_cast<size_t>(c.vocab_size));
        const int32_t maxLen = 16;
        out.write(reinterpret_cast<const char*>(&maxLen), 4);
        for (const std::string& piece : pieces) {
            const float score = 0;
            const int32_t len = int32_t(piece.size());
            out.write(reinterpret_cast<const char*>(&score), 4);
            out.write(reinterpret_cast<const char*>(&len), 4);
            out.write(piece.data(), len);
        }
    });
}

double decodeBytesPerToken(const LlamaConfig& c, int64_t context, int weightBytes) {
    double weights = double(c.vocab_size) * double(c.hidden_size);  // lm_head (tied or not: read once)
    double cache = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const double q = double(c.num_heads[l] * c.head_dim), kv = double(c.num_kv_heads[l] * c.head_dim);
        weights += double(c.hidden_size) * (2 * q + 2 * kv) + 3.0 * double(c.hidden_size) * double(c.intermediate_size[l]);
        cache += 2.0 * double(c.hidden_size);  // the two norms (float32 whatever the weights)
        cache += 2.0 * kv * double(context);  // K and V of the cached positions
    }
    return double(weightBytes) * weights + 4.0 * cache;
}

void writeHfCheckpointIn(const LlamaCheckpoint& checkpoint, const std::string& dir, c10::ScalarType dtype) {
    saveHfLlamaDirectory(checkpoint, dir);
    const std::string file = (fs::path(dir) / "model.safetensors").string();
    const std::shared_ptr<SafeTensorsFile> f32 = SafeTensorsFile::open(file);
    std::vector<SafeTensorsEntry> entries;
    for (const std::string& name : f32->names()) {
        const at::Tensor view = f32->view(name);
        entries.push_back({name, dtype, view.sizes().vec()});
    }
    // Renamed over the float32 file at commit; the mapping keeps reading the old one till then.
    SafeTensorsStreamWriter writer(file, entries, {{"format", "pt"}});
    for (const SafeTensorsEntry& e : entries) writer.write(e.name, f32->view(e.name).to(dtype));
    writer.commit();
}

namespace {

// FLOPs per token of a forward over windows of `seqlen`: two per weight multiplied (layers and
// classifier) and the attention products (q·kᵀ and p·v, 2·2·heads·head_dim per key; a causal
// window sees (seqlen + 1) / 2 keys on average, as PyTorch's unfused attention computes them all
// this counts what a causal kernel needs).
double evalFlopsPerToken(const LlamaConfig& c, int64_t seqlen) {
    double flops = 2.0 * double(c.vocab_size) * double(c.hidden_size);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const double q = double(c.num_heads[l] * c.head_dim), kv = double(c.num_kv_heads[l] * c.head_dim);
        flops += 2.0 * double(c.hidden_size) * (2 * q + 2 * kv) +
                 6.0 * double(c.hidden_size) * double(c.intermediate_size[l]);
        flops += 4.0 * q * double(seqlen + 1) / 2.0;
    }
    return flops;
}

} // namespace

double measureStreamBandwidth(int64_t bytes, int repeats) {
    const int64_t n = std::max<int64_t>(1, bytes / 4);
    std::vector<float> buffer(static_cast<size_t>(n), 1.0f);  // written once: every page is resident
    double best = 0;
    volatile float sink = 0;
    for (int i = 0; i < std::max(1, repeats); ++i) {
        const double t0 = now();
        sink = sink + streamSumF32(buffer.data(), n);
        best = std::max(best, double(n) * 4.0 / (now() - t0) / 1e9);
    }
    return best;
}

double measureGemmRate(int64_t m, int64_t k, int64_t n, int repeats) {
    at::manual_seed(5);
    const at::Tensor a = at::randn({m, k}), b = at::randn({n, k});
    at::Tensor out = at::linear(a, b);  // warm-up (the BLAS's buffers)
    double best = 0;
    for (int i = 0; i < std::max(1, repeats); ++i) {
        const double t0 = now();
        out = at::linear(a, b);  // the call the forward makes: x · Wᵀ
        best = std::max(best, 2.0 * double(m) * double(k) * double(n) / (now() - t0) / 1e9);
    }
    return best;
}

RuntimeBenchReport runRuntimeBench(const RuntimeBenchOptions& o, const ProgressFn& progress) {
    RuntimeBenchReport r;
    // Both pools, LibTorch's and OpenBLAS's own, at o.threads (setComputeThreads): with OpenBLAS
    // left at every core, "one thread" evaluation and GEMM figures were two-thread figures
    // (measured: GEMM 205 against 104 GFLOP/s on 2 cores).
    chooseRuntime("cpu", "float32");
    const ScopedComputeThreads computeThreads(o.threads);
    const LlamaConfig config = syntheticLlamaConfig(o.size);
    const int64_t context = o.promptTokens + o.decodeTokens;
    if (context >= config.max_position_embeddings || o.evalSeqlen > config.max_position_embeddings)
        throw Error("--suite runtime: prompt + decode tokens and the evaluation windows must fit the synthetic model's "
                    "context of " + std::to_string(config.max_position_embeddings));
    const double steps = 5;
    reportProgress(progress, "runtime: building the model", 0, steps);
    r.checkpoint = syntheticCheckpoint(config, 1);
    r.parameters = config.parameterCount();
    r.gemvIsa = gemvF32Isa();
    // The decode figure's context averages prompt + decode/2 positions.
    r.bytesPerToken = decodeBytesPerToken(config, o.promptTokens + o.decodeTokens / 2);
    r.flopsPerToken = evalFlopsPerToken(config, o.evalSeqlen);

    fs::create_directories(o.workDir);
    r.llama2cPath = (fs::path(o.workDir) / ("synthetic-" + o.size + ".bin")).string();
    writeLlama2cCheckpoint(r.checkpoint, r.llama2cPath);

    // run.c's binary first, so that its rounds can alternate with npw's below.
    std::string runcExe;
    if (o.runcSource.empty() || !fs::exists(o.runcSource)) {
        r.runc.skipped = "no run.c at '" + o.runcSource + "'";
    } else {
        runcExe = (fs::path(o.workDir) / "run").string();
        std::string out;
        const std::string build = "gcc -Ofast -march=native " + std::string(o.threads > 1 ? "-fopenmp " : "") + "-o " +
                                  shellQuote(runcExe) + " " + shellQuote(o.runcSource) + " -lm";
        if (runCommand(build, out) != 0) {
            r.runc.skipped = "cannot build run.c: " + out.substr(0, 400);
            runcExe.clear();
        }
    }
    const auto runcRound = [&] {
        if (runcExe.empty()) return;
        const std::string tok = r.llama2cPath.substr(0, r.llama2cPath.size() - 4) + ".tokenizer.bin";
        // -n counts the prompt's token: one prompt token, then decodeTokens; run.c's figure
        // excludes its first step.
        const std::string cmd = "OMP_NUM_THREADS=" + std::to_string(o.threads) + " " + shellQuote(runcExe) + " " +
                                shellQuote(r.llama2cPath) + " -z " + shellQuote(tok) + " -t 0 -n " +
                                std::to_string(o.decodeTokens + 2) + " -i t";
        std::string out;
        const int status = runCommand(cmd, out);
        const size_t at = out.find("achieved tok/s: ");
        if (status != 0 || at == std::string::npos) {
            r.runc.skipped = "run.c failed: " + out.substr(0, 400);
            runcExe.clear();
            return;
        }
        r.runc.decode = std::max(r.runc.decode, std::stod(out.substr(at + 16)));
    };
    // On a shared machine the load changes from second to second: the figures that form a
    // ratio are taken in alternating rounds (bandwidth, npw dense, npw pruned, run.c), each the
    // best of its rounds, so that each ratio compares the least disturbed run of both sides.
    const auto bandwidthRound = [&] {
        r.bandwidthGBs = std::max(r.bandwidthGBs, measureStreamBandwidth(int64_t{1} << 30, 2));
    };

    reportProgress(progress, "runtime: decode rounds", 1, steps);
    {
        const LlamaModel dense(r.checkpoint, Runtime{});
        std::unique_ptr<LlamaModel> pruned;
        if (o.prunedRatio > 0) {
            r.prunedRatio = o.prunedRatio;
            LlamaCheckpoint ck = syntheticCheckpoint(prunedByShape(config, o.prunedRatio), 2);
            r.prunedBytesPerToken = decodeBytesPerToken(ck.config, o.promptTokens + o.decodeTokens / 2);
            pruned = std::make_unique<LlamaModel>(std::move(ck), Runtime{});
        }
        std::mt19937_64 rng(1234);  // a fixed pseudo-random prompt, as benchmarkGeneration's
        std::vector<int32_t> prompt(static_cast<size_t>(o.promptTokens));
        for (auto& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(config.vocab_size));
        SamplingOptions greedy;
        greedy.maxNewTokens = o.decodeTokens;
        const auto decodeRate = [&](const GenerationResult& g) {
            return g.tokens.size() > 1 ? double(g.tokens.size() - 1) / g.decodeSeconds : 0.0;
        };
        generate(dense, prompt, greedy);  // warm-up: allocator, caches
        if (pruned) generate(*pruned, prompt, greedy);
        for (int i = 0; i < o.repeats; ++i) {
            bandwidthRound();
            const GenerationResult g = generate(dense, prompt, greedy);
            r.npw.prefill = std::max(r.npw.prefill, double(o.promptTokens) / g.prefillSeconds);
            r.npw.decode = std::max(r.npw.decode, decodeRate(g));
            if (r.gemvIsa == "avx512f") {
                setGemvIsaLimit(GemvIsaLimit::Avx2);
                r.decodeAvx2 = std::max(r.decodeAvx2, decodeRate(generate(dense, prompt, greedy)));
                setGemvIsaLimit(GemvIsaLimit::Best);
            }
            if (pruned) r.prunedDecode = std::max(r.prunedDecode, decodeRate(generate(*pruned, prompt, greedy)));
            runcRound();
            reportProgress(progress, "runtime: decode rounds", 1 + double(i + 1) / o.repeats, steps);
        }
        bandwidthRound();
        reportProgress(progress, "runtime: evaluation and GEMM", 3, steps);
        r.gemmGflops = measureGemmRate(o.evalSeqlen * o.evalWindows, config.hidden_size, config.intermediate_size[0],
                                       o.repeats + 1);
        r.npw.eval = evalTokensPerSecond(dense, o.evalWindows, o.evalSeqlen, o.repeats);
        r.gemmGflops = std::max(r.gemmGflops, measureGemmRate(o.evalSeqlen * o.evalWindows, config.hidden_size,
                                                              config.intermediate_size[0], o.repeats + 1));
    }

    if (o.halfPrecision) {
        // The same weights as bfloat16 and float16 safetensors, each loaded mapped and decoded in
        // its own rounds (alternating with the bandwidth figure, as above).
        reportProgress(progress, "runtime: bfloat16 / float16 weights", 3.5, steps);
        r.float32WeightsMiB = double(config.parameterCount()) * 4.0 / (1024.0 * 1024.0);
        r.halfBytesPerToken = decodeBytesPerToken(config, o.promptTokens + o.decodeTokens / 2, 2);
        r.bf16Dir = (fs::path(o.workDir) / ("synthetic-" + o.size + "-bf16")).string();
        r.f16Dir = (fs::path(o.workDir) / ("synthetic-" + o.size + "-f16")).string();
        writeHfCheckpointIn(r.checkpoint, r.bf16Dir, at::kBFloat16);
        writeHfCheckpointIn(r.checkpoint, r.f16Dir, at::kHalf);
        std::mt19937_64 rng(1234);  // the float32 rounds' prompt
        std::vector<int32_t> prompt(static_cast<size_t>(o.promptTokens));
        for (auto& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(config.vocab_size));
        SamplingOptions greedy;
        greedy.maxNewTokens = o.decodeTokens;
        const auto rounds = [&](const std::string& dir, ReferenceFigures& f, double& anonAdded) {
            // Memory: the model's load and one generation (prefill and decode), sampled before
            // the timed rounds, whose bandwidth figure allocates a 1 GiB buffer of its own.
            AnonPeakSampler sampler;
            const LlamaModel model(loadLlamaCheckpoint(dir, WeightStorage::Mapped), Runtime{});
            generate(model, prompt, greedy);  // also the warm-up: the file's pages, the allocator
            anonAdded = sampler.peakAbove();
            for (int i = 0; i < o.repeats; ++i) {
                bandwidthRound();
                const GenerationResult g = generate(model, prompt, greedy);
                f.prefill = std::max(f.prefill, double(o.promptTokens) / g.prefillSeconds);
                if (g.tokens.size() > 1) f.decode = std::max(f.decode, double(g.tokens.size() - 1) / g.decodeSeconds);
                if (&f == &r.bf16 && r.gemvIsa == "avx512f") {
                    setGemvIsaLimit(GemvIsaLimit::Avx2);
                    const GenerationResult a = generate(model, prompt, greedy);
                    setGemvIsaLimit(GemvIsaLimit::Best);
                    if (a.tokens.size() > 1)
                        r.bf16DecodeAvx2 = std::max(r.bf16DecodeAvx2, double(a.tokens.size() - 1) / a.decodeSeconds);
                }
            }
            if (&f == &r.bf16) f.eval = evalTokensPerSecond(model, o.evalWindows, o.evalSeqlen, o.repeats);
        };
        rounds(r.bf16Dir, r.bf16, r.bf16AnonAddedMiB);
        rounds(r.f16Dir, r.f16, r.f16AnonAddedMiB);
        r.bf16Checkpoint = loadLlamaCheckpoint(r.bf16Dir, WeightStorage::Mapped);
        r.f16Checkpoint = loadLlamaCheckpoint(r.f16Dir, WeightStorage::Mapped);
    }

    reportProgress(progress, "runtime: eager PyTorch", 4, steps);
    if (o.eagerScript.empty() || !fs::exists(o.eagerScript)) {
        r.eager.skipped = "no eager script at '" + o.eagerScript + "'";
    } else {
        std::string out;
        const std::string cmd = "OMP_NUM_THREADS=" + std::to_string(o.threads) + " " + shellQuote(o.python) + " " +
                                shellQuote(o.eagerScript) + " " + shellQuote(r.llama2cPath) +
                                " --threads " + std::to_string(o.threads) + " --prompt-tokens " +
                                std::to_string(o.promptTokens) + " --decode-tokens " + std::to_string(o.decodeTokens) +
                                " --eval-windows " + std::to_string(o.evalWindows) + " --eval-seqlen " +
                                std::to_string(o.evalSeqlen) + " --repeats " + std::to_string(o.repeats);
        const int status = runCommand(cmd, out);
        const size_t at = out.rfind("{\"prefill");
        if (status != 0 || at == std::string::npos) {
            r.eager.skipped = "the eager script failed (no PyTorch in " + o.python + "?): " + out.substr(0, 400);
        } else {
            const nlohmann::json j = nlohmann::json::parse(out.substr(at));
            r.eager.prefill = j.at("prefill_tokens_per_s").get<double>();
            r.eager.decode = j.at("decode_tokens_per_s").get<double>();
            r.eager.eval = j.at("eval_tokens_per_s").get<double>();
        }
    }

    reportProgress(progress, "runtime", steps, steps);
    return r;
}

} // namespace npw
