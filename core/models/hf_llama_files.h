#pragma once
// A Hugging Face LLaMA folder's tensors as its safetensors headers list them, and the one walk
// over them that both the loader (model_loader.cpp: LibTorch tensors) and npw info without
// LibTorch (checkpoint_summary.h: headers only, for npw-text) take: which tensors a config
// implies, in which order they are taken, what is refused and how it is worded. No LibTorch here
// or in the .cpp.
#include "core/io/safetensors_header.h"
#include "core/models/llama_config.h"
#include "core/util/error.h"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace npw {

using HfShape = std::vector<int64_t>;

std::string hfLayerTensorName(int64_t layer, const std::string& suffix);

// DIR/config.json; npw::Error "'DIR' is not a Hugging Face model directory" where there is none.
std::string hfConfigPath(const std::string& dir);
// That config, read and validated as loading reads it (readHfLlamaConfig, LlamaConfig::validate).
LlamaConfig readHfDirectoryConfig(const std::string& configPath);

// Every tensor a LLaMA with this config must have, by Hugging Face name, with the shape the
// config implies. The loader fills the weights through it and the writer reads them, so the
// two cannot disagree on names or shapes. Weights is LlamaWeights, const LlamaWeights or
// HfTensorSlots<T>.
template <class Weights, class Visit>
void forEachRequiredHfTensor(const LlamaConfig& config, Weights& weights, Visit visit) {
    const int64_t hidden = config.hidden_size;
    visit("model.embed_tokens.weight", HfShape{config.vocab_size, hidden}, weights.embed);
    for (int64_t i = 0; i < config.num_layers; ++i) {
        auto& layer = weights.layers[static_cast<size_t>(i)];
        const int64_t qWidth = config.num_heads[static_cast<size_t>(i)] * config.head_dim;
        const int64_t kvWidth = config.num_kv_heads[static_cast<size_t>(i)] * config.head_dim;
        const int64_t inter = config.intermediate_size[static_cast<size_t>(i)];
        visit(hfLayerTensorName(i, "input_layernorm.weight"), HfShape{hidden}, layer.attn_norm);
        visit(hfLayerTensorName(i, "self_attn.q_proj.weight"), HfShape{qWidth, hidden}, layer.wq);
        visit(hfLayerTensorName(i, "self_attn.k_proj.weight"), HfShape{kvWidth, hidden}, layer.wk);
        visit(hfLayerTensorName(i, "self_attn.v_proj.weight"), HfShape{kvWidth, hidden}, layer.wv);
        if (config.qkv_bias) {
            visit(hfLayerTensorName(i, "self_attn.q_proj.bias"), HfShape{qWidth}, layer.wq_bias);
            visit(hfLayerTensorName(i, "self_attn.k_proj.bias"), HfShape{kvWidth}, layer.wk_bias);
            visit(hfLayerTensorName(i, "self_attn.v_proj.bias"), HfShape{kvWidth}, layer.wv_bias);
        }
        if (config.qk_norm) {
            visit(hfLayerTensorName(i, "self_attn.q_norm.weight"), HfShape{config.head_dim}, layer.q_norm);
            visit(hfLayerTensorName(i, "self_attn.k_norm.weight"), HfShape{config.head_dim}, layer.k_norm);
        }
        visit(hfLayerTensorName(i, "self_attn.o_proj.weight"), HfShape{hidden, qWidth}, layer.wo);
        visit(hfLayerTensorName(i, "post_attention_layernorm.weight"), HfShape{hidden}, layer.ffn_norm);
        visit(hfLayerTensorName(i, "mlp.gate_proj.weight"), HfShape{inter, hidden}, layer.w_gate);
        visit(hfLayerTensorName(i, "mlp.up_proj.weight"), HfShape{inter, hidden}, layer.w_up);
        visit(hfLayerTensorName(i, "mlp.down_proj.weight"), HfShape{hidden, inter}, layer.w_down);
    }
    visit("model.norm.weight", HfShape{hidden}, weights.final_norm);
    if (!config.tie_word_embeddings) visit("lm_head.weight", HfShape{config.vocab_size, hidden}, weights.lm_head);
}

