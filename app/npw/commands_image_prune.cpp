// `npw prune`, `npw sweep` and `npw metrics --model` on class-conditional image models: the
// pruning engine on LlamaGen's GPT, calibrated on samples the dense model generates, measured
// by the image metrics (core/experiments/image_calibration.h, core/experiments/image_sweep.h).
#include "app/npw/commands.h"
#include "core/text/json_output.h"
#include "core/data/fashion_mnist.h"
#include "core/eval/image_eval.h"
#include "core/eval/metrics_run.h"
#include "core/experiments/image_calibration.h"
#include "core/experiments/image_sweep.h"
#include "core/experiments/image_workbench.h"
#include "core/prune/stage_bounds.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <ATen/ATen.h>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

struct MetricsContext {
    std::unique_ptr<FeatureNetwork> network;
    ResolvedReference reference;
};

MetricsContext openMetrics(const Args& args) {
    MetricsContext m;
    m.network = loadFeatureNetwork(args.get("features"));
    m.reference = resolveReference(args.get("reference"), *m.network, defaultCacheDir(), 250, terminalProgress());
    return m;
}

} // namespace

nlohmann::json evaluationJson(const ImageEvaluation& e) { return imageEvaluationJson(e); }

// FID on fewer images than it needs (fidSampleWarning) said once per command, on stderr, before
// the numbers a reader would compare; the JSON rows carry it as `fid_warning`.
void warnAboutFidSamples(const ImageEvaluation& e) {
    static bool warned = false;
    const std::string w = fidSampleWarning(e.metrics);
    if (w.empty() || warned) return;
    warned = true;
    clearProgressLine();
    std::cerr << "warning: " << w << std::endl;
}

void printEvaluationHeader() {
    std::cout << std::left << std::setw(18) << "model" << std::right << std::setw(6) << "ratio" << std::setw(9)
              << "achieved" << std::setw(9) << "FID" << std::setw(9) << "sFID" << std::setw(8) << "IS" << std::setw(7)
              << "prec" << std::setw(7) << "recall" << std::setw(8) << "class" << std::setw(10) << "tok/s"
              << std::setw(10) << "params" << "\n";
}

void printEvaluationRow(const std::string& name, double ratio, double achieved, const ImageEvaluation& e) {
    std::cout << std::left << std::setw(18) << name << std::right << std::fixed << std::setprecision(2) << std::setw(6)
              << ratio << std::setprecision(3) << std::setw(9) << achieved << std::setprecision(2) << std::setw(9)
              << e.metrics.fid << std::setw(9) << e.metrics.sfid << std::setw(8) << e.metrics.is.mean
              << std::setprecision(3) << std::setw(7) << e.metrics.precision << std::setw(7) << e.metrics.recall;
    if (std::isfinite(e.classAccuracy))
        std::cout << std::setw(8) << e.classAccuracy;
    else
        std::cout << std::setw(8) << "-";
    std::cout << std::setprecision(0) << std::setw(10) << e.tokensPerSecond << std::setw(10) << e.parameters;
    // Few images: how far FID moves when the generated images are resampled (fidBootstrapInterval).
    if (e.metrics.fidResamples > 0)
        std::cout << std::setprecision(2) << "  FID 5–95 % " << e.metrics.fidLow << "–" << e.metrics.fidHigh;
    std::cout << std::endl;
}

