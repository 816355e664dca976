// export-gguf: a dense or pruned checkpoint as a GGUF file llama.cpp runs.
#include "app/npw/commands.h"
#include "core/io/gguf_export.h"
#include "core/io/model_loader.h"
#include "core/util/error.h"

#include <iostream>

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
    const LlamaCheckpoint checkpoint = loadLlamaCheckpoint(args.positional()[0]);
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
    emit(args, j, [&] {
        std::cout << "wrote " << r.path << " (" << r.bytes << " bytes): architecture " << r.architecture << ", "
                  << r.tensors << " tensors, " << r.parameters << " parameters, " << r.dtype << ", tokenizer "
                  << r.tokenizerModel << "\n";
        for (const std::string& note : r.notes) std::cout << "note: " << note << "\n";
    });
    return 0;
}

} // namespace

void addGgufCommand(std::vector<Command>& out) {
    out.push_back({"export-gguf", "MODEL --out FILE.gguf [--dtype f32|f16] [--json]",
                   "write a dense or pruned model as GGUF for llama.cpp (llama or, non-uniform, deci)",
                   {{"out", "FILE", "", "the .gguf file to write (atomically)"},
                    {"dtype", "TYPE", "f32", "f32 or f16 for the weight matrices (norms and biases stay f32)"},
                    {"name", "TEXT", "", "general.name (default: the model's folder or file name)"},
                    jsonFlag()},
                   runExportGguf});
}

} // namespace npw::cli