// LlamaWeights' places with another kind of tensor (npw info's: a header entry).
template <class T>
struct HfLayerSlots {
    T attn_norm, wq, wk, wv, wq_bias, wk_bias, wv_bias, q_norm, k_norm, wo, wo_bias, ffn_norm, w_gate, w_up, w_down,
        w_down_bias;
};
template <class T>
struct HfTensorSlots {
    T embed;
    std::vector<HfLayerSlots<T>> layers;
    T final_norm, lm_head;
};

// npw models carry biases on q, k, v (Qwen2; LLaMA's attention_bias), o_proj and down_proj
// (what FLAP's bias compensation adds). transformers' attention_bias switches on biases for all
// of q, k, v, o and mlp_bias for all of gate, up, down, so the writer stores zeros for the
// biases npw lacks (transformers would otherwise initialise them at random) and the reader
// accepts gate/up biases only when they are zero.
struct ZeroBias {
    const char* suffix;
    int64_t width;
};
std::vector<ZeroBias> zeroMlpBiases(const LlamaConfig& config, size_t layer);

// The safetensors files of one HF directory (model.safetensors, or the shards an index lists,
// which must agree with it tensor for tensor), and which tensors have been taken, so that
// anything left over can be refused: a checkpoint npw does not fully understand is rejected
// rather than run wrong. `open` reads a file's header (SafeTensorsHeader::open, or
// SafeTensorsFile::open where the tensors are read too).
class HfSafetensorsListing {
public:
    using Open = std::function<std::shared_ptr<const SafeTensorsHeader>(const std::string& path)>;
    HfSafetensorsListing(const std::filesystem::path& dir, std::string configPath, const Open& open);

    bool has(const std::string& name) const { return fileOf_.count(name) != 0; }
    // The tensor's file after checking its dtype (F32, F16, BF16) and shape; marks it taken.
    const SafeTensorsHeader& take(const std::string& name, const HfShape& expected);
    const std::string& fileOf(const std::string& name) const { return fileOf_.at(name)->path(); }
    const std::string& configPath() const { return configPath_; }
    // Every tensor taken, with the file it is in.
    const std::map<std::string, const SafeTensorsHeader*>& taken() const { return taken_; }
    void rejectUntaken() const;

private:
    void openShards(const std::filesystem::path& dir, const std::string& indexPath, const Open& open);

    std::string configPath_;
    std::string listing_;  // where the tensors are listed: model.safetensors or the index
    std::map<std::string, std::shared_ptr<const SafeTensorsHeader>> fileOf_;
    std::map<std::string, const SafeTensorsHeader*> taken_;
};

// Thrown where an answer depends on tensor values a headers-only reader does not compare (a tied
// checkpoint that stores its classifier anyway: is it the embedding?): the caller that can,
// loads the tensors instead (npw-text hands the command to npw-run).
struct NeedsTensorValues {};