int runImagePrune(const Args& args, const std::string& model, const PruneSettings& settings) {
    if (!args.has("calib") || args.get("calib") != "generated")
        throw Error("image model '" + model + "': calibrate with --calib generated [--per-class N] (sequences the dense model "
                    "generates, as the paper does for LlamaGen)");
    for (const char* lmOnly : {"stats", "stats-on-disk", "save-stats", "calib-ids", "calib-per-line", "seqlen", "layerwise", "stats-precision", "shard-mib"})
        if (args.has(lmOnly)) throw Error(std::string("--") + lmOnly + " is for language models, not image model '" + model + "'");
    const std::string metric = args.get("metric");  // fid, all (the same) or none: the flag table
    const std::string out = args.get("out");
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    std::shared_ptr<VqModel> vq;
    if (metric != "none" || args.has("vq") || fs::is_directory(fs::path(resolveModelPath(model)) / "vq"))
        vq = VqModel::load(vqPathFor(args, model), runtime);
    // The one image pipeline (image_workbench.h): the same calibration, scores, selection and
    // compensation as npw sweep, the demo and the studio.
    ImagePruningWorkbench bench(openGpt(args, model, vq ? vq->config().downsample() : 16), vq, runtime);
    const LlamaGenModel& dense = bench.dense();
    runOutputGuard().addModel(dense.checkpoint().source);  // the file loaded: every output is checked against it
    checkExportTarget(dense.checkpoint().source, out);     // before the expensive part

    const ImageSamplingOptions sampling = samplingFromArgs(args);
    ImagePruningWorkbench::checkSettings(settings);  // before the expensive calibration
    bench.calibrate(args.getInt("per-class"), sampling, terminalProgress());
    const ImageWorkbenchPrune run = bench.prune(settings, terminalProgress());
    LlamaGenCheckpoint pruned = dense.checkpoint().withTransformer(run.pruned.checkpoint);
    pruned.source = dense.checkpoint().source;

    const ImageCalibrationSet& calibration = bench.calibration();
    const CalibrationSummary summary = bench.calibrationSummary();
    nlohmann::json manifest = nlohmann::json::parse(pruneManifestJson(run.report, settings, summary, model));
    manifest["calibration"]["image"] = calibration.toMetadata();
    nlohmann::json extra = nlohmann::json::object();
    const std::vector<std::string> names = classNames(model);
    if (!names.empty()) extra["class_names"] = names;
    const auto saveStart = std::chrono::steady_clock::now();
    savePrunedImageModel(pruned, vq.get(), out, npw::json_fields::dumpJson(manifest, 2, "the export manifest") + "\n", npw::json_fields::dumpJson(extra));
    const double saveSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - saveStart).count();

    // Each stage against its bound, as on the language roads (stage_bounds.h); generating the
    // calibration samples is not a pruning stage (timings.generate_calibration_s).
    const LlamaConfig& config = dense.config().transformer;
    PruneStageInputs stageInputs = pruneStageInputs(run.report.timings, saveSeconds, out);
    stageInputs.calibrated = true;
    stageInputs.tokens = summary.tokens;
    stageInputs.seqlen = summary.seqlen;
    const std::vector<StageMeasure> stages = pruneStageMeasures(config, stageInputs);
    const MachineRates rates = measureMachineRates(out, choleskySizeFor(config));

    nlohmann::json j = pruneReportJson(run.report);
    j["stage_bounds"] = stageBoundsJson(stages, rates);
    j["timings"]["save_s"] = saveSeconds;
    j["model"] = model;
    j["out"] = out;
    j["timings"]["generate_calibration_s"] = bench.generationSeconds();
    j["calibration"] = {{"source", "generated"}, {"per_class", calibration.perClass},
                        {"samples", summary.samples}, {"tokens", summary.tokens}, {"cfg", sampling.cfgScale}};
    std::vector<std::pair<std::string, ImageEvaluation>> evaluations;
    if (metric != "none") {
        MetricsContext m = openMetrics(args);
        ImageSamplingOptions evalSampling = sampling;
        evalSampling.seed = static_cast<uint64_t>(args.getInt("seed")) + 1000000;  // not the calibration samples
        const LlamaGenModel prunedModel(pruned, runtime);
        const std::vector<std::pair<std::string, const LlamaGenModel*>> models = {{"dense", &dense},
                                                                                   {run.report.method, &prunedModel}};
        for (const auto& [name, mdl] : models)
            evaluations.emplace_back(name, evaluateImageModel(*mdl, *vq, *m.network, m.reference.stats,
                                                              args.getInt("samples"), evalSampling, terminalProgress()));
        warnAboutFidSamples(evaluations[0].second);
        j["metrics"] = {{"reference", m.reference.description}, {"features", m.network->identity()},
                        {"dense", evaluationJson(evaluations[0].second)},
                        {"pruned", evaluationJson(evaluations[1].second)}};
    }
    printResult(args, j, [&] {
        const PruneReport& r = run.report;
        std::cout << "pruned    " << model << " -> " << out << " (image model, calibrated on " << summary.samples
                  << " generated samples)\n"
                  << "method    " << r.method << ", ratio " << r.ratio << ", " << alphaModeName(r.alphaMode) << " alpha "
                  << std::setprecision(4) << r.alpha << ", compensation " << compensationName(r.compensation) << "\n"
                  << "params    " << r.paramsBefore << " -> " << r.paramsAfter << std::fixed << std::setprecision(1)
                  << "  (removed " << 100 * r.achievedRatio << "% of attention+MLP)\n"
                  << "layers    heads ";
        for (const auto& l : r.layers) std::cout << l.headsAfter << "/" << l.headsBefore << " ";
        std::cout << "\n          channels ";
        for (const auto& l : r.layers) std::cout << l.channelsAfter << "/" << l.channelsBefore << " ";
        std::cout << "\n";
        std::cout << stageBoundsText(stages, rates);
        if (!evaluations.empty()) {
            std::cout << "\n";
            printEvaluationHeader();
            printEvaluationRow("dense", 0, 0, evaluations[0].second);
            printEvaluationRow(r.method, r.ratio, r.achievedRatio, evaluations[1].second);
        }
    });
    return 0;
}

