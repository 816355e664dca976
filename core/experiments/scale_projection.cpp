// Projecting the layer-wise road's stages to other shapes and calibrations (scale_projection.h).
#include "core/experiments/scale_projection.h"

#include "core/experiments/synthetic_checkpoint.h"
#include "core/models/parameter_count.h"
#include "core/prune/layerwise_prune.h"
#include "core/prune/units.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace npw {

namespace {

LlamaConfig llama2(int64_t layers, int64_t hidden, int64_t heads, int64_t kvHeads, int64_t inter) {
    LlamaConfig c;
    c.hidden_size = hidden;
    c.head_dim = 128;
    c.vocab_size = 32000;
    c.num_layers = layers;
    c.num_heads.assign(static_cast<size_t>(layers), heads);
    c.num_kv_heads.assign(static_cast<size_t>(layers), kvHeads);
    c.intermediate_size.assign(static_cast<size_t>(layers), inter);
    c.max_position_embeddings = 4096;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.bos_token_id = 1;
    c.eos_token_id = 2;
    c.tie_word_embeddings = false;
    return c;
}

double d(int64_t v) { return static_cast<double>(v); }

int64_t attentionWidth(const LlamaConfig& c, size_t l) { return c.num_heads.at(l) * c.head_dim; }

} // namespace

std::vector<std::string> projectionShapeNames() { return {"tiny", "110m", "1b", "7b", "8b", "13b", "70b"}; }

LlamaConfig projectionShape(const std::string& name) {
    if (name == "13b") return llama2(40, 5120, 40, 40, 13824);
    if (name == "70b") return llama2(80, 8192, 64, 8, 28672);
    const std::vector<std::string> names = projectionShapeNames();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        throw Error("shape '" + name + "': expected one of " + list);
    }
    return syntheticCheckpointConfig(name);
}

RemovedChannels uniformlyRemoved(const LlamaConfig& config, double ratio) {
    if (!(ratio >= 0 && ratio < 1)) throw Error("the pruning ratio must lie in [0, 1), got " + std::to_string(ratio));
    RemovedChannels out;
    for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l) {
        const AttentionUnits units(config, static_cast<int64_t>(l), AttentionUnitKind::KvGroup);
        const int64_t count = units.count();
        const int64_t removedUnits = count > 0 ? static_cast<int64_t>(ratio * d(count)) : 0;
        const int64_t queryHeadsPerUnit = count > 0 ? config.num_heads[l] / count : 0;
        out.attention.push_back(removedUnits * queryHeadsPerUnit * config.head_dim);
        out.mlp.push_back(static_cast<int64_t>(ratio * d(config.intermediate_size[l])));
    }
    return out;
}

LlamaConfig configAfter(const LlamaConfig& config, const RemovedChannels& removed) {
    LlamaConfig after = config;
    for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l) {
        const int64_t heads = config.num_heads[l], kv = config.num_kv_heads[l];
        const int64_t removedHeads = removed.attention.at(l) / std::max<int64_t>(config.head_dim, 1);
        after.num_heads[l] = heads - removedHeads;
        after.num_kv_heads[l] = kv - (heads > 0 ? removedHeads * kv / heads : 0);
        after.intermediate_size[l] = config.intermediate_size[l] - removed.mlp.at(l);
    }
    return after;
}

int64_t modelParameters(const LlamaConfig& config) {
    const int64_t norms = (2 * config.num_layers + 1) * config.hidden_size;
    return prunableParameters(config) + norms + config.vocab_size * config.hidden_size * (config.tie_word_embeddings ? 1 : 2);
}

