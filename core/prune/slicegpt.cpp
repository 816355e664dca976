// SliceGPT (slicegpt.h).
#include "core/prune/slicegpt.h"
#include "core/models/non_finite.h"

#include "core/models/parameter_count.h"
#include "core/prune/export.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <filesystem>

namespace npw {

namespace {

at::Tensor f64(const at::Tensor& t) { return t.defined() ? t.detach().to(at::kDouble).cpu() : t; }
at::Tensor f32(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat).contiguous() : t; }
// Weight [out, in] times diag(scale) on its input columns.
at::Tensor foldColumns(const at::Tensor& w, const at::Tensor& scale) { return f64(w) * f64(scale).unsqueeze(0); }

} // namespace

at::Tensor slicegptBasis(const std::vector<at::Tensor>& batches, at::Tensor* values) {
    if (batches.empty()) throw Error("slicegpt: no hidden states to compute a basis from");
    const int64_t D = batches.front().size(-1);
    at::Tensor H = at::zeros({D, D}, at::kDouble);
    for (const at::Tensor& b : batches) {
        const at::Tensor x = b.reshape({-1, D}).to(at::kDouble).cpu();
        H += at::matmul(x.t(), x);
    }
    if (!allFinite(H)) throw Error("slicegpt: the hidden states hold NaN or Inf");
    const double damp = 0.01 * H.diagonal().mean().item<double>();
    H.diagonal().add_(damp);
    auto [eigenvalues, eigenvectors] = at::linalg_eigh(H);
    const at::Tensor order = at::argsort(eigenvalues, /*dim=*/0, /*descending=*/true);
    if (values) *values = eigenvalues.index_select(0, order);
    return eigenvectors.index_select(1, order);
}

int64_t slicedPrunableParameters(const LlamaConfig& c, int64_t d) {
    int64_t n = 0;
    const int64_t D = c.hidden_size, hd = c.head_dim;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const auto i = static_cast<size_t>(l);
        const int64_t dOut = l + 1 == c.num_layers ? D : d;
        n += (c.num_heads[i] + 2 * c.num_kv_heads[i]) * hd * d + d * c.num_heads[i] * hd;  // q, k, v; o
        n += 2 * c.intermediate_size[i] * d + c.intermediate_size[i] * dOut;               // gate, up; down
        n += d * d + d * dOut;                                                              // shortcuts
    }
    return n;
}

int64_t untyingExtraParameters(const LlamaConfig& c, int64_t d) { return c.tie_word_embeddings ? c.vocab_size * d : 0; }

int64_t slicegptWidthForRatio(const LlamaConfig& c, double ratio, int64_t roundInterval, bool* reached) {
    const int64_t D = c.hidden_size;
    const int64_t step = std::max<int64_t>(1, std::min(roundInterval, D));
    const double before = static_cast<double>(prunableParameters(c));
    if (reached) *reached = true;
    if (ratio <= 0) return D;
    for (int64_t d = D - D % step; d >= step; d -= step) {
        const double after = static_cast<double>(slicedPrunableParameters(c, d) + untyingExtraParameters(c, d));
        if (1.0 - after / before >= ratio) return d;
    }
    // Out of reach (shortcuts and an untied classifier cost more than slicing saves): the
    // narrowest width, reported at the ratio it achieves.
    if (reached) *reached = false;
    return step;
}

