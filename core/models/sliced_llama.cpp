// A SliceGPT-sliced LLaMA: forward, parameter counts, files (sliced_llama.h).
#include "core/models/sliced_llama.h"
#include "core/models/non_finite.h"

#include "core/io/safetensors.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace npw {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWeightsFile = kSlicedWeightsFile;
constexpr const char* kConfigFile = kSlicedConfigFile;

at::Tensor toRuntime(const at::Tensor& t, const Runtime& rt) {
    return t.defined() ? t.to(rt.device, rt.dtype).contiguous() : t;
}

// A shortcut matrix S [d_in, d_out] stored column-major: S.t() [d_out, d_in] has contiguous rows,
// as the decode kernel reads a linear layer's weight (llamaLinear), so x·S costs what a linear
// layer of that size costs. A tensor already laid out so (and on the runtime) is not copied.
at::Tensor columnMajor(const at::Tensor& S, const Runtime& rt) {
    return S.defined() ? S.t().to(rt.device, rt.dtype).contiguous().t() : S;
}

// x · S for a shortcut S [d_in, d_out], through the forward's linear layer.
at::Tensor shortcut(const at::Tensor& x, const at::Tensor& S) { return llamaLinear(x, S.t()); }

std::vector<std::pair<std::string, at::Tensor*>> named(SlicedWeights& w) {
    std::vector<std::pair<std::string, at::Tensor*>> out = {{"embed", &w.embed}, {"lm_head", &w.lm_head}};
    for (size_t l = 0; l < w.layers.size(); ++l) {
        SlicedLayerWeights& L = w.layers[l];
        const std::string p = "layers." + std::to_string(l) + ".";
        for (auto [name, t] : std::vector<std::pair<const char*, at::Tensor*>>{
                 {"wq", &L.wq}, {"wk", &L.wk}, {"wv", &L.wv}, {"wo", &L.wo}, {"wq_bias", &L.wq_bias},
                 {"wk_bias", &L.wk_bias}, {"wv_bias", &L.wv_bias}, {"wo_bias", &L.wo_bias}, {"q_norm", &L.q_norm},
                 {"k_norm", &L.k_norm}, {"w_gate", &L.w_gate}, {"w_up", &L.w_up}, {"w_down", &L.w_down},
                 {"w_down_bias", &L.w_down_bias}, {"attn_shortcut", &L.attn_shortcut},
                 {"mlp_shortcut", &L.mlp_shortcut}})
            out.emplace_back(p + name, t);
    }
    return out;
}

SlicedWeights toRuntimeWeights(const SlicedWeights& src, const Runtime& rt) {
    SlicedWeights w = src;
    for (auto& [name, t] : named(w)) *t = toRuntime(*t, rt);
    for (size_t l = 0; l < w.layers.size(); ++l) {
        w.layers[l].attn_shortcut = columnMajor(src.layers[l].attn_shortcut, rt);
        w.layers[l].mlp_shortcut = columnMajor(src.layers[l].mlp_shortcut, rt);
    }
    return w;
}

} // namespace

at::Tensor slicedRmsNorm(const at::Tensor& x, int64_t originalWidth, double eps) {
    return llamaRmsNorm(x, at::Tensor(), eps, originalWidth);
}

at::Tensor slicedAttention(const LlamaConfig& cfg, const SlicedLayerWeights& L, int64_t l, const at::Tensor& x,
                           const LlamaPositionTables& tables) {
    if (cfg.num_heads[static_cast<size_t>(l)] == 0) {
        at::Tensor zero =
            at::zeros({x.size(0), x.size(1), L.wo.defined() ? L.wo.size(0) : L.attn_shortcut.size(1)}, x.options());
        return L.wo_bias.defined() ? zero + L.wo_bias : zero;
    }
    return llamaAttentionBranch(cfg, L, l, slicedRmsNorm(x, cfg.hidden_size, cfg.rms_norm_eps), tables);
}

