// prune --method llm-pruner | slicegpt | block-influence: the baselines in their own structure
// (core/prune/baselines.h). Kept apart from commands_prune.cpp: runPrune hands over here first.
#include "app/npw/commands.h"
#include "core/eval/perplexity.h"
#include "core/experiments/dataset_inputs.h"
#include "core/experiments/language_workbench.h"
#include "core/models/language_model.h"
#include "core/models/sliced_llama.h"
#include "core/prune/baselines.h"
#include "core/prune/slicegpt.h"
#include "core/util/error.h"

#include <chrono>
#include <iomanip>
#include <iostream>

namespace npw::cli {

namespace {

// "4-29": the first and last layer pruned (inclusive) → [first, last + 1).
std::pair<int64_t, int64_t> parseLayerRange(const std::string& text) {
    const size_t dash = text.find('-');
    try {
        if (dash == std::string::npos || dash == 0) throw std::invalid_argument(text);
        size_t a = 0, b = 0;
        const std::string head = text.substr(0, dash), tail = text.substr(dash + 1);
        const long long first = std::stoll(head, &a), last = std::stoll(tail, &b);
        if (a != head.size() || b != tail.size() || first < 0 || last < first) throw std::invalid_argument(text);
        return {first, last + 1};
    } catch (const std::exception&) {
        throw Error("--llm-pruner-layers: '" + text + "' is not a layer range A-B (e.g. 4-29)");
    }
}

void printBaselineHuman(const BaselineRun& run, const std::string& model, const std::string& out) {
    const PruneReport& r = run.report;
    std::cout << "pruned    " << model << " -> " << out << "\n"
              << "method    " << r.method << ", ratio " << r.ratio << ", " << run.native.value("knob", std::string()) << " "
              << run.native.at(run.native.value("knob", std::string("knob"))).dump() << "\n"
              << "params    " << r.paramsBefore << " -> " << r.paramsAfter << std::fixed << std::setprecision(1)
              << "  (removed " << 100 * r.achievedRatio << "% of attention+MLP, " << 100 * r.achievedRatioModel
              << "% of the model)\n";
    if (run.sliced) {
        std::cout << "widths    ";
        for (int64_t d : run.sliced->residualWidths()) std::cout << d << " ";
        std::cout << "(residual stream: embedding, then after each attention and MLP)\n";
    } else {
        std::cout << "\nlayer  heads    kv      channels\n";
        for (size_t l = 0; l < r.layers.size(); ++l) {
            const LayerPruneReport& p = r.layers[l];
            auto arrow = [](int64_t a, int64_t b) { return std::to_string(a) + "->" + std::to_string(b); };
            std::cout << std::left << std::setw(7) << l << std::setw(9) << arrow(p.headsBefore, p.headsAfter) << std::setw(8)
                      << arrow(p.kvHeadsBefore, p.kvHeadsAfter) << arrow(p.channelsBefore, p.channelsAfter) << "\n"
                      << std::right;
        }
    }
    std::cout << std::setprecision(2) << "\ntimings   " << r.timings.scoreSeconds << " s\n";
}

} // namespace

int runBaselinePrune(const Args& args, const std::string& model, BaselineMethod method) {
    if (!args.has("calib")) throw Error("--method " + std::string(baselineMethodName(method)) +
                                        " needs --calib FILE (it calibrates in its own way: --stats does not apply)");
    if (!args.has("out")) throw Error("--out DIR is required (the pruned model's directory)");
    for (const char* numericalOnly : {"stats", "save-stats", "save-scores", "stats-on-disk", "box", "protect", "only", "layerwise", "stats-precision", "shard-mib"})
        if (args.has(numericalOnly))
            throw Error("--" + std::string(numericalOnly) + " does not apply to --method " + baselineMethodName(method));
    BaselineOptions options;
    options.ratio = args.getDouble("ratio");
    options.taylor = parseTaylorKind(args.get("taylor"));
    if (args.has("llm-pruner-layers")) std::tie(options.layerStart, options.layerEnd) = parseLayerRange(args.get("llm-pruner-layers"));
    if (args.has("layer-ratio")) options.layerRatio = args.getDouble("layer-ratio");
    options.llmPrunerGlobal = args.flag("llm-pruner-global");
    if (method != BaselineMethod::LlmPruner)
        for (const char* flag : {"taylor", "llm-pruner-layers", "layer-ratio", "llm-pruner-global"})
            if (args.has(flag)) throw Error("--" + std::string(flag) + " is an llm-pruner option");
    checkCalibDataset(args);  // before the model is loaded

    LanguageModel lm = openLanguageModel(model, chooseRuntime(args.get("device"), args.get("dtype")), args.get("tokenizer"), args.flag("allow-small-vocab"));
    const LlamaConfig& config = lm.model->config();
    const std::string out = args.get("out");
    runOutputGuard().addModel(lm.model->checkpoint().source);  // the file loaded, as a source
    checkExportTarget(lm.model->checkpoint().source, out);
    if (method == BaselineMethod::LlmPruner && options.layerEnd > config.num_layers)
        throw Error("--llm-pruner-layers: the model has layers 0-" + std::to_string(config.num_layers - 1));

    // The workbench's one calibration builder and length rule, as `npw prune` calibrates: the
    // windows only (the baselines score on them, not on statistics).
    LanguagePruningWorkbench workbench(lm);
    workbench.setCalibration(LanguagePruningWorkbench::windowsOnly(lm, calibrationRequestFromArgs(args)));
    const std::string& note = workbench.calibration().note;
    if (!note.empty()) std::cerr << "note: " << note << "\n";
    const CalibrationSummary calibration = workbench.calibration().summary;
    const std::string reuse = calibrationReuseWarning(calibration);
    if (!reuse.empty()) std::cerr << "warning: " << reuse << "\n";

    // Through the workbench, as the studio prunes: the method's scores kept, selected at ρ and
    // applied in its own structure (the same numbers as runBaseline).
    BaselineRun run = workbench.pruneBaseline(method, options, terminalProgress());
    if (!run.native.value("target_reached", true))
        std::cerr << "note: " << baselineMethodName(method) << " cannot remove " << options.ratio
                  << " of the attention + MLP parameters of this model; it removes " << run.report.achievedRatio
                  << " (reported as achieved)\n";
    const auto saveStart = std::chrono::steady_clock::now();
    const std::string manifest = baselineManifestJson(run, calibration, model);
    if (run.sliced)
        saveSlicedModel(*run.sliced, out, manifest, lm.model->checkpoint().source);
    else
        savePrunedModel(run.pruned, out, manifest);
    const double saveSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - saveStart).count();

    nlohmann::json j = pruneReportJson(run.report);
    j.erase("loss_unit");
    j.erase("threshold");
    j["model"] = model;
    j["out"] = out;
    j["native"] = run.native;
    j["format"] = run.sliced ? kSlicedModelFormat : "npw-pruned-model";
    j["timings"] = {{"prune_s", run.report.timings.scoreSeconds}, {"save_s", saveSeconds}};
    j["calibration"] = {{"source", calibration.source}, {"samples", calibration.samples},
                        {"seqlen", calibration.seqlen}, {"tokens", calibration.tokens}, {"seed", calibration.seed},
                        {"source_hash", calibration.sourceHash}, {"distinct_tokens", calibration.distinctTokens}};
    if (!reuse.empty()) j["calibration"]["warning"] = reuse;
    printResult(args, j, [&] { printBaselineHuman(run, model, out); });
    return 0;
}

} // namespace npw::cli
