// npw bench --suite pruning|calibration-memory|runtime|image-runtime / --synthetic SIZE: the pruning
// engine's figures, the runtime against run.c, llama.cpp and eager PyTorch (core/experiments/
// runtime_bench.h), and image generation against its bounds (core/experiments/image_runtime_bench.h).
#include "app/npw/commands.h"
#include "core/text/json_output.h"
#include "core/eval/generate.h"
#include "core/experiments/image_runtime_bench.h"
#include "core/experiments/pruning_bench.h"
#include "core/experiments/scale_bench.h"
#include "core/experiments/scale_projection.h"
#include "core/text/json_fields.h"
#include "core/experiments/runtime_bench.h"
#include "core/experiments/synthetic_checkpoint.h"
#include "core/models/language_model.h"
#include "core/prune/calibration.h"
#include "core/experiments/language_workbench.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/library_environment.h"
#include "core/util/paths.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace npw::cli {

namespace {

std::string loadAverage() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return in ? a + " " + b + " " + c : "unknown";
}

nlohmann::json solverSuite(bool json) {
    nlohmann::json rows = nlohmann::json::array();
    if (!json)
        std::cout << "numerical-score solvers (float64, T = 50, λ = " << kDefaultLambda << ", ρ = 0.3)\n"
                  << std::setw(7) << "D" << std::setw(22) << "Alg.1 re-solving (s)" << std::setw(22)
                  << "Alg.1 one factor. (s)" << std::setw(20) << "closed-form solve" << std::setw(16)
                  << "z for new ρ" << std::setw(14) << "max |Δz|" << "\n";
    for (int64_t D : {1024, 4096, 11008}) {
        SolverTiming t = benchmarkNumericalSolvers(D, 50, kDefaultLambda, 0.3, 7);
        rows.push_back({{"D", t.D}, {"iterations", t.iterations},
                        {"newton_resolve_s", t.newtonResolveSeconds < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.newtonResolveSeconds)},
                        {"newton_factored_s", t.newtonFactoredSeconds}, {"closed_form_solve_s", t.closedFormSolveSeconds},
                        {"closed_form_z_s", t.closedFormZSeconds}, {"max_deviation", t.maxDeviation}});
        if (!json) {
            std::cout << std::setw(7) << D << std::fixed << std::setprecision(3) << std::setw(22);
            if (t.newtonResolveSeconds < 0)
                std::cout << "(skipped, D > 4096)";
            else
                std::cout << t.newtonResolveSeconds;
            std::cout << std::setw(22) << t.newtonFactoredSeconds << std::setw(20) << t.closedFormSolveSeconds
                      << std::setprecision(6) << std::setw(16) << t.closedFormZSeconds << std::scientific
                      << std::setprecision(1) << std::setw(14) << t.maxDeviation << std::defaultfloat << "\n";
        }
    }
    return rows;
}

nlohmann::json reselectionSuite(bool json) {
    ReselectionTiming t = benchmarkReselection();
    if (!json)
        std::cout << "\nre-selection, " << t.layers << " layers × (" << t.headsPerLayer << " heads + "
                  << t.channelsPerLayer << " channels): sort once " << std::fixed << std::setprecision(1)
                  << t.buildSeconds * 1e3 << " ms; select for a new ρ/α median " << std::setprecision(3)
                  << t.medianSelectSeconds * 1e3 << " ms (max " << t.maxSelectSeconds * 1e3
                  << " ms); a full std::sort " << std::setprecision(1) << t.fullSortSeconds * 1e3 << " ms\n";
    return {{"layers", t.layers}, {"heads", t.headsPerLayer}, {"channels", t.channelsPerLayer},
            {"build_ms", t.buildSeconds * 1e3}, {"select_median_ms", t.medianSelectSeconds * 1e3},
            {"select_max_ms", t.maxSelectSeconds * 1e3}, {"full_sort_ms", t.fullSortSeconds * 1e3}};
}

nlohmann::json demoPruneSuite(const Args& args, bool json) {
    nlohmann::json rows = nlohmann::json::array();
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    const std::string calib = (std::filesystem::path(resourcesDir()) / "demo" / "data" / "kjv-ot.txt").string();
    if (!json) std::cout << "\nprune time on the demo models (numerical, ρ = 0.3, 128 samples × 128 tokens)\n";
    for (const std::string name : {"demo:lm", "demo:lm-gqa"}) {
        LanguageModel lm = openLanguageModel(name, runtime);
        // The road of `npw prune`: the workbench's calibration builder, then its prune.
        CalibrationRequest request;
        request.source = calib;
        request.samples = 128;
        request.seqlen = 128;
        LanguagePruningWorkbench workbench(lm);
        workbench.setCalibration(LanguagePruningWorkbench::calibrate(lm, request));
        PruneSettings settings;
        settings.ratio = 0.3;
        const WorkbenchPrune run = workbench.prune(settings);
        const PruneTimings& t = run.report.timings;
        rows.push_back({{"model", name}, {"calibrate_s", t.calibrateSeconds}, {"score_s", t.scoreSeconds},
                        {"select_s", t.selectSeconds}, {"apply_s", t.applySeconds},
                        {"achieved_ratio", run.report.achievedRatio}, {"peak_memory_mib", peakResidentMiB()}});
        if (!json)
            std::cout << "  " << std::left << std::setw(12) << name << std::right << std::fixed << std::setprecision(3)
                      << "calibrate " << t.calibrateSeconds << " s, score " << t.scoreSeconds << " s, select "
                      << t.selectSeconds * 1e3 << " ms, compensate+slice " << t.applySeconds << " s; achieved "
                      << run.report.achievedRatio << "; process peak " << std::setprecision(0) << peakResidentMiB()
                      << " MiB\n";
    }
    return rows;
}