at::Tensor slicedMlp(const LlamaConfig& cfg, const SlicedLayerWeights& L, int64_t l, const at::Tensor& x) {
    if (cfg.intermediate_size[static_cast<size_t>(l)] == 0) {
        at::Tensor zero = at::zeros({x.size(0), x.size(1), L.w_down.defined() ? L.w_down.size(0) : L.mlp_shortcut.size(1)},
                                    x.options());
        return L.w_down_bias.defined() ? zero + L.w_down_bias : zero;
    }
    return llamaMlpBranch(cfg, L, l, slicedRmsNorm(x, cfg.hidden_size, cfg.rms_norm_eps));
}

at::Tensor slicedForward(const LlamaConfig& cfg, const SlicedWeights& w, const at::Tensor& ids, KvCache* cache,
                         const ActivationTap& tap) {
    if (ids.dim() != 2) throw Error("sliced model: ids must be [batch, tokens]");
    const int64_t T = ids.size(1), start = cache ? cache->length : 0;
    cfg.checkAttentionSpan(start + T, "a sequence");
    if (start + T > cfg.max_position_embeddings)
        throw Error("sequence of " + std::to_string(start + T) + " positions exceeds the model's context of " +
                    std::to_string(cfg.max_position_embeddings));
    const at::TensorOptions opts = w.embed.options();
    // The dense model's tables and cache: positions start..start+T−1, the causal mask of T new
    // queries, the rotary tables grown inside the cache as llamaForward grows them.
    const LlamaPositionTables tables =
        cache ? llamaCachedPositionTables(cfg, *cache, T, opts) : llamaPositionTables(cfg, 0, T, opts);
    if (cache && cache->k.empty()) {
        cache->k.resize(static_cast<size_t>(cfg.num_layers));
        cache->v.resize(static_cast<size_t>(cfg.num_layers));
    }
    const int64_t D = cfg.hidden_size;
    const double eps = cfg.rms_norm_eps;
    at::Tensor x = at::embedding(w.embed, ids);
    for (size_t i = 0; i < w.layers.size(); ++i) {
        const SlicedLayerWeights& L = w.layers[i];
        const auto l = static_cast<int64_t>(i);
        at::Tensor mid = shortcut(x, L.attn_shortcut);
        if (cfg.num_heads[i] > 0)
            mid = mid + llamaAttentionBranch(cfg, L, l, slicedRmsNorm(x, D, eps), tables, cache, tap);
        else if (L.wo_bias.defined())  // no heads: the block's bias alone, as in the dense model
            mid = mid + L.wo_bias;
        x = shortcut(mid, L.mlp_shortcut);
        if (cfg.intermediate_size[i] > 0)
            x = x + llamaMlpBranch(cfg, L, l, slicedRmsNorm(mid, D, eps), tap);
        else if (L.w_down_bias.defined())
            x = x + L.w_down_bias;
    }
    if (cache) cache->length = start + T;
    return llamaLinear(slicedRmsNorm(x, D, eps), w.lm_head);
}

SlicedLlama::SlicedLlama(LlamaConfig config, SlicedWeights weights, Runtime runtime, std::string tokenizerPath)
    : config_(std::move(config)), cpuWeights_(std::move(weights)), runtime_(runtime),
      tokenizerPath_(std::move(tokenizerPath)) {
    if (static_cast<int64_t>(cpuWeights_.layers.size()) != config_.num_layers)
        throw Error("sliced model: " + std::to_string(cpuWeights_.layers.size()) + " layers for a config of " +
                    std::to_string(config_.num_layers));
    config_.tie_word_embeddings = false;  // SliceGPT unties them
    // Column-major shortcuts (columnMajor above), so that a float32 CPU runtime shares them.
    for (SlicedLayerWeights& L : cpuWeights_.layers) {
        L.attn_shortcut = columnMajor(L.attn_shortcut, Runtime{c10::kCPU, at::kFloat});
        L.mlp_shortcut = columnMajor(L.mlp_shortcut, Runtime{c10::kCPU, at::kFloat});
    }
    weights_ = toRuntimeWeights(cpuWeights_, runtime_);
}

