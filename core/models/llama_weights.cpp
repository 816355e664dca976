#include "core/models/llama_weights.h"
#include "core/models/weight_values.h"

#include <ATen/ATen.h>

namespace npw {

std::vector<std::pair<std::string, at::Tensor*>> namedTensors(LlamaWeights& w, bool includeTiedHead) {
    std::vector<std::pair<std::string, at::Tensor*>> out;
    out.emplace_back("model.embed_tokens.weight", &w.embed);
    for (size_t i = 0; i < w.layers.size(); ++i) {
        LlamaLayerWeights& L = w.layers[i];
        const std::string p = "model.layers." + std::to_string(i) + ".";
        out.emplace_back(p + "input_layernorm.weight", &L.attn_norm);
        out.emplace_back(p + "self_attn.q_proj.weight", &L.wq);
        out.emplace_back(p + "self_attn.k_proj.weight", &L.wk);
        out.emplace_back(p + "self_attn.v_proj.weight", &L.wv);
        if (L.wq_bias.defined()) out.emplace_back(p + "self_attn.q_proj.bias", &L.wq_bias);
        if (L.wk_bias.defined()) out.emplace_back(p + "self_attn.k_proj.bias", &L.wk_bias);
        if (L.wv_bias.defined()) out.emplace_back(p + "self_attn.v_proj.bias", &L.wv_bias);
        if (L.q_norm.defined()) out.emplace_back(p + "self_attn.q_norm.weight", &L.q_norm);
        if (L.k_norm.defined()) out.emplace_back(p + "self_attn.k_norm.weight", &L.k_norm);
        out.emplace_back(p + "self_attn.o_proj.weight", &L.wo);
        if (L.wo_bias.defined()) out.emplace_back(p + "self_attn.o_proj.bias", &L.wo_bias);
        out.emplace_back(p + "post_attention_layernorm.weight", &L.ffn_norm);
        out.emplace_back(p + "mlp.gate_proj.weight", &L.w_gate);
        out.emplace_back(p + "mlp.up_proj.weight", &L.w_up);
        out.emplace_back(p + "mlp.down_proj.weight", &L.w_down);
        if (L.w_down_bias.defined()) out.emplace_back(p + "mlp.down_proj.bias", &L.w_down_bias);
    }
    out.emplace_back("model.norm.weight", &w.final_norm);
    const bool tied = w.lm_head.defined() && w.lm_head.is_same(w.embed);
    if (!tied || includeTiedHead) out.emplace_back("lm_head.weight", &w.lm_head);
    return out;
}

void copyWeightsIntoMemory(LlamaCheckpoint& checkpoint) {
    if (!checkpoint.weightsMapped) return;  // already owned float32: a copy would double the memory
    checkpoint.weightsMapped = false;
    LlamaWeights& weights = checkpoint.weights;
    const bool tied = weights.lm_head.defined() && weights.lm_head.is_same(weights.embed);
    // Each tensor's values are read here for the first time: checked as they are converted.
    for (auto& [name, tensor] : namedTensors(weights)) {
        *tensor = tensor->scalar_type() == at::kFloat ? tensor->clone(at::MemoryFormat::Contiguous) : tensor->to(at::kFloat).contiguous();
        checkWeightValues(checkpoint, name, *tensor);
    }
    checkpoint.valuesChecked = true;
    if (tied) weights.lm_head = weights.embed;
}

} // namespace npw