nlohmann::json syntheticSuite(const Args& args, bool json) {
    const LlamaConfig dense = syntheticLlamaConfig(args.get("synthetic"));
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    const auto rows = benchmarkSpeedAgainstSparsity(dense, args.getDoubleList("ratios"), runtime,
                                                    args.getInt("prompt-tokens"), args.getInt("decode-tokens"),
                                                    terminalProgress());
    nlohmann::json out = nlohmann::json::array();
    if (!json)
        std::cout << "synthetic " << args.get("synthetic") << " LLaMA (" << dense.parameterCount()
                  << " parameters), pruned by shape, " << runtime.describe() << "\n"
                  << std::setw(7) << "ratio" << std::setw(15) << "parameters" << std::setw(14) << "weights MiB"
                  << std::setw(14) << "resident MiB" << std::setw(14) << "prefill t/s" << std::setw(13)
                  << "decode t/s" << "\n";
    for (const auto& r : rows) {
        out.push_back({{"ratio", r.ratio}, {"params", r.parameters}, {"weights_mib", r.weightsMiB},
                       {"resident_mib", r.residentMiB}, {"prefill_tokens_per_s", r.prefillTokensPerSecond},
                       {"decode_tokens_per_s", r.decodeTokensPerSecond}});
        if (!json)
            std::cout << std::fixed << std::setprecision(2) << std::setw(7) << r.ratio << std::setw(15) << r.parameters
                      << std::setprecision(0) << std::setw(14) << r.weightsMiB << std::setw(14) << r.residentMiB
                      << std::setprecision(1) << std::setw(14) << r.prefillTokensPerSecond << std::setw(13)
                      << r.decodeTokensPerSecond << "\n";
    }
    return out;
}

LlamaConfig calibrationMemoryConfig(const Args& args) {
    LlamaConfig c = syntheticLlamaConfig(args.has("synthetic") ? args.get("synthetic") : "1b");
    const int64_t layers = args.getInt("layers");  // 0 = all
    if (layers > 0 && layers < c.num_layers) {
        c.num_layers = layers;
        c.num_heads.resize(static_cast<size_t>(layers));
        c.num_kv_heads.resize(static_cast<size_t>(layers));
        c.intermediate_size.resize(static_cast<size_t>(layers));
    }
    return c;
}

nlohmann::json memoryRowJson(const CalibrationMemoryRow& r) {
    return {{"mode", r.layerwise ? "layerwise" : "in-ram"}, {"params", r.parameters}, {"layers", r.layers},
            {"windows", r.windows}, {"seqlen", r.seqlen}, {"weights_mib", r.weightsMiB}, {"stats_mib", r.statsMiB},
            {"hidden_mib", r.hiddenMiB}, {"resident_before_mib", r.residentBeforeMiB}, {"peak_mib", r.peakMiB},
            {"anon_after_mib", r.anonAfterMiB}, {"file_after_mib", r.fileAfterMiB}, {"seconds", r.seconds},
            {"peak_was_reset", r.peakWasReset}};
}

constexpr const char* kMemoryRowMarker = "npw-calibration-memory-row ";

