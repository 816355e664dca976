// zeroshot: multiple-choice accuracy as lm-evaluation-harness scores it; make-verse-task: the
// demo task built from the held-out New Testament.
#include "app/npw/commands.h"
#include "core/eval/zeroshot.h"
#include "core/models/language_model.h"
#include "core/text/json_fields.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cmath>
#include <iomanip>
#include <iostream>

namespace npw::cli {

namespace {

nlohmann::json zeroShotJson(const ZeroShotResult& r) {
    using npw::json_fields::finiteOrNull;
    return {{"task", r.task},          {"items", r.items},
            {"acc", r.acc},            {"acc_stderr", finiteOrNull(r.accStderr)},
            {"acc_norm", finiteOrNull(r.accNorm)}, {"acc_norm_stderr", finiteOrNull(r.accNormStderr)}};
}

int runZeroShot(const Args& args) {
    if (args.positional().size() != 1) throw Error("'npw zeroshot' takes exactly one MODEL");
    if (!args.has("task")) throw Error("--task NAME:FILE is required (NAME one of " + zeroShotTaskKinds() + ")");
    const std::string modelName = args.positional()[0];
    const std::vector<ZeroShotTask> tasks = loadZeroShotTasks(args.get("task"), args.getInt("limit"));
    // A LLaMA or a SliceGPT export (sliced_llama.h): scoring needs only logits.
    LanguageModel lm =
        openCausalLanguageModel(modelName, chooseRuntime(args.get("device"), args.get("dtype")), args.get("tokenizer"), args.flag("allow-small-vocab"));
    ZeroShotOptions options;
    options.batchRows = args.getInt("batch");
    nlohmann::json out = {{"model", modelName}, {"structure", lm.causal().structure()}, {"tasks", nlohmann::json::array()}};
    std::vector<ZeroShotResult> results;
    for (const ZeroShotTask& task : tasks) {
        results.push_back(evaluateZeroShot(lm, task, options, terminalProgress()));
        out["tasks"].push_back(zeroShotJson(results.back()));
        out["tasks"].back()["source"] = task.source;
    }
    printResult(args, out, [&] {
        std::cout << std::left << std::setw(16) << "task" << std::right << std::setw(7) << "items" << std::setw(18)
                  << "acc" << std::setw(18) << "acc_norm" << "\n"
                  << std::fixed << std::setprecision(4);
        for (const ZeroShotResult& r : results) {
            std::cout << std::left << std::setw(16) << r.task << std::right << std::setw(7) << r.items << std::setw(9)
                      << r.acc << " ± " << std::setw(6) << r.accStderr;
            if (std::isfinite(r.accNorm)) std::cout << std::setw(9) << r.accNorm << " ± " << std::setw(6) << r.accNormStderr;
            std::cout << "\n";
        }
    });
    return 0;
}

int runMakeVerseTask(const Args& args) {
    for (const char* required : {"text", "out"})
        if (!args.has(required)) throw Error(std::string("--") + required + " is required");
    const std::vector<std::string> lines =
        buildVerseEndingTask(readTextInput(args.get("text"), "verse text"), args.getInt("n"), uint64_t(args.getInt("seed")));
    std::string body;
    for (const std::string& line : lines) body += line + "\n";
    writeTextAtomically(args.get("out"), body);
    printResult(args, {{"out", args.get("out")}, {"items", lines.size()}, {"task", "mc"}},
         [&] { std::cout << "wrote " << lines.size() << " items to " << args.get("out") << " (task kind mc)\n"; });
    return 0;
}

} // namespace

void addZeroShotCommands(std::vector<Command>& out) {
    out.push_back({"zeroshot", "MODEL --task NAME:FILE[,NAME:FILE…] [--limit N]",
                   "Zero-shot multiple-choice accuracy (acc, acc_norm, standard errors) as lm-evaluation-harness scores it.",
                   flagsFor("zeroshot"), runZeroShot});
    out.push_back({"make-verse-task", "--text FILE --out FILE.jsonl [--n N] [--seed S]",
                   "Build the demo zero-shot task: choose the true ending of a verse among four (one verse per line).",
                   flagsFor("make-verse-task"), runMakeVerseTask});
}

} // namespace npw::cli