at::Tensor SlicedLlama::forward(const at::Tensor& ids, KvCache* cache, const ActivationTap& tap) const {
    return slicedForward(config_, weights_, ids, cache, tap);
}

int64_t SlicedLlama::parameters() const {
    SlicedWeights w = cpuWeights_;
    int64_t n = 0;
    for (auto& [name, t] : named(w))
        if (t->defined()) n += t->numel();
    return n;
}

int64_t SlicedLlama::prunableParameters() const {
    int64_t n = 0;
    for (const SlicedLayerWeights& L : cpuWeights_.layers)
        for (const at::Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.attn_shortcut, &L.mlp_shortcut})
            if (t->defined()) n += t->numel();
    return n;
}

std::vector<int64_t> SlicedLlama::residualWidths() const {
    std::vector<int64_t> d = {cpuWeights_.embed.size(1)};
    for (const SlicedLayerWeights& L : cpuWeights_.layers) {
        d.push_back(L.attn_shortcut.size(1));
        d.push_back(L.mlp_shortcut.size(1));
    }
    return d;
}

void SlicedLlama::writeFiles(const std::string& dir) const {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    SlicedWeights w = cpuWeights_;
    for (auto& [name, t] : named(w))
        if (t->defined()) tensors.emplace_back(name, t->to(at::kFloat).contiguous());
    writeSafeTensors((fs::path(dir) / kWeightsFile).string(), tensors, {{"format", kSlicedModelFormat}});
    HfBiasFlags biases;
    nlohmann::json config = nlohmann::json::parse(hfLlamaConfigJson(config_, biases));
    config["npw_format"] = kSlicedModelFormat;
    config["npw_rope_layout"] = config_.rope_layout == RopeLayout::AdjacentPairs ? "adjacent-pairs" : "half-split";
    writeTextAtomically((fs::path(dir) / kConfigFile).string(), json_fields::dumpJson(config, 2, "config.json") + "\n");
    if (!tokenizerPath_.empty()) {
        const std::string ext = fs::path(tokenizerPath_).extension().string();
        const std::string name = ext == ".json" ? "tokenizer.json" : ext == ".model" ? "tokenizer.model" : "tokenizer.bin";
        fs::copy_file(tokenizerPath_, fs::path(dir) / name, fs::copy_options::overwrite_existing);
    }
}

bool SlicedLlama::isSlicedDirectory(const std::string& dir) { return isSlicedLlamaDirectory(dir); }

