// The baselines' names, dispatch, report and manifest (baselines.h).
#include "core/prune/baselines.h"
#include "core/text/json_output.h"

#include "core/models/sliced_llama.h"
#include "core/prune/baseline_pruner.h"
#include "core/prune/block_influence.h"
#include "core/prune/export.h"
#include "core/prune/llm_pruner.h"
#include "core/prune/slicegpt.h"
#include "core/util/error.h"
#include "core/util/version.h"

#include <algorithm>
#include <chrono>

namespace npw {

const char* baselineMethodName(BaselineMethod method) { return methodInfo(method).name; }

std::optional<BaselineMethod> parseBaselineMethod(const std::string& name) {
    const MethodInfo* m = findMethod(name);
    if (m && m->kind == MethodKind::Baseline) return m->baseline;
    return std::nullopt;
}

const char* taylorKindName(TaylorKind kind) {
    switch (kind) {
    case TaylorKind::ParamFirst: return "param_first";
    case TaylorKind::ParamMix: return "param_mix";
    case TaylorKind::Vectorize: return "vectorize";
    }
    return "?";
}

TaylorKind parseTaylorKind(const std::string& name) {
    for (TaylorKind k : {TaylorKind::ParamFirst, TaylorKind::ParamMix, TaylorKind::Vectorize})
        if (name == taylorKindName(k)) return k;
    throw Error("unknown Taylor importance '" + name + "' (choose one of param_first, param_mix, vectorize)");
}

PruneReport baselineReport(const std::string& method, double ratio, const LlamaCheckpoint& dense,
                           const LlamaCheckpoint& pruned) {
    PruneReport r;
    r.method = method;
    r.ratio = ratio;
    r.alpha = std::numeric_limits<double>::quiet_NaN();
    r.lambda = std::numeric_limits<double>::quiet_NaN();
    r.threshold = std::numeric_limits<double>::quiet_NaN();
    setPruneCounts(r, countPrunedParameters(dense, pruned));
    return r;
}

BaselineRun runBaseline(BaselineMethod method, const LlamaModel& model, const CalibrationSet& set,
                        const BaselineOptions& options, const ProgressFn& progress) {
    if (!(options.ratio >= 0 && options.ratio < 1))
        throw Error(std::string(baselineMethodName(method)) + ": ratio " + std::to_string(options.ratio) +
                    " is outside [0, 1)");
    const auto start = std::chrono::steady_clock::now();
    BaselineRun run;
    switch (method) {
    case BaselineMethod::BlockInfluence: run = pruneBlockInfluence(model, set, options, progress); break;
    case BaselineMethod::LlmPruner: run = pruneLlmPruner(model, set, options, progress); break;
    case BaselineMethod::SliceGpt: run = pruneSliceGpt(model, set, options, progress); break;
    }
    run.report.timings.scoreSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return run;
}

std::string baselineManifestJson(const BaselineRun& run, const CalibrationSummary& calibration,
                                 const std::string& sourceModel) {
    nlohmann::json j = pruneReportJson(run.report);
    j.erase("timings");
    j.erase("loss_unit");
    j.erase("threshold");
    j["format"] = run.sliced ? kSlicedModelFormat : "npw-pruned-model";
    j["npw_version"] = npwVersion();
    j["source_model"] = sourceModel;
    j["native"] = run.native;
    j["calibration"] = calibrationManifestJson(calibration);
    return json_fields::dumpJson(j, 2, "the export manifest") + "\n";
}

BaselineRun pruneBlockInfluence(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                                const ProgressFn& progress, const BlockInfluence* scores) {
    const BlockInfluence bi = scores ? *scores : blockInfluence(model, set, progress);
    const std::vector<int64_t> removed = blocksToRemove(model.config(), bi.influence, options.ratio);
    BaselineRun run;
    run.method = baselineMethodName(BaselineMethod::BlockInfluence);
    run.pruned = removeBlocks(model.checkpoint(), removed);
    run.report = baselineReport(run.method, options.ratio, model.checkpoint(), run.pruned);
    const LlamaConfig& c = model.config();
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const auto i = static_cast<size_t>(l);
        const bool gone = std::find(removed.begin(), removed.end(), l) != removed.end();
        LayerPruneReport p;
        p.headsBefore = c.num_heads[i];
        p.kvHeadsBefore = c.num_kv_heads[i];
        p.channelsBefore = c.intermediate_size[i];
        p.headsAfter = gone ? 0 : p.headsBefore;
        p.kvHeadsAfter = gone ? 0 : p.kvHeadsBefore;
        p.channelsAfter = gone ? 0 : p.channelsBefore;
        run.report.layers.push_back(p);
    }
    run.native = {{"knob", "blocks_removed"},
                  {"blocks_removed", removed.size()},
                  {"removed_blocks", removed},
                  {"block_influence", bi.influence},
                  {"influence_tokens", bi.tokens},
                  {"layers_after", run.pruned.config.num_layers},
                  {"score", "ShortGPT Block Influence: 1 - mean over calibration tokens of cos(block input, block output)"}};
    return run;
}

} // namespace npw

// ---- BaselinePruner (baseline_pruner.h) ----------------------------------------------------------

namespace npw {

BaselinePruner::BaselinePruner(BaselineMethod method, const LlamaModel& model, const CalibrationSet& set,
                               BaselineOptions options, ProgressFn progress)
    : method_(method), model_(model), set_(set), options_(options), progress_(std::move(progress)) {}

BaselineRun BaselinePruner::prune(double ratio) {
    BaselineOptions o = options_;
    o.ratio = ratio;
    if (!(ratio >= 0 && ratio < 1))
        throw Error(std::string(baselineMethodName(method_)) + ": ratio " + std::to_string(ratio) + " is outside [0, 1)");
    const auto start = std::chrono::steady_clock::now();
    BaselineRun run;
    switch (method_) {
    case BaselineMethod::BlockInfluence:
        if (!blocks_) blocks_ = blockInfluence(model_, set_, progress_);
        run = pruneBlockInfluence(model_, set_, o, progress_, &*blocks_);
        break;
    case BaselineMethod::LlmPruner:
        // Gradients only when some unit goes (ρ = 0 and an empty range need none).
        if (!groups_ && ratio > 0) groups_ = llmPrunerScores(model_, set_, o, progress_);
        run = pruneLlmPruner(model_, set_, o, progress_, groups_ ? &*groups_ : nullptr);
        break;
    case BaselineMethod::SliceGpt: run = pruneSliceGpt(model_, set_, o, progress_); break;
    }
    run.report.timings.scoreSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return run;
}

} // namespace npw