// --suite calibration-memory: each mode in a fresh process of this binary (`--mode`), since the
// allocator keeps what a first run freed and the high-water mark would count it.
nlohmann::json calibrationMemorySuite(const Args& args, bool json) {
    const LlamaConfig config = calibrationMemoryConfig(args);
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    const int64_t windows = args.getInt("calib-samples"), seqlen = args.getInt("calib-seqlen");
    const std::string statsPath =
        (std::filesystem::temp_directory_path() / ("npw-calibration-memory-" + std::to_string(::getpid()) + ".safetensors"))
            .string();
    if (args.has("mode")) {  // the child: one calibration, one line of JSON
        const std::string mode = args.get("mode");  // in-ram or layerwise: the flag table
        const CalibrationMemoryRow row =
            measureCalibrationMemory(config, runtime, windows, seqlen, mode == "layerwise", statsPath, terminalProgress());
        std::error_code ec;
        std::filesystem::remove(statsPath, ec);
        std::cout << kMemoryRowMarker << npw::json_fields::dumpJson(memoryRowJson(row)) << std::endl;
        return nullptr;
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    nlohmann::json rows = nlohmann::json::array();
    if (!json)
        std::cout << "calibration memory, synthetic " << (args.has("synthetic") ? args.get("synthetic") : "1b")
                  << " LLaMA, " << config.num_layers << " layers (" << config.parameterCount() << " parameters), "
                  << windows << " windows x " << seqlen << " tokens, " << runtime.describe() << "\n"
                  << std::setw(11) << "mode" << std::setw(13) << "peak MiB" << std::setw(14) << "before MiB"
                  << std::setw(16) << "calib. own MiB" << std::setw(12) << "stats MiB" << std::setw(13) << "hidden MiB"
                  << std::setw(15) << "anon after MiB" << std::setw(10) << "time s" << "\n";
    for (const std::string mode : {"layerwise", "in-ram"}) {
        std::string command = "'" + self + "' bench --suite calibration-memory --mode " + mode + " --layers " +
                              std::to_string(config.num_layers) + " --calib-samples " + std::to_string(windows) +
                              " --calib-seqlen " + std::to_string(seqlen) + " --device " + args.get("device") +
                              " --dtype " + args.get("dtype");
        if (args.has("synthetic")) command += " --synthetic " + args.get("synthetic");
        FILE* pipe = ::popen(command.c_str(), "r");
        if (!pipe) throw Error("calibration-memory: cannot start '" + command + "'");
        std::string output;
        char buffer[4096];
        while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
        const int status = ::pclose(pipe);
        const size_t at = output.find(kMemoryRowMarker);
        if (status != 0 || at == std::string::npos)
            throw Error("calibration-memory: the " + mode + " run failed (exit status " + std::to_string(status) +
                        "): " + output);
        const nlohmann::json row = nlohmann::json::parse(output.substr(at + std::strlen(kMemoryRowMarker)));
        rows.push_back(row);
        if (!json)
            std::cout << std::setw(11) << mode << std::fixed << std::setprecision(0) << std::setw(13)
                      << row["peak_mib"].get<double>() << std::setw(14) << row["resident_before_mib"].get<double>()
                      << std::setw(16) << row["peak_mib"].get<double>() - row["resident_before_mib"].get<double>()
                      << std::setw(12) << row["stats_mib"].get<double>() << std::setw(13)
                      << row["hidden_mib"].get<double>() << std::setw(15) << row["anon_after_mib"].get<double>()
                      << std::setprecision(1) << std::setw(10) << row["seconds"].get<double>() << std::defaultfloat
                      << (row["peak_was_reset"].get<bool>() ? "" : "  (peak not reset: includes the model's build)")
                      << "\n";
    }
    return rows;
}

// --suite scale (core/experiments/scale_bench.h).
nlohmann::json scaleSuite(const Args& args, bool json) {
    ScaleBenchOptions o;
    o.size = args.has("synthetic") ? args.get("synthetic") : "1b";
    if (o.size != "tiny" && o.size != "110m" && o.size != "1b" && o.size != "7b" && o.size != "8b")
        throw Error("--synthetic '" + o.size + "': the scale suite takes tiny, 110m, 1b, 7b or 8b");
    o.npwRun = std::filesystem::read_symlink("/proc/self/exe").string();
    o.folder = args.has("out") ? args.get("out") : "npw-scale-" + o.size;
    o.threads = static_cast<int>(args.getInt("threads"));
    o.nsamples = args.getInt("nsamples");
    o.seqlen = args.getInt("seqlen");
    o.evalWindows = args.getInt("eval-windows");
    o.layerwise = args.flag("layerwise");
    o.seed = static_cast<uint64_t>(args.getInt("seed"));
    if (!json)
        std::cout << "scale suite: synthetic " << o.size << ", " << o.threads << " thread(s), " << o.nsamples << " x "
                  << o.seqlen << " calibration tokens, " << o.evalWindows << " evaluation windows, BLAS "
                  << blasKernelDescription() << ", load average " << loadAverage() << "\n";
    nlohmann::json out = runScaleBench(o, [&](const std::string& line) {
        if (!json) std::cout << line << std::endl;
    });
    out["load_average_after"] = loadAverage();
    return out;
}

// --suite projection (core/experiments/scale_projection.h): each stage of the layer-wise road at
// other shapes and calibrations, from the work it does and the efficiency one measured run reached.
nlohmann::json projectionSuite(const Args& args, bool json) {
    if (!args.has("from"))
        throw Error("--suite projection needs --from FILE: the output of a measured `npw prune --json` (its "
                    "stage_bounds give each stage's efficiency and this machine's rates)");
    const std::string from = args.get("from");
    const MeasuredEfficiency measured =
        measuredEfficiency(json_fields::readJsonFile(from), from, static_cast<int>(args.getInt("threads")));
    GpuAssumptions gpu;
    gpu.gemm32 = args.getDouble("gpu-gemm32-tflops") * 1e12;
    gpu.gemm64 = args.getDouble("gpu-gemm64-tflops") * 1e12;
    gpu.hostCores = static_cast<int>(args.getInt("gpu-host-cores"));
    std::vector<std::pair<int64_t, int64_t>> calibrations;
    for (const std::string& item : args.getList("calibrations")) {
        const size_t x = item.find('x');
        char* end = nullptr;
        const long long w = x == std::string::npos ? 0 : std::strtoll(item.c_str(), &end, 10);
        const bool windowsOk = x != std::string::npos && end == item.c_str() + x;
        const long long l = windowsOk ? std::strtoll(item.c_str() + x + 1, &end, 10) : 0;
        if (!windowsOk || *end != '\0' || w < 1 || w > (1 << 20) || l < 2 || l > (1 << 20))
            throw Error("--calibrations: '" + item + "' is not WINDOWSxSEQLEN (e.g. 16x512: 1 to 2^20 windows of 2 to "
                        "2^20 tokens)");
        calibrations.emplace_back(w, l);
    }
    const double ratio = args.getDouble("ratio");
    if (args.getList("shapes").empty() || calibrations.empty())
        throw Error("--suite projection: --shapes and --calibrations each need at least one item");
    nlohmann::json rows = nlohmann::json::array();
    for (const std::string& shape : args.getList("shapes"))
        for (const auto& [windows, seqlen] : calibrations) rows.push_back(projectPrune(shape, windows, seqlen, ratio, measured, gpu));
    nlohmann::json efficiency = nlohmann::json::object();
    for (const auto& [stage, e] : measured.efficiency) efficiency[stage] = e;
    nlohmann::json out = {{"from", from},
                          {"measured", {{"seconds", measured.totalSeconds}, {"threads", measured.threads},
                                        {"efficiency", efficiency},
                                        {"rates", {{"float32_gemm_flop_per_s", measured.rates.gemm32},
                                                   {"float64_gemm_flop_per_s", measured.rates.gemm64},
                                                   {"float64_cholesky_flop_per_s", measured.rates.cholesky64},
                                                   {"disk_write_bytes_per_s", measured.rates.diskWrite}}}}},
                          {"gpu", {{"float32_gemm_flop_per_s", gpu.gemm32}, {"float64_gemm_flop_per_s", gpu.gemm64},
                                   {"host_cores", gpu.hostCores}}},
                          {"projections", rows}};
    if (!json) {
        auto hms = [](double s) {
            std::ostringstream o;
            if (s >= 3600) o << std::fixed << std::setprecision(1) << s / 3600 << " h";
            else if (s >= 60) o << std::fixed << std::setprecision(1) << s / 60 << " min";
            else o << std::fixed << std::setprecision(1) << s << " s";
            return o.str();
        };
        auto gb = [](double b) {
            std::ostringstream o;
            o << std::fixed << std::setprecision(1) << b / 1e9 << " GB";
            return o.str();
        };
        std::cout << "projection of npw prune's layer-wise road (numerical, rho " << ratio << ") from " << from << ": "
                  << measured.threads << " thread(s) there, " << std::fixed << std::setprecision(0)
                  << measured.totalSeconds << " s of stages; one GPU: "
                  << gpu.gemm32 / 1e12 << " TFLOP/s float32-accumulated GEMM, " << gpu.gemm64 / 1e12
                  << " TFLOP/s float64 GEMM, solves on " << gpu.hostCores << " host cores\n";
        for (const nlohmann::json& r : rows) {
            const nlohmann::json& f = r["footprint"];
            std::cout << "\n" << r["shape"].get<std::string>() << ", " << r["windows"].get<int64_t>() << " x "
                      << r["seqlen"].get<int64_t>() << " tokens: here " << hms(r["total_here_s"].get<double>()) << ", one GPU "
                      << hms(r["total_gpu_s"].get<double>()) << " (" << std::setprecision(0)
                      << r["unmodelled_share"].get<double>() * 100 << " % in stages without a model, as measured); peak RssAnon " << gb(f["peak_rss_anon_bytes"].get<double>())
                      << ", scratch " << gb(f["scratch_bytes"].get<double>()) << " (" << f["scratch_precision"].get<std::string>()
                      << "), export " << gb(f["export_bytes"].get<double>()) << "\n";
            for (const nlohmann::json& s : r["stages"])
                std::cout << "  " << std::left << std::setw(22) << s["stage"].get<std::string>() << std::right << std::setw(10)
                          << hms(s["seconds_here"].get<double>()) << std::setw(12) << hms(s["seconds_gpu"].get<double>())
                          << "   efficiency " << std::setprecision(2) << s["efficiency"].get<double>() << "\n";
        }
    }
    return out;
}

// --suite runtime: every figure of issue 17 side by side, one run, one machine load.
nlohmann::json runtimeSuite(const Args& args, bool json) {
    namespace fs = std::filesystem;
    RuntimeBenchOptions o;
    o.size = args.has("synthetic") ? args.get("synthetic") : "110m";
    o.threads = static_cast<int>(args.getInt("threads"));
    o.promptTokens = args.getInt("prompt-tokens");
    o.decodeTokens = args.getInt("decode-tokens");
    o.repeats = static_cast<int>(args.getInt("repeats"));
    o.evalWindows = args.getInt("eval-windows");
    o.evalSeqlen = args.getInt("eval-seqlen");
    // A run killed with -9 leaves its folder (a 4 GB checkpoint at 1b): the next run removes it.
    removeWorkOfDeadProcesses(fs::temp_directory_path().string(), "npw-runtime-bench-");
    o.workDir = (fs::temp_directory_path() / ("npw-runtime-bench-" + std::to_string(::getpid()))).string();
    struct Cleanup {
        std::string dir;
        ~Cleanup() { std::error_code ec; fs::remove_all(dir, ec); }
    } cleanup{o.workDir};
    const fs::path repo = (fs::path(resourcesDir()) / "..").lexically_normal();
    const char* runc = std::getenv("NPW_RUNC");
    o.runcSource = runc && *runc ? runc : (repo / ".." / "shared" / "fixtures" / "llama2c-run" / "run.c").lexically_normal().string();
    o.eagerScript = (fs::path(resourcesDir()) / "bench" / "eager_llama.py").string();
    const RuntimeBenchReport r = runRuntimeBench(o, terminalProgress());

    nlohmann::json llama = {{"skipped", ""}};
    double llamaPrefill = 0, llamaDecode = 0;
    try {
        llama = benchLlamaCpp(r.checkpoint, o.promptTokens, o.decodeTokens, o.repeats, o.threads);
        llamaPrefill = llama.at("prefill_tokens_per_s").get<double>();
        llamaDecode = llama.at("decode_tokens_per_s").get<double>();
    } catch (const Error& e) {
        llama = {{"skipped", e.what()}};
    }
    // The 16-bit rounds' counterparts: llama.cpp on the same weights as stored, the mapped BF16
    // folder exported as a BF16 GGUF and the F16 folder as an F16 GGUF.
    const auto llamaOn = [&](const LlamaCheckpoint& c, const std::string& dtype, double& prefill, double& decode) {
        nlohmann::json j = {{"skipped", "--suite runtime ran without the 16-bit models"}};
        if (r.f16Dir.empty()) return j;
        try {
            j = benchLlamaCpp(c, o.promptTokens, o.decodeTokens, o.repeats, o.threads, dtype);
            prefill = j.at("prefill_tokens_per_s").get<double>();
            decode = j.at("decode_tokens_per_s").get<double>();
        } catch (const Error& e) {
            j = {{"skipped", e.what()}};
        }
        return j;
    };
    double llamaBf16Prefill = 0, llamaBf16Decode = 0, llamaF16Prefill = 0, llamaF16Decode = 0;
    const nlohmann::json llamaBf16 = llamaOn(r.bf16Checkpoint, "bf16", llamaBf16Prefill, llamaBf16Decode);
    const nlohmann::json llamaF16 = llamaOn(r.f16Checkpoint, "f16", llamaF16Prefill, llamaF16Decode);
    const auto ratio = [](double a, double b) { return a > 0 && b > 0 ? nlohmann::json(a / b) : nlohmann::json(nullptr); };
    const auto figures = [](const ReferenceFigures& f) {
        nlohmann::json j = {{"prefill_tokens_per_s", f.prefill}, {"decode_tokens_per_s", f.decode},
                            {"eval_tokens_per_s", f.eval}};
        if (!f.skipped.empty()) j["skipped"] = f.skipped;
        return j;
    };
    const double predicted = r.prunedBytesPerToken > 0 ? r.bytesPerToken / r.prunedBytesPerToken : 0;
    const double measured = r.npw.decode > 0 ? r.prunedDecode / r.npw.decode : 0;
    nlohmann::json out = {
        {"synthetic", o.size}, {"parameters", r.parameters}, {"threads", o.threads}, {"gemv_kernel", r.gemvIsa},
        {"blas", blasKernelDescription()},
        {"prompt_tokens", o.promptTokens}, {"decode_tokens", o.decodeTokens}, {"eval_windows", o.evalWindows},
        {"eval_seqlen", o.evalSeqlen}, {"repeats", o.repeats},
        {"read_bandwidth_gb_s", r.bandwidthGBs}, {"gemm_gflop_s", r.gemmGflops},
        {"decode_bytes_per_token", r.bytesPerToken}, {"eval_flops_per_token", r.flopsPerToken},
        {"roofline_decode_tokens_per_s", r.roofline()}, {"gemm_bound_eval_tokens_per_s", r.gemmBound()},
        {"npw", figures(r.npw)}, {"runc", figures(r.runc)}, {"eager_pytorch", figures(r.eager)}, {"llamacpp", llama},
        {"half_precision",
         {{"npw_bf16", figures(r.bf16)}, {"npw_f16", figures(r.f16)}, {"llamacpp_bf16", llamaBf16}, {"llamacpp_f16", llamaF16},
          {"decode_bytes_per_token", r.halfBytesPerToken},
          {"roofline_decode_tokens_per_s", r.halfBytesPerToken > 0 ? r.bandwidthGBs * 1e9 / r.halfBytesPerToken : 0.0},
          {"float32_weights_mib", r.float32WeightsMiB},
          {"bf16_rss_anon_added_mib", r.bf16AnonAddedMiB}, {"f16_rss_anon_added_mib", r.f16AnonAddedMiB},
          {"ratios",
           {{"bf16_decode_vs_llamacpp_bf16", ratio(r.bf16.decode, llamaBf16Decode)},
            {"bf16_prefill_vs_llamacpp_bf16", ratio(r.bf16.prefill, llamaBf16Prefill)},
            {"bf16_decode_vs_llamacpp_f16", ratio(r.bf16.decode, llamaF16Decode)},
            {"f16_decode_vs_llamacpp_f16", ratio(r.f16.decode, llamaF16Decode)},
            {"bf16_decode_vs_float32", ratio(r.bf16.decode, r.npw.decode)},
            {"bf16_prefill_vs_float32", ratio(r.bf16.prefill, r.npw.prefill)},
            {"bf16_eval_vs_float32", ratio(r.bf16.eval, r.npw.eval)},
            {"f16_prefill_vs_llamacpp_f16", ratio(r.f16.prefill, llamaF16Prefill)}}}}},
        {"ratios",
         {{"decode_vs_runc", ratio(r.npw.decode, r.runc.decode)}, {"decode_vs_llamacpp", ratio(r.npw.decode, llamaDecode)},
          {"decode_vs_roofline", ratio(r.npw.decode, r.roofline())},
          {"decode_vs_eager", ratio(r.npw.decode, r.eager.decode)},
          {"prefill_vs_llamacpp", ratio(r.npw.prefill, llamaPrefill)},
          {"prefill_vs_eager", ratio(r.npw.prefill, r.eager.prefill)},
          {"eval_vs_eager", ratio(r.npw.eval, r.eager.eval)}, {"eval_vs_gemm_bound", ratio(r.npw.eval, r.gemmBound())}}},
        {"pruned",
         {{"ratio", r.prunedRatio}, {"decode_tokens_per_s", r.prunedDecode}, {"bytes_per_token", r.prunedBytesPerToken},
          {"speedup_measured", measured}, {"speedup_predicted_from_bytes", predicted},
          {"measured_vs_predicted", ratio(measured, predicted)}}},
        {"avx2_decode",
         {{"float32_tokens_per_s", r.decodeAvx2}, {"bf16_tokens_per_s", r.bf16DecodeAvx2},
          {"float32_avx512_vs_avx2", ratio(r.npw.decode, r.decodeAvx2)},
          {"bf16_avx512_vs_avx2", ratio(r.bf16.decode, r.bf16DecodeAvx2)}}},
        {"load_average", loadAverage()}};
    if (!json) {
        const auto fig = [](double v) {
            std::ostringstream s;
            if (v > 0) s << std::fixed << std::setprecision(1) << v; else s << "—";
            return s.str();
        };
        const auto rat = [](const nlohmann::json& v) {
            std::ostringstream s;
            if (v.is_number()) s << std::fixed << std::setprecision(2) << v.get<double>() << "×"; else s << "—";
            return s.str();
        };
        const nlohmann::json& q = out["ratios"];
        std::cout << "runtime, synthetic " << o.size << " LLaMA (" << r.parameters << " parameters, random weights), "
                  << o.threads << " thread(s), GEMV kernel " << r.gemvIsa << ", BLAS " << blasKernelDescription()
                  << ", load average " << loadAverage() << "\n"
                  << "  read bandwidth " << std::fixed << std::setprecision(1) << r.bandwidthGBs
                  << " GB/s (streaming 1 GiB); GEMM " << r.gemmGflops << " GFLOP/s (LibTorch's BLAS)\n"
                  << "  decode reads " << std::setprecision(1) << r.bytesPerToken / 1e6 << " MB/token -> roofline "
                  << fig(r.roofline()) << " tokens/s; evaluation " << r.flopsPerToken / 1e9
                  << " GFLOP/token -> GEMM bound " << fig(r.gemmBound()) << " tokens/s\n"
                  << std::left << std::setw(16) << "  runtime" << std::right << std::setw(14) << "prefill t/s"
                  << std::setw(13) << "decode t/s" << std::setw(12) << "eval t/s" << "\n";
        const auto row = [&](const std::string& name, const ReferenceFigures& f) {
            std::cout << std::left << std::setw(16) << ("  " + name) << std::right << std::setw(14) << fig(f.prefill)
                      << std::setw(13) << fig(f.decode) << std::setw(12) << fig(f.eval)
                      << (f.skipped.empty() ? "" : "  (skipped: " + f.skipped.substr(0, 120) + ")") << "\n";
        };
        row("npw", r.npw);
        row("run.c", r.runc);
        row("eager PyTorch", r.eager);
        ReferenceFigures lc{llamaPrefill, llamaDecode, 0,
                            llama.contains("skipped") ? llama["skipped"].get<std::string>() : std::string()};
        row("llama.cpp", lc);
        if (r.decodeAvx2 > 0)
            std::cout << "  npw decode with the AVX2 kernels instead (alternating rounds): float32 " << fig(r.decodeAvx2)
                      << " t/s (AVX-512 " << rat(out["avx2_decode"]["float32_avx512_vs_avx2"]) << " of it), bf16 "
                      << fig(r.bf16DecodeAvx2) << " t/s (AVX-512 " << rat(out["avx2_decode"]["bf16_avx512_vs_avx2"])
                      << ")\n";
        std::cout << "  npw decode: " << rat(q["decode_vs_runc"]) << " run.c, " << rat(q["decode_vs_llamacpp"])
                  << " llama.cpp, " << rat(q["decode_vs_roofline"]) << " roofline, " << rat(q["decode_vs_eager"])
                  << " eager PyTorch\n"
                  << "  npw prefill: " << rat(q["prefill_vs_llamacpp"]) << " llama.cpp, " << rat(q["prefill_vs_eager"])
                  << " eager PyTorch; eval: " << rat(q["eval_vs_eager"]) << " eager PyTorch, "
                  << rat(q["eval_vs_gemm_bound"]) << " GEMM bound\n";
        if (!r.bf16Dir.empty()) {
            const nlohmann::json& h = out["half_precision"];
            const nlohmann::json& hq = h["ratios"];
            std::cout << "  16-bit weights (the same model as BF16 / F16 safetensors, mapped; decode reads "
                      << std::setprecision(1) << r.halfBytesPerToken / 1e6 << " MB/token -> roofline "
                      << fig(h["roofline_decode_tokens_per_s"].get<double>()) << " tokens/s)\n";
            row("npw bf16", r.bf16);
            row("npw f16", r.f16);
            row("llama.cpp bf16",
                ReferenceFigures{llamaBf16Prefill, llamaBf16Decode, 0,
                                 llamaBf16.contains("skipped") ? llamaBf16["skipped"].get<std::string>() : std::string()});
            row("llama.cpp f16",
                ReferenceFigures{llamaF16Prefill, llamaF16Decode, 0,
                                 llamaF16.contains("skipped") ? llamaF16["skipped"].get<std::string>() : std::string()});
            std::cout << "  npw bf16 vs llama.cpp bf16: decode " << rat(hq["bf16_decode_vs_llamacpp_bf16"]) << ", prefill "
                      << rat(hq["bf16_prefill_vs_llamacpp_bf16"]) << "\n"
                      << "  npw decode: bf16 " << rat(hq["bf16_decode_vs_llamacpp_f16"]) << " llama.cpp f16, f16 "
                      << rat(hq["f16_decode_vs_llamacpp_f16"]) << " llama.cpp f16; bf16 vs npw float32: decode "
                      << rat(hq["bf16_decode_vs_float32"]) << ", prefill " << rat(hq["bf16_prefill_vs_float32"])
                      << ", eval " << rat(hq["bf16_eval_vs_float32"]) << "\n"
                      << "  memory: RssAnon peak above the level before loading, bf16 " << std::setprecision(0)
                      << r.bf16AnonAddedMiB << " MiB, f16 " << r.f16AnonAddedMiB << " MiB (a float32 copy: "
                      << r.float32WeightsMiB << " MiB)\n";
        }
        if (r.prunedRatio > 0)
            std::cout << "  pruned " << std::setprecision(0) << r.prunedRatio * 100 << " % by shape: decode "
                      << fig(r.prunedDecode) << " tokens/s, speed-up " << std::setprecision(2) << measured
                      << "× measured vs " << predicted << "× predicted from bytes (" << rat(out["pruned"]["measured_vs_predicted"])
                      << ")\n";
    }
    return out;
}

// --suite image-runtime: images/s of LlamaGen-shaped GPTs with guidance against the roofline.
nlohmann::json imageRuntimeSuite(const Args& args, bool json) {
    ImageRuntimeBenchOptions o;
    o.gptModel = args.get("gpt-model");
    o.threads = static_cast<int>(args.getInt("threads"));
    o.batches = args.getIntList("batch");
    o.cfgScale = args.getDouble("cfg");
    o.repeats = static_cast<int>(args.getInt("repeats"));
    const ImageRuntimeBenchReport r = runImageRuntimeBench(o, terminalProgress());
    nlohmann::json models = nlohmann::json::array(), rows = nlohmann::json::array();
    for (const ImageRuntimeModel& m : r.models)
        models.push_back({{"name", m.name}, {"description", m.description}, {"parameters", m.parameters},
                          {"weight_bytes_per_step", m.weightBytes},
                          {"vq_decoder_seconds_per_image", m.decoderSecondsPerImage}, {"vq_decoder", m.decoderNote}});
    for (const ImageRuntimeRow& w : r.rows)
        rows.push_back({{"model", w.model}, {"batch", w.batch}, {"rows_per_step", w.rows}, {"seconds", w.seconds},
                        {"images_per_s", w.imagesPerSecond}, {"tokens_per_s", w.tokensPerSecond},
                        {"cpu_seconds", w.cpuSeconds}, {"images_per_cpu_s", w.imagesPerCpuSecond},
                        {"weight_read_gb_s", w.weightGBs}, {"bandwidth_bound_images_per_s", w.bandwidthBound},
                        {"gemm_bound_images_per_s", w.gemmBound}, {"roofline_images_per_s", w.roofline},
                        {"vs_roofline", w.rooflineRatio()}});
    nlohmann::json out = {{"gpt_model", o.gptModel}, {"threads", o.threads}, {"blas", blasKernelDescription()}, {"cfg", o.cfgScale},
                          {"repeats", o.repeats}, {"gemv_kernel", r.gemvIsa}, {"steps_per_image", r.steps},
                          {"read_bandwidth_gb_s", r.bandwidthGBs}, {"gemm_gflop_s", r.gemmGflops},
                          {"models", models}, {"rows", rows}, {"load_average", loadAverage()}};
    if (!r.demoSkipped.empty()) out["demo_skipped"] = r.demoSkipped;
    // The pruned model's speed-up at each batch: its rows and the dense model's come from the same rounds.
    if (r.models.size() >= 2 && r.models[1].name.find("pruned") != std::string::npos) {
        const size_t nb = o.batches.size();
        nlohmann::json speedups = nlohmann::json::array();
        for (size_t b = 0; b < nb; ++b)
            speedups.push_back({{"batch", o.batches[b]},
                                {"measured", r.rows[nb + b].imagesPerSecond / r.rows[b].imagesPerSecond},
                                {"roofline", r.rows[nb + b].roofline / r.rows[b].roofline}});
        out["pruned_speedup"] = speedups;
    }
    if (!json) {
        std::cout << "image generation, " << o.threads << " thread(s), guidance " << o.cfgScale << " ("
                  << (o.cfgScale > 1 ? "[cond; null]: 2 rows per image" : "off: 1 row per image") << "), "
                  << r.steps << " steps per image, kernel " << r.gemvIsa << ", load average " << loadAverage() << "\n"
                  << "  read bandwidth " << std::fixed << std::setprecision(1) << r.bandwidthGBs
                  << " GB/s (streaming 1 GiB); GEMM " << r.gemmGflops << " GFLOP/s (LibTorch's BLAS, 1024 rows)\n";
        for (const ImageRuntimeModel& m : r.models) {
            std::cout << "  " << m.name << ": " << m.description << ", " << m.parameters << " parameters, "
                      << std::setprecision(1) << m.weightBytes / 1e6 << " MB of weights per step";
            if (m.decoderSecondsPerImage > 0)
                std::cout << "; VQ decoder " << std::setprecision(3) << m.decoderSecondsPerImage << " s/image ("
                          << m.decoderNote << ")";
            std::cout << "\n";
        }
        if (!r.demoSkipped.empty()) std::cout << "  demo:c2i skipped: " << r.demoSkipped << "\n";
        std::cout << std::left << std::setw(34) << "  model" << std::right << std::setw(6) << "batch" << std::setw(6)
                  << "rows" << std::setw(10) << "images/s" << std::setw(12) << "img/CPU-s" << std::setw(10) << "tokens/s" << std::setw(13)
                  << "weight GB/s" << std::setw(11) << "BW bound" << std::setw(11) << "GEMM bound" << std::setw(11)
                  << "roofline" << std::setw(9) << "ratio" << "\n";
        for (const ImageRuntimeRow& w : r.rows)
            std::cout << std::left << std::setw(34) << ("  " + w.model) << std::right << std::setw(6) << w.batch
                      << std::setw(6) << w.rows << std::setprecision(3) << std::setw(10) << w.imagesPerSecond
                      << std::setw(12) << w.imagesPerCpuSecond << std::setprecision(0) << std::setw(10) << w.tokensPerSecond << std::setprecision(1)
                      << std::setw(13) << w.weightGBs << std::setprecision(3) << std::setw(11) << w.bandwidthBound
                      << std::setw(11) << w.gemmBound << std::setw(11) << w.roofline << std::setprecision(2)
                      << std::setw(8) << w.rooflineRatio() << "×\n";
        // The pruned model's speed-up at each batch (dense and pruned rows of the same rounds).
        if (out.contains("pruned_speedup")) {
            std::cout << "  pruned speed-up (images/s pruned ÷ dense, same rounds), by batch:";
            for (const auto& p : out["pruned_speedup"])
                std::cout << " " << p["batch"].get<int64_t>() << ": " << std::setprecision(2)
                          << p["measured"].get<double>() << "× (roofline's " << p["roofline"].get<double>() << "×)";
            std::cout << "\n";
        }
    }
    return out;
}

} // namespace

