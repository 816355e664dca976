// demo: the main job on the bundled demo models — evaluate each dense model, prune it with the
// numerical score and with FLAP, evaluate the pruned models, print a table and write it to a
// folder (results.json, perplexity.csv, and the pruned checkpoints); the same for the image
// model demo:c2i with the image metrics.
#include "app/npw/commands.h"
#include "core/text/json_output.h"
#include "core/eval/generate.h"
#include "core/models/parameter_count.h"
#include "core/models/vq_model.h"
#include "core/eval/metrics_run.h"
#include "core/io/image_png.h"
#include "core/experiments/image_workbench.h"
#include "core/experiments/language_workbench.h"
#include "core/eval/perplexity.h"
#include "core/models/language_model.h"
#include "core/prune/calibration.h"
#include "core/prune/pruner.h"
#include "core/util/atomic_file.h"
#include "core/util/content_hash.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/regular_file.h"

#include <ATen/ATen.h>
#include <filesystem>
#include <limits>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

struct DemoEvalSet {
    std::string name, path;
};

// demo:c2i, the class-conditional image model: calibrated on its own samples (16 per class),
// pruned with the numerical score and with FLAP, each model measured by FID, sFID, IS,
// precision, recall and class accuracy (demo classifier features, Fashion-MNIST test set), and
// the same samples of every class from the three models side by side in one PNG.
void runImageDemo(const Args& args, const Runtime& runtime, double ratio, const fs::path& out, nlohmann::json& results) {
    const std::string name = "demo:c2i";
    auto vq = VqModel::load((fs::path(resolveModelPath(name)) / "vq").string(), runtime);
    ImagePruningWorkbench bench(loadLlamaGenCheckpoint(name), vq, runtime);
    ImageSamplingOptions sampling;
    sampling.cfgScale = 2.0;
    sampling.batchSize = 100;
    ImageSamplingOptions calibration = sampling;
    calibration.seed = 1000000;  // calibration samples are not the evaluated ones
    bench.calibrate(16, calibration, terminalProgress());
    auto network = loadFeatureNetwork("demo");
    const ResolvedReference reference =
        resolveReference("fashion-mnist-test", *network, defaultCacheDir(), 250, terminalProgress());
    const int64_t samples = args.getInt("image-samples");
    std::cout << "\n" << name << ": " << samples << " images per model (classes in turn, cfg " << sampling.cfgScale
              << "), against the " << reference.description << "; numerical at its defaults (as every model)\n";
    printEvaluationHeader();
    const int64_t classes = bench.dense().config().num_classes;
    std::vector<int64_t> gridClasses;
    for (int64_t k = 0; k < classes; ++k)
        for (int i = 0; i < 4; ++i) gridClasses.push_back(k);
    std::vector<at::Tensor> grids;
    std::vector<std::string> titles;
    auto measure = [&](const LlamaGenModel& model, const std::string& variant, double achieved) {
        const ImageEvaluation e = evaluateImageModel(model, *vq, *network, reference.stats, samples, sampling, terminalProgress());
        printEvaluationRow(variant, variant == "dense" ? 0.0 : ratio, achieved, e);
        nlohmann::json row = evaluationJson(e);
        row["model"] = name;
        row["variant"] = variant;
        row["achieved_ratio"] = achieved;
        results.push_back(row);
        grids.push_back(imageGrid(generateImages(model, *vq, gridClasses, sampling).images, {}, GridOptions{4, 2, 28}));
        std::ostringstream title;
        title << name << " " << variant;
        if (variant != "dense") title << " ρ=" << std::fixed << std::setprecision(2) << ratio;
        titles.push_back(title.str());
    };
    measure(bench.dense(), "dense", 0.0);
    const LlamaCheckpoint denseTransformer = bench.dense().checkpoint().transformer();
    for (const std::string method : {"numerical", "flap"}) {
        // The same defaults as every other model: no per-model λ (issue 15).
        const double lambda = std::numeric_limits<double>::quiet_NaN();
        PrunedModel pruned = bench.prune(method, ratio, lambda);
        const LlamaGenCheckpoint ck = bench.dense().checkpoint().withTransformer(pruned.checkpoint);
        const int64_t before = prunableParameters(denseTransformer.config);
        const double achieved = double(before - prunableParameters(pruned.checkpoint.config)) / double(before);
        const fs::path dir = out / ("c2i-" + method + "-" + std::to_string(int(ratio * 100)));
        savePrunedImageModel(ck, vq.get(), dir.string(), bench.manifestJson(name, method, ratio, lambda, pruned),
                             npw::json_fields::dumpJson(nlohmann::json{{"class_names", classNames(name)}}));
        measure(LlamaGenModel(ck, runtime), method, achieved);
    }
    // dense | numerical | FLAP, a row per class, the same four seeds in each, each panel titled
    // with model, method and ρ.
    writePng((out / "c2i-dense-numerical-flap.png").string(), titledPanels(grids, titles));
    std::cout << "  samples of every class (dense | numerical | FLAP, same seeds): "
              << (out / "c2i-dense-numerical-flap.png").string() << "\n";
}

