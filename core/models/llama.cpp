#include "core/models/llama.h"
#include "core/models/gemv.h"
#include "core/models/weight_values.h"
#include "core/models/widened_linear.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

namespace npw {

namespace {

// width: the divisor of Σx² (x's own width for LLaMA; SliceGPT's sliced model divides by the
// dense width). An undefined weight scales nothing.
at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, int64_t width = 0) {
    // Computed in float32 whatever the model dtype, as LLaMA and LlamaGen do.
    const int64_t n = x.size(-1);
    const int64_t divisor = width > 0 ? width : n;
    const bool weighted = weight.defined();
    if (n > 0 && x.numel() <= 2 * n && x.device().is_cpu() && x.scalar_type() == at::kFloat &&
        (!weighted || (weight.scalar_type() == at::kFloat && weight.numel() == n && weight.is_contiguous() &&
                       !weight.requires_grad())) &&
        !x.requires_grad()) {
        // Decoding (one or two rows): one pass instead of six ATen ops and their allocations;
        // the same formula, the mean of squares summed in float64 (within float32 rounding of ATen's).
        const at::Tensor xc = x.contiguous();
        at::Tensor out = at::empty_like(xc);
        const float *px = xc.data_ptr<float>(), *pw = weighted ? weight.data_ptr<float>() : nullptr;
        float* po = out.data_ptr<float>();
        for (int64_t r = 0; r < xc.numel() / n; ++r, px += n, po += n) {
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += double(px[i]) * double(px[i]);
            const float scale =
                static_cast<float>(1.0 / std::sqrt(static_cast<double>(static_cast<float>(ss / double(divisor))) + eps));
            if (pw)
                for (int64_t i = 0; i < n; ++i) po[i] = (px[i] * scale) * pw[i];
            else
                for (int64_t i = 0; i < n; ++i) po[i] = px[i] * scale;
        }
        return out;
    }
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor meanSquare = divisor == n ? xf.pow(2).mean(-1, /*keepdim=*/true)
                                         : xf.pow(2).sum(-1, /*keepdim=*/true) / static_cast<double>(divisor);
    at::Tensor normed = (xf * at::rsqrt(meanSquare + eps)).to(x.scalar_type());
    return weighted ? normed * weight : normed;
}

// cos/sin tables [T, head_dim/2] for positions start..start+T-1, with the config's
// frequencies (rope_theta and rope_scaling).
std::pair<at::Tensor, at::Tensor> ropeTables(const LlamaConfig& cfg, int64_t start, int64_t length,
                                             const at::TensorOptions& opts) {
    auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor inv = at::tensor(cfg.ropeInverseFrequencies(), f64);
    at::Tensor pos = at::arange(start, start + length, f64);
    at::Tensor angles = at::outer(pos, inv);
    return {angles.cos().to(opts), angles.sin().to(opts)};
}

// x: [B, H, T, D]. Rotates pairs of dimensions by position-dependent angles.
at::Tensor applyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RopeLayout layout) {
    const int64_t half = x.size(-1) / 2;
    if (x.dim() == 4 && x.size(0) * x.size(2) <= 2 && x.device().is_cpu() && x.scalar_type() == at::kFloat &&
        cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat && cos.dim() == 2 && !x.requires_grad()) {
        // Decoding: one loop over the heads instead of eight ATen ops and their temporaries; the
        // same products and sums, in the same order, as the tensor expressions below.
        const int64_t B = x.size(0), H = x.size(1), T = x.size(2);
        at::Tensor out = at::empty({B, H, T, 2 * half}, x.options());
        const auto xa = x.accessor<float, 4>();
        const auto ca = cos.accessor<float, 2>(), sa = sin.accessor<float, 2>();
        float* po = out.data_ptr<float>();
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t t = 0; t < T; ++t, po += 2 * half) {
                    const auto row = xa[b][h][t];
                    for (int64_t i = 0; i < half; ++i) {
                        const float c = ca[t][i], sn = sa[t][i];
                        if (layout == RopeLayout::HalfSplit) {
                            const float x1 = row[i], x2 = row[half + i];
                            po[i] = x1 * c - x2 * sn;
                            po[half + i] = x2 * c + x1 * sn;
                        } else {
                            const float x0 = row[2 * i], x1 = row[2 * i + 1];
                            po[2 * i] = x0 * c - x1 * sn;
                            po[2 * i + 1] = x0 * sn + x1 * c;
                        }
                    }
                }
        return out;
    }
    if (layout == RopeLayout::HalfSplit) {
        at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
        return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
    }
    at::Tensor pairs = x.unflatten(-1, {half, 2});
    at::Tensor x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
    return at::stack({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1).flatten(-2);
}