int runWriteSyntheticCheckpoint(const Args& args) {
    if (!args.has("out")) throw Error("--write-synthetic needs --out DIR, the model folder to create");
    if (!args.positional().empty())
        throw Error("--write-synthetic takes no MODEL (it writes one), got '" + args.positional()[0] + "'");
    const std::string size = args.get("write-synthetic");
    SyntheticCheckpointOptions options;
    options.seed = static_cast<uint64_t>(args.getInt("seed"));
    options.shardBytes = args.getInt("shard-mib") << 20;
    options.tokenizerFile = args.get("tokenizer");
    const auto start = std::chrono::steady_clock::now();
    const SyntheticCheckpointReport r =
        writeSyntheticHfCheckpoint(syntheticCheckpointConfig(size), args.get("out"), options, terminalProgress());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const nlohmann::json j = {{"size", size}, {"out", r.dir}, {"shards", r.shards}, {"tensors", r.tensors},
                              {"parameters", r.parameters}, {"bytes", r.bytes}, {"dtype", "bf16"}, {"seconds", seconds}};
    printResult(args, j, [&] {
        std::cout << "wrote " << r.dir << ": synthetic " << size << " LLaMA, " << r.parameters << " parameters, "
                  << r.tensors << " tensors in " << r.shards.size() << " bf16 shard" << (r.shards.size() == 1 ? "" : "s")
                  << " (" << r.bytes << " bytes), " << std::fixed << std::setprecision(1) << seconds << " s\n";
    });
    return 0;
}