std::vector<StageMeasure> projectedStageWork(const LlamaConfig& config, int64_t windows, int64_t seqlen,
                                             const RemovedChannels& removed, int64_t exportElementBytes,
                                             int64_t scratchElementBytes, bool hiddenEveryLayer) {
    const auto layers = static_cast<size_t>(config.num_layers);
    if (removed.attention.size() != layers || removed.mlp.size() != layers)
        throw Error("internal: removed channels for " + std::to_string(removed.attention.size()) + " layers, the shape has " +
                    std::to_string(layers));
    const int64_t tokens = windows * seqlen;
    const double rows = d(config.hidden_size), n = d(tokens);
    auto stage = [](const char* name) {
        StageMeasure m;
        m.stage = name;
        return m;
    };
    StageMeasure forward = stage("calibration_forward"), gram = stage("gram_accumulation"), scores = stage("scores"),
                 curve = stage("cross_layer_ranking"), compensation = stage("compensation"), writing = stage("writing"),
                 scratch = stage("scratch_writing");
    forward.gemm32Flops = calibrationForwardFlops(config, tokens, seqlen);
    const double hidden = d(calibrationHiddenBytes(config, tokens));  // one file per layer
    for (size_t l = 0; l < layers; ++l) {
        for (const bool attention : {true, false}) {
            const int64_t width = attention ? attentionWidth(config, l) : config.intermediate_size[l];
            if (width <= 0) continue;
            const double dd = d(width), cube = dd * dd * dd / 3;
            const int64_t p = attention ? removed.attention[l] : removed.mlp[l];
            gram.gemm64Flops += dd * (dd + 1) * n;
            scores.gemm64Flops += dd * (dd + 1) * rows + 2 * dd * dd;
            scores.choleskyFlops += cube;
            curve.gemm64Flops += dd * dd * rows;
            curve.choleskyFlops += cube;
            if (p > 0) {
                const double k = dd - d(p), pp = d(p);
                compensation.gemm64Flops += (2 * k * pp + k * k + pp * pp) * rows;
                compensation.choleskyFlops += cube;
            }
            scratch.bytes += 2 * dd * 8;  // Σx and Σx²
        }
        if (l + 1 < layers && hiddenEveryLayer) scratch.bytes += hidden;
    }
    scratch.bytes += d(packedGramBytes(config, scratchElementBytes));  // the Gram triangles
    writing.bytes = d(modelParameters(configAfter(config, removed))) * d(exportElementBytes);
    forward.note = "the blocks' float32 forward (weights and attention)";
    gram.note = "float64 symmetric rank-k updates, d(d+1)·N per site";
    scores.note = "per site: WᵀW, one Cholesky, one solve";
    curve.note = "per site: one Cholesky, one trmm (the L* curve)";
    compensation.note = "per pruned site: one Cholesky, (2kp + k² + p²)·rows";
    writing.note = "the export";
    scratch.note = "Gram triangles, sums, the hidden states after every layer but the last";
    return {forward, gram, scratch, scores, curve, compensation, writing};
}

LayerwiseFootprint projectedFootprint(const LlamaConfig& config, int64_t windows, int64_t seqlen, double ratio) {
    LayerwiseFootprint f;
    f.checkpointBytes = 2 * modelParameters(config);
    f.hiddenBytes = calibrationHiddenBytes(config, windows * seqlen);
    for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l) {
        const int64_t da = attentionWidth(config, l), di = config.intermediate_size[l];
        // The layer's norms beside its prunable weights.
        f.layerFloat32Bytes = std::max(f.layerFloat32Bytes, 4 * (prunableLayerParameters(config, l) + 2 * config.hidden_size));
        f.gramBytes = std::max(f.gramBytes, 8 * (da * da + di * di));
        f.factorBytes = std::max(f.factorBytes, 8 * std::max(da * da, di * di));
    }
    // The process before any model: LibTorch, its thread pools, the runtime (measured: about 200 MiB
    // of RssAnon beside the terms above on the 1.1B and 7B runs).
    f.baselineBytes = int64_t{200} << 20;
    // Calibration holds the hidden states and one layer's G accumulators; the apply step the layer
    // in float32, both G and one factor. The larger is the peak.
    const int64_t calibration = f.hiddenBytes + f.gramBytes;
    const int64_t apply = f.layerFloat32Bytes + f.gramBytes + f.factorBytes;
    f.peakAnonBytes = f.baselineBytes + std::max(calibration, apply);
    // The scratch file's rule (layerwise_prune.h) with the checkpoint in bf16.
    f.scratchBoundBytes = f.checkpointBytes + f.hiddenBytes;
    const bool float32 = scratchDtype(config, f.scratchBoundBytes) == at::kFloat;
    f.scratchPrecision = float32 ? "float32" : "float64";
    f.scratchBytes = packedGramBytes(config, float32 ? 4 : 8);
    f.exportBytes = 2 * modelParameters(configAfter(config, uniformlyRemoved(config, ratio)));
    return f;
}