// Takes a LLaMA's tensors from `store` into `weights` (LlamaWeights or HfTensorSlots<T>), as
// the config implies them, then the optional biases, and refuses any tensor left: the loader's
// walk (model_loader.h), which the headers-only summary takes too. Store has: Tensor (default:
// none), has(name), take(name, shape), defined(t), nonZero(t), equal(a, b), fileOf(name),
// configPath(), rejectUntaken(). Sets config.qkv_bias where non-zero q/k/v biases are found.
template <class Store, class Weights>
void takeHfLlamaTensors(LlamaConfig& config, Store& store, Weights& weights) {
    using Tensor = typename Store::Tensor;
    auto takeIfPresent = [&](const std::string& name, const HfShape& shape) {
        return store.has(name) ? store.take(name, shape) : Tensor();
    };
    weights.layers.resize(static_cast<size_t>(config.num_layers));
    forEachRequiredHfTensor(config, weights, [&](const std::string& name, const HfShape& shape, Tensor& target) {
        target = store.take(name, shape);
    });
    if (config.tie_word_embeddings) {
        // Some tied checkpoints store the classifier anyway; it must then be the embedding.
        const std::string headName = "lm_head.weight";
        Tensor head = takeIfPresent(headName, HfShape{config.vocab_size, config.hidden_size});
        if (store.defined(head) && !store.equal(head, weights.embed))
            throw Error("tensor '" + headName + "' in '" + store.fileOf(headName) + "' differs from the embedding, but config '" +
                        store.configPath() + "' says tie_word_embeddings");
        weights.lm_head = weights.embed;
    }
    for (size_t i = 0; i < weights.layers.size(); ++i) {
        const auto layer = static_cast<int64_t>(i);
        const HfShape hiddenShape{config.hidden_size};
        weights.layers[i].wo_bias = takeIfPresent(hfLayerTensorName(layer, "self_attn.o_proj.bias"), hiddenShape);
        weights.layers[i].w_down_bias = takeIfPresent(hfLayerTensorName(layer, "mlp.down_proj.bias"), hiddenShape);
        for (const ZeroBias& bias : zeroMlpBiases(config, i)) {
            const std::string name = hfLayerTensorName(layer, bias.suffix);
            const Tensor zero = takeIfPresent(name, HfShape{bias.width});
            if (store.defined(zero) && store.nonZero(zero))
                throw Error("tensor '" + name + "' in '" + store.fileOf(name) +
                            "' is a non-zero bias, which is unsupported: npw models have biases only on o_proj and "
                            "down_proj");
        }
    }
    if (!config.qkv_bias) {
        // q/k/v biases of a family whose config switches them on (LLaMA's or Qwen3's
        // attention_bias). npw's own exports write zeros there when only o_proj has a bias
        // (FLAP): biases that are all zero are dropped, the model is the same without them.
        // Non-zero ones are read when q_proj, k_proj and v_proj have them in every layer.
        const char* projections[] = {"q_proj", "k_proj", "v_proj"};
        auto name = [](int64_t l, const char* proj) { return hfLayerTensorName(l, std::string("self_attn.") + proj + ".bias"); };
        auto width = [&](int64_t l, const char* proj) {
            return (proj[0] == 'q' ? config.num_heads[l] : config.num_kv_heads[l]) * config.head_dim;
        };
        std::string nonZero;
        for (int64_t l = 0; l < config.num_layers; ++l)
            for (const char* proj : projections) {
                const Tensor bias = takeIfPresent(name(l, proj), HfShape{width(l, proj)});
                if (store.defined(bias) && nonZero.empty() && store.nonZero(bias)) nonZero = name(l, proj);
            }
        if (!nonZero.empty()) {
            for (int64_t l = 0; l < config.num_layers; ++l)
                for (const char* proj : projections)
                    if (!store.has(name(l, proj)))
                        throw Error("tensor '" + name(l, proj) + "' is missing: the checkpoint with config '" +
                                    store.configPath() + "' has a non-zero bias '" + nonZero +
                                    "', and npw reads q/k/v biases only when q_proj, k_proj and v_proj have them in every layer");
            for (int64_t l = 0; l < config.num_layers; ++l) {
                auto& layer = weights.layers[static_cast<size_t>(l)];
                layer.wq_bias = store.take(name(l, "q_proj"), HfShape{width(l, "q_proj")});
                layer.wk_bias = store.take(name(l, "k_proj"), HfShape{width(l, "k_proj")});
                layer.wv_bias = store.take(name(l, "v_proj"), HfShape{width(l, "v_proj")});
            }
            config.qkv_bias = true;
        }
    }
    store.rejectUntaken();
}

} // namespace npw
