// LLM-Pruner without recovery (llm_pruner.h).
#include "core/prune/llm_pruner.h"

#include "core/models/parameter_count.h"
#include "core/prune/apply.h"
#include "core/util/error.h"
#include "core/util/finite.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>

namespace npw {

namespace {

// The seven prunable weights of a block, in one fixed order.
std::vector<at::Tensor*> prunable(LlamaLayerWeights& L) {
    return {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
}

// float32 (a copy only when the runtime's dtype is another); detach() makes a new autograd leaf
// that shares the weights' storage, so a float32 model is not copied.
// A weight made inside InferenceMode cannot take part in autograd: it is copied instead.
at::Tensor floatCopy(const at::Tensor& t) {
    if (!t.defined()) return t;
    return t.is_inference() ? t.to(at::kFloat).clone() : t.detach().to(at::kFloat).detach();
}

// A float32 view (or copy) of a block whose prunable weights are autograd leaves.
LlamaLayerWeights leafCopy(const LlamaLayerWeights& src) {
    LlamaLayerWeights L = src;
    for (at::Tensor* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wq_bias, &L.wk_bias, &L.wv_bias, &L.q_norm, &L.k_norm,
                          &L.wo, &L.wo_bias, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down, &L.w_down_bias})
        *t = floatCopy(*t);
    for (at::Tensor* t : prunable(L))
        if (t->numel() > 0) t->requires_grad_(true);
    return L;
}


} // namespace

std::pair<int64_t, int64_t> llmPrunerDefaultLayers(int64_t layers) {
    const int64_t skipFirst = (layers + 7) / 8, skipLast = (layers + 15) / 16;
    return {skipFirst, std::max(skipFirst, layers - skipLast)};
}

int64_t llmPrunerRemoved(int64_t units, double r, int64_t width) {
    if (units <= 1 || r <= 0) return 0;
    // torch-pruning's MetaPruner (LLM-Pruner's copy): n = C − int(C·(1 − r)) of the C = units·width
    // output channels of the root layer, then n // width whole units (heads: width = the q rows of
    // one unit). The epsilon keeps exact products such as 0.75·8 from rounding down to 5.
    const int64_t channels = units * width;
    const auto kept = static_cast<int64_t>(std::floor((1.0 - r) * static_cast<double>(channels) + 1e-9));
    return std::min(units - 1, (channels - kept) / width);  // one unit stays
}

TaylorGradients taylorGradients(const LlamaModel& model, const CalibrationSet& set, int64_t firstLayer, bool fisher,
                                const ProgressFn& progress) {
    // Autograd on even when a caller runs inside InferenceMode (a GUI worker, a test).
    c10::InferenceMode autogradAllowed(false);
    const LlamaConfig& cfg = model.config();
    const LlamaWeights& w = model.deviceWeights();
    const int64_t L = cfg.num_layers, T = set.seqlen, n = static_cast<int64_t>(set.windows.size());
    if (n == 0 || T < 2) throw Error("llm-pruner: the calibration set needs windows of at least 2 tokens");
    if (firstLayer < 0 || firstLayer > L) throw Error("llm-pruner: first layer " + std::to_string(firstLayer) + " out of range");
    TaylorGradients out;
    out.first = firstLayer;
    out.windows = n;
    out.grad.resize(static_cast<size_t>(L));
    if (fisher) out.fisher.resize(static_cast<size_t>(L));
    std::vector<LlamaLayerWeights> leaves(static_cast<size_t>(L));
    // param_first: the leaves' .grad accumulates ∂(L_i/n)/∂w over the windows (one float32 copy of
    // the pruned layers' weights). param_mix needs each window's own gradient for F: it is moved
    // into two accumulators block by block and the block's .grad freed again.
    for (int64_t l = firstLayer; l < L; ++l) {
        const auto i = static_cast<size_t>(l);
        leaves[i] = leafCopy(w.layers[i]);
        if (fisher) {
            std::vector<at::Tensor*> src = prunable(leaves[i]), g = prunable(out.grad[i]), f = prunable(out.fisher[i]);
            for (size_t k = 0; k < src.size(); ++k) {
                *g[k] = at::zeros_like(src[k]->detach());
                *f[k] = at::zeros_like(src[k]->detach());
            }
        }
    }
    const at::Tensor finalNorm = floatCopy(w.final_norm), head = floatCopy(w.lm_head);
    const auto f32 = w.embed.options().dtype(at::kFloat);
    const LlamaPositionTables tables32 = llamaPositionTables(cfg, 0, T, f32);
    double lossSum = 0;
    for (int64_t b = 0; b < n; ++b) {
        const auto& window = set.windows[static_cast<size_t>(b)];
        at::Tensor ids = at::empty({1, T}, at::kLong);
        for (int64_t t = 0; t < T; ++t) {
            const int32_t id = window[static_cast<size_t>(t)];
            if (id < 0 || id >= cfg.vocab_size)
                throw Error("llm-pruner: token id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(cfg.vocab_size));
            ids[0][t] = id;
        }
        ids = ids.to(w.embed.device());
        // Forward without autograd, keeping each pruned block's input (the checkpoints).
        std::vector<at::Tensor> inputs(static_cast<size_t>(L));
        at::Tensor x;
        {
            at::NoGradGuard noGrad;
            // A float32 runtime over a mapped bfloat16/float16 file keeps the weights as stored but
            // runs float32 activations, as its forward does (the table's rows widened exactly).
            x = at::embedding(w.embed, ids);
            if (model.runtime().dtype == at::kFloat) x = x.to(at::kFloat);
            const LlamaPositionTables tables = llamaPositionTables(cfg, 0, T, x.options());
            for (int64_t l = 0; l < firstLayer; ++l) x = llamaBlockForward(cfg, w.layers[static_cast<size_t>(l)], l, x, tables);
            x = x.to(at::kFloat);
            for (int64_t l = firstLayer; l < L; ++l) {
                inputs[static_cast<size_t>(l)] = x;
                x = llamaBlockForward(cfg, leaves[static_cast<size_t>(l)], l, x, tables32);
            }
        }
        at::AutoGradMode gradOn(true);
        // The head: RMSNorm, classifier, the window's mean next-token cross-entropy (the LM loss).
        at::Tensor top = x.detach().requires_grad_(true);
        at::Tensor normed = top * at::rsqrt(top.pow(2).mean(-1, true) + cfg.rms_norm_eps) * finalNorm;
        at::Tensor logits = at::linear(normed, head);
        at::Tensor loss = at::cross_entropy_loss(logits[0].narrow(0, 0, T - 1), ids[0].narrow(0, 1, T - 1));
        lossSum += loss.item<double>();
        // The gradient of the mean over windows is the mean of the windows' gradients (equal lengths).
        (fisher ? loss : loss / static_cast<double>(n)).backward();
        at::Tensor gradOut = top.grad();
        // Backward one block at a time, recomputed from its input (activation checkpointing).
        for (int64_t l = L - 1; l >= firstLayer; --l) {
            const auto i = static_cast<size_t>(l);
            at::Tensor in = inputs[i].detach().requires_grad_(l > firstLayer);
            at::Tensor y = llamaBlockForward(cfg, leaves[i], l, in, tables32);
            y.backward(gradOut);
            if (l > firstLayer) gradOut = in.grad();
            inputs[i] = at::Tensor();
            if (!fisher) continue;
            std::vector<at::Tensor*> src = prunable(leaves[i]), g = prunable(out.grad[i]), f = prunable(out.fisher[i]);
            for (size_t k = 0; k < src.size(); ++k) {
                const at::Tensor gi = src[k]->grad();
                if (!gi.defined()) continue;
                at::NoGradGuard noGrad;
                // F as hf_prune.py accumulates it: grad² / n per example.
                g[k]->add_(gi, 1.0 / static_cast<double>(n));
                f[k]->add_(gi * gi, 1.0 / static_cast<double>(n));
                src[k]->mutable_grad() = at::Tensor();
            }
        }
        reportProgress(progress, "taylor gradients", static_cast<double>(b + 1), static_cast<double>(n));
    }
    if (!fisher)
        for (int64_t l = firstLayer; l < L; ++l) {
            const auto i = static_cast<size_t>(l);
            std::vector<at::Tensor*> src = prunable(leaves[i]), g = prunable(out.grad[i]);
            for (size_t k = 0; k < src.size(); ++k)
                *g[k] = src[k]->grad().defined() ? src[k]->grad() : at::zeros_like(src[k]->detach());
        }
    out.loss = lossSum / static_cast<double>(n);
    return out;
}

GroupImportance llmPrunerImportance(const LlamaWeights& weights, const LlamaConfig& cfg, const TaylorGradients& g,
                                    TaylorKind kind, int64_t start, int64_t end) {
    GroupImportance out;
    out.heads.resize(static_cast<size_t>(cfg.num_layers));
    out.channels.resize(static_cast<size_t>(cfg.num_layers));
    if (start < g.first) throw Error("llm-pruner: importance asked from layer " + std::to_string(start) +
                                     " but gradients start at " + std::to_string(g.first));
    at::NoGradGuard noGrad;
    const int64_t hd = cfg.head_dim;
    for (int64_t l = start; l < end; ++l) {
        const auto i = static_cast<size_t>(l);
        const LlamaLayerWeights& W = weights.layers[i];
        const LlamaLayerWeights& G = g.grad[i];
        // Element-wise salience in float64 (w·∂L/∂w, less ½w²F for param_mix).
        auto salience = [&](const at::Tensor& w, const at::Tensor& grad, const at::Tensor* fisher) {
            at::Tensor s = w.to(at::kDouble).cpu() * grad.to(at::kDouble).cpu();
            if (kind == TaylorKind::ParamMix) {
                const at::Tensor wd = w.to(at::kDouble).cpu();
                s = s - 0.5 * wd * fisher->to(at::kDouble).cpu() * wd;
            }
            return s;
        };
        const LlamaLayerWeights* F = kind == TaylorKind::ParamMix ? &g.fisher[i] : nullptr;
        const at::Tensor sq = salience(W.wq, G.wq, F ? &F->wq : nullptr), sk = salience(W.wk, G.wk, F ? &F->wk : nullptr),
                         sv = salience(W.wv, G.wv, F ? &F->wv : nullptr), so = salience(W.wo, G.wo, F ? &F->wo : nullptr),
                         sg = salience(W.w_gate, G.w_gate, F ? &F->w_gate : nullptr),
                         su = salience(W.w_up, G.w_up, F ? &F->w_up : nullptr),
                         sd = salience(W.w_down, G.w_down, F ? &F->w_down : nullptr);
        // Rows of q/k/v/gate/up and columns of o/down: element-wise kinds sum |s| over the row or
        // column; vectorize takes |Σ s| of each row or column (LLM-Pruner's vector-wise importance).
        const bool vec = kind == TaylorKind::Vectorize;
        auto rows = [&](const at::Tensor& s) { return (vec ? s.sum(1).abs() : s.abs().sum(1)).contiguous(); };
        auto cols = [&](const at::Tensor& s) { return (vec ? s.sum(0).abs() : s.abs().sum(0)).contiguous(); };
        const int64_t nh = cfg.num_heads[i], nkv = cfg.num_kv_heads[i], inter = cfg.intermediate_size[i];
        if (nh > 0) {
            const int64_t group = nh / nkv;
            // Per channel of the query side (q rows + o columns), per channel of k and v rows.
            const at::Tensor qSide = rows(sq) + cols(so), kvSide = rows(sk) + rows(sv);
            const at::Tensor perGroup = qSide.view({nkv, group * hd}).sum(1) + kvSide.view({nkv, hd}).sum(1);
            for (int64_t u = 0; u < nkv; ++u) {
                out.heads[i].push_back(perGroup[u].item<double>());
                requireFinite(out.heads[i].back(), "llm-pruner: layer " + std::to_string(l) + "'s importance of head group " +
                                                       std::to_string(u), kNonFiniteHint);
            }
        }
        if (inter > 0) {
            const at::Tensor perChannel = rows(sg) + rows(su) + cols(sd);
            const double* p = perChannel.data_ptr<double>();
            out.channels[i].assign(p, p + inter);
            for (int64_t c = 0; c < inter; ++c)
                requireFinite(p[c], "llm-pruner: layer " + std::to_string(l) + "'s importance of MLP channel " +
                                        std::to_string(c), kNonFiniteHint);
        }
    }
    return out;
}

std::pair<int64_t, int64_t> llmPrunerLayers(const LlamaConfig& cfg, const BaselineOptions& options) {
    auto [start, end] = llmPrunerDefaultLayers(cfg.num_layers);
    if (options.layerStart >= 0) start = options.layerStart;
    if (options.layerEnd >= 0) end = options.layerEnd;
    if (start < 0 || end > cfg.num_layers || start > end)
        throw Error("llm-pruner: layer range [" + std::to_string(start) + ", " + std::to_string(end) +
                    ") does not fit the model's " + std::to_string(cfg.num_layers) + " layers");
    return {start, end};
}

LlmPrunerScores llmPrunerScores(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                                const ProgressFn& progress) {
    LlmPrunerScores out;
    std::tie(out.start, out.end) = llmPrunerLayers(model.config(), options);
    out.taylor = options.taylor;
    const TaylorGradients grads = taylorGradients(model, set, out.start, options.taylor == TaylorKind::ParamMix, progress);
    out.loss = grads.loss;
    out.importance = llmPrunerImportance(model.deviceWeights(), model.config(), grads, options.taylor, out.start, out.end);
    return out;
}

LlmPrunerSelection llmPrunerSelect(const LlamaConfig& cfg, const BaselineOptions& options,
                                   const std::function<const LlmPrunerScores&()>& importances) {
    // Not a structured binding: clang 14 (the fuzz tree's compiler) cannot capture one in a lambda.
    const std::pair<int64_t, int64_t> layers = llmPrunerLayers(cfg, options);
    const int64_t start = layers.first, end = layers.second;
    const int64_t D = cfg.hidden_size, hd = cfg.head_dim;
    auto headCost = [&](size_t l) {
        const int64_t g = cfg.num_kv_heads[l] > 0 ? cfg.num_heads[l] / cfg.num_kv_heads[l] : 0;
        return D * (2 * g * hd + 2 * hd);
    };
    // A unit's q rows: the channels torch-pruning counts on the root layer (q_proj) before dividing.
    auto headWidth = [&](size_t l) { return cfg.num_kv_heads[l] > 0 ? cfg.num_heads[l] / cfg.num_kv_heads[l] * hd : 1; };
    auto removedAt = [&](double r) {
        int64_t removed = 0;
        for (int64_t l = start; l < end; ++l) {
            const auto i = static_cast<size_t>(l);
            removed += llmPrunerRemoved(cfg.num_kv_heads[i], r, headWidth(i)) * headCost(i) +
                       llmPrunerRemoved(cfg.intermediate_size[i], r) * 3 * D;
        }
        return removed;
    };
    const double target = options.ratio * static_cast<double>(prunableParameters(cfg));
    double r = options.layerRatio;
    bool reached = true;
    if (std::isnan(r)) {
        // The smallest r whose rounded removal reaches ρ (removedAt is a non-decreasing step function).
        double lo = 0, hi = 1;
        if (static_cast<double>(removedAt(1.0)) < target) {
            r = 1.0;
            reached = false;
        } else if (target <= 0) {
            r = 0;
        } else {
            for (int it = 0; it < 60; ++it) {
                const double mid = 0.5 * (lo + hi);
                (static_cast<double>(removedAt(mid)) >= target ? hi : lo) = mid;
            }
            r = hi;
        }
    } else if (!(r >= 0 && r < 1)) {
        throw Error("llm-pruner: per-layer ratio " + std::to_string(r) + " is outside [0, 1)");
    }

    LlmPrunerSelection out;
    Mask& mask = out.mask;
    mask.keepHeads.resize(static_cast<size_t>(cfg.num_layers));
    mask.keepChannels.resize(static_cast<size_t>(cfg.num_layers));
    for (int64_t l = 0; l < cfg.num_layers; ++l) {
        const auto i = static_cast<size_t>(l);
        mask.keepHeads[i].assign(static_cast<size_t>(cfg.num_kv_heads[i]), true);
        mask.keepChannels[i].assign(static_cast<size_t>(cfg.intermediate_size[i]), true);
    }
    if (options.llmPrunerGlobal && end > start && (target > 0 || !std::isnan(options.layerRatio))) {
        // Global: one ranking of every unit in the range by raw importance; the fewest lowest
        // units whose parameters reach ρ (or, with layerRatio, n − ⌊n(1 − r)⌋ of the n units).
        const LlmPrunerScores* scores = &importances();
        out.scored = true;
        struct Unit { double importance; size_t layer; bool head; size_t index; };
        std::vector<Unit> units;
        for (int64_t l = start; l < end; ++l) {
            const auto i = static_cast<size_t>(l);
            for (size_t u = 0; u < scores->importance.heads[i].size(); ++u) units.push_back({scores->importance.heads[i][u], i, true, u});
            for (size_t u = 0; u < scores->importance.channels[i].size(); ++u) units.push_back({scores->importance.channels[i][u], i, false, u});
        }
        std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.importance < b.importance; });
        const auto n = static_cast<int64_t>(units.size());
        int64_t count = 0;
        if (!std::isnan(options.layerRatio)) {
            count = n - static_cast<int64_t>(std::floor((1.0 - options.layerRatio) * static_cast<double>(n) + 1e-9));
            reached = true;
        } else {
            double removed = 0;
            while (count < n && removed < target) {
                const Unit& u = units[static_cast<size_t>(count++)];
                removed += static_cast<double>(u.head ? headCost(u.layer) : 3 * D);
            }
            reached = removed >= target;
        }
        for (int64_t k = 0; k < count; ++k) {
            const Unit& u = units[static_cast<size_t>(k)];
            (u.head ? mask.keepHeads : mask.keepChannels)[u.layer][u.index] = false;
        }
        r = n > 0 ? static_cast<double>(count) / static_cast<double>(n) : 0.0;
    } else if (r > 0 && end > start) {
        const LlmPrunerScores* scores = &importances();
        out.scored = true;
        if (scores->start != start || scores->end != end || scores->taylor != options.taylor)
            throw Error("llm-pruner: the scores were computed for another layer range or importance");
        auto dropLowest = [](const std::vector<double>& score, int64_t count, std::vector<bool>& keep) {
            std::vector<size_t> order(score.size());
            std::iota(order.begin(), order.end(), size_t(0));
            std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
            for (int64_t k = 0; k < count; ++k) keep[order[static_cast<size_t>(k)]] = false;
        };
        for (int64_t l = start; l < end; ++l) {
            const auto i = static_cast<size_t>(l);
            dropLowest(scores->importance.heads[i], llmPrunerRemoved(cfg.num_kv_heads[i], r, headWidth(i)), mask.keepHeads[i]);
            dropLowest(scores->importance.channels[i], llmPrunerRemoved(cfg.intermediate_size[i], r), mask.keepChannels[i]);
        }
    }
    out.knob = r;
    out.reached = reached;
    out.start = start;
    out.end = end;
    return out;
}

