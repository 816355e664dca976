// prune: calibrate, score, select, compensate, slice and export (core/prune/pruner.h).
#include "app/npw/commands.h"
#include "core/eval/perplexity.h"
#include "core/experiments/dataset_inputs.h"
#include "core/experiments/language_workbench.h"
#include "core/models/language_model.h"
#include "core/models/checkpoint_inspection.h"
#include "core/prune/layerwise_prune.h"
#include "core/prune/pruner.h"
#include "core/prune/stage_bounds.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/number_text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

namespace npw::cli {

std::optional<TextDatasetRef> checkCalibDataset(const Args& args) {
    std::optional<TextDatasetRef> dataset = parseTextDatasetRef(args.get("calib"));
    if (dataset && (args.flag("calib-ids") || args.flag("calib-per-line")))
        throw Error("--calib " + args.get("calib") + " is a data set (text): --calib-ids and --calib-per-line do not apply");
    return dataset;
}

CalibrationRequest calibrationRequestFromArgs(const Args& args) {
    CalibrationRequest request;
    request.source = args.get("calib");
    request.perLine = args.flag("calib-per-line");
    request.sourceIsIds = args.flag("calib-ids") || request.perLine;
    request.samples = args.getInt("nsamples");
    request.seqlen = args.has("seqlen") ? args.getInt("seqlen") : 0;
    request.seed = static_cast<uint64_t>(args.getInt("seed"));
    return request;
}

namespace {

std::string formatNumber(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

// "3", "0,2,5", "0-3,7": layer indices (checked against the model later).
std::vector<int64_t> parseLayerList(const std::string& text) {
    std::vector<int64_t> layers;
    std::istringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        if (item.empty()) continue;
        try {
            const size_t dash = item.find('-', 1);
            const std::string head = item.substr(0, dash);
            const std::string tail = dash == std::string::npos ? head : item.substr(dash + 1);
            size_t usedHead = 0, usedTail = 0;
            const long long first = std::stoll(head, &usedHead);
            const long long last = std::stoll(tail, &usedTail);
            if (usedHead != head.size() || usedTail != tail.size()) throw std::invalid_argument(item);
            if (first < 0 || last < first) throw std::invalid_argument(item);
            for (long long l = first; l <= last; ++l) layers.push_back(l);
        } catch (const std::exception&) {
            throw Error("--protect: '" + item + "' is not a layer index or range (e.g. 0,2-4)");
        }
    }
    return layers;
}

// Every value here already passed the table of flags (finite, in range, a known name).
PruneSettings settingsFromArgs(const Args& args) {
    PruneSettings s;
    s.method = parsePruneMethod(args.get("method"));
    s.ratio = args.getDouble("ratio");
    if (args.has("alpha")) s.alpha = args.getDouble("alpha");
    s.alphaMode = parseAlphaMode(args.get("alpha-mode"));
    // An absolute --lambda overrides the relative default (λ = λ_rel / median c); both at once
    // would leave one of them unused.
    if (args.has("lambda") && args.has("lambda-rel"))
        throw Error("--lambda (absolute) and --lambda-rel (relative to the median c) are alternatives; give one");
    if (args.has("lambda")) s.lambda = args.getDouble("lambda");
    s.lambdaRel = args.getDouble("lambda-rel");
    s.crossLayer = parseCrossLayerRanking(args.get("ranking"));
    s.iters = static_cast<int>(args.getInt("iters"));
    s.z0 = args.getDouble("z0");
    s.damp = args.getDouble("damp");
    s.compensation = parseCompensation(args.get("compensation"));
    if (args.flag("no-compensation")) {
        if (args.has("compensation") && s.compensation != CompensationKind::None)
            throw Error("--no-compensation contradicts --compensation " + args.get("compensation"));
        s.compensation = CompensationKind::None;
    }
    if (args.has("only"))
        s.scope = args.get("only") == "attention" ? SelectionScope::AttentionOnly : SelectionScope::MlpOnly;
    if (args.has("protect")) s.protectedLayers = parseLayerList(args.get("protect"));
    s.seed = static_cast<uint64_t>(args.getInt("seed"));
    s.attentionUnit = parseAttentionUnit(args.get("unit"));
    s.standardisedGlobal = args.flag("standardised-global");
    s.boxConstrained = args.flag("box");
    s.validate();
    return s;
}

std::string lossText(double loss, int64_t before, int64_t after) {
    if (before == after) return "-";
    std::ostringstream out;
    out << std::scientific << std::setprecision(2) << loss;
    return out.str();
}

void printHuman(const PruneReport& r, const std::string& model, const std::string& out) {
    std::cout << "pruned    " << model << " -> " << out << "\n"
              << "method    " << r.method << ", ratio " << r.ratio << ", " << alphaModeName(r.alphaMode) << " alpha "
              << std::setprecision(4) << r.alpha
              << (r.method == "numerical" ? ", lambda " + formatNumber(r.lambda) + " (" + r.lambdaGiven + "; lambda_rel " +
                                                formatNumber(r.lambdaRel) + " of median c " + formatNumber(r.medianC) +
                                                "), ranking " + r.crossLayer
                                          : "")
              << ", compensation " << compensationName(r.compensation) << "\n"
              << "params    " << r.paramsBefore << " -> " << r.paramsAfter << std::fixed << std::setprecision(1)
              << "  (removed " << 100 * r.achievedRatio << "% of attention+MLP, " << 100 * r.achievedRatioModel
              << "% of the model)\n\n";
    std::cout << "layer  heads    kv      channels     attn loss (uncomp.)    mlp loss (uncomp.)\n";
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const LayerPruneReport& p = r.layers[l];
        auto arrow = [](int64_t a, int64_t b) { return std::to_string(a) + "->" + std::to_string(b); };
        std::cout << std::left << std::setw(7) << l << std::setw(9) << arrow(p.headsBefore, p.headsAfter) << std::setw(8)
                  << arrow(p.kvHeadsBefore, p.kvHeadsAfter) << std::setw(13) << arrow(p.channelsBefore, p.channelsAfter)
                  << std::setw(9) << lossText(p.attentionLoss, p.headsBefore, p.headsAfter) << " (" << std::setw(9)
                  << lossText(p.attentionLossUncompensated, p.headsBefore, p.headsAfter) << ")    " << std::setw(9)
                  << lossText(p.mlpLoss, p.channelsBefore, p.channelsAfter) << " ("
                  << lossText(p.mlpLossUncompensated, p.channelsBefore, p.channelsAfter) << ")\n"
                  << std::right;
    }
    std::cout << std::setprecision(2) << "\ntimings   calibrate " << r.timings.calibrateSeconds << " s, score "
              << r.timings.scoreSeconds << " s, select " << r.timings.selectSeconds << " s, apply "
              << r.timings.applySeconds << " s\n";
}

// The bounded road (core/prune/layerwise_prune.h): the model mapped, statistics in a scratch
// file beside --out, the export streamed layer by layer in the checkpoint's dtype.
int runLayerwisePrune(const Args& args, const std::string& model, const PruneSettings& settings, const PruneRoad& road,
                      const Runtime& runtime) {
    for (const char* inRamOnly : {"stats", "save-stats", "stats-on-disk"})
        if (args.has(inRamOnly))
            throw Error("--" + std::string(inRamOnly) + " reads or writes every layer's statistics in float64 as one file, "
                        "which the layer-by-layer road does not keep (" + road.reason + ")");
    if (settings.method == PruneMethod::Numerical && settings.crossLayer == CrossLayerRanking::MeasuredDamage)
        throw Error("--ranking lstar-kl measures each site's damage with 2L + 1 whole-model forward passes over the "
                    "calibration windows (" + std::to_string(2 * inspectLlamaCheckpoint(model).config.num_layers + 1) +
                    " passes here); the layer-by-layer road does not make them (" + road.reason +
                    "): use --ranking lstar-rel (the default)");
    std::cerr << "note: " << road.reason << "\n";
    // On a GPU the weights stay mapped on the CPU and each block is copied to the GPU for its
    // pass (CalibrationOptions::blockRuntime); scoring, compensation and writing run on the CPU
    // as on every machine (LAPACK, one site at a time).
    const bool blocksOnGpu = runtime.device.is_cuda();
    LanguageModel lm = openCausalLanguageModel(model, blocksOnGpu ? Runtime{} : runtime, args.get("tokenizer"),
                                               args.flag("allow-small-vocab"));
    if (!lm.model) throw Error("'" + model + "' is a SliceGPT export, which npw does not prune again");
    const std::string out = args.get("out");
    runOutputGuard().addModel(lm.model->checkpoint().source);
    checkExportTarget(lm.model->checkpoint().source, out);

    std::string note;
    const CalibrationSet set = buildCalibrationSet(lm, calibrationRequestFromArgs(args), &note);
    if (!note.empty()) std::cerr << "note: " << note << "\n";
    const CalibrationSummary calibration = CalibrationSummary::of(set);
    if (const std::string reuse = calibrationReuseWarning(calibration); !reuse.empty()) std::cerr << "warning: " << reuse << "\n";

    // The scratch beside the export (the disk the user chose).
    std::filesystem::path target = std::filesystem::absolute(out);
    if (!target.has_filename()) target = target.parent_path();  // "pruned/"
    std::filesystem::create_directories(target.parent_path());
    removeStaleTemporaries(target.string());
    LayerwisePruneOptions options;
    if (blocksOnGpu) {
        options.calibration.blockRuntime = runtime;
        std::cerr << "note: calibrating one block at a time on " << runtime.describe()
                  << " (the weights stay memory-mapped on the CPU)\n";
    }
    // The work folder beside the export: what an interrupted run calibrated (resumed by the same
    // command), removed when the export is complete.
    options.workDir = workFolderBeside(out);
    runOutputGuard().check(options.workDir, "the work folder");
    options.note = [](const std::string& line) { std::cerr << "note: " << line << "\n"; };
    const std::string precision = args.get("stats-precision");
    options.shardBytes = args.getInt("shard-mib") << 20;
    options.precision = precision == "float64"   ? StatsScratchPrecision::Float64
                        : precision == "float32" ? StatsScratchPrecision::Float32
                                                 : StatsScratchPrecision::Auto;
    auto scratchJson = [](const LayerwisePruneRun& r) {
        return statisticsScratchJson(r.statsPrecision, r.scratchBytes, r.scratchBoundBytes, r.hiddenBytes);
    };
    const LayerwisePruneRun run = pruneLayerwise(
        *lm.model, set, settings, out,
        [&](const LayerwisePruneRun& r) { return layerwiseManifestJson(r.report, settings, calibration, model, scratchJson(r)); },
        options, terminalProgress());

    // Each stage against its bound, the rates measured now in this process (stage_bounds.h), as
    // on the in-RAM road, with the scratch file's writing and reading as stages of their own.
    const LlamaConfig& config = lm.model->config();
    const std::vector<StageMeasure> stages = layerwiseStageMeasures(config, run);
    const MachineRates rates = measureMachineRates(out, choleskySizeFor(config));

    nlohmann::json j = pruneReportJson(run.report);
    j["stage_bounds"] = stageBoundsJson(stages, rates);
    j["timings"]["save_s"] = run.stages.saveSeconds;
    j["model"] = model;
    j["out"] = out;
    j["calibration"] = {{"source", calibration.source}, {"samples", calibration.samples},
                        {"seqlen", calibration.seqlen}, {"tokens", calibration.tokens}, {"seed", calibration.seed},
                        {"source_hash", calibration.sourceHash}, {"distinct_tokens", calibration.distinctTokens},
                        {"layerwise", true}};
    if (!note.empty()) j["calibration"]["note"] = note;
    j["road"] = {{"layerwise", true}, {"forced", road.forced}, {"reason", road.reason}, {"in_ram_bytes", road.inRamBytes},
                 {"physical_bytes", road.physicalBytes}, {"in_gpu_bytes", road.inGpuBytes},
                 {"device_bytes", road.deviceBytes}, {"blocks_on", runtime.describe()},
                 {"statistics_scratch", scratchJson(run)},
                 {"resumed_at_layer", run.resumedAtLayer},
                 {"resumed_score_steps", run.resumedScoreSteps},
                 {"resumed_export_at_layer", run.resumedExportAtLayer}};
    if (args.has("save-scores")) saveScoreSet(run.scores, settings.ratio, args.get("save-scores"));
    printResult(args, j, [&] {
        printHuman(run.report, model, out);
        std::cout << stageBoundsText(stages, rates);
    });
    return 0;
}

int runPrune(const Args& args) {
    if (args.positional().size() != 1)
        throw Error("'npw prune' takes exactly one MODEL, got " + std::to_string(args.positional().size()));
    const std::string& model = args.positional()[0];
    if (isImageModelRequest(args, model)) {
        if (!args.has("out")) throw Error("--out DIR is required (the pruned model's directory)");
        if (parseBaselineMethod(args.get("method")))
            throw Error("--method " + args.get("method") + " prunes language models only (manual: Sweeps and baselines)");
        return runImagePrune(args, model, settingsFromArgs(args));
    }
    // The baselines in their own structure (commands_baselines.cpp).
    if (const std::optional<BaselineMethod> baseline = parseBaselineMethod(args.get("method")))
        return runBaselinePrune(args, model, *baseline);
    if (args.has("calib") == args.has("stats"))
        throw Error("give --calib FILE (text, or token ids with --calib-ids) or --stats FILE (from --save-stats)");
    if (args.has("stats-on-disk") && !args.has("calib"))
        throw Error("--stats-on-disk FILE computes statistics: it needs --calib (--stats FILE already reads them from disk)");
    if (!args.has("out")) throw Error("--out DIR is required (the pruned model's directory)");
    // Validated once, here (settingsFromArgs): bad flags fail before anything is loaded or calibrated.
    const PruneSettings settings = settingsFromArgs(args);
    // --calib wikitext2:FILE (ptb:, c4:, …): a data set's train split, prepared as GPTQ does.
    checkCalibDataset(args);

    // The one rule for the road (layerwise_prune.h): in RAM while the model in float32 and its
    // statistics in float64 take at most half of the RAM, else layer by layer. Read from the
    // config alone, before any weight.
    // On a GPU the in-RAM road holds the model and every statistic there too (choosePruneRoad).
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    PruneRoad road;
    if (!SlicedLlama::isSlicedDirectory(model)) {  // openLanguageModel refuses a sliced one by name
        road = choosePruneRoad(inspectLlamaCheckpoint(model).config, physicalMemoryBytes(), args.flag("layerwise"),
                               deviceMemoryBytes(runtime), static_cast<int64_t>(c10::elementSize(runtime.dtype)));
        if (road.layerwise) return runLayerwisePrune(args, model, settings, road, runtime);
    }
    if (args.has("shard-mib"))
        std::cerr << "note: --shard-mib sets the shards of the layer-by-layer road's export; " << road.reason
                  << ", which writes one model.safetensors\n";

    LanguageModel lm = openLanguageModel(model, runtime, args.get("tokenizer"), args.flag("allow-small-vocab"));
    const LlamaConfig& config = lm.model->config();
    const std::string out = args.get("out");
    // The file loaded, as a source: every output (--out, --save-stats, --save-scores,
    // --stats-on-disk, claimed in main against --calib, --stats and the rest) is checked against it.
    runOutputGuard().addModel(lm.model->checkpoint().source);
    checkExportTarget(lm.model->checkpoint().source, out);  // before the expensive part

    // The same workbench as `npw sweep`, `npw demo` and the studio: one calibration builder
    // (one rule for --seqlen: capped at the model's context, said in the report), one place
    // where a method's scores are computed, one selection and one report.
    LanguagePruningWorkbench workbench(lm);
    std::string statsOnDisk;  // where a layer-wise calibration kept the statistics
    if (args.has("calib")) {
        const CalibrationRequest request = calibrationRequestFromArgs(args);
        // --stats-on-disk FILE: the statistics calibrated layer-wise into FILE (float64, reusable
        // with --stats); the model itself in RAM.
        const std::string statsFile = args.has("stats-on-disk") ? args.get("stats-on-disk") : "";
        if (statsFile.empty()) {
            workbench.setCalibration(LanguagePruningWorkbench::calibrate(lm, request, terminalProgress()));
        } else {
            workbench.setCalibration(
                LanguagePruningWorkbench::calibrateToFile(lm, request, statsFile, model, terminalProgress()));
            statsOnDisk = statsFile;
        }
        if (!workbench.calibration().note.empty()) std::cerr << "note: " << workbench.calibration().note << "\n";
        const std::string reuse = calibrationReuseWarning(workbench.calibration().summary);
        if (!reuse.empty()) std::cerr << "warning: " << reuse << "\n";
    } else {
        workbench.setCalibration(LanguagePruningWorkbench::calibrationFromFile(args.get("stats"), config.num_layers));
    }
    const WorkbenchPrune run = workbench.prune(settings, terminalProgress());
    const CalibrationSummary& calibration = workbench.calibration().summary;

    const auto saveStart = std::chrono::steady_clock::now();
    if (args.has("save-stats")) {
        std::map<std::string, std::string> metadata = calibration.toMetadata();
        metadata["model"] = model;
        saveModelStats(*workbench.calibration().stats, args.get("save-stats"), metadata);
    }
    if (args.has("save-scores"))
        saveScoreSet(*workbench.computedScores(workbench.scoreSetNames().back()), settings.ratio, args.get("save-scores"));
    savePrunedModel(run.pruned.checkpoint, out, pruneManifestJson(run.report, settings, calibration, model));
    const double saveSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - saveStart).count();

