#include "core/experiments/synthetic_checkpoint.h"
#include "core/experiments/pruning_bench.h"

#include "core/io/safetensors.h"
#include "core/text/tokenizer_files.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace npw {

namespace {

// Left in the partial folder from its creation on: only a folder that has it is ever cleared.
constexpr const char* kPartialMarker = ".npw-synthetic-partial";

struct PlannedTensor {
    std::string name;
    std::vector<int64_t> shape;
    double stdev = 0;  // 0: a norm, all ones
};

std::vector<PlannedTensor> plannedTensors(const LlamaConfig& c) {
    const double s = 0.02, sOut = 0.02 / std::sqrt(2.0 * static_cast<double>(c.num_layers));
    const int64_t D = c.hidden_size;
    std::vector<PlannedTensor> out;
    out.push_back({"model.embed_tokens.weight", {c.vocab_size, D}, s});
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const int64_t q = c.num_heads[l] * c.head_dim, kv = c.num_kv_heads[l] * c.head_dim, inter = c.intermediate_size[l];
        out.push_back({p + "input_layernorm.weight", {D}, 0});
        out.push_back({p + "self_attn.q_proj.weight", {q, D}, s});
        out.push_back({p + "self_attn.k_proj.weight", {kv, D}, s});
        out.push_back({p + "self_attn.v_proj.weight", {kv, D}, s});
        out.push_back({p + "self_attn.o_proj.weight", {D, q}, sOut});
        out.push_back({p + "post_attention_layernorm.weight", {D}, 0});
        out.push_back({p + "mlp.gate_proj.weight", {inter, D}, s});
        out.push_back({p + "mlp.up_proj.weight", {inter, D}, s});
        out.push_back({p + "mlp.down_proj.weight", {D, inter}, sOut});
    }
    out.push_back({"model.norm.weight", {D}, 0});
    if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, D}, s});
    return out;
}

int64_t elementsOf(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

// The tensor in bf16, generated 16M elements at a time so that no float32 copy of it exists.
at::Tensor randomBf16(const PlannedTensor& t, uint64_t seed) {
    at::Tensor out = at::empty(t.shape, at::kBFloat16);
    if (t.stdev == 0) return out.fill_(1.0);
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const int64_t rowElements = t.shape.size() == 1 ? 1 : t.shape[1];
    const int64_t rowsPerBlock = std::max<int64_t>(1, (int64_t(1) << 24) / rowElements);
    at::Tensor rows = t.shape.size() == 1 ? out.unsqueeze(1) : out;
    for (int64_t r = 0; r < rows.size(0); r += rowsPerBlock) {
        const int64_t n = std::min(rowsPerBlock, rows.size(0) - r);
        rows.narrow(0, r, n).copy_(at::normal(0.0, t.stdev, {n, rows.size(1)}, gen));
    }
    return out;
}

// DIR.npw-partial, created empty with its marker (a leftover of an interrupted run of `command`
// is cleared first). Refuses an existing DIR and a partial folder npw did not leave.
fs::path beginPartialFolder(const std::string& dir, const std::string& command) {
    if (dir.empty()) throw Error("--out: give the folder to write the checkpoint into");
    std::error_code ec;
    if (fs::exists(dir, ec))
        throw Error("'" + dir + "' already exists; the synthetic checkpoint is written into a new folder (npw never "
                    "replaces a folder it did not write)");
    fs::path partial = fs::path(dir).lexically_normal().string() + ".npw-partial";
    if (fs::exists(partial, ec)) {
        if (!fs::exists(partial / kPartialMarker, ec))
            throw Error("'" + partial.string() + "' exists and was not left by an interrupted '" + command + "'; "
                        "move it away first");
        fs::remove_all(partial, ec);  // an earlier run that was stopped: start over
        if (ec) throw Error("cannot clear the interrupted run's '" + partial.string() + "': " + ec.message());
    }
    fs::create_directories(partial, ec);
    if (ec) throw Error("cannot create '" + partial.string() + "': " + ec.message());
    std::ofstream(partial / kPartialMarker) << command << ", in progress\n";
    return partial;
}

// The finished folder becomes DIR: the marker goes, then one rename.
void finishPartialFolder(const fs::path& partial, const std::string& dir) {
    std::error_code ec;
    fs::remove(partial / kPartialMarker, ec);
    fs::rename(partial, dir, ec);
    if (ec) throw Error("cannot rename '" + partial.string() + "' to '" + dir + "': " + ec.message());
}

std::string shardName(size_t index, size_t count) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
    return name;
}

} // namespace

