// demo: the main job on the bundled demo models, printed as a table and written to a folder.
#include "app/npw/commands.h"
#include "core/eval/generate.h"
#include "core/eval/perplexity.h"
#include "core/models/language_model.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <filesystem>
#include <iomanip>
#include <iostream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

int runDemo(const Args& args) {
    const fs::path data = fs::path(resourcesDir()) / "demo" / "data";
    const std::vector<std::pair<std::string, std::string>> evalSets = {
        {"kjv-nt", (data / "kjv-nt.txt").string()}, {"jargon", (data / "jargon.txt").string()}};
    const int64_t maxWindows = args.getInt("max-windows");
    const std::vector<int64_t> seqlens = {128, 512};
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    const fs::path out = args.get("out");
    fs::create_directories(out);

    nlohmann::json results = nlohmann::json::array();
    std::cout << "npw demo — dense demo models on held-out text (" << runtime.describe() << ")\n\n";
    std::cout << std::left << std::setw(10) << "model" << std::setw(10) << "params" << std::setw(9) << "eval"
              << std::setw(8) << "seqlen" << std::right << std::setw(10) << "ppl" << std::setw(11) << "bits/byte"
              << std::setw(9) << "tokens" << "\n";
    for (const std::string name : {"demo:lm", "demo:lm-gqa"}) {
        LanguageModel lm = openLanguageModel(name, runtime);
        const auto params = lm.model->config().parameterCount();
        for (const auto& [evalName, path] : evalSets) {
            const std::vector<int32_t> ids = lm.encode(readTextFile(path), true);
            for (int64_t seqlen : seqlens) {
                PerplexityOptions o;
                o.seqlen = effectiveSeqlen(seqlen, lm.model->config());
                o.maxWindows = maxWindows;
                PerplexityResult r = evaluatePerplexity(*lm.model, ids, o, nullptr,
                                                        [&lm](const std::vector<int32_t>& v) { return lm.decode(v); },
                                                        terminalProgress());
                std::cout << std::left << std::setw(10) << name.substr(5) << std::setw(10) << params << std::setw(9)
                          << evalName << std::setw(8) << o.seqlen << std::right << std::fixed << std::setprecision(2)
                          << std::setw(10) << r.ppl << std::setprecision(3) << std::setw(11) << r.bitsPerByte
                          << std::setw(9) << r.tokens << "\n";
                results.push_back({{"model", name}, {"eval", evalName}, {"seqlen", o.seqlen}, {"ppl", r.ppl},
                                   {"bits_per_byte", r.bitsPerByte}, {"tokens", r.tokens}, {"windows", r.windows}});
            }
        }
        SamplingOptions greedy;
        greedy.maxNewTokens = 40;
        greedy.stopToken = lm.model->config().eos_token_id;
        const std::string prompt = "And Jesus said unto them,";
        GenerationResult g = generate(*lm.model, lm.encode(prompt, true), greedy);
        std::cout << "  " << name << " continues \"" << prompt << "\" →" << lm.decode(g.tokens) << "\n";
        results.push_back({{"model", name}, {"prompt", prompt}, {"greedy", lm.decode(g.tokens)}});
    }
    const std::string csvPath = (out / "perplexity.csv").string();
    std::string csv = "model,eval,seqlen,ppl,bits_per_byte,tokens\n";
    for (const auto& r : results)
        if (r.contains("ppl"))
            csv += r["model"].get<std::string>() + "," + r["eval"].get<std::string>() + "," +
                   std::to_string(r["seqlen"].get<int64_t>()) + "," + std::to_string(r["ppl"].get<double>()) + "," +
                   std::to_string(r["bits_per_byte"].get<double>()) + "," + std::to_string(r["tokens"].get<int64_t>()) + "\n";
    writeTextAtomically(csvPath, csv);
    writeTextAtomically((out / "results.json").string(), results.dump(2) + "\n");
    std::cout << "\nwrote " << (out / "results.json").string() << " and " << csvPath << "\n";
    return 0;
}

} // namespace

void addDemoCommand(std::vector<Command>& out) {
    std::vector<Flag> flags = {{"out", "DIR", "npw-demo-results", "folder for results.json and the CSV tables"},
                               {"max-windows", "K", "0", "evaluate only K windows per set (0 = all)"}};
    for (Flag f : runtimeFlags()) flags.push_back(f);
    out.push_back({"demo", "[--out DIR]", "Run the whole pipeline on the bundled demo models and print the results.",
                   flags, runDemo});
}

} // namespace npw::cli