SlicedLlama SlicedLlama::load(const std::string& dir, const Runtime& runtime) {
    const std::string configPath = (fs::path(dir) / kConfigFile).string();
    const std::string weightsPath = (fs::path(dir) / kWeightsFile).string();
    if (!isSlicedDirectory(dir))
        throw Error("'" + dir + "' is not a sliced model (expected " + kWeightsFile + " and " + kConfigFile + ")");
    LlamaConfig config = readHfLlamaConfig(configPath);
    const nlohmann::json raw = json_fields::readJsonFile(configPath, "config '" + configPath + "'");
    if (raw.value("npw_format", std::string()) != kSlicedModelFormat)
        throw Error("config '" + configPath + "': field npw_format: expected \"" + kSlicedModelFormat + "\"");
    config.rope_layout = raw.value("npw_rope_layout", std::string()) == "adjacent-pairs" ? RopeLayout::AdjacentPairs
                                                                                         : RopeLayout::HalfSplit;
    const auto file = SafeTensorsFile::open(weightsPath);
    SlicedWeights w;
    w.layers.resize(static_cast<size_t>(config.num_layers));
    const int64_t V = config.vocab_size, hd = config.head_dim;
    auto need = [&](const std::string& name, at::Tensor& t, bool optional) {
        if (!file->has(name)) {
            if (optional) return;
            throw Error("sliced model '" + weightsPath + "': tensor " + name + " is missing");
        }
        t = file->loadFloat(name);
        if (!allFinite(t))
            throw Error("sliced model '" + weightsPath + "': tensor " + name + " holds NaN or Inf");
    };
    auto shape = [&](const std::string& name, const at::Tensor& t, const std::vector<int64_t>& expected) {
        if (t.sizes().vec() != expected) {
            std::ostringstream e, g;
            for (int64_t x : expected) e << x << " ";
            for (int64_t x : t.sizes()) g << x << " ";
            throw Error("sliced model '" + weightsPath + "': tensor " + name + " has shape [ " + g.str() +
                        "], expected [ " + e.str() + "]");
        }
    };
    need("embed", w.embed, false);
    need("lm_head", w.lm_head, false);
    if (w.embed.dim() != 2 || w.embed.size(0) != V)
        throw Error("sliced model '" + weightsPath + "': tensor embed must be [" + std::to_string(V) + ", d]");
    int64_t d = w.embed.size(1);
    for (size_t l = 0; l < w.layers.size(); ++l) {
        SlicedLayerWeights& L = w.layers[l];
        const std::string p = "layers." + std::to_string(l) + ".";
        const int64_t nh = config.num_heads[l], nkv = config.num_kv_heads[l], inter = config.intermediate_size[l];
        need(p + "attn_shortcut", L.attn_shortcut, false);
        if (L.attn_shortcut.dim() != 2 || L.attn_shortcut.size(0) != d)
            throw Error("sliced model '" + weightsPath + "': tensor " + p + "attn_shortcut must be [" + std::to_string(d) + ", d]");
        const int64_t dMid = L.attn_shortcut.size(1);
        need(p + "mlp_shortcut", L.mlp_shortcut, false);
        if (L.mlp_shortcut.dim() != 2 || L.mlp_shortcut.size(0) != dMid)
            throw Error("sliced model '" + weightsPath + "': tensor " + p + "mlp_shortcut must be [" + std::to_string(dMid) + ", d]");
        const int64_t dOut = L.mlp_shortcut.size(1);
        if (nh > 0) {
            need(p + "wq", L.wq, false), shape(p + "wq", L.wq, {nh * hd, d});
            need(p + "wk", L.wk, false), shape(p + "wk", L.wk, {nkv * hd, d});
            need(p + "wv", L.wv, false), shape(p + "wv", L.wv, {nkv * hd, d});
            need(p + "wo", L.wo, false), shape(p + "wo", L.wo, {dMid, nh * hd});
            need(p + "wq_bias", L.wq_bias, true);
            need(p + "wk_bias", L.wk_bias, true);
            need(p + "wv_bias", L.wv_bias, true);
            need(p + "q_norm", L.q_norm, true);
            need(p + "k_norm", L.k_norm, true);
            if (L.wq_bias.defined()) shape(p + "wq_bias", L.wq_bias, {nh * hd});
            if (L.wk_bias.defined()) shape(p + "wk_bias", L.wk_bias, {nkv * hd});
            if (L.wv_bias.defined()) shape(p + "wv_bias", L.wv_bias, {nkv * hd});
            if (L.q_norm.defined()) shape(p + "q_norm", L.q_norm, {hd});
            if (L.k_norm.defined()) shape(p + "k_norm", L.k_norm, {hd});
        }
        need(p + "wo_bias", L.wo_bias, true);
        if (L.wo_bias.defined()) shape(p + "wo_bias", L.wo_bias, {dMid});
        if (inter > 0) {
            need(p + "w_gate", L.w_gate, false), shape(p + "w_gate", L.w_gate, {inter, dMid});
            need(p + "w_up", L.w_up, false), shape(p + "w_up", L.w_up, {inter, dMid});
            need(p + "w_down", L.w_down, false), shape(p + "w_down", L.w_down, {dOut, inter});
        }
        need(p + "w_down_bias", L.w_down_bias, true);
        if (L.w_down_bias.defined()) shape(p + "w_down_bias", L.w_down_bias, {dOut});
        d = dOut;
    }
    shape("lm_head", w.lm_head, {V, d});
    std::string tokenizer;
    for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin"})
        if (tokenizer.empty() && fs::exists(fs::path(dir) / name)) tokenizer = (fs::path(dir) / name).string();
    return SlicedLlama(std::move(config), std::move(w), runtime, tokenizer);
}

} // namespace npw