    // Each stage against its bound, the rates measured now in this process (stage_bounds.h).
    const MachineRates rates = measureMachineRates(out, choleskySizeFor(config));
    PruneStageInputs stageInputs = pruneStageInputs(run.report.timings, saveSeconds, out);
    stageInputs.calibrated = args.has("calib");
    stageInputs.tokens = calibration.tokens;
    stageInputs.seqlen = calibration.seqlen;
    const std::vector<StageMeasure> stages = pruneStageMeasures(config, stageInputs);

    nlohmann::json j = pruneReportJson(run.report);
    j["stage_bounds"] = stageBoundsJson(stages, rates);
    j["model"] = model;
    j["out"] = out;
    j["timings"]["save_s"] = saveSeconds;
    j["calibration"] = {{"source", calibration.source}, {"samples", calibration.samples},
                        {"seqlen", calibration.seqlen}, {"tokens", calibration.tokens}, {"seed", calibration.seed},
                        {"source_hash", calibration.sourceHash}, {"distinct_tokens", calibration.distinctTokens}};
    if (const std::string reuse = calibrationReuseWarning(calibration); !reuse.empty()) j["calibration"]["warning"] = reuse;
    if (!calibration.statsFile.empty()) j["calibration"]["statistics_file"] = calibration.statsFile;
    j["calibration"]["layerwise"] = !statsOnDisk.empty();
    if (!workbench.calibration().note.empty()) j["calibration"]["note"] = workbench.calibration().note;
    if (!statsOnDisk.empty()) j["calibration"]["statistics_on_disk"] = statsOnDisk;
    j["road"] = {{"layerwise", false}, {"reason", road.reason}, {"in_ram_bytes", road.inRamBytes},
                 {"physical_bytes", road.physicalBytes}};
    printResult(args, j, [&] {
        printHuman(run.report, model, out);
        std::cout << stageBoundsText(stages, rates);
    });
    return 0;
}

} // namespace

void addPruneCommand(std::vector<Command>& out) {
    out.push_back({"prune",
                   "MODEL --method M --ratio R (--calib FILE|NAME:FILE [--calib-ids] [--nsamples N] [--seqlen L] | --stats FILE) [--alpha A] "
                   "[--alpha-mode paper|budget] [--lambda X | --lambda-rel R] [--ranking lstar-rel|lstar|lstar-kl|z] [--iters T] [--damp G] [--no-compensation] "
                   "[--only attention|mlp] [--protect LAYERS] [--seed S] --out DIR [--save-scores F] [--save-stats F] "
                   "[--stats-on-disk F]\n"
                   "       npw prune IMAGE_MODEL --method M --ratio R --calib generated [--per-class N] [--cfg S] --out DIR "
                   "[--metric fid [--samples N]]",
                   "Structured pruning: calibrate, score, select globally, compensate, slice, export.", flagsFor("prune"),
                   runPrune});
}

} // namespace npw::cli