// x [..., in] · wᵀ (+ bias). A few rows (decoding one token; LlamaGen's guided batches, 2 rows
// per image) go through npw's own kernel (gemv.h) on the CPU in float32: at::linear hands every
// shape to the BLAS's GEMM, which (OpenBLAS 0.3.21, Debian bookworm) first packs the whole weight
// into a buffer — an extra copy of every weight per step, measured 2–5× slower than GEMV at one
// row — and OpenBLAS's single-thread sgemv_n streamed the weights at about half the rate
// llama2.c's plain loop does (issue 17). Up to gemvF32MaxRows() rows the kernel reads each weight
// once for all rows; beyond, GEMM's blocking wins. CUDA, half precision and training keep
// LibTorch's ops (one or two rows as matrix-vector products, more as GEMM).
//
// bfloat16 / float16 weights on the CPU (a checkpoint's matrices used as it stores them: the
// runtime keeps them, llamaTensorOnRuntime) with float32 activations: the same split, each weight
// widened to float32 as it is read — the GEMV kernel for a few rows, the float32 GEMM on one
// widened block of rows at a time for more (widened_linear.h) — float32 products and sums.
at::Tensor denseLayer(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = {}) {
    if (linearWidenedApplies(x, w)) {
        const int64_t width = x.size(-1);
        const int64_t rows = width > 0 ? x.numel() / width : 0;
        if (rows > 0 && x.dim() >= 2 && gemvApplies(x.reshape({rows, width}), w)) {
            std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
            shape.back() = w.size(0);
            at::Tensor out = gemv(x.reshape({rows, width}), w);
            if (bias.defined()) out = out + bias;
            return out.view(shape);
        }
        return linearWidened(x, w, bias);
    }
    if (w.device().is_cpu() && (w.scalar_type() == at::kBFloat16 || w.scalar_type() == at::kHalf) &&
        x.scalar_type() != w.scalar_type())
        // 16-bit weights against activations that need gradients (or another dtype): LibTorch's
        // differentiable ops on a float32 copy of this one matrix.
        return at::linear(x, w.to(x.scalar_type()), bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt);
    const int64_t width = x.size(-1);
    const int64_t rows = width > 0 ? x.numel() / width : 0;
    if (rows == 0 || x.dim() < 2 || (rows > 2 && rows > gemvF32MaxRows()))
        return at::linear(x, w, bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = w.size(0);
    const at::Tensor flat = x.reshape({rows, width});
    at::Tensor out;
    if (gemvF32Applies(flat, w))  // npw's own kernel: CPU float32 without autograd (gemv_kernel.h)
        out = gemvF32(flat, w);
    else if (rows > 2)  // GEMM's shapes
        return at::linear(x, w, bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt);
    else  // CUDA, half precision, training
        out = rows == 1 ? at::mv(w, flat[0]).unsqueeze(0) : at::stack({at::mv(w, flat[0]), at::mv(w, flat[1])});
    if (bias.defined()) out = out + bias;
    return out.view(shape);
}

} // namespace