int runWriteSyntheticImageModel(const Args& args) {
    if (!args.has("out")) throw Error("--write-synthetic-image needs --out DIR, the model folder to create");
    if (!args.positional().empty())
        throw Error("--write-synthetic-image takes no MODEL (it writes one), got '" + args.positional()[0] + "'");
    if (args.has("write-synthetic"))
        throw Error("give one of --write-synthetic (a LLaMA) and --write-synthetic-image (a LlamaGen GPT)");
    const std::string size = args.get("write-synthetic-image");
    const LlamaGenConfig config = syntheticLlamaGenConfig(size, args.getInt("num-classes"));
    SyntheticCheckpointOptions options;
    options.seed = static_cast<uint64_t>(args.getInt("seed"));
    const auto start = std::chrono::steady_clock::now();
    const SyntheticCheckpointReport r = writeSyntheticLlamaGenDirectory(config, args.get("out"), options, terminalProgress());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const nlohmann::json j = {{"size", size},          {"name", config.name},       {"out", r.dir},
                              {"num_classes", config.num_classes}, {"grid", config.grid}, {"tensors", r.tensors},
                              {"parameters", r.parameters},        {"bytes", r.bytes},    {"dtype", "bf16"},
                              {"seconds", seconds}};
    printResult(args, j, [&] {
        std::cout << "wrote " << r.dir << ": synthetic " << config.describe() << "; " << r.parameters << " parameters, "
                  << r.tensors << " tensors in bf16 model.safetensors (" << r.bytes << " bytes), " << std::fixed
                  << std::setprecision(1) << seconds << " s; no VQ tokenizer (npw generate needs --vq)\n";
    });
    return 0;
}

