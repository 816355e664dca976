// A SliceGPT-sliced LLaMA: forward, parameter counts, files (sliced_llama.h).
#include "core/models/sliced_llama.h"

#include "core/io/safetensors.h"
#include "core/text/json_fields.h"
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

constexpr const char* kWeightsFile = "npw-sliced.safetensors";
constexpr const char* kConfigFile = "npw-sliced-config.json";

// SliceGPT's RMSN: the norm over the kept directions divided by the original width D.
at::Tensor rmsn(const at::Tensor& x, int64_t D, double eps) {
    const at::Tensor xf = x.to(at::kFloat);
    return (xf * at::rsqrt(xf.pow(2).sum(-1, true) / static_cast<double>(D) + eps)).to(x.scalar_type());
}

at::Tensor headNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    const at::Tensor xf = x.to(at::kFloat);
    return (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * weight;
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RopeLayout layout) {
    const int64_t half = x.size(-1) / 2;
    if (layout == RopeLayout::HalfSplit) {
        const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
        return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
    }
    const at::Tensor pairs = x.unflatten(-1, {half, 2});
    const at::Tensor x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
    return at::stack({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1).flatten(-2);
}

at::Tensor denseLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
    return at::linear(x, w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt);
}

at::Tensor toRuntime(const at::Tensor& t, const Runtime& rt) {
    return t.defined() ? t.to(rt.device, rt.dtype).contiguous() : t;
}

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
    return w;
}

} // namespace

at::Tensor slicedRmsNorm(const at::Tensor& x, int64_t originalWidth, double eps) { return rmsn(x, originalWidth, eps); }