namespace {

// Causal mask for T new queries against start+T keys: query i sees keys <= start+i.
at::Tensor causalMask(int64_t start, int64_t length, const at::TensorOptions& opts) {
    if (length <= 1) return {};
    at::Tensor q = at::arange(start, start + length, at::kLong).unsqueeze(1);
    at::Tensor k = at::arange(0, start + length, at::kLong).unsqueeze(0);
    return at::zeros({length, start + length}, at::TensorOptions().dtype(opts.dtype()))
        .masked_fill(k > q, -std::numeric_limits<float>::infinity())
        .to(opts.device());
}

// Appends this step's keys and values [B, kv_heads, T, hd] to layer l's cache and returns views
// of everything cached so far. The cache is a buffer grown by doubling (up to the context), so a
// decoded token writes its own row instead of copying the whole cache as a concatenation would.
std::pair<at::Tensor, at::Tensor> appendToCache(KvCache& cache, int64_t l, const at::Tensor& k, const at::Tensor& v,
                                                int64_t context) {
    const int64_t past = cache.length, T = k.size(2), need = past + T;
    at::Tensor& kb = cache.k[static_cast<size_t>(l)];
    at::Tensor& vb = cache.v[static_cast<size_t>(l)];
    if (kb.defined() && (kb.size(0) != k.size(0) || kb.size(1) != k.size(1) || kb.size(3) != k.size(3)))
        throw Error("KV cache of layer " + std::to_string(l) + " holds another batch or head shape");
    if (!kb.defined() || kb.size(2) < need) {
        const int64_t grown = kb.defined() ? 2 * kb.size(2) : std::max<int64_t>(need, 64);
        const int64_t capacity = std::max(need, std::min(grown, context));
        at::Tensor nk = at::empty({k.size(0), k.size(1), capacity, k.size(3)}, k.options());
        at::Tensor nv = at::empty({v.size(0), v.size(1), capacity, v.size(3)}, v.options());
        if (past > 0) {
            nk.narrow(2, 0, past).copy_(kb.narrow(2, 0, past));
            nv.narrow(2, 0, past).copy_(vb.narrow(2, 0, past));
        }
        kb = nk;
        vb = nv;
    }
    kb.narrow(2, past, T).copy_(k);
    vb.narrow(2, past, T).copy_(v);
    return {kb.narrow(2, 0, need), vb.narrow(2, 0, need)};
}

// softmax(q kᵀ · scale + mask) v for q [B, heads, T, hd] and k, v [B, kv_heads, S, hd]. With
// grouped-query attention the g query heads of each KV head are stacked into one [g·T, hd]
// block (head h uses KV head h / g, as repeat_interleave would pair them), so K and V are read
// where they are instead of being copied g times.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                  double scale) {
    const int64_t B = q.size(0), nh = q.size(1), T = q.size(2), hd = q.size(3), nkv = k.size(1);
    const int64_t g = nh / nkv;
    const at::Tensor qg = g == 1 ? q : q.reshape({B, nkv, g * T, hd});
    // Scaled and masked in place: [B, heads, T, S] is the forward's largest activation (134 MB
    // for 4 windows of 512 tokens and 32 heads), and each fresh copy of it is memory the
    // allocator maps and the kernel zeroes again. (Autograd allows both: matmul's backward
    // reads its inputs, not its output.)
    at::Tensor scores = at::matmul(qg, k.transpose(-2, -1));  // [B, kv_heads, g·T, S]
    scores.mul_(scale);
    if (mask.defined()) {  // [T, S], broadcast over each group's g blocks of T rows (no g-fold copy per layer)
        if (g == 1)
            scores.add_(mask);
        else
            scores.view({B, nkv, g, T, -1}).add_(mask);
    }
    at::Tensor probs = at::softmax(scores.to(at::kFloat), -1).to(q.scalar_type());
    at::Tensor out = at::matmul(probs, v);  // [B, kv_heads, g·T, hd]
    return g == 1 ? out : out.reshape({B, nh, T, hd});
}

} // namespace

LlamaPositionTables llamaPositionTables(const LlamaConfig& cfg, int64_t start, int64_t length,
                                        const at::TensorOptions& opts) {
    LlamaPositionTables tables;
    cfg.checkAttentionSpan(start + length, "a window");
    std::tie(tables.cos, tables.sin) = ropeTables(cfg, start, length, opts);
    tables.mask = causalMask(start, length, opts);
    return tables;
}