LlamaConfig syntheticCheckpointConfig(const std::string& size) {
    if (size != "7b" && size != "8b") return syntheticLlamaConfig(size);
    LlamaConfig c;
    const bool llama3 = size == "8b";
    const int64_t layers = 32, heads = 32, kv = llama3 ? 8 : 32, inter = llama3 ? 14336 : 11008;
    c.hidden_size = 4096;
    c.head_dim = 128;
    c.vocab_size = llama3 ? 128256 : 32000;
    c.num_layers = layers;
    c.num_heads.assign(layers, heads);
    c.num_kv_heads.assign(layers, kv);
    c.intermediate_size.assign(layers, inter);
    c.max_position_embeddings = llama3 ? 8192 : 4096;
    c.rope_theta = llama3 ? 500000.0 : 10000.0;
    c.rms_norm_eps = 1e-5;
    c.bos_token_id = llama3 ? 128000 : 1;
    c.eos_token_id = llama3 ? 128001 : 2;
    c.tie_word_embeddings = false;
    return c;
}

SyntheticCheckpointReport writeSyntheticHfCheckpoint(const LlamaConfig& config, const std::string& dir,
                                                     const SyntheticCheckpointOptions& options, const ProgressFn& progress) {
    config.validate(dir);
    const fs::path partial = beginPartialFolder(dir, "npw bench --write-synthetic");

    // Shards: consecutive tensors until a shard holds at least shardBytes.
    const std::vector<PlannedTensor> planned = plannedTensors(config);
    std::vector<std::vector<size_t>> shards(1);
    int64_t inShard = 0;
    SyntheticCheckpointReport report;
    for (size_t i = 0; i < planned.size(); ++i) {
        if (inShard >= options.shardBytes) {
            shards.emplace_back();
            inShard = 0;
        }
        shards.back().push_back(i);
        inShard += 2 * elementsOf(planned[i].shape);
        report.parameters += elementsOf(planned[i].shape);
    }

    nlohmann::json weightMap = nlohmann::json::object();
    int64_t done = 0;
    for (size_t s = 0; s < shards.size(); ++s) {
        const std::string name = shardName(s, shards.size());
        std::vector<SafeTensorsEntry> entries;
        for (size_t i : shards[s]) entries.push_back({planned[i].name, at::kBFloat16, planned[i].shape});
        SafeTensorsStreamWriter writer((partial / name).string(), entries, {{"format", "pt"}});
        for (size_t i : shards[s]) {
            reportProgress(progress, "write " + planned[i].name, static_cast<double>(done),
                           static_cast<double>(planned.size()));
            writer.write(planned[i].name, randomBf16(planned[i], options.seed * 1000003 + i));
            weightMap[planned[i].name] = name;
            ++done;
        }
        writer.commit();
        report.shards.push_back(name);
        report.bytes += fs::file_size(partial / name);
    }
    writeTextAtomically((partial / "model.safetensors.index.json").string(),
                        nlohmann::json({{"metadata", {{"total_size", report.bytes}}}, {"weight_map", weightMap}}).dump(2) + "\n");
    if (!options.tokenizerFile.empty()) {
        const std::string bytes = readTokenizerFileBytes(options.tokenizerFile);
        const char* tokenizerName = tokenizerFileNameFor(detectTokenizerFile(bytes));
        if (*tokenizerName == '\0')
            throw Error("tokenizer '" + options.tokenizerFile + "' is none of tokenizer.json, tokenizer.model, tokenizer.bin");
        writeFileAtomically((partial / tokenizerName).string(),
                            [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
    }
    nlohmann::json configJson = nlohmann::json::parse(hfLlamaConfigJson(config, {}));
    configJson["torch_dtype"] = "bfloat16";
    configJson["npw_synthetic"] = "random weights written by npw bench --write-synthetic; for measurements only";
    writeTextAtomically((partial / "config.json").string(), configJson.dump(2) + "\n");
    finishPartialFolder(partial, dir);
    report.dir = dir;
    report.config = config;
    report.tensors = static_cast<int64_t>(planned.size());
    reportProgress(progress, "done", static_cast<double>(planned.size()), static_cast<double>(planned.size()));
    return report;
}

LlamaGenConfig syntheticLlamaGenConfig(const std::string& size, int64_t numClasses) {
    if (size == "tiny") {
        LlamaGenSizes s;
        s.dim = 64;
        s.layers = 2;
        s.heads = 4;
        s.grid = 8;
        s.vocab = 512;
        s.classes = numClasses;
        s.multipleOf = 32;
        LlamaGenConfig c = llamaGenCustomConfig(s);
        c.name = "tiny";
        return c;
    }
    // llamaGenNamedConfig names the sizes when SIZE is none of them; tiny is ours.
    try {
        return llamaGenNamedConfig(size, 256, 16384, numClasses, 16);
    } catch (const Error&) {
        throw Error("unknown synthetic image model size '" + size + "': B, L, XL, XXL, 3B (LlamaGen's GPT sizes) or tiny");
    }
}

std::vector<std::string> syntheticLlamaGenSizes() {
    std::vector<std::string> names = llamaGenModelNames();
    names.emplace_back("tiny");
    return names;
}

SyntheticCheckpointReport writeSyntheticLlamaGenDirectory(const LlamaGenConfig& config, const std::string& dir,
                                                          const SyntheticCheckpointOptions& options,
                                                          const ProgressFn& progress) {
    config.validate(dir);
    const LlamaConfig& t = config.transformer;
    const double s = 0.02, sOut = 0.02 / std::sqrt(2.0 * static_cast<double>(t.num_layers));
    const int64_t D = t.hidden_size;
    // LlamaGen's names and shapes, in the order its state dict lists them (readWeights in
    // llamagen.cpp takes exactly these).
    std::vector<PlannedTensor> planned;
    planned.push_back({"cls_embedding.embedding_table.weight", {config.num_classes + 1, D}, s});
    planned.push_back({"tok_embeddings.weight", {t.vocab_size, D}, s});
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        const int64_t q = t.num_heads[l] * t.head_dim, kv = t.num_kv_heads[l] * t.head_dim, inter = t.intermediate_size[l];
        planned.push_back({p + "attention.wqkv.weight", {q + 2 * kv, D}, s});
        planned.push_back({p + "attention.wo.weight", {D, q}, sOut});
        planned.push_back({p + "feed_forward.w1.weight", {inter, D}, s});
        planned.push_back({p + "feed_forward.w3.weight", {inter, D}, s});
        planned.push_back({p + "feed_forward.w2.weight", {D, inter}, sOut});
        planned.push_back({p + "attention_norm.weight", {D}, 0});
        planned.push_back({p + "ffn_norm.weight", {D}, 0});
    }
    planned.push_back({"norm.weight", {D}, 0});
    planned.push_back({"output.weight", {t.vocab_size, D}, s});

    const fs::path partial = beginPartialFolder(dir, "npw bench --write-synthetic-image");
    SyntheticCheckpointReport report;
    std::vector<SafeTensorsEntry> entries;
    for (const PlannedTensor& p : planned) {
        entries.push_back({p.name, at::kBFloat16, p.shape});
        report.parameters += elementsOf(p.shape);
    }
    const std::string weights = "model.safetensors";
    {
        SafeTensorsStreamWriter writer((partial / weights).string(), entries, {{"format", "pt"}});
        for (size_t i = 0; i < planned.size(); ++i) {
            reportProgress(progress, "write " + planned[i].name, static_cast<double>(i),
                           static_cast<double>(planned.size()));
            writer.write(planned[i].name, randomBf16(planned[i], options.seed * 1000003 + i));
        }
        writer.commit();
    }
    report.shards.push_back(weights);
    report.bytes = fs::file_size(partial / weights);
    const nlohmann::json extra = {
        {"torch_dtype", "bfloat16"},
        {"npw_synthetic", "random weights written by npw bench --write-synthetic-image; for measurements only"}};
    writeTextAtomically((partial / "config.json").string(), llamaGenConfigJson(config, extra.dump()));
    finishPartialFolder(partial, dir);
    report.dir = dir;
    report.config = t;
    report.tensors = static_cast<int64_t>(planned.size());
    reportProgress(progress, "done", static_cast<double>(planned.size()), static_cast<double>(planned.size()));
    return report;
}

} // namespace npw