at::Tensor slicedAttention(const LlamaConfig& cfg, const SlicedLayerWeights& L, int64_t l, const at::Tensor& x,
                           const LlamaPositionTables& tables) {
    const int64_t B = x.size(0), T = x.size(1), hd = cfg.head_dim;
    const int64_t nh = cfg.num_heads[static_cast<size_t>(l)], nkv = cfg.num_kv_heads[static_cast<size_t>(l)];
    if (nh == 0) {
        at::Tensor zero = at::zeros({B, T, L.wo.defined() ? L.wo.size(0) : L.attn_shortcut.size(1)}, x.options());
        return L.wo_bias.defined() ? zero + L.wo_bias : zero;
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const at::Tensor h = rmsn(x, cfg.hidden_size, cfg.rms_norm_eps);
    at::Tensor q = denseLinear(h, L.wq, L.wq_bias).view({B, T, nh, hd});
    at::Tensor k = denseLinear(h, L.wk, L.wk_bias).view({B, T, nkv, hd});
    at::Tensor v = denseLinear(h, L.wv, L.wv_bias).view({B, T, nkv, hd}).transpose(1, 2);
    if (L.q_norm.defined()) q = headNorm(q, L.q_norm, cfg.rms_norm_eps);
    if (L.k_norm.defined()) k = headNorm(k, L.k_norm, cfg.rms_norm_eps);
    q = rope(q.transpose(1, 2), tables.cos, tables.sin, cfg.rope_layout);
    k = rope(k.transpose(1, 2), tables.cos, tables.sin, cfg.rope_layout);
    if (nkv != nh) {
        k = k.repeat_interleave(nh / nkv, 1);
        v = v.repeat_interleave(nh / nkv, 1);
    }
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
    if (tables.mask.defined()) scores = scores + tables.mask;
    const at::Tensor probs = at::softmax(scores.to(at::kFloat), -1).to(q.scalar_type());
    const at::Tensor attn = at::matmul(probs, v).transpose(1, 2).reshape({B, T, nh * hd});
    return denseLinear(attn, L.wo, L.wo_bias);
}

at::Tensor slicedMlp(const LlamaConfig& cfg, const SlicedLayerWeights& L, int64_t l, const at::Tensor& x) {
    if (cfg.intermediate_size[static_cast<size_t>(l)] == 0) {
        at::Tensor zero = at::zeros({x.size(0), x.size(1), L.w_down.defined() ? L.w_down.size(0) : L.mlp_shortcut.size(1)},
                                    x.options());
        return L.w_down_bias.defined() ? zero + L.w_down_bias : zero;
    }
    const at::Tensor h = rmsn(x, cfg.hidden_size, cfg.rms_norm_eps);
    return denseLinear(at::silu(denseLinear(h, L.w_gate)) * denseLinear(h, L.w_up), L.w_down, L.w_down_bias);
}

at::Tensor slicedForward(const LlamaConfig& cfg, const SlicedWeights& w, const at::Tensor& ids) {
    if (ids.dim() != 2) throw Error("sliced model: ids must be [batch, tokens]");
    const int64_t T = ids.size(1);
    cfg.checkAttentionSpan(T, "a sequence");
    if (T > cfg.max_position_embeddings)
        throw Error("sequence of " + std::to_string(T) + " positions exceeds the model's context of " +
                    std::to_string(cfg.max_position_embeddings));
    const LlamaPositionTables tables = llamaPositionTables(cfg, 0, T, w.embed.options());
    at::Tensor x = at::embedding(w.embed, ids);
    for (size_t l = 0; l < w.layers.size(); ++l) {
        const SlicedLayerWeights& L = w.layers[l];
        const at::Tensor mid = at::matmul(x, L.attn_shortcut) + slicedAttention(cfg, L, static_cast<int64_t>(l), x, tables);
        x = at::matmul(mid, L.mlp_shortcut) + slicedMlp(cfg, L, static_cast<int64_t>(l), mid);
    }
    return denseLinear(rmsn(x, cfg.hidden_size, cfg.rms_norm_eps), w.lm_head);
}

SlicedLlama::SlicedLlama(LlamaConfig config, SlicedWeights weights, Runtime runtime, std::string tokenizerPath)
    : config_(std::move(config)), cpuWeights_(std::move(weights)), runtime_(runtime),
      tokenizerPath_(std::move(tokenizerPath)) {
    if (static_cast<int64_t>(cpuWeights_.layers.size()) != config_.num_layers)
        throw Error("sliced model: " + std::to_string(cpuWeights_.layers.size()) + " layers for a config of " +
                    std::to_string(config_.num_layers));
    config_.tie_word_embeddings = false;  // SliceGPT unties them
    weights_ = toRuntimeWeights(cpuWeights_, runtime_);
}

at::Tensor SlicedLlama::logits(const at::Tensor& ids, bool keepOnDevice) const {
    c10::InferenceMode guard;
    at::Tensor out = slicedForward(config_, weights_, ids.to(runtime_.device, at::kLong)).to(at::kFloat);
    return keepOnDevice ? out : out.cpu();
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
    writeTextAtomically((fs::path(dir) / kConfigFile).string(), config.dump(2) + "\n");
    if (!tokenizerPath_.empty()) {
        const std::string ext = fs::path(tokenizerPath_).extension().string();
        const std::string name = ext == ".json" ? "tokenizer.json" : ext == ".model" ? "tokenizer.model" : "tokenizer.bin";
        fs::copy_file(tokenizerPath_, fs::path(dir) / name, fs::copy_options::overwrite_existing);
    }
}

bool SlicedLlama::isSlicedDirectory(const std::string& dir) {
    std::error_code ec;
    return fs::is_directory(dir, ec) && fs::exists(fs::path(dir) / kWeightsFile, ec) &&
           fs::exists(fs::path(dir) / kConfigFile, ec);
}

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
        if (!at::isfinite(t).all().item<bool>())
            throw Error("sliced model '" + weightsPath + "': tensor " + name + " holds NaN or Inf");
    };
    auto shape = [&](const std::string& name, const at::Tensor& t, std::vector<int64_t> expected) {
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