int runImageSweep(const Args& args, const std::string& model) {
    // --csv against MODEL and the other inputs: main's output guard (flag_table.h).
    for (const char* required : {"methods", "ratios"})
        if (!args.has(required)) throw Error(std::string("--") + required + " is required");
    if (args.has("calib") && args.get("calib") != "generated")
        throw Error("image model '" + model + "': the sweep calibrates on generated samples (--calib generated)");
    if (args.has("eval") || args.has("zeroshot"))
        throw Error("image model '" + model + "': --eval and --zeroshot are for language models; the image sweep "
                    "measures FID, sFID, IS, precision and recall (--metric fid)");
    if (args.flag("layerwise"))
        throw Error("--layerwise is for language models, not image model '" + model + "'");
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    std::shared_ptr<const VqModel> vq = VqModel::load(vqPathFor(args, model), runtime);
    ImagePruningWorkbench bench(openGpt(args, model, vq->config().downsample()), vq, runtime);
    MetricsContext m = openMetrics(args);

    ImageSweepSpec spec;
    spec.methods = args.getList("methods");
    spec.ratios = args.getDoubleList("ratios");
    spec.calibPerClass = args.getInt("per-class");
    spec.evalSampling = samplingFromArgs(args);
    spec.calibSampling = spec.evalSampling;
    spec.calibSampling.seed = spec.evalSampling.seed + 1000000;  // calibration samples are not evaluation samples
    spec.evalSamples = args.getInt("samples");
    if (args.has("lambda")) {  // absolute; without it the relative default
        const std::vector<double> lambdas = args.getDoubleList("lambda");  // a list for language models
        if (lambdas.size() != 1)
            throw Error("image model '" + model + "': the image sweep takes one --lambda, got " + args.get("lambda"));
        spec.lambda = lambdas[0];
    }
    spec.alphaMode = parseAlphaMode(args.get("alpha-mode"));
    if (args.has("alpha")) spec.alpha = args.getDouble("alpha");

    // Issue 15's held-out metric: the token perplexity of the first N Fashion-MNIST test images'
    // VQ codes (encoded once here; the sweep measures every model on them).
    HeldOutCodes heldOut;
    const int64_t heldOutImages = args.getInt("token-ppl");
    spec.generatedMetrics = !args.flag("token-ppl-only");
    if (!spec.generatedMetrics && heldOutImages == 0)
        throw Error("--token-ppl-only needs --token-ppl N (the held-out images to measure)");
    if (heldOutImages > 0) {
        const LabelledImages test = loadFashionMnist("test");
        const int64_t n = std::min<int64_t>(heldOutImages, test.images.size(0));
        heldOut = encodeHeldOutImages(*vq, test.images.narrow(0, 0, n), test.labels.narrow(0, 0, n),
                                      test.source + " (first " + std::to_string(n) + ")", terminalProgress());
        spec.heldOut = &heldOut;
    }

    const bool json = args.flag("json");
    if (!json && spec.generatedMetrics) printEvaluationHeader();
    if (!json && !spec.generatedMetrics)
        std::cout << std::left << std::setw(22) << "method" << std::right << std::setw(6) << "ratio" << std::setw(10)
                  << "achieved" << std::setw(12) << "token ppl" << "\n";
    const std::vector<ImageSweepRow> rows = runImageSweep(
        bench, *m.network, m.reference.stats, spec,
        [&](const ImageSweepRow& r) {
            if (spec.generatedMetrics) warnAboutFidSamples(r.eval);
            if (json) return;
            clearProgressLine();  // stdout may be the progress bar's terminal
            if (spec.generatedMetrics) {
                printEvaluationRow(r.method, r.ratio, r.achievedRatio, r.eval);
                if (spec.heldOut) std::cout << "    held-out token ppl " << std::fixed << std::setprecision(3) << r.tokenPpl << "\n";
            } else {
                std::cout << std::left << std::setw(22) << r.method << std::right << std::fixed << std::setprecision(2)
                          << std::setw(6) << r.ratio << std::setprecision(3) << std::setw(10) << r.achievedRatio
                          << std::setw(12) << r.tokenPpl << "\n";
            }
        },
        terminalProgress());
    if (args.has("csv")) writeTextAtomically(args.get("csv"), imageSweepRowsCsv(rows));
    if (json) {
        nlohmann::json out = {{"model", model}, {"reference", m.reference.description},
                              {"features", m.network->identity()}, {"rows", nlohmann::json::array()}};
        for (const ImageSweepRow& r : rows) out["rows"].push_back(imageSweepRowJson(r));
        std::cout << npw::json_fields::dumpJson(out, 2) << std::endl;
    }
    return 0;
}

ImageSource modelImages(const Args& args, const std::string& model, int64_t n, int64_t* numClasses) {
    const Runtime runtime = chooseRuntime(args.get("device"), "float32");
    auto vq = VqModel::load(vqPathFor(args, model), runtime);
    auto gpt = std::make_shared<LlamaGenModel>(openGpt(args, model, vq->config().downsample()), runtime);
    const ImageSamplingOptions sampling = samplingFromArgs(args);
    GeneratedImages g = generateImages(*gpt, *vq, balancedClasses(n, gpt->config().num_classes), sampling, terminalProgress());
    if (numClasses) *numClasses = gpt->config().num_classes;
    std::ostringstream what;
    what << n << " images generated by " << model << " (cfg " << sampling.cfgScale << ", seeds " << sampling.seed << ".."
         << sampling.seed + static_cast<uint64_t>(n) - 1 << ", classes 0.." << gpt->config().num_classes - 1
         << " in turn; " << std::fixed << std::setprecision(0) << g.tokensPerSecond << " tokens/s)";
    return imageSourceFromTensor(g.images, what.str());
}

} // namespace npw::cli
