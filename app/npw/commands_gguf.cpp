// export-gguf: a dense or pruned checkpoint as a GGUF file llama.cpp runs.
#include "app/npw/commands.h"
#include "core/models/gguf_export.h"
#include "core/models/language_model.h"
#include "core/models/model_loader.h"
#include "core/eval/generate.h"
#include "core/models/runtime.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <iostream>
#include <random>

namespace npw::cli {

namespace {

int runExportGguf(const Args& args) {
    if (args.positional().size() != 1)
        throw Error("'npw export-gguf' takes exactly one MODEL (a checkpoint path or demo:lm), got " +
                    std::to_string(args.positional().size()));
    if (!args.has("out")) throw Error("'npw export-gguf' needs --out FILE.gguf");
    GgufExportOptions options;
    options.dtype = parseGgufDtype(args.get("dtype"));
    options.name = args.get("name");
    // Mapped: the weights stay in the file; each tensor is read, checked and converted when it is
    // written (planGgufExport), so the model is never whole in memory.
    options.placeholderVocabulary = args.flag("no-tokenizer");
    if (options.placeholderVocabulary && args.has("tokenizer"))
        throw Error("--no-tokenizer writes no tokenizer, --tokenizer names one: give one of them");
    LlamaCheckpoint checkpoint = loadLlamaCheckpoint(args.positional()[0], WeightStorage::Mapped);
    useTokenizerFile(checkpoint, args.get("tokenizer"));
    const GgufExportReport r = exportGguf(checkpoint, args.get("out"), options);

    nlohmann::json layers = nlohmann::json::array();
    for (const GgufLayerShape& s : r.layers)
        layers.push_back({{"heads", s.heads}, {"kv_heads", s.kvHeads}, {"feed_forward", s.feedForward},
                          {"padded_head", s.paddedHead}, {"padded_channel", s.paddedChannel}});
    const nlohmann::json j = {{"model", args.positional()[0]}, {"out", r.path},
                              {"architecture", r.architecture}, {"tokenizer", r.tokenizerModel},
                              {"dtype", r.dtype}, {"tensors", r.tensors},
                              {"parameters", r.parameters}, {"bytes", r.bytes},
                              {"layers", layers}, {"notes", r.notes}};
    printResult(args, j, [&] {
        std::cout << "wrote " << r.path << " (" << r.bytes << " bytes): architecture " << r.architecture << ", "
                  << r.tensors << " tensors, " << r.parameters << " parameters, " << r.dtype << ", tokenizer "
                  << r.tokenizerModel << "\n";
        for (const std::string& note : r.notes) std::cout << "note: " << note << "\n";
    });
    return 0;
}

} // namespace

void addGgufCommand(std::vector<Command>& out) {
    out.push_back({"export-gguf", "MODEL --out FILE.gguf [--dtype f32|f16|bf16] [--tokenizer FILE | --no-tokenizer] [--json]",
                   "write a dense or pruned model as GGUF for llama.cpp (llama or, non-uniform, deci)",
                   flagsFor("export-gguf"), runExportGguf});
}

} // namespace npw::cli

