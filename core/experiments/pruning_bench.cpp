#include "core/experiments/pruning_bench.h"
#include "core/eval/generate.h"
#include "core/models/llama.h"
#include "core/models/llama_init.h"
#include "core/prune/calibration.h"
#include "core/prune/numerical_score.h"
#include "core/prune/select.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <unistd.h>

namespace npw {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

} // namespace

SolverTiming benchmarkNumericalSolvers(int64_t D, int iterations, double lambda, double rho, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    auto f64 = at::TensorOptions().dtype(at::kDouble);
    // A realistic A: weight [out, D] and a Gram of N > D tokens, per token.
    at::Tensor weight = at::normal(0.0, 0.02, {std::min<int64_t>(D, 4096), D}, gen).to(at::kDouble);
    at::Tensor x = at::normal(0.0, 1.0, {D + 64, D}, gen).to(at::kDouble);
    at::Tensor gram = at::matmul(x.t(), x) / double(D + 64);
    at::Tensor A = numericalScoreMatrix(weight, gram);
    (void)f64;

    SolverTiming t;
    t.D = D;
    t.iterations = iterations;
    const double r = (1.0 - rho) * static_cast<double>(D);
    at::Tensor z0 = at::rand({D}, gen).to(at::kDouble);
    auto t0 = Clock::now();
    NumericalSolve solve = solveNumericalScore(A);
    t.closedFormSolveSeconds = since(t0);
    t0 = Clock::now();
    at::Tensor zClosed = numericalScoreClosedForm(solve, rho, lambda);
    t.closedFormZSeconds = since(t0);
    t0 = Clock::now();
    at::Tensor zFactored = numericalScoreNewton(A, r, lambda, iterations, z0, /*reuseFactorisation=*/true);
    t.newtonFactoredSeconds = since(t0);
    t.maxDeviation = (zFactored - zClosed).abs().max().item<double>();
    if (D <= 4096) {
        t0 = Clock::now();
        at::Tensor zResolve = numericalScoreNewton(A, r, lambda, iterations, z0, /*reuseFactorisation=*/false);
        t.newtonResolveSeconds = since(t0);
        t.maxDeviation = std::max(t.maxDeviation, (zResolve - zClosed).abs().max().item<double>());
    }
    return t;
}

ReselectionTiming benchmarkReselection(int64_t layers, int64_t heads, int64_t channels, int repeats) {
    std::mt19937_64 rng(42);
    std::normal_distribution<double> normal;
    std::vector<LayerScores> scores(layers);
    std::vector<LayerUnitCost> costs(layers);
    std::vector<double> all;
    for (int64_t l = 0; l < layers; ++l) {
        for (int64_t h = 0; h < heads; ++h) scores[l].heads.push_back(normal(rng));
        for (int64_t c = 0; c < channels; ++c) scores[l].channels.push_back(normal(rng));
        costs[l].headParams = 4 * 128 * 4096;
        costs[l].channelParams = 3 * 4096;
        all.insert(all.end(), scores[l].heads.begin(), scores[l].heads.end());
        all.insert(all.end(), scores[l].channels.begin(), scores[l].channels.end());
    }
    ReselectionTiming t;
    t.layers = layers;
    t.headsPerLayer = heads;
    t.channelsPerLayer = channels;
    auto t0 = Clock::now();
    SelectionIndex index(scores, costs);
    t.buildSeconds = since(t0);
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
        const double rho = 0.05 + 0.6 * i / repeats;
        const double alpha = 100.0 + i;
        t0 = Clock::now();
        SelectionResult r = index.select(rho, alpha, i % 2 ? AlphaMode::Paper : AlphaMode::Budget);
        times.push_back(since(t0));
        if (r.mask.keepChannels.empty()) throw Error("benchmark: empty selection");
    }
    std::sort(times.begin(), times.end());
    t.medianSelectSeconds = times[times.size() / 2];
    t.maxSelectSeconds = times.back();
    t0 = Clock::now();
    std::sort(all.begin(), all.end());
    t.fullSortSeconds = since(t0);
    return t;
}

LlamaConfig syntheticLlamaConfig(const std::string& size) {
    LlamaConfig c;
    int64_t layers = 0, heads = 0, kv = 0, inter = 0;
    if (size == "1b") {
        c.hidden_size = 2048;
        c.head_dim = 64;
        c.vocab_size = 32000;
        layers = 22, heads = 32, kv = 4, inter = 5632;
    } else if (size == "110m") {  // GPT-2-small's shape (issue 17): 110M without the embedding table
        c.hidden_size = 768;
        c.head_dim = 64;
        c.vocab_size = 32000;
        layers = 12, heads = 12, kv = 12, inter = 2048;
    } else if (size == "tiny") {
        c.hidden_size = 128;
        c.head_dim = 32;
        c.vocab_size = 512;
        layers = 4, heads = 4, kv = 2, inter = 384;
    } else {
        throw Error("unknown synthetic size '" + size + "' (expected 110m, 1b or tiny)");
    }
    c.num_layers = layers;
    c.num_heads.assign(layers, heads);
    c.num_kv_heads.assign(layers, kv);
    c.intermediate_size.assign(layers, inter);
    c.max_position_embeddings = 2048;
    c.tie_word_embeddings = false;
    return c;
}