int runDemo(const Args& args) {
    const fs::path data = fs::path(resourcesDir()) / "demo" / "data";
    const std::vector<DemoEvalSet> evalSets = {{"kjv-nt", (data / "kjv-nt.txt").string()},
                                               {"jargon", (data / "jargon.txt").string()}};
    const std::string calibPath = (data / "kjv-ot.txt").string();
    // The one protocol (core/eval/evaluation_protocol.h): windows of 2048 capped at the context
    // (512 for the demo models), the first --max-windows of each held-out set (a cap, recorded).
    EvaluationProtocol protocol;
    protocol.maxWindows = args.getInt("max-windows");
    const int64_t maxWindows = protocol.maxWindows;
    const double ratio = args.getDouble("ratio");
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    const fs::path out = args.get("out");
    fs::create_directories(out);

    nlohmann::json results = nlohmann::json::array();
    std::string csv = "model,variant,eval,seqlen,achieved_ratio,ppl,bits_per_byte,tokens,windows,max_windows,eval_hash,"
                      "calib_source,calib_seqlen,calib_samples,calib_seed,calib_hash\n";
    std::cout << "npw demo — the bundled demo models, dense and pruned to ρ = " << ratio << " ("
              << runtime.describe() << ")\n"
              << "evaluation: " << (maxWindows > 0 ? "first " + std::to_string(maxWindows) + " windows" : "every window")
              << " of each held-out set, windows of the model's context (at most 2048); calibration: "
              << kDefaultCalibrationSamples << " windows of the model's context of the Old Testament\n\n";
    std::cout << std::left << std::setw(8) << "model" << std::setw(13) << "variant" << std::setw(9) << "eval"
              << std::right << std::setw(7) << "seqlen" << std::setw(10) << "removed" << std::setw(10) << "ppl"
              << std::setw(11) << "bits/byte" << "\n";
    for (const std::string name : {"demo:lm", "demo:lm-gqa"}) {
        LanguageModel lm = openLanguageModel(name, runtime);
        std::vector<std::vector<int32_t>> evalIds;
        std::vector<std::string> evalHashes;
        for (const auto& set : evalSets) {
            evalIds.push_back(lm.encode(readTextInput(set.path, "evaluation text"), true));
            evalHashes.push_back(fileContentHash(set.path));
        }
        // The workbench of `npw prune` and the studio: calibrated once, scored per method.
        LanguagePruningWorkbench workbench(lm);
        CalibrationRequest request;  // the protocol's defaults: 128 windows of the model's context
        request.source = calibPath;
        workbench.setCalibration(LanguagePruningWorkbench::calibrate(lm, request, terminalProgress()));
        const CalibrationSummary& calibration = workbench.calibration().summary;

        auto evaluateVariant = [&](const LlamaModel& model, const std::string& variant, double achieved) {
            for (size_t e = 0; e < evalSets.size(); ++e) {
                const PerplexityOptions o = perplexityOptions(protocol, model.config());
                PerplexityResult r = evaluatePerplexity(model, evalIds[e], o, nullptr,
                                                        [&lm](const std::vector<int32_t>& v) { return lm.decode(v); },
                                                        terminalProgress());
                std::cout << std::left << std::setw(8) << name.substr(5) << std::setw(13) << variant << std::setw(9)
                          << evalSets[e].name << std::right << std::setw(7) << o.seqlen << std::fixed
                          << std::setprecision(3) << std::setw(10) << achieved << std::setprecision(2)
                          << std::setw(10) << r.ppl << std::setprecision(3) << std::setw(11) << r.bitsPerByte
                          << std::endl;
                results.push_back({{"model", name}, {"variant", variant}, {"eval", evalSets[e].name},
                                   {"seqlen", o.seqlen}, {"achieved_ratio", achieved}, {"ppl", r.ppl},
                                   {"bits_per_byte", r.bitsPerByte}, {"tokens", r.tokens}, {"windows", r.windows},
                                   {"max_windows", maxWindows}, {"eval_hash", evalHashes[e]},
                                   {"calibration", {{"source", calibration.source}, {"seqlen", calibration.seqlen},
                                                    {"samples", calibration.samples}, {"seed", calibration.seed},
                                                    {"source_hash", calibration.sourceHash},
                                                    {"distinct_tokens", calibration.distinctTokens}}}});
                csv += name + "," + variant + "," + evalSets[e].name + "," + std::to_string(o.seqlen) + "," +
                       std::to_string(achieved) + "," + std::to_string(r.ppl) + "," +
                       std::to_string(r.bitsPerByte) + "," + std::to_string(r.tokens) + "," +
                       std::to_string(r.windows) + "," + std::to_string(maxWindows) + "," + evalHashes[e] + "," +
                       calibration.source + "," + std::to_string(calibration.seqlen) + "," +
                       std::to_string(calibration.samples) + "," + std::to_string(calibration.seed) + "," +
                       calibration.sourceHash + "\n";
            }
        };
        evaluateVariant(*lm.model, "dense", 0.0);
        for (const PruneMethod method : {PruneMethod::Numerical, PruneMethod::Flap}) {
            PruneSettings settings;
            settings.method = method;
            settings.ratio = ratio;
            settings.validate();  // --ratio: this command's edge
            const WorkbenchPrune run = workbench.prune(settings);
            const std::string variant = methodName(method);
            const fs::path dir = out / (name.substr(5) + "-" + variant + "-" + std::to_string(int(ratio * 100)));
            savePrunedModel(run.pruned.checkpoint, dir.string(),
                            pruneManifestJson(run.report, settings, workbench.calibration().summary, name));
            LlamaModel pruned(run.pruned.checkpoint, runtime);
            evaluateVariant(pruned, variant, run.report.achievedRatio);
        }
        SamplingOptions greedy;
        greedy.maxNewTokens = 24;
        greedy.stopToken = lm.model->config().eos_token_id;
        const std::string prompt = "And Jesus said unto them,";
        const std::vector<int32_t> promptIds = lm.encode(prompt, true);
        std::vector<int32_t> all = promptIds;
        GenerationResult g = generate(*lm.model, promptIds, greedy);
        all.insert(all.end(), g.tokens.begin(), g.tokens.end());
        std::cout << "  " << name << " (dense, greedy): " << lm.decode(all) << "\n";
        results.push_back({{"model", name}, {"prompt", prompt}, {"greedy", lm.decode(all)}});
    }
    if (args.getInt("image-samples") > 0 && fs::is_directory(fs::path(resourcesDir()) / "demo" / "c2i"))
        runImageDemo(args, runtime, ratio, out, results);
    writeTextAtomically((out / "perplexity.csv").string(), csv);
    writeTextAtomically((out / "results.json").string(), npw::json_fields::dumpJson(results, 2, "results.json") + "\n");
    std::cout << "\nwrote " << (out / "results.json").string() << ", " << (out / "perplexity.csv").string()
              << " and the pruned models in " << out.string() << "/\n";
    return 0;
}

} // namespace

void addDemoCommand(std::vector<Command>& out) {
    out.push_back({"demo", "[--out DIR] [--ratio R] [--max-windows K] [--image-samples N]",
                   "The whole pipeline on the bundled demo models (language and image): evaluate, prune (numerical, FLAP), "
                   "evaluate again.",
                   flagsFor("demo"), runDemo});
}

} // namespace npw::cli
