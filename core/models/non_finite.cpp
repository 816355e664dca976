#include "core/models/non_finite.h"

#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace npw {

namespace {

// Whether any of n values (their raw bits) has every exponent bit set: NaN or ±inf. Blocks of 16 Ki
// values without a branch inside (the compiler can vectorise them), stopping after the first block
// that has one.
template <typename Bits>
bool anyExponentAllOnes(const Bits* bits, int64_t n, Bits exponent) {
    constexpr int64_t kBlock = int64_t(1) << 14;
    for (int64_t i = 0; i < n; i += kBlock) {
        const int64_t end = std::min(n, i + kBlock);
        unsigned hit = 0;
        for (int64_t j = i; j < end; ++j) hit |= static_cast<unsigned>((bits[j] & exponent) == exponent);
        if (hit != 0) return true;
    }
    return false;
}

template <typename Bits>
bool bitsAllFinite(const at::Tensor& t, Bits exponent) {
    const Bits* bits = static_cast<const Bits*>(t.data_ptr());
    std::atomic<bool> found{false};
    at::parallel_for(0, t.numel(), int64_t(1) << 20, [&](int64_t begin, int64_t end) {
        if (!found.load(std::memory_order_relaxed) && anyExponentAllOnes(bits + begin, end - begin, exponent))
            found.store(true, std::memory_order_relaxed);
    });
    return !found.load();
}

} // namespace

bool allFinite(const at::Tensor& t) {
    if (!t.defined() || t.numel() == 0 || !t.is_floating_point()) return true;
    if (!t.device().is_cpu()) return at::isfinite(t).all().item<bool>();  // one reduction on the device
    if (t.is_contiguous()) {
        switch (t.scalar_type()) {
            case at::kFloat: return bitsAllFinite<uint32_t>(t, 0x7F800000u);
            case at::kDouble: return bitsAllFinite<uint64_t>(t, 0x7FF0000000000000ull);
            case at::kBFloat16: return bitsAllFinite<uint16_t>(t, 0x7F80u);
            case at::kHalf: return bitsAllFinite<uint16_t>(t, 0x7C00u);
            default: break;
        }
    }
    // Chunks, each reduced to its smallest and largest element: those are finite exactly when
    // every element is (NaN and ±inf propagate). Half and bfloat16 (no aminmax on the CPU) go
    // through float32 per chunk.
    const at::Tensor flat = t.reshape({-1});
    constexpr int64_t kChunk = int64_t(1) << 22;
    for (int64_t i = 0; i < flat.numel(); i += kChunk) {
        at::Tensor chunk = flat.narrow(0, i, std::min(kChunk, flat.numel() - i));
        if (chunk.scalar_type() != at::kFloat && chunk.scalar_type() != at::kDouble) chunk = chunk.to(at::kFloat);
        const auto [low, high] = at::aminmax(chunk);
        if (!std::isfinite(low.item<double>()) || !std::isfinite(high.item<double>())) return false;
    }
    return true;
}

std::string nonFiniteValues(const at::Tensor& t) {
    if (allFinite(t)) return "";
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
