// demo: the main job on the bundled demo models — evaluate each dense model, prune it with the
// numerical score and with FLAP, evaluate the pruned models, print a table and write it to a
// folder (results.json, perplexity.csv, and the pruned checkpoints).
#include "app/npw/commands.h"
#include "core/eval/generate.h"
#include "core/eval/perplexity.h"
#include "core/models/language_model.h"
#include "core/prune/calibration.h"
#include "core/prune/pruner.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <filesystem>
#include <iomanip>
#include <iostream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

struct DemoEvalSet {
    std::string name, path;
};

int runDemo(const Args& args) {
    const fs::path data = fs::path(resourcesDir()) / "demo" / "data";
    const std::vector<DemoEvalSet> evalSets = {{"kjv-nt", (data / "kjv-nt.txt").string()},
                                               {"jargon", (data / "jargon.txt").string()}};
    const std::string calibPath = (data / "kjv-ot.txt").string();
    const int64_t maxWindows = args.getInt("max-windows");
    const double ratio = args.getDouble("ratio");
    const std::vector<int64_t> seqlens = {128, 512};
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    const fs::path out = args.get("out");
    fs::create_directories(out);

    nlohmann::json results = nlohmann::json::array();
    std::string csv = "model,variant,eval,seqlen,achieved_ratio,ppl,bits_per_byte,tokens\n";
    std::cout << "npw demo — the bundled demo models, dense and pruned to ρ = " << ratio << " ("
              << runtime.describe() << ")\n"
              << "evaluation: " << (maxWindows > 0 ? "first " + std::to_string(maxWindows) + " windows" : "every window")
              << " of each held-out set; calibration: 128 windows × 128 tokens of the Old Testament\n\n";
    std::cout << std::left << std::setw(8) << "model" << std::setw(13) << "variant" << std::setw(9) << "eval"
              << std::right << std::setw(7) << "seqlen" << std::setw(10) << "removed" << std::setw(10) << "ppl"
              << std::setw(11) << "bits/byte" << "\n";
    for (const std::string name : {"demo:lm", "demo:lm-gqa"}) {
        LanguageModel lm = openLanguageModel(name, runtime);
        std::vector<std::vector<int32_t>> evalIds;
        for (const auto& set : evalSets) evalIds.push_back(lm.encode(readTextFile(set.path), true));
        const CalibrationSet calibration =
            drawCalibrationSet(readCalibrationStream(calibPath, false, lm), 128, 128, 0, calibPath);
        const ModelStats stats = calibrate(*lm.model, calibration, terminalProgress());

        auto evaluateVariant = [&](const LlamaModel& model, const std::string& variant, double achieved) {
            for (size_t e = 0; e < evalSets.size(); ++e)
                for (int64_t seqlen : seqlens) {
                    PerplexityOptions o;
                    o.seqlen = effectiveSeqlen(seqlen, model.config());
                    o.maxWindows = maxWindows;
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
                                       {"bits_per_byte", r.bitsPerByte}, {"tokens", r.tokens}, {"windows", r.windows}});
                    csv += name + "," + variant + "," + evalSets[e].name + "," + std::to_string(o.seqlen) + "," +
                           std::to_string(achieved) + "," + std::to_string(r.ppl) + "," +
                           std::to_string(r.bitsPerByte) + "," + std::to_string(r.tokens) + "\n";
                }
        };
        evaluateVariant(*lm.model, "dense", 0.0);
        for (const PruneMethod method : {PruneMethod::Numerical, PruneMethod::Flap}) {
            PruneSettings settings;
            settings.method = method;
            settings.ratio = ratio;
            PruneRun run = pruneModelWithStats(*lm.model, stats, settings);
            const std::string variant = methodName(method);
            const fs::path dir = out / (name.substr(5) + "-" + variant + "-" + std::to_string(int(ratio * 100)));
            savePrunedModel(run.pruned.checkpoint, dir.string(),
                            pruneManifestJson(run.report, settings, CalibrationSummary::of(calibration), name));
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
    writeTextAtomically((out / "perplexity.csv").string(), csv);
    writeTextAtomically((out / "results.json").string(), results.dump(2) + "\n");
    std::cout << "\nwrote " << (out / "results.json").string() << ", " << (out / "perplexity.csv").string()
              << " and the pruned models in " << out.string() << "/\n";
    return 0;
}

} // namespace

void addDemoCommand(std::vector<Command>& out) {
    std::vector<Flag> flags = {{"out", "DIR", "npw-demo-results", "folder for results.json, the CSV and the pruned models"},
                               {"ratio", "R", "0.3", "pruning ratio of the demo's numerical and FLAP runs"},
                               {"max-windows", "K", "100", "evaluate the first K windows per set (0 = all)"}};
    for (Flag f : runtimeFlags()) flags.push_back(f);
    out.push_back({"demo", "[--out DIR] [--ratio R] [--max-windows K]",
                   "The whole pipeline on the bundled demo models: evaluate, prune (numerical, FLAP), evaluate again.",
                   flags, runDemo});
}

} // namespace npw::cli