MeasuredEfficiency measuredEfficiency(const nlohmann::json& report, const std::string& file, int threads) {
    MeasuredEfficiency m;
    m.file = file;
    m.threads = std::max(threads, 1);
    const auto bad = [&](const std::string& what) {
        return Error("'" + file + "': " + what + " (expected the output of npw prune --json, which has stage_bounds)");
    };
    if (!report.is_object() || !report.contains("stage_bounds") || !report["stage_bounds"].is_object())
        throw bad("no stage_bounds object");
    const nlohmann::json& sb = report["stage_bounds"];
    if (!sb.contains("stages") || !sb["stages"].is_array() || !sb.contains("rates") || !sb["rates"].is_object())
        throw bad("stage_bounds has no stages array or no rates object");
    auto rate = [&](const char* key) {
        const nlohmann::json& r = sb["rates"];
        // Every projected stage divides by one of these: a run whose probe measured none (a disk it
        // could not write: 0, said in disk_write_note) cannot be projected from.
        if (!r.contains(key) || !r[key].is_number() || !std::isfinite(r[key].get<double>()) || r[key].get<double>() <= 0)
            throw bad(std::string("stage_bounds.rates.") + key + " is missing or not a positive number" +
                      (r.contains("disk_write_note") && r["disk_write_note"].is_string()
                           ? " (" + r["disk_write_note"].get<std::string>() + ")"
                           : std::string()));
        return r[key].get<double>();
    };
    m.rates.gemm32 = rate("float32_gemm_flop_per_s");
    m.rates.gemm64 = rate("float64_gemm_flop_per_s");
    m.rates.cholesky64 = rate("float64_cholesky_flop_per_s");
    m.rates.diskWrite = rate("disk_write_bytes_per_s");
    for (const nlohmann::json& s : sb["stages"]) {
        if (!s.is_object() || !s.contains("stage") || !s["stage"].is_string() || !s.contains("seconds") ||
            !s["seconds"].is_number() || !std::isfinite(s["seconds"].get<double>()) || s["seconds"].get<double>() < 0)
            throw bad("a stage without a name or a non-negative number of seconds");
        const double seconds = s["seconds"].get<double>();
        m.totalSeconds += seconds;
        m.seconds.emplace_back(s["stage"].get<std::string>(), seconds);
        if (s.contains("ratio") && s["ratio"].is_number() && std::isfinite(s["ratio"].get<double>()) && s["ratio"].get<double>() > 0)
            m.efficiency.emplace_back(s["stage"].get<std::string>(), s["ratio"].get<double>());
    }
    if (m.efficiency.empty()) throw bad("no stage has a bound and a ratio");
    // The layer-wise road says its threads: "cpu (2 threads) Float".
    if (report.contains("road") && report["road"].is_object() && report["road"].contains("blocks_on") &&
        report["road"]["blocks_on"].is_string()) {
        std::smatch match;
        const std::string on = report["road"]["blocks_on"].get<std::string>();
        if (std::regex_search(on, match, std::regex(R"(\((\d+) threads?\))"))) m.threads = std::max(1, std::stoi(match[1]));
    }
    return m;
}

