// `npw bench --suite scale` (scale_bench.h).
#include "core/experiments/scale_bench.h"

#include "core/experiments/synthetic_checkpoint.h"
#include "core/prune/stage_bounds.h"
#include "core/util/child_process.h"
#include "core/util/error.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

namespace npw {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void writeRandomIds(const fs::path& file, int64_t count, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> id(3, vocab - 1);  // past BOS/EOS/UNK of either convention
    std::ofstream out(file);
    for (int64_t i = 0; i < count; ++i) out << id(rng) << (i % 32 == 31 ? '\n' : ' ');
    if (!out.flush()) throw Error("scale suite: cannot write '" + file.string() + "'");
}

// One step in its own process; its JSON output (every npw step runs with --json) with the
// measured wall time, peaks and `bytes` on disk added.
json step(const ScaleBenchOptions& o, const std::string& name, const std::vector<std::string>& args) {
    const ChildRun run = runChildMeasured(o.npwRun, args, {"NPW_NUM_THREADS=" + std::to_string(o.threads)});
    if (run.exitCode != 0)
        throw Error("scale suite: step '" + name + "' failed (" +
                    (run.signal ? "killed by signal " + std::to_string(run.signal)
                                : "exit status " + std::to_string(run.exitCode)) +
                    "; its error is above)");
    json out;
    try {
        out = json::parse(run.out);
    } catch (const json::exception&) {
        throw Error("scale suite: step '" + name + "' printed no JSON object");
    }
    out["step"] = name;
    out["wall_s"] = run.seconds;
    out["peak_rss_anon_mib"] = run.peakRssAnonMiB;
    out["peak_rss_file_mib"] = run.peakRssFileMiB;
    out["peak_vm_hwm_mib"] = run.peakVmHwmMiB;
    return out;
}

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(digits) << v;
    return s.str();
}

std::string memoryLine(const json& s) {
    return fixed(s["wall_s"].get<double>(), 1) + " s, peak RssAnon " + fixed(s["peak_rss_anon_mib"].get<double>(), 0) +
           " MiB, RssFile " + fixed(s["peak_rss_file_mib"].get<double>(), 0) + " MiB";
}

} // namespace

json runScaleBench(const ScaleBenchOptions& o, const std::function<void(const std::string&)>& say) {
    const fs::path root = fs::absolute(o.folder);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(root, ec)))
        throw Error("scale suite: --out '" + o.folder + "' exists; give a folder that does not (the suite creates it "
                    "and removes it at the end)");
    const LlamaConfig config = syntheticCheckpointConfig(o.size);
    // Refused before anything is written: the token-id files hold nsamples · seqlen and
    // evalWindows · seqlen ids (a window longer than the context would be capped by prune and
    // refused by eval).
    if (o.seqlen < 2 || o.nsamples < 1 || o.evalWindows < 1)
        throw Error("scale suite: --seqlen must be at least 2, --nsamples and --eval-windows at least 1");
    if (o.seqlen > config.max_position_embeddings)
        throw Error("scale suite: --seqlen " + std::to_string(o.seqlen) + " is longer than the " + o.size +
                    " model's context of " + std::to_string(config.max_position_embeddings) + " tokens");
    constexpr int64_t kMaxTokens = int64_t(1) << 26;  // 64 Mi ids (~500 MB of text); the papers use 128 × 2048
    if (o.nsamples > kMaxTokens / o.seqlen || o.evalWindows > kMaxTokens / o.seqlen)
        throw Error("scale suite: --nsamples " + std::to_string(o.nsamples) + " / --eval-windows " +
                    std::to_string(o.evalWindows) + " windows of " + std::to_string(o.seqlen) +
                    " tokens exceed the suite's " + std::to_string(kMaxTokens) + " tokens per set");
    fs::create_directories(root);
    struct RemoveAtEnd {
        fs::path path;
        ~RemoveAtEnd() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    } removeAtEnd{root};

    const std::string model = (root / "model").string(), calib = (root / "calib-ids.txt").string(),
                      evalIds = (root / "eval-ids.txt").string();
    writeRandomIds(calib, o.nsamples * o.seqlen + o.seqlen, config.vocab_size, o.seed);
    writeRandomIds(evalIds, o.evalWindows * o.seqlen + 1, config.vocab_size, o.seed + 1);
    json result = {{"size", o.size},         {"parameters", config.parameterCount()}, {"threads", o.threads},
                   {"nsamples", o.nsamples}, {"seqlen", o.seqlen},                    {"eval_windows", o.evalWindows},
                   {"ratio", o.ratio},       {"seed", o.seed}};

    json write = step(o, "write", {"bench", "--write-synthetic", o.size, "--out", model, "--seed", std::to_string(o.seed),
                                   "--json"});
    write["checkpoint_bytes"] = regularFileBytesUnder(model);
    say("write     " + o.size + " checkpoint, " + fixed(double(write["checkpoint_bytes"].get<uint64_t>()) / 1e9, 2) +
        " GB: " + memoryLine(write));
    result["write"] = write;

    const std::vector<std::string> evalArgs = {"--ids", evalIds, "--seqlen", std::to_string(o.seqlen), "--max-windows",
                                               std::to_string(o.evalWindows), "--layerwise", "--json"};
    auto evaluate = [&](const std::string& what, const std::string& dir) {
        std::vector<std::string> args = {"eval", dir};
        args.insert(args.end(), evalArgs.begin(), evalArgs.end());
        json e = step(o, "eval " + what, args);
        say("eval      " + what + ": perplexity " + (e.contains("ppl") ? e["ppl"].dump() : "?") + ", " +
            memoryLine(e));
        return e;
    };
    result["dense_eval"] = evaluate("dense", model);

    json prunes = json::array();
    for (const std::string& method : o.methods) {
        const std::string out = (root / ("pruned-" + method)).string();
        std::vector<std::string> args = {"prune",     model,       "--method", method, "--ratio", fixed(o.ratio, 6),
                                         "--calib",   calib,       "--calib-ids", "--nsamples", std::to_string(o.nsamples),
                                         "--seqlen",  std::to_string(o.seqlen), "--seed", std::to_string(o.seed),
                                         "--out",     out,         "--json"};
        if (o.layerwise) args.emplace_back("--layerwise");
        json p = step(o, "prune " + method, args);
        p["export_bytes"] = regularFileBytesUnder(out);
        std::string timings;
        if (p.contains("timings"))
            for (const auto& [stage, seconds] : p["timings"].items())
                if (seconds.is_number())
                    timings += " " + stage.substr(0, stage.size() - (stage.size() > 2 && stage.compare(stage.size() - 2, 2, "_s") == 0 ? 2 : 0)) +
                               " " + fixed(seconds.get<double>(), 2) + " s,";
        std::string scratch;
        if (p["road"].contains("statistics_scratch"))
            scratch = ", scratch " + fixed(double(p["road"]["statistics_scratch"].value("bytes", int64_t{0})) / 1e9, 2) + " GB";
        say("prune     " + method + " (" + (p["road"].value("layerwise", false) ? "layer-wise" : "in RAM") +
            "):" + timings + " export " + fixed(double(p["export_bytes"].get<uint64_t>()) / 1e9, 2) + " GB" + scratch +
            "; " + memoryLine(p));
        p["eval"] = evaluate(method, out);
        fs::remove_all(out, ec);  // the disk holds one export at a time
        prunes.push_back(std::move(p));
    }
    result["prunes"] = std::move(prunes);
    return result;
}

} // namespace npw
