// sweep: perplexity against sparsity for several methods, ratios and calibration settings.
#include "app/npw/commands.h"
#include "app/npw/text_table.h"
#include "core/eval/perplexity.h"
#include "core/prune/calibration.h"
#include "core/experiments/dataset_inputs.h"
#include "core/experiments/sweep.h"
#include "core/experiments/sweep_request.h"
#include "core/models/checkpoint_inspection.h"
#include "core/models/runtime.h"
#include "core/prune/layerwise_prune.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/system_memory.h"

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

namespace npw::cli {

namespace {

// `text` with its first `from` replaced by `to` (prune's road sentence said of a sweep).
std::string replacedOnce(std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
}

int runSweepCommand(const Args& args) {
    if (args.positional().size() != 1) throw Error("'npw sweep' takes exactly one MODEL");
    const std::string modelName = args.positional()[0];
    if (isImageModelRequest(args, modelName)) return runImageSweep(args, modelName);
    for (const char* required : {"methods", "ratios", "calib"})
        if (!args.has(required)) throw Error(std::string("--") + required + " is required");
    if (!args.has("eval") && !args.has("zeroshot") && !args.flag("speed"))
        throw Error("give --eval SETS, --zeroshot TASKS, --speed or several");
    // The one rule for the road, as `npw prune` takes it (layerwise_prune.h): in RAM while the model
    // in float32 and every layer's statistics in float64 take at most half of the RAM, else layer
    // by layer. Read from the config alone, before any weight; what that road cannot run is refused
    // before any work.
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    PruneRoad road;
    if (!SlicedLlama::isSlicedDirectory(modelName))  // runSweep refuses a sliced one by name
        road = choosePruneRoad(inspectLlamaCheckpoint(modelName).config, physicalMemoryBytes(), args.flag("layerwise"),
                               deviceMemoryBytes(runtime), static_cast<int64_t>(c10::elementSize(runtime.dtype)));
    else if (args.flag("layerwise"))
        throw Error("--layerwise: '" + modelName + "' is a SliceGPT export, which npw does not prune again");
    road.reason = replacedOnce(replacedOnce(road.reason, "pruning ", "sweeping "), "prunes layer by layer", "sweeps layer by layer");
    std::string workDir;
    if (road.layerwise) {
        SweepSpec methodsOnly;
        methodsOnly.methods = args.getList("methods");
        methodsOnly.measureSpeed = args.flag("speed");
        // Why this road, for the refusals: the flag, or the sizes that chose it.
        const std::string why = road.forced ? std::string("--layerwise")
                                            : road.reason.substr(0, road.reason.find("; "));
        refuseOnLayerwiseSweep(methodsOnly, why);
        if (args.has("zeroshot"))
            throw Error("--zeroshot scores every task's items with the whole model in memory, which the layer-by-layer "
                        "road does not hold (" + why + "): run npw zeroshot on a pruned export instead");
        // Statistics and one pruned model at a time beside --csv (the disk the user chose), else in
        // the temporary folder; what a killed sweep left there is removed first.
        std::string parent;
        if (args.has("csv")) parent = std::filesystem::absolute(args.get("csv")).parent_path().string();
        workDir = layerwiseSweepWorkDir(parent);
        runOutputGuard().check(workDir, "the sweep's work folder");
        // One sentence: why, and where the statistics and the pruned models go.
        road.reason = replacedOnce(road.reason, "; weights stay memory-mapped, statistics go to a scratch file beside --out", "");
        road.reason = replacedOnce(road.reason, ", statistics go to a scratch file beside --out", "");  // the GPU's sentence
        road.reason += "; weights stay memory-mapped, the statistics and one pruned model at a time go to " + workDir +
                       " (removed at the end)";
        std::cerr << "note: " << road.reason << "\n";
    }
    // On a GPU the layer-wise road keeps the weights mapped on the CPU and copies one block at a
    // time to the GPU (for calibration and evaluation), as `npw prune` does.
    const bool blocksOnGpu = road.layerwise && runtime.device.is_cuda();
    LanguageModel lm = openLanguageModel(modelName, blocksOnGpu ? Runtime{} : runtime, args.get("tokenizer"), args.flag("allow-small-vocab"));
    // The file loaded, as a source: --csv is checked against it (and against --calib, --eval and
    // every other input of the table, in main) by the run's output guard.
    runOutputGuard().addModel(lm.model->checkpoint().source);

    // The flags as a request; core reads what it names, as for the studio's Sweep tab.
    SweepRequest request;
    request.methods = args.getList("methods");
    request.ratios = args.getDoubleList("ratios");
    request.calibSamples = args.getIntList("nsamples");
    if (args.has("seqlen")) request.calibSeqlens = args.getIntList("seqlen");  // else the protocol's (the context, ≤ 2048)
    if (args.has("lambda")) request.lambdas = args.getDoubleList("lambda");  // absolute; else relative
    request.lambdaRel = args.getDouble("lambda-rel");
    request.seeds = static_cast<int>(args.getInt("seeds"));
    request.evaluation.seqlen = args.getInt("eval-seqlen");
    request.evaluation.maxWindows = args.getInt("max-windows");
    request.alphaMode = parseAlphaMode(args.get("alpha-mode"));
    if (args.has("alpha")) request.alpha = args.getDouble("alpha");
    request.calibration.source = args.get("calib");
    request.calibration.sourceIsIds = args.flag("calib-ids");
    request.calibration.perLine = args.flag("calib-per-line");
    if (parseTextDatasetRef(request.calibration.source) && (request.calibration.sourceIsIds || request.calibration.perLine))
        throw Error("--calib " + request.calibration.source +
                    " is a data set (text): --calib-ids and --calib-per-line do not apply");
    if (args.has("zeroshot")) {
        request.zeroShotTask = args.get("zeroshot");
        request.zeroShotLimit = args.getInt("zeroshot-limit");
    }
    request.measureSpeed = args.flag("speed");
    request.speedTokens = args.getInt("speed-tokens");
    request.speedRepeats = static_cast<int>(args.getInt("speed-repeats"));
    request.evalSources = args.getList("eval");
    std::vector<std::string> warnings;
    const SweepSpec spec = buildSweepSpec(lm, request, &warnings);
    for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
    // With --csv the sweep is resumable: each finished model's rows go to a work folder beside
    // it, recognised by the model's, the texts' and the settings' fingerprint; the same command
    // again takes them from there. The folder goes once the CSV is written.
    std::optional<SweepJournal> journal;
    if (args.has("csv")) {
        const std::string journalDir = workFolderBeside(args.get("csv"));
        runOutputGuard().check(journalDir, "the sweep's work folder");
        journal.emplace(journalDir, sweepFingerprint(lm, spec, road.layerwise ? "layer-wise" : "in RAM", runtime),
                        [](const std::string& line) { std::cerr << "note: " << line << "\n"; });
    }

    const bool json = args.flag("json");
    // Columns: always two spaces between them, so a wide value (a scientific λ, a perplexity of
    // 10^9) pushes the line right instead of running into its neighbour. The rows are printed as
    // they come, so widths are known in advance only for the names: the method and evaluation
    // columns are as wide as the longest name the sweep will print (the summary, printed at the
    // end, sizes every column from its content: sweepSummaryText).
    struct Column { const char* title; int width; bool left; };
    Column columns[] = {{"method", 18, true},   {"ratio", 5, false},  {"seed", 4, false},
                        {"samples", 7, false},  {"seqlen", 6, false}, {"lambda", 9, false},
                        {"eval", 10, true},     {"achieved", 8, false}, {"ppl", 10, false}};
    for (const std::string& m : spec.methods) columns[0].width = std::max(columns[0].width, static_cast<int>(displayWidth(m)));
    for (const SweepEvalSet& set : spec.evalSets)
        columns[6].width = std::max(columns[6].width, static_cast<int>(displayWidth(set.name)));
    for (const ZeroShotTask& task : spec.zeroShotTasks)
        columns[6].width = std::max(columns[6].width, static_cast<int>(displayWidth(task.name)));
    auto tableLine = [&columns](const std::vector<std::string>& cells) {
        std::ostringstream line;
        for (size_t i = 0; i < cells.size(); ++i) {
            if (i > 0) line << "  ";
            const Column& c = columns[i];
            const bool last = i + 1 == cells.size();
            if (c.left) line << std::left << std::setw(last ? 0 : c.width) << cells[i];
            else line << std::right << std::setw(c.width) << cells[i];
        }
        return line.str();
    };
    auto number = [](double v, int precision, bool scientific = false) {
        std::ostringstream out;
        out << std::setprecision(precision) << (scientific ? std::scientific : std::fixed) << v;
        return out.str();
    };
    auto printRow = [&](const SweepRow& r) {
        if (json) return;
        std::ostringstream line;
        line << tableLine({r.method, number(r.ratio, 2), std::to_string(r.seed), std::to_string(r.calibSamples),
                           std::to_string(r.calibSeqlen), std::isfinite(r.lambdaUsed) ? number(r.lambdaUsed, 3, true) : "-",
                           r.evalSet, number(r.achievedRatio, 3), std::isfinite(r.ppl) ? number(r.ppl, 2) : "-"});
        if (std::isfinite(r.acc)) line << "  acc " << number(r.acc, 4);
        if (r.isSpeedRow()) {
            line << "  decode " << number(r.decodeTokensPerSecond, 0) << " tok/s ("
                 << speedRunsText(r.speedRuns, r.decodeSlowest, r.decodeFastest) << "), prefill "
                 << number(r.prefillTokensPerSecond, 0) << " tok/s, weights " << number(r.weightsMiB, 2) << " MiB, KV cache "
                 << number(r.kvCacheMiB, 2) << " MiB";
            if (std::isfinite(r.loadAverage)) line << ", load " << number(r.loadAverage, 2);
        }
        // Taken from the work folder of an interrupted run of this sweep, not measured again.
        if (r.resumed) line << "  (resumed)";
        clearProgressLine();  // the row goes to stdout, which may be the bar's terminal
        std::cout << line.str() << std::endl;
    };
    if (!json) {
        std::vector<std::string> titles;
        for (const Column& c : columns) titles.emplace_back(c.title);
        std::cout << tableLine(titles) << std::endl;
    }
    std::vector<SweepRow> rows;
    if (road.layerwise) {
        LayerwiseSweepOptions options;
        options.workDir = workDir;
        options.evalRuntime = runtime;
        if (blocksOnGpu) options.calibration.blockRuntime = runtime;
        options.journal = journal ? &*journal : nullptr;
        rows = runSweepLayerwise(lm, spec, options, printRow, terminalProgress());
    } else {
        rows = runSweep(lm, spec, printRow, terminalProgress(), journal ? &*journal : nullptr);
    }
    if (args.has("csv")) writeTextAtomically(args.get("csv"), sweepRowsCsv(rows));
    if (journal) journal->complete();  // every row is in the CSV: nothing to resume

    nlohmann::json out = {{"model", modelName}, {"rows", nlohmann::json::array()}, {"summary", nlohmann::json::array()},
                          {"warnings", warnings},
                          {"road", {{"layerwise", road.layerwise}, {"forced", road.forced}, {"reason", road.reason},
                                    {"in_ram_bytes", road.inRamBytes}, {"physical_bytes", road.physicalBytes}}}};
    using npw::json_fields::finiteOrNull;
    for (const SweepRow& r : rows) out["rows"].push_back(sweepRowJson(r));
    const auto summary = summariseOverSeeds(rows);
    for (const SweepSummaryRow& s : summary)
        out["summary"].push_back({{"method", s.first.method}, {"ratio", s.first.ratio},
                                  {"calib_samples", s.first.calibSamples}, {"calib_seqlen", s.first.calibSeqlen},
                                  {"lambda", finiteOrNull(s.first.lambda)}, {"lambda_rel", finiteOrNull(s.first.lambdaRel)},
                                  {"eval", s.first.evalSet},
                                  {"seeds", s.count}, {"ppl_mean", finiteOrNull(s.pplMean)},
                                  {"ppl_std", finiteOrNull(s.pplStd)}, {"acc_mean", finiteOrNull(s.accMean)},
                                  {"acc_std", finiteOrNull(s.accStd)}, {"acc_norm_mean", finiteOrNull(s.accNormMean)},
                                  {"achieved_ratio_mean", s.achievedRatioMean},
                                  {"decode_tokens_per_s_mean", finiteOrNull(s.decodeMean)},
                                  {"decode_tokens_per_s_std", s.count > 1 ? finiteOrNull(s.decodeStd) : nlohmann::json(nullptr)},
                                  {"decode_tokens_per_s_slowest", finiteOrNull(s.decodeSlowest)},
                                  {"decode_tokens_per_s_fastest", finiteOrNull(s.decodeFastest)},
                                  {"speed_runs", s.first.speedRuns},
                                  {"prefill_tokens_per_s_mean", finiteOrNull(s.prefillMean)},
                                  {"weights_mib_mean", finiteOrNull(s.weightsMiBMean)},
                                  {"kv_cache_mib_mean", finiteOrNull(s.kvCacheMiBMean)}});
    clearProgressLine();
    if (json) {
        std::cout << npw::json_fields::dumpJson(out, 2) << std::endl;
    } else {
        std::cout << "\nmean ± std over seeds\n" << sweepSummaryText(summary);
    }
    return 0;
}

} // namespace

std::string sweepSummaryText(const std::vector<SweepSummaryRow>& summary) {
    auto fixed = [](double v, int precision) {
        std::ostringstream out;
        out << std::fixed << std::setprecision(precision) << v;
        return out.str();
    };
    std::vector<std::vector<std::string>> rows;
    for (const SweepSummaryRow& s : summary) {
        std::vector<std::string> row = {s.first.method, fixed(s.first.ratio, 2), s.first.evalSet, fixed(s.achievedRatioMean, 3)};
        if (s.first.isSpeedRow()) {
            // One model measured: its median and the runs' range; several seeds: their spread.
            // Never "± 0" for what was measured once.
            std::string speed = "decode " + fixed(s.decodeMean, 0);
            if (s.count == 1)
                speed += " tok/s (" + speedRunsText(s.first.speedRuns, s.decodeSlowest, s.decodeFastest) + ")";
            else
                speed += " ± " + fixed(s.decodeStd, 0) + " tok/s over " + std::to_string(s.count) + " seeds (each the median of " +
                         std::to_string(s.first.speedRuns) + " run" + (s.first.speedRuns == 1 ? "" : "s") + ", all runs " +
                         fixed(s.decodeSlowest, 0) + "–" + fixed(s.decodeFastest, 0) + ")";
            row.insert(row.end(), {"", speed + ", weights " + fixed(s.weightsMiBMean, 2) + " MiB"});
        } else if (std::isfinite(s.accMean)) {
            row.insert(row.end(), {"", "acc " + fixed(s.accMean, 4) + (s.count == 1 ? " (1 seed)" : " ± " + fixed(s.accStd, 4))});
        } else {
            row.insert(row.end(), {std::isfinite(s.pplMean) ? fixed(s.pplMean, 2) : "-",
                                   s.count == 1 ? "(1 seed)" : "± " + fixed(s.pplStd, 2)});
        }
        rows.push_back(row);
    }
    return formatTextTable({{"method", false}, {"ratio", true}, {"eval", false}, {"achieved", true}, {"ppl", true}, {"", false}},
                           rows);
}

void addSweepCommand(std::vector<Command>& out) {
    out.push_back({"sweep",
                   "MODEL --methods A,B --ratios R1,R2 --calib FILE|wikitext2:FILE --eval text:FILE[,ids:FILE,wikitext2:FILE,c4:FILE]\n"
                   "       npw sweep IMAGE_MODEL --methods A,B --ratios R1,R2 [--per-class N] [--samples N] [--cfg S]",
                   "Perplexity (language) or FID/sFID/IS/precision/recall (image models) against sparsity for several "
                   "methods (scores computed once each).",
                   flagsFor("sweep"), runSweepCommand});
}

} // namespace npw::cli