namespace npw::cli {

namespace {

// The bridge script: $NPW_LLAMACPP_BRIDGE, else the source tree's tests/fixtures/llamacpp.
std::string bridgeScript() {
    if (const char* env = std::getenv("NPW_LLAMACPP_BRIDGE"); env && *env) return env;
    return (std::filesystem::path(resourcesDir()) / ".." / "tests" / "fixtures" / "llamacpp" / "run_gguf.mjs")
        .lexically_normal()
        .string();
}

std::string shellQuote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

} // namespace

std::string storedMatrixGgufDtype(const LlamaCheckpoint& checkpoint) {
    std::string stored;
    for (const auto& [name, origin] : checkpoint.origins) {
        if (origin.shape.size() != 2) continue;
        if (origin.dtype != "BF16" && origin.dtype != "F16") return "f32";
        if (!stored.empty() && stored != origin.dtype) return "f32";
        stored = origin.dtype;
    }
    return stored == "BF16" ? "bf16" : stored == "F16" ? "f16" : "f32";
}

nlohmann::json benchLlamaCpp(const LlamaCheckpoint& checkpoint, int64_t promptTokens, int64_t decodeTokens, int repeats,
                             int threads, const std::string& ggufDtype) {
    namespace fs = std::filesystem;
    const std::string script = bridgeScript();
    if (!fs::exists(fs::path(script).parent_path() / "node_modules" / "node-llama-cpp" / "package.json"))
        throw Error("--llamacpp needs node-llama-cpp beside '" + script +
                    "': run `npm install --omit=optional` in that folder (Node.js required), or set NPW_LLAMACPP_BRIDGE");
    // Named by this process, so that the next run removes one a kill -9 left (4 GB at 1b).
    removeWorkOfDeadProcesses(fs::temp_directory_path().string(), "npw-bench-", ".gguf");
    std::random_device rd;
    const fs::path gguf =
        fs::temp_directory_path() / ("npw-bench-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + ".gguf");
    struct Cleanup {
        fs::path p;
        ~Cleanup() { std::error_code ec; fs::remove(p, ec); }
    } cleanup{gguf};
    GgufExportOptions exportOptions;
    exportOptions.dtype = parseGgufDtype(ggufDtype);
    // The benchmark runs llama.cpp on token ids: a model without a tokenizer runs there too.
    exportOptions.placeholderVocabulary = checkpoint.tokenizerPath.empty();
    exportGguf(checkpoint, gguf.string(), exportOptions);

    // The same kind of prompt as benchmarkGeneration: fixed pseudo-random ids (speed does not
    // depend on the text), BOS first.
    std::mt19937_64 rng(1234);
    std::string ids = std::to_string(checkpoint.config.bos_token_id);
    for (int64_t i = 1; i < promptTokens; ++i) ids += "," + std::to_string(rng() % checkpoint.config.vocab_size);
    const std::string command = "node " + shellQuote(script) + " --model " + shellQuote(gguf.string()) +
                                " --prompt-ids " + ids + " --tokens " + std::to_string(decodeTokens) + " --bench --repeats " +
                                std::to_string(repeats) + " --threads " + std::to_string(threads) + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) throw Error("--llamacpp: cannot run node: " + std::string(std::strerror(errno)));
    std::string output;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    const int status = pclose(pipe);
    if (status != 0) throw Error("--llamacpp: '" + script + "' failed (status " + std::to_string(status) + "): " + output);
    const nlohmann::json r = nlohmann::json::parse(output.substr(output.rfind("\n{") == std::string::npos ? 0 : output.rfind("\n{") + 1));

    // npw's greedy ids from the same prompt, to show both ran the same model.
    std::vector<int32_t> prompt;
    for (int64_t id : r.at("prompt_ids")) prompt.push_back(static_cast<int32_t>(id));
    SamplingOptions greedy;
    greedy.maxNewTokens = decodeTokens;
    const std::vector<int32_t> npwIds =
        generate(LlamaModel(checkpoint, chooseRuntime("cpu", "float32")), prompt, greedy).tokens;
    const auto llamaIds = r.at("ids").get<std::vector<int32_t>>();
    // How many greedy ids agree before the first difference: with 16-bit GGUFs llama.cpp rounds the
    // activations to the weights' type for its matrix products, and npw keeps them float32, so
    // a near tie between the two largest logits (common with random weights and a 128k
    // vocabulary) can go either way; the ids that agree up to there still show the same model.
    size_t agree = 0;
    while (agree < npwIds.size() && agree < llamaIds.size() && npwIds[agree] == llamaIds[agree]) ++agree;
    const bool same = agree == npwIds.size() && llamaIds.size() >= npwIds.size();
    return {{"prefill_tokens_per_s", r.at("prefill_tokens_per_second")},
            {"decode_tokens_per_s", r.at("decode_tokens_per_second")},
            {"threads", threads},
            {"repeats", r.at("repeats")},
            {"gguf_dtype", ggufDtype},
            {"same_greedy_ids", same},
            {"greedy_ids_agreeing", agree},
            {"npw_ids", npwIds},
            {"llamacpp_ids", llamaIds}};
}

} // namespace npw::cli