at::Tensor llamaAttentionBranch(const LlamaConfig& cfg, const LlamaLayerWeights& L, int64_t l, const at::Tensor& h,
                                const LlamaPositionTables& tables, KvCache* cache, const ActivationTap& tap) {
    const int64_t B = h.size(0), T = h.size(1), hd = cfg.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const int64_t nh = cfg.num_heads[l], nkv = cfg.num_kv_heads[l];
    at::Tensor q = denseLayer(h, L.wq, L.wq_bias).view({B, T, nh, hd});
    at::Tensor k = denseLayer(h, L.wk, L.wk_bias).view({B, T, nkv, hd});
    at::Tensor v = denseLayer(h, L.wv, L.wv_bias).view({B, T, nkv, hd}).transpose(1, 2);
    if (L.q_norm.defined()) q = rmsNorm(q, L.q_norm, cfg.rms_norm_eps);  // Qwen3: per head, before RoPE
    if (L.k_norm.defined()) k = rmsNorm(k, L.k_norm, cfg.rms_norm_eps);
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    q = applyRope(q, tables.cos, tables.sin, cfg.rope_layout);
    k = applyRope(k, tables.cos, tables.sin, cfg.rope_layout);
    if (cache) std::tie(k, v) = appendToCache(*cache, l, k, v, cfg.max_position_embeddings);
    at::Tensor attn = attend(q, k, v, tables.mask, scale).transpose(1, 2).reshape({B, T, nh * hd});
    if (tap) tap(l, TapSite::AttentionOutputInput, attn);
    return denseLayer(attn, L.wo, L.wo_bias);
}

at::Tensor llamaMlpBranch(const LlamaConfig&, const LlamaLayerWeights& L, int64_t l, const at::Tensor& h,
                          const ActivationTap& tap) {
    at::Tensor act = denseLayer(h, L.w_gate);
    const at::Tensor up = denseLayer(h, L.w_up);
    if (act.requires_grad() || up.requires_grad()) {
        act = at::silu(act) * up;  // autograd (LLM-Pruner's gradients) keeps both factors
    } else {
        // In place: two [tokens, D_inter] activations fewer per layer for the allocator to map
        // and the kernel to zero (46 MB each at 1.1B for 2,048 tokens).
        at::silu_(act);
        act.mul_(up);
    }
    if (tap) tap(l, TapSite::MlpDownInput, act);
    return denseLayer(act, L.w_down, L.w_down_bias);
}

at::Tensor llamaBlockForward(const LlamaConfig& cfg, const LlamaLayerWeights& L, int64_t l, at::Tensor x,
                             const LlamaPositionTables& tables, KvCache* cache, const ActivationTap& tap) {
    if (cfg.num_heads[l] > 0) {
        x = x + llamaAttentionBranch(cfg, L, l, rmsNorm(x, L.attn_norm, cfg.rms_norm_eps), tables, cache, tap);
    } else if (L.wo_bias.defined()) {
        // Every head pruned: FLAP's bias compensation leaves the block's mean output.
        x = x + L.wo_bias;
    }
    if (cfg.intermediate_size[l] > 0) {
        x = x + llamaMlpBranch(cfg, L, l, rmsNorm(x, L.ffn_norm, cfg.rms_norm_eps), tap);
    } else if (L.w_down_bias.defined()) {
        x = x + L.w_down_bias;
    }
    return x;
}

at::Tensor llamaRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, int64_t width) {
    return rmsNorm(x, weight, eps, width);
}

at::Tensor llamaLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
    return denseLayer(x, w, bias);
}