SlicedLlama sliceGpt(const LlamaModel& model, const CalibrationSet& set, int64_t d, const ProgressFn& progress) {
    c10::InferenceMode guard;
    const LlamaConfig& cfg = model.config();
    const LlamaCheckpoint& dense = model.checkpoint();  // float32, CPU
    const int64_t D = cfg.hidden_size, L = cfg.num_layers;
    if (d < 1 || d > D) throw Error("slicegpt: width " + std::to_string(d) + " outside [1, " + std::to_string(D) + "]");
    if (set.windows.empty()) throw Error("slicegpt: the calibration set has no windows");
    // The calibration runs in float32 on the model's device (the covariances in float64).
    const c10::Device device = model.runtime().device;
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
    const int64_t perBatch = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, set.seqlen));
    std::vector<at::Tensor> ids;
    for (size_t first = 0; first < set.windows.size(); first += static_cast<size_t>(perBatch)) {
        const size_t count = std::min(set.windows.size() - first, static_cast<size_t>(perBatch));
        at::Tensor t = at::empty({static_cast<int64_t>(count), set.seqlen}, at::kLong);
        auto acc = t.accessor<int64_t, 2>();
        for (size_t b = 0; b < count; ++b)
            for (int64_t i = 0; i < set.seqlen; ++i) {
                const int32_t id = set.windows[first + b][static_cast<size_t>(i)];
                if (id < 0 || id >= cfg.vocab_size)
                    throw Error("slicegpt: token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(cfg.vocab_size));
                acc[static_cast<int64_t>(b)][i] = id;
            }
        ids.push_back(t.to(device));
    }
    const LlamaPositionTables tables = llamaPositionTables(cfg, 0, set.seqlen, opts);
    const double totalSteps = 2.0 * static_cast<double>(L) + 1.0;
    double step = 0;

    // Step 0: the embedding's output and its basis.
    std::vector<at::Tensor> signal;  // hidden states in the original basis, [B, T, D] per batch
    signal.reserve(ids.size());
    const at::Tensor embed = dense.weights.embed.to(opts);
    for (const at::Tensor& t : ids) signal.push_back(at::embedding(embed, t));
    at::Tensor Q = slicegptBasis(signal);  // [D, D] float64
    at::Tensor Qd = Q.narrow(1, 0, d);
    SlicedWeights w;
    w.embed = f32(at::matmul(f64(dense.weights.embed), Qd));
    std::vector<at::Tensor> x;  // the sliced model's hidden states, [B, T, d_in]
    x.reserve(signal.size());
    for (const at::Tensor& s : signal) x.push_back(at::matmul(s, Qd.to(opts)));
    signal.clear();
    reportProgress(progress, "slicegpt", ++step, totalSteps);

    for (int64_t l = 0; l < L; ++l) {
        const LlamaLayerWeights& src = dense.weights.layers[static_cast<size_t>(l)];
        SlicedLayerWeights S;
        // Readers of the stream: fold the norm's scale, rotate by Q, keep d columns.
        const bool heads = cfg.num_heads[static_cast<size_t>(l)] > 0;
        if (heads) {
            S.wq = f32(at::matmul(foldColumns(src.wq, src.attn_norm), Qd));
            S.wk = f32(at::matmul(foldColumns(src.wk, src.attn_norm), Qd));
            S.wv = f32(at::matmul(foldColumns(src.wv, src.attn_norm), Qd));
            S.wq_bias = src.wq_bias, S.wk_bias = src.wk_bias, S.wv_bias = src.wv_bias;
            S.q_norm = src.q_norm, S.k_norm = src.k_norm;
        }
        // The residual after attention, in the original basis: x·Q_dᵀ + o_proj(attention).
        SlicedLayerWeights run = S;
        for (at::Tensor* t : {&run.wq, &run.wk, &run.wv}) *t = t->defined() ? t->to(opts) : *t;
        run.wo = heads ? src.wo.to(opts) : at::Tensor();
        run.wo_bias = src.wo_bias.defined() ? src.wo_bias.to(opts) : at::Tensor();
        run.attn_shortcut = Qd.t().to(opts);  // [d, D]: back to the original basis
        std::vector<at::Tensor> mid;
        mid.reserve(x.size());
        for (const at::Tensor& xb : x)
            mid.push_back(at::matmul(xb, run.attn_shortcut) + slicedAttention(cfg, run, l, xb, tables));
        const at::Tensor Qm = slicegptBasis(mid), Qmd = Qm.narrow(1, 0, d);
        if (heads) S.wo = f32(at::matmul(Qmd.t(), f64(src.wo)));
        if (src.wo_bias.defined()) S.wo_bias = f32(at::matmul(f64(src.wo_bias), Qmd));
        S.attn_shortcut = f32(at::matmul(Qd.t(), Qmd));
        for (auto& m : mid) m = at::matmul(m, Qmd.to(opts));  // the sliced stream after attention
        reportProgress(progress, "slicegpt", ++step, totalSteps);

        const bool channels = cfg.intermediate_size[static_cast<size_t>(l)] > 0;
        if (channels) {
            S.w_gate = f32(at::matmul(foldColumns(src.w_gate, src.ffn_norm), Qmd));
            S.w_up = f32(at::matmul(foldColumns(src.w_up, src.ffn_norm), Qmd));
        }
        SlicedLayerWeights runMlp;
        runMlp.w_gate = channels ? S.w_gate.to(opts) : at::Tensor();
        runMlp.w_up = channels ? S.w_up.to(opts) : at::Tensor();
        runMlp.w_down = channels ? src.w_down.to(opts) : at::Tensor();
        runMlp.w_down_bias = src.w_down_bias.defined() ? src.w_down_bias.to(opts) : at::Tensor();
        runMlp.mlp_shortcut = Qmd.t().to(opts);
        std::vector<at::Tensor> out;
        out.reserve(mid.size());
        for (const at::Tensor& m : mid) out.push_back(at::matmul(m, runMlp.mlp_shortcut) + slicedMlp(cfg, runMlp, l, m));
        mid.clear();
        // The last block feeds the classifier at full width, unrotated (SliceGPT leaves the head
        // unsliced by default; rotating a full-width stream would change nothing).
        const bool last = l + 1 == L;
        Q = last ? at::eye(D, at::kDouble) : slicegptBasis(out);
        Qd = last ? Q : Q.narrow(1, 0, d);
        if (channels) S.w_down = f32(at::matmul(Qd.t(), f64(src.w_down)));
        if (src.w_down_bias.defined()) S.w_down_bias = f32(at::matmul(f64(src.w_down_bias), Qd));
        S.mlp_shortcut = f32(at::matmul(Qmd.t(), Qd));
        x.clear();
        if (!last)
            for (const at::Tensor& o : out) x.push_back(at::matmul(o, Qd.to(opts)));
        w.layers.push_back(std::move(S));
        reportProgress(progress, "slicegpt", ++step, totalSteps);
    }
    // The classifier with the final norm's scale folded in (untied from a tied embedding).
    w.lm_head = f32(foldColumns(dense.weights.lm_head, dense.weights.final_norm));
    return SlicedLlama(cfg, std::move(w), model.runtime(), dense.tokenizerPath);
}