LlamaConfig prunedByShape(const LlamaConfig& config, double rho) {
    if (!(rho >= 0 && rho < 1)) throw Error("ratio " + std::to_string(rho) + " is outside [0, 1)");
    LlamaConfig c = config;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const int64_t groups = config.num_kv_heads[l];
        const int64_t perGroup = groups > 0 ? config.num_heads[l] / groups : 0;
        const int64_t keptGroups = groups - static_cast<int64_t>(std::llround(rho * static_cast<double>(groups)));
        c.num_kv_heads[l] = keptGroups;
        c.num_heads[l] = keptGroups * perGroup;
        c.intermediate_size[l] = config.intermediate_size[l] - static_cast<int64_t>(std::llround(rho * static_cast<double>(config.intermediate_size[l])));
    }
    return c;
}

double currentResidentMiB() {
    std::ifstream statm("/proc/self/statm");
    long pages = 0, resident = 0;
    statm >> pages >> resident;
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

namespace {

// A "Field:   123 kB" line of /proc/self/status, in MiB (0 when absent).
double procStatusMiB(const std::string& field) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
    return 0;
}

} // namespace

CalibrationMemoryRow measureCalibrationMemory(const LlamaConfig& config, const Runtime& runtime, int64_t windows,
                                              int64_t seqlen, bool layerwise, const std::string& statsPath,
                                              const ProgressFn& progress) {
    CalibrationMemoryRow row;
    row.layerwise = layerwise;
    row.layers = config.num_layers;
    row.windows = windows;
    row.seqlen = seqlen;
    LlamaCheckpoint ck;
    ck.config = config;
    ck.weights = initLlamaWeights(config, 1);
    ck.source = "synthetic";
    row.parameters = config.parameterCount();
    row.weightsMiB = static_cast<double>(row.parameters) * 4.0 / (1024.0 * 1024.0);
    const LlamaModel model(std::move(ck), runtime);
    std::mt19937_64 rng(5);
    std::vector<int32_t> stream(static_cast<size_t>(std::max<int64_t>(4 * seqlen, 4096)));
    for (int32_t& id : stream) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(config.vocab_size));
    const CalibrationSet set = drawCalibrationSet(stream, windows, seqlen, 0, "random ids");
    row.statsMiB = static_cast<double>(modelStatsBytes(config)) / (1024.0 * 1024.0);
    row.hiddenMiB = layerwise ? static_cast<double>(layerwiseHiddenBytes(model, set)) / (1024.0 * 1024.0) : 0.0;

    row.residentBeforeMiB = procStatusMiB("VmRSS");
    {
        std::ofstream clear("/proc/self/clear_refs");
        clear << "5";  // resets VmHWM to the current RSS (Linux ≥ 4.0)
        clear.flush();
        row.peakWasReset = static_cast<bool>(clear);
    }
    const auto start = std::chrono::steady_clock::now();
    const ModelStats stats =
        layerwise ? calibrateLayerwise(model, set, statsPath, {}, progress) : calibrate(model, set, progress);
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    row.peakMiB = procStatusMiB("VmHWM");
    row.anonAfterMiB = procStatusMiB("RssAnon");
    row.fileAfterMiB = procStatusMiB("RssFile");
    if (stats.tokens() != set.tokens()) throw Error("calibration-memory: the statistics saw the wrong number of tokens");
    return row;
}

std::vector<SparsitySpeedRow> benchmarkSpeedAgainstSparsity(const LlamaConfig& dense, const std::vector<double>& ratios,
                                                            const Runtime& runtime, int64_t promptTokens,
                                                            int64_t decodeTokens, const ProgressFn& progress) {
    std::vector<SparsitySpeedRow> rows;
    for (size_t i = 0; i < ratios.size(); ++i) {
        SparsitySpeedRow row;
        row.ratio = ratios[i];
        LlamaCheckpoint ck;
        ck.config = prunedByShape(dense, ratios[i]);
        ck.weights = initLlamaWeights(ck.config, 1);
        ck.source = "synthetic";
        LlamaModel model(std::move(ck), runtime);
        BenchResult b = benchmarkGeneration(model, promptTokens, decodeTokens, 2);
        row.parameters = b.parameters;
        row.weightsMiB = b.weightsMiB;
        row.residentMiB = runtime.device.is_cuda() ? b.peakMemoryMiB : currentResidentMiB();
        row.decodeTokensPerSecond = b.decodeTokensPerSecond;
        row.prefillTokensPerSecond = b.prefillTokensPerSecond;
        rows.push_back(row);
        reportProgress(progress, "speed vs sparsity", double(i + 1), double(ratios.size()));
    }
    return rows;
}

} // namespace npw