namespace {

// Rotary cos/sin of `T` positions after cache.length, sliced from the cache's tables (grown by
// doubling, so that a decoded token does not rebuild them in float64).
std::pair<at::Tensor, at::Tensor> cachedRope(const LlamaConfig& cfg, KvCache& cache, int64_t T,
                                             const at::TensorOptions& opts) {
    const int64_t start = cache.length;
    at::Tensor& tc = cache.ropeCos;
    if (!tc.defined() || tc.size(0) < start + T || tc.dtype() != opts.dtype() || tc.device() != opts.device()) {
        const int64_t grown = tc.defined() ? 2 * tc.size(0) : 256;
        const int64_t capacity = std::max(start + T, std::min(grown, cfg.max_position_embeddings));
        std::tie(cache.ropeCos, cache.ropeSin) = ropeTables(cfg, 0, capacity, opts);
    }
    return {cache.ropeCos.narrow(0, start, T), cache.ropeSin.narrow(0, start, T)};
}

} // namespace

LlamaPositionTables llamaCachedPositionTables(const LlamaConfig& cfg, KvCache& cache, int64_t T,
                                              const at::TensorOptions& opts) {
    cfg.checkAttentionSpan(cache.length + T, "a sequence");
    LlamaPositionTables tables;
    std::tie(tables.cos, tables.sin) = cachedRope(cfg, cache, T, opts);
    tables.mask = causalMask(cache.length, T, opts);
    return tables;
}

namespace {

// The dtype the activations are computed in: the weights' own, except that 16-bit matrices on
// the CPU (kept as a checkpoint stores them, llamaTensorOnRuntime) run with float32 activations.
at::TensorOptions activationOptions(const at::Tensor& embed) {
    if (embed.device().is_cpu() && (embed.scalar_type() == at::kBFloat16 || embed.scalar_type() == at::kHalf))
        return embed.options().dtype(at::kFloat);
    return embed.options();
}

} // namespace

at::Tensor llamaForward(const LlamaConfig& cfg, const LlamaWeights& w, const at::Tensor& ids, KvCache* cache,
                        const ActivationTap& tap) {
    if (ids.dim() != 2) throw Error("llamaForward: ids must be [batch, tokens]");
    const int64_t start = cache ? cache->length : 0;
    cfg.checkAttentionSpan(start + ids.size(1), "a sequence");
    const int64_t T = ids.size(1);
    const at::TensorOptions activations = activationOptions(w.embed);
    at::Tensor cos, sin;
    if (cache) {
        std::tie(cos, sin) = cachedRope(cfg, *cache, T, activations);
    } else {
        std::tie(cos, sin) = ropeTables(cfg, start, T, activations);
    }
    // Rows gathered from the stored table, then widened (a no-op for float32 weights).
    return llamaForwardEmbeddings(cfg, w, at::embedding(w.embed, ids).to(activations.dtype()), cos, sin, cache, tap);
}

at::Tensor llamaForwardEmbeddings(const LlamaConfig& cfg, const LlamaWeights& w, const at::Tensor& embeddings,
                                  const at::Tensor& cos, const at::Tensor& sin, KvCache* cache,
                                  const ActivationTap& tap) {
    if (embeddings.dim() != 3) throw Error("llamaForward: input embeddings must be [batch, tokens, hidden]");
    const int64_t T = embeddings.size(1), hd = cfg.head_dim;
    const int64_t start = cache ? cache->length : 0;
    if (start + T > cfg.max_position_embeddings)
        throw Error("sequence of " + std::to_string(start + T) + " positions exceeds the model's context of " +
                    std::to_string(cfg.max_position_embeddings));
    if (cos.size(0) != T || cos.size(1) != hd / 2 || sin.sizes() != cos.sizes())
        throw Error("llamaForward: rotary tables must be [tokens, head_dim/2]");
    if (cache && cache->k.empty()) {
        cache->k.resize(cfg.num_layers);
        cache->v.resize(cfg.num_layers);
    }
    const LlamaPositionTables tables{cos, sin, causalMask(start, T, activationOptions(w.embed))};
    at::Tensor x = embeddings;  // [B, T, D]
    for (int64_t l = 0; l < cfg.num_layers; ++l) x = llamaBlockForward(cfg, w.layers[l], l, x, tables, cache, tap);
    if (cache) cache->length = start + T;
    return llamaOutputLogits(cfg, w.final_norm, w.lm_head, x);
}