nlohmann::json projectPrune(const std::string& shape, int64_t windows, int64_t seqlen, double ratio,
                            const MeasuredEfficiency& measured, const GpuAssumptions& gpu) {
    if (windows < 1 || seqlen < 2) throw Error("a projection needs at least one window of at least 2 tokens");
    const LlamaConfig config = projectionShape(shape);
    const LayerwiseFootprint f = projectedFootprint(config, windows, seqlen, ratio);
    const bool hiddenEveryLayer = f.hiddenBytes <= kHiddenSavedEveryLayerBytes;
    const std::vector<StageMeasure> work = projectedStageWork(config, windows, seqlen, uniformlyRemoved(config, ratio), 2,
                                                              f.scratchPrecision == "float32" ? 4 : 8, hiddenEveryLayer);
    auto efficiencyOf = [&](const std::string& stage) {
        for (const auto& [name, e] : measured.efficiency)
            if (name == stage) return e;
        return 1.0;  // not measured: at its bound
    };
    const double hostScale = d(measured.threads) / d(std::max(gpu.hostCores, 1));
    // Large hidden states: written once at least, then as often as keeps them under a tenth of
    // the calibration's time (layerwise_prune.cpp).
    double calibrationHere = 0, calibrationGpu = 0;
    for (const StageMeasure& s : work) {
        if (s.stage == "calibration_forward" || s.stage == "gram_accumulation") {
            calibrationHere += s.boundSeconds(measured.rates) / efficiencyOf(s.stage);
            calibrationGpu += s.stage == "calibration_forward" ? s.gemm32Flops / gpu.gemm32 : s.gemm64Flops / gpu.gemm64;
        }
    }
    auto hiddenWrites = [&](double calibrationSeconds) {
        if (hiddenEveryLayer || config.num_layers < 2 || measured.rates.diskWrite <= 0) return 0.0;
        const double one = d(f.hiddenBytes) / measured.rates.diskWrite / efficiencyOf("scratch_writing");
        return std::min(one * d(config.num_layers - 1), one + 0.1 * calibrationSeconds);
    };
    nlohmann::json stages = nlohmann::json::array();
    double here = 0, onGpu = 0;
    for (const StageMeasure& s : work) {
        const double e = efficiencyOf(s.stage);
        double seconds = s.boundSeconds(measured.rates) / e;
        double gpuSeconds = seconds * hostScale;  // the solves: LAPACK on the GPU machine's cores
        if (s.stage == "calibration_forward") gpuSeconds = s.gemm32Flops / gpu.gemm32;
        if (s.stage == "gram_accumulation") gpuSeconds = s.gemm64Flops / gpu.gemm64;
        if (s.stage == "writing") gpuSeconds = seconds;  // the same disk
        if (s.stage == "scratch_writing") {
            gpuSeconds = seconds + hiddenWrites(calibrationGpu);
            seconds += hiddenWrites(calibrationHere);
        }
        here += seconds;
        onGpu += gpuSeconds;
        nlohmann::json w = nlohmann::json::object();
        if (s.gemm32Flops > 0) w["float32_gemm_flop"] = s.gemm32Flops;
        if (s.gemm64Flops > 0) w["float64_gemm_flop"] = s.gemm64Flops;
        if (s.choleskyFlops > 0) w["float64_cholesky_flop"] = s.choleskyFlops;
        if (s.bytes > 0) w["bytes_written"] = s.bytes;
        stages.push_back({{"stage", s.stage}, {"work", w}, {"efficiency", e}, {"seconds_here", seconds},
                          {"seconds_gpu", gpuSeconds}, {"note", s.note}});
    }
    // The measured stages not modelled here (bookkeeping, slicing, scratch reads, resume records)
    // keep their share of the time.
    double unmodelled = 0;
    for (const auto& [name, seconds] : measured.seconds)
        if (std::none_of(work.begin(), work.end(), [&name = name](const StageMeasure& s) { return s.stage == name; }))
            unmodelled += seconds;
    const double share = measured.totalSeconds > 0 ? unmodelled / measured.totalSeconds : 0.0;
    const double keep = 1.0 - std::min(share, 0.9);
    return {{"shape", shape},
            {"parameters", modelParameters(config)},
            {"windows", windows},
            {"seqlen", seqlen},
            {"tokens", windows * seqlen},
            {"ratio", ratio},
            {"stages", stages},
            {"total_here_s", here / keep},
            {"total_gpu_s", onGpu / keep},
            {"unmodelled_share", share},
            {"footprint",
             {{"peak_rss_anon_bytes", f.peakAnonBytes},
              {"hidden_state_bytes", f.hiddenBytes},
              {"layer_float32_bytes", f.layerFloat32Bytes},
              {"gram_float64_bytes", f.gramBytes},
              {"factor_float64_bytes", f.factorBytes},
              {"baseline_bytes", f.baselineBytes},
              {"checkpoint_bytes", f.checkpointBytes},
              {"scratch_bytes", f.scratchBytes},
              {"scratch_bound_bytes", f.scratchBoundBytes},
              {"scratch_precision", f.scratchPrecision},
              {"export_bytes", f.exportBytes}}}};
}

} // namespace npw