int runPruningBench(const Args& args) {
    const bool json = args.flag("json");
    nlohmann::json out;
    if (args.get("suite") == "scale") {
        out = scaleSuite(args, json);
    } else if (args.get("suite") == "projection") {
        out = projectionSuite(args, json);
    } else if (args.get("suite") == "runtime") {
        out = runtimeSuite(args, json);
    } else if (args.get("suite") == "image-runtime") {
        out = imageRuntimeSuite(args, json);
    } else if (args.get("suite") == "calibration-memory") {
        const nlohmann::json rows = calibrationMemorySuite(args, json);
        if (args.has("mode")) return 0;
        out["calibration_memory"] = rows;
    } else if (args.has("synthetic")) {
        out["synthetic"] = args.get("synthetic");
        out["speed_vs_sparsity"] = syntheticSuite(args, json);
    } else if (args.get("suite") == "pruning") {
        out["solvers"] = solverSuite(json);
        out["reselection"] = reselectionSuite(json);
        out["demo_prune"] = demoPruneSuite(args, json);
    } else {
        throw Error("unknown --suite '" + args.get("suite") + "' (expected pruning, calibration-memory, runtime, image-runtime, scale or projection)");
    }
    if (out.is_object() && !out.contains("blas")) out["blas"] = blasKernelDescription();  // the GEMMs' kernels
    if (json) std::cout << npw::json_fields::dumpJson(out, 2) << std::endl;
    return 0;
}

} // namespace npw::cli