at::Tensor llamaOutputLogits(const LlamaConfig& cfg, const at::Tensor& finalNorm, const at::Tensor& lmHead,
                             const at::Tensor& x) {
    return denseLayer(rmsNorm(x, finalNorm, cfg.rms_norm_eps), lmHead);
}

bool llamaKeepsStoredDtype(const at::Tensor& t, const Runtime& rt) {
    return t.defined() && t.dim() == 2 && t.device().is_cpu() && rt.device.is_cpu() && rt.dtype == at::kFloat &&
           (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

at::Tensor llamaTensorOnRuntime(const at::Tensor& t, const Runtime& rt) {
    if (!t.defined()) return t;
    if (llamaKeepsStoredDtype(t, rt)) return t.contiguous();  // a mapped file's view: itself
    return t.to(rt.device, rt.dtype).contiguous();
}

namespace {

at::Tensor toRuntime(const at::Tensor& t, const Runtime& rt) { return llamaTensorOnRuntime(t, rt); }

} // namespace

LlamaLayerWeights llamaLayerOnRuntime(const LlamaLayerWeights& L, const Runtime& runtime) {
    LlamaLayerWeights d;
    d.attn_norm = toRuntime(L.attn_norm, runtime);
    d.wq = toRuntime(L.wq, runtime);
    d.wk = toRuntime(L.wk, runtime);
    d.wv = toRuntime(L.wv, runtime);
    d.wq_bias = toRuntime(L.wq_bias, runtime);
    d.wk_bias = toRuntime(L.wk_bias, runtime);
    d.wv_bias = toRuntime(L.wv_bias, runtime);
    d.q_norm = toRuntime(L.q_norm, runtime);
    d.k_norm = toRuntime(L.k_norm, runtime);
    d.wo = toRuntime(L.wo, runtime);
    d.wo_bias = toRuntime(L.wo_bias, runtime);
    d.ffn_norm = toRuntime(L.ffn_norm, runtime);
    d.w_gate = toRuntime(L.w_gate, runtime);
    d.w_up = toRuntime(L.w_up, runtime);
    d.w_down = toRuntime(L.w_down, runtime);
    d.w_down_bias = toRuntime(L.w_down_bias, runtime);
    return d;
}

LlamaModel::LlamaModel(LlamaCheckpoint checkpoint, Runtime runtime)
    : checkpoint_(std::move(checkpoint)), runtime_(runtime) {
    // A mapped checkpoint's values were not read at load: checked here, block by block, before
    // the model can run (a NaN in the file names its file, tensor and index, not a layer's output).
    checkAllWeightValues(checkpoint_);
    checkpoint_.valuesChecked = true;
    const LlamaWeights& src = checkpoint_.weights;
    const bool tied = src.lm_head.defined() && src.lm_head.is_same(src.embed);
    weights_.embed = toRuntime(src.embed, runtime_);
    weights_.final_norm = toRuntime(src.final_norm, runtime_);
    weights_.lm_head = tied ? weights_.embed : toRuntime(src.lm_head, runtime_);
    weights_.layers.reserve(src.layers.size());
    for (const LlamaLayerWeights& L : src.layers) weights_.layers.push_back(llamaLayerOnRuntime(L, runtime_));
}

at::Tensor CausalLm::logits(const at::Tensor& ids, KvCache* cache, bool keepOnDevice, const ActivationTap& tap) const {
    c10::InferenceMode guard;
    at::Tensor out = forward(ids.to(runtime().device, at::kLong), cache, tap).to(at::kFloat);
    return keepOnDevice ? out : out.cpu();
}

at::Tensor LlamaModel::forward(const at::Tensor& ids, KvCache* cache, const ActivationTap& tap) const {
    return llamaForward(config(), weights_, ids, cache, tap);
}

} // namespace npw