BaselineRun pruneSliceGpt(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                          const ProgressFn& progress) {
    const LlamaConfig& cfg = model.config();
    if (cfg.family != ModelFamily::Llama && cfg.family != ModelFamily::Mistral && cfg.family != ModelFamily::Qwen2 &&
        cfg.family != ModelFamily::Qwen3)
        throw Error("slicegpt: unsupported model family");
    bool reached = true;
    const int64_t d = slicegptWidthForRatio(cfg, options.ratio, options.roundInterval, &reached);
    auto sliced = std::make_shared<SlicedLlama>(sliceGpt(model, set, d, progress));
    BaselineRun run;
    run.method = baselineMethodName(BaselineMethod::SliceGpt);
    run.sliced = sliced;
    PruneReport& r = run.report;
    r.method = run.method;
    r.ratio = options.ratio;
    r.alpha = r.lambda = r.threshold = std::numeric_limits<double>::quiet_NaN();
    const int64_t extra = untyingExtraParameters(cfg, d);
    r.paramsBefore = checkpointParameters(model.checkpoint());
    r.paramsAfter = sliced->parameters();
    r.prunableBefore = prunableParameters(cfg);
    r.prunableAfter = sliced->prunableParameters() + extra;
    const double removed = static_cast<double>(r.prunableBefore - r.prunableAfter);
    r.achievedRatio = removed / static_cast<double>(r.prunableBefore);
    r.achievedRatioModel = removed / static_cast<double>(r.paramsBefore);
    for (int64_t l = 0; l < cfg.num_layers; ++l) {
        const auto i = static_cast<size_t>(l);
        LayerPruneReport p;
        p.headsBefore = p.headsAfter = cfg.num_heads[i];
        p.kvHeadsBefore = p.kvHeadsAfter = cfg.num_kv_heads[i];
        p.channelsBefore = p.channelsAfter = cfg.intermediate_size[i];
        r.layers.push_back(p);
    }
    run.native = {{"knob", "slicing_fraction"},
                  {"slicing_fraction", 1.0 - static_cast<double>(d) / static_cast<double>(cfg.hidden_size)},
                  {"width", d},
                  {"target_reached", reached},
                  {"hidden_size", cfg.hidden_size},
                  {"round_interval", options.roundInterval},
                  {"shortcut_parameters", [&] {
                       int64_t n = 0;
                       for (const auto& L : sliced->weights().layers) n += L.attn_shortcut.numel() + L.mlp_shortcut.numel();
                       return n;
                   }()},
                  {"untied_classifier_extra_parameters", extra},
                  {"residual_widths", sliced->residualWidths()},
                  {"head_sliced", false},
                  {"per_unit_scores", "none: SliceGPT deletes principal directions of the residual stream, not heads or channels"},
                  {"covariance", "uncentred sum of x x^T over every calibration token, float64, + 0.01 * mean(diag) I"}};
    return run;
}

void saveSlicedModel(const SlicedLlama& model, const std::string& dir, const std::string& manifestJson,
                     const std::string& sourceModel) {
    writeExportDirectory(sourceModel, dir, manifestJson, [&](const std::string& staging) {
        std::filesystem::create_directories(staging);
        model.writeFiles(staging);
    });
}

} // namespace npw