BaselineRun pruneLlmPruner(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                           const ProgressFn& progress, const LlmPrunerScores* given) {
    std::optional<LlmPrunerScores> computed;
    // The gradients only when some unit goes (ρ = 0 and an empty range need none).
    const LlmPrunerSelection chosen = llmPrunerSelect(model.config(), options, [&]() -> const LlmPrunerScores& {
        if (given) return *given;
        if (!computed) computed.emplace(llmPrunerScores(model, set, options, progress));
        return *computed;
    });
    const LlmPrunerScores* scores = given ? given : computed ? &*computed : nullptr;
    const Mask& mask = chosen.mask;
    const double r = chosen.knob;
    const bool reached = chosen.reached;
    const int64_t start = chosen.start, end = chosen.end;
    PruneSettings settings;
    settings.compensation = CompensationKind::None;
    settings.attentionUnit = AttentionUnitKind::KvGroup;
    PrunedModel pruned = applyMask(model.checkpoint(), ModelStats{}, mask, settings);
    BaselineRun run;
    run.method = baselineMethodName(BaselineMethod::LlmPruner);
    run.pruned = std::move(pruned.checkpoint);
    run.report = baselineReport(run.method, options.ratio, model.checkpoint(), run.pruned);
    run.report.layers = pruned.layers;
    for (const LayerPruneReport& p : pruned.layers) {
        run.report.removedUnits += p.kvHeadsBefore - p.kvHeadsAfter;
        run.report.removedChannels += p.channelsBefore - p.channelsAfter;
    }
    run.native = {{"knob", options.llmPrunerGlobal ? "global_unit_ratio" : "per_layer_ratio"},
                  {options.llmPrunerGlobal ? "global_unit_ratio" : "per_layer_ratio", r},
                  {"selection", options.llmPrunerGlobal ? "global (raw importance across layers and kinds)" : "uniform per layer"},
                  {"per_layer_ratio_given", !std::isnan(options.layerRatio)},
                  {"target_reached", reached},
                  {"layers_pruned", {start, end}},
                  {"taylor", taylorKindName(options.taylor)},
                  {"calibration_loss", scores ? nlohmann::json(scores->loss) : nlohmann::json(nullptr)},
                  {"attention_unit", "kv-group (its query heads' q rows and o columns, its k and v rows)"},
                  {"head_importance", scores ? nlohmann::json(scores->importance.heads) : nlohmann::json::array()},
                  {"recovery", "none (LoRA recovery is out of scope)"}};
    return run;
}

} // namespace npw
