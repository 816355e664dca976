#include "core/models/non_finite.h"

#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

namespace npw {

std::string nonFiniteValues(const at::Tensor& t) {
    if (!t.defined() || t.numel() == 0 || !t.is_floating_point() || at::isfinite(t).all().item<bool>()) return "";
    std::string found;
    const auto add = [&found](const char* name) { found += (found.empty() ? "" : ", ") + std::string(name); };
    if (at::isnan(t).any().item<bool>()) add("NaN");
    if (at::isposinf(t).any().item<bool>()) add("inf");
    if (at::isneginf(t).any().item<bool>()) add("-inf");
    return found;
}

std::string llamaLocateNonFinite(const LlamaConfig& cfg, const LlamaWeights& w, const at::Tensor& ids) {
    c10::InferenceMode guard;
    const auto check = [](const at::Tensor& t, const std::string& what) {
        const std::string found = nonFiniteValues(t);
        return found.empty() ? std::string() : what + " became non-finite (" + found + ")";
    };
    // llamaForward's steps (llama.cpp), each checked.
    const LlamaPositionTables tables = llamaPositionTables(cfg, 0, ids.size(1), w.embed.options());
    at::Tensor x = at::embedding(w.embed, ids.to(w.embed.device(), at::kLong));
    std::string found = check(x, "the token embedding");
    for (int64_t l = 0; found.empty() && l < cfg.num_layers; ++l) {
        const LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
        const std::string layer = "layer " + std::to_string(l) + "'s ";
        if (cfg.num_heads[static_cast<size_t>(l)] > 0) {
            const at::Tensor h = llamaRmsNorm(x, L.attn_norm, cfg.rms_norm_eps);
            if (!(found = check(h, layer + "attention input norm")).empty()) break;
            const at::Tensor a = llamaAttentionBranch(cfg, L, l, h, tables);
            if (!(found = check(a, layer + "attention output")).empty()) break;
            x = x + a;
        } else if (L.wo_bias.defined()) {
            x = x + L.wo_bias;
        }
        if (!(found = check(x, layer + "residual stream after attention")).empty()) break;
        if (cfg.intermediate_size[static_cast<size_t>(l)] > 0) {
            const at::Tensor h = llamaRmsNorm(x, L.ffn_norm, cfg.rms_norm_eps);
            if (!(found = check(h, layer + "MLP input norm")).empty()) break;
            const at::Tensor m = llamaMlpBranch(cfg, L, l, h);
            if (!(found = check(m, layer + "MLP output")).empty()) break;
            x = x + m;
        } else if (L.w_down_bias.defined()) {
            x = x + L.w_down_bias;
        }
        found = check(x, layer + "residual stream after the MLP");
    }
    if (!found.empty()) return found;
    const at::Tensor normed = llamaRmsNorm(x, w.final_norm, cfg.rms_norm_eps);
    if (!(found = check(normed, "the final norm")).empty()) return found;
    return check(llamaLinear(normed, w.lm_head), "the logits (lm_head)");
}

std::string locateNonFinite(const CausalLm& model, const at::Tensor& ids) {
    if (const auto* llama = dynamic_cast<const LlamaModel*>(&model))
        return llamaLocateNonFinite(llama->config(), llama->deviceWeights(), ids);
    // The first tapped input that is non-finite (layers run in order: attention, then the MLP).
    std::string found;
    const ActivationTap tap = [&found](int64_t layer, TapSite site, const at::Tensor& input) {
        if (!found.empty()) return;
        const std::string values = nonFiniteValues(input);
        if (!values.empty())
            found = "layer " + std::to_string(layer) + "'s " +
                    (site == TapSite::AttentionOutputInput ? "attention (o_proj's input)" : "MLP (down_proj's input)") +
                    " became non-finite (" + values + ")";
    };
    const at::Tensor out = model.logits(ids, nullptr, true, tap);
    if (!found.empty()) return found;
    const std::string values = nonFiniteValues(out);
    return values.empty() ? "" : "the logits became non-finite (" + values + ")";
}

void requireFiniteLogits(const CausalLm& model, const at::Tensor& logits, const std::vector<int32_t>& context,
                         const std::string& what) {
    const std::string values = nonFiniteValues(logits);
    if (values.empty()) return;
    const at::Tensor ids = at::tensor(std::vector<int64_t>(context.begin(), context.end()), at::kLong).unsqueeze(0);
    const std::string where = locateNonFinite(model, ids);
    throw Error(what + " became non-finite (" + values + ") after " + std::to_string(context.size()) + " tokens" +
                (where.empty() ? std::string() : ": " + where) + kNonFiniteHint);
}

} // namespace npw
