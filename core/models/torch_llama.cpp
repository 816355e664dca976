#include "core/models/torch_llama.h"
#include "core/models/non_finite.h"
#include "core/text/tokenizer_files.h"

#include "core/text/json_fields.h"

#include "core/io/shape_text.h"
#include "core/io/torch_checkpoint.h"
#include "core/models/weight_values.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace npw {

using nlohmann::json;
using Shape = std::vector<int64_t>;

namespace {

std::optional<double> gMetaRopeScalingFactor;

void checkFinite(const at::Tensor& tensor, const std::string& file, const std::string& name) {
    if (!allFinite(tensor))
        throw Error("tensor '" + name + "' in '" + file + "' has NaN or infinite values");
}

void fillUniformConfig(LlamaConfig& c, int64_t dim, int64_t layers, int64_t heads, int64_t kvHeads, int64_t hidden) {
    c.hidden_size = dim;
    c.num_layers = layers;
    c.head_dim = dim / heads;
    c.num_heads.assign(static_cast<size_t>(layers), heads);
    c.num_kv_heads.assign(static_cast<size_t>(layers), kvHeads);
    c.intermediate_size.assign(static_cast<size_t>(layers), hidden);
    c.rope_layout = RopeLayout::AdjacentPairs;  // Meta's and llama2.c's complex-number RoPE
}

// ---------------------------------------------------------------------------------------------
// Meta's original release
// ---------------------------------------------------------------------------------------------

struct MetaParams {
    int64_t dim = 0, layers = 0, heads = 0, kvHeads = 0, vocab = -1, multipleOf = 256;
    std::optional<double> ffnDimMultiplier;
    double normEps = 1e-5, ropeTheta = 10000.0;
    bool useScaledRope = false;
    std::optional<int64_t> maxSeqLen;
};

MetaParams readMetaParams(const std::string& path) {
    auto fail = [&](const std::string& problem) -> void { throw Error("params '" + path + "': " + problem); };
    const json j = json_fields::readJsonFile(path, "params '" + path + "'");  // depth- and range-checked
    if (!j.is_object()) fail("not a JSON object");
    auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
    auto integer = [&](const char* key, std::optional<int64_t> fallback) -> int64_t {
        if (!given(key)) {
            if (!fallback) fail(std::string("'") + key + "' is missing");
            return *fallback;
        }
        if (!j[key].is_number_integer()) fail(std::string("'") + key + "' must be an integer, got " + j[key].dump());
        return j[key].get<int64_t>();
    };
    auto number = [&](const char* key, double fallback) -> double {
        if (!given(key)) return fallback;
        if (!j[key].is_number()) fail(std::string("'") + key + "' must be a number, got " + j[key].dump());
        return j[key].get<double>();
    };
    MetaParams p;
    p.dim = integer("dim", std::nullopt);
    p.layers = integer("n_layers", std::nullopt);
    p.heads = integer("n_heads", std::nullopt);
    p.kvHeads = integer("n_kv_heads", p.heads);
    p.vocab = integer("vocab_size", -1);
    p.multipleOf = integer("multiple_of", 256);
    if (given("ffn_dim_multiplier")) p.ffnDimMultiplier = number("ffn_dim_multiplier", 1.0);
    p.normEps = number("norm_eps", 1e-5);
    p.ropeTheta = number("rope_theta", 10000.0);
    if (given("use_scaled_rope")) {
        if (!j["use_scaled_rope"].is_boolean()) fail("'use_scaled_rope' must be true or false");
        p.useScaledRope = j["use_scaled_rope"].get<bool>();
    }
    if (given("max_seq_len")) p.maxSeqLen = integer("max_seq_len", 0);
    if (p.dim <= 0 || p.layers <= 0 || p.layers > 100000 || p.heads <= 0 || p.kvHeads <= 0 || p.multipleOf <= 0 ||
        p.heads % p.kvHeads != 0 || p.dim % p.heads != 0 || (p.dim / p.heads) % 2 != 0 || p.vocab == 0 || p.vocab < -1)
        fail("dim " + std::to_string(p.dim) + ", n_layers " + std::to_string(p.layers) + ", n_heads " +
             std::to_string(p.heads) + ", n_kv_heads " + std::to_string(p.kvHeads) + ", vocab_size " +
             std::to_string(p.vocab) + ", multiple_of " + std::to_string(p.multipleOf) + " do not describe a LLaMA");
    return p;
}

// llama/model.py's FeedForward: int(2·4·dim/3), times ffn_dim_multiplier, rounded up to multiple_of.
int64_t metaHiddenDim(const MetaParams& p) {
    int64_t hidden = 2 * (4 * p.dim) / 3;
    if (p.ffnDimMultiplier) hidden = static_cast<int64_t>(*p.ffnDimMultiplier * static_cast<double>(hidden));
    return p.multipleOf * ((hidden + p.multipleOf - 1) / p.multipleOf);
}

std::vector<std::string> metaShards(const fs::path& dir) {
    std::map<int, std::string> byRank;
    const std::regex pattern(R"(consolidated\.(\d+)\.pth)");
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::smatch m;
        const std::string name = entry.path().filename().string();
        if (std::regex_match(name, m, pattern)) byRank[std::stoi(m[1].str())] = entry.path().string();
    }
    std::vector<std::string> shards;
    for (const auto& [rank, path] : byRank) {
        if (rank != static_cast<int>(shards.size()))
            throw Error("Meta checkpoint '" + dir.string() + "': the shards are not consolidated.00.pth … consolidated." +
                        std::to_string(byRank.size() - 1) + ".pth without gaps (found rank " + std::to_string(rank) +
                        " where " + std::to_string(shards.size()) + " was expected)");
        shards.push_back(path);
    }
    return shards;
}

// Meta's and llama2.c's names (layers.N.attention.wq.weight, …) of the HF names namedTensors uses.
std::string metaNameOf(const std::string& hfName) {
    static const std::vector<std::pair<std::string, std::string>> kSuffixes = {
        {"input_layernorm.weight", "attention_norm.weight"}, {"self_attn.q_proj.weight", "attention.wq.weight"},
        {"self_attn.k_proj.weight", "attention.wk.weight"},  {"self_attn.v_proj.weight", "attention.wv.weight"},
        {"self_attn.o_proj.weight", "attention.wo.weight"},  {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "feed_forward.w1.weight"},  {"mlp.down_proj.weight", "feed_forward.w2.weight"},
        {"mlp.up_proj.weight", "feed_forward.w3.weight"}};
    if (hfName == "model.embed_tokens.weight") return "tok_embeddings.weight";
    if (hfName == "model.norm.weight") return "norm.weight";
    if (hfName == "lm_head.weight") return "output.weight";
    const std::string prefix = "model.layers.";
    if (hfName.rfind(prefix, 0) != 0) return "";
    const size_t dot = hfName.find('.', prefix.size());
    const std::string layer = hfName.substr(prefix.size(), dot - prefix.size()), rest = hfName.substr(dot + 1);
    for (const auto& [hf, meta] : kSuffixes)
        if (rest == hf) return "layers." + layer + "." + meta;
    return "";
}

// A headers-only load's origins by Meta name, filed under the HF names of the checkpoint's tensors.
void nameOrigins(LlamaCheckpoint& checkpoint, const std::map<std::string, TensorOrigin>& byMetaName, const std::string&) {
    for (const auto& [hfName, tensor] : namedTensors(checkpoint.weights)) {
        auto it = byMetaName.find(metaNameOf(hfName));
        if (it != byMetaName.end()) checkpoint.origins[hfName] = it->second;
    }
    checkpoint.valuesChecked = false;  // none was read
}

// How one tensor's model-parallel pieces are joined.
enum class Join { Dim0, Dim1, Replicated, Embedding };

} // namespace

void setMetaRopeScalingFactor(std::optional<double> factor) { gMetaRopeScalingFactor = factor; }

std::optional<double> metaRopeScalingFactor() {
    if (gMetaRopeScalingFactor) return gMetaRopeScalingFactor;
    if (const char* env = std::getenv("NPW_ROPE_SCALING_FACTOR"); env && *env) {
        char* end = nullptr;
        const double value = std::strtod(env, &end);
        if (end == env || *end != '\0' || !(value > 0))
            throw Error(std::string("NPW_ROPE_SCALING_FACTOR '") + env + "' is not a positive number");
        return value;
    }
    return std::nullopt;
}

namespace {

// A tensor of the given shape with no data (LibTorch's meta device): what a headers-only load
// holds, so that shapes are joined and checked exactly as the values would be.
at::Tensor shapeOnly(const std::vector<int64_t>& shape) {
    return at::empty(shape, at::TensorOptions().device(at::kMeta).dtype(at::kFloat));
}

uint64_t storedBytes(const TorchTensorInfo& info) {
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    const uint64_t element = info.dtype == "F64" || info.dtype == "I64" ? 8
                             : info.dtype == "F32" || info.dtype == "I32" ? 4
                             : info.dtype == "F16" || info.dtype == "BF16" ? 2 : 1;
    return static_cast<uint64_t>(numel) * element;
}

} // namespace

LlamaCheckpoint loadMetaCheckpoint(const std::string& dirName, bool headersOnly, bool mapped) {
    const fs::path dir(dirName);
    const std::string paramsPath = (dir / "params.json").string();
    const MetaParams p = readMetaParams(paramsPath);
    const std::vector<std::string> shardPaths = metaShards(dir);
    if (shardPaths.empty()) throw Error("Meta checkpoint '" + dirName + "' has no consolidated.00.pth");
    const int64_t ranks = static_cast<int64_t>(shardPaths.size());
    std::vector<std::shared_ptr<TorchCheckpoint>> shards;
    shards.reserve(shardPaths.size());
    TorchCheckpointOptions options;
    options.stateDictPath = "";  // Meta saves the state dict itself
    for (const std::string& path : shardPaths) shards.push_back(TorchCheckpoint::open(path, options));

    const int64_t hidden = metaHiddenDim(p), headDim = p.dim / p.heads;
    std::set<std::string> taken;
    std::map<std::string, TensorOrigin> origins;  // headersOnly, and mapped tensors: by Meta name
    // mapped: a piece in its stored dtype, a view of the archive where it can be (no copy), else
    // an owned copy (F64 as float32); integer storages refused as loadFloat refuses them.
    auto readPiece = [&](size_t r, const std::string& name) {
        const TorchCheckpoint& shard = *shards[r];
        if (shard.canView(name)) return shard.view(name);
        const std::string& dtype = shard.info(name).dtype;
        return dtype == "F32" || dtype == "F16" || dtype == "BF16" ? shard.load(name) : shard.loadFloat(name);
    };
    // Joins the pieces of `name` from every shard and checks the whole against `expected`
    // (a negative entry: any size, e.g. the vocabulary when params.json says -1).
    auto take = [&](const std::string& name, Join join, Shape expected) {
        std::vector<at::Tensor> pieces;
        for (size_t r = 0; r < shards.size(); ++r) {
            if (!shards[r]->has(name))
                throw Error("missing tensor '" + name + "' in '" + shardPaths[r] + "' (params '" + paramsPath + "' implies it)");
            pieces.push_back(headersOnly ? shapeOnly(shards[r]->info(name).shape)
                             : mapped    ? readPiece(r, name)
                                         : shards[r]->loadFloat(name));
            if (pieces.back().dim() != static_cast<int64_t>(expected.size()))
                throw Error("tensor '" + name + "' in '" + shardPaths[r] + "' has shape " + formatShape(pieces.back().sizes()) +
                            ", not " + std::to_string(expected.size()) + "-dimensional");
        }
        taken.insert(name);
        at::Tensor whole;
        std::string how;
        if (join == Join::Embedding) {
            // ParallelEmbedding (LLaMA-1/2) splits the embedding dimension; VocabParallelEmbedding
            // (Llama-3) the vocabulary. A shard as wide as dim is split by vocabulary.
            join = ranks == 1 || pieces[0].size(1) == p.dim ? Join::Dim0 : Join::Dim1;
        }
        // Model-parallel shards hold equal pieces: a shard from another model (another width or
        // MLP size) is named here, before anything is joined (at::cat would fail inside LibTorch).
        for (size_t r = 1; r < pieces.size(); ++r)
            if (pieces[r].sizes() != pieces[0].sizes()) {
                const std::string joined = join == Join::Replicated ? "replicated in every shard"
                                           : join == Join::Dim0     ? "split along dim 0"
                                                                    : "split along dim 1";
                throw Error("tensor '" + name + "' in '" + shardPaths[r] + "' has shape " + formatShape(pieces[r].sizes()) +
                            " but " + formatShape(pieces[0].sizes()) + " in '" + shardPaths[0] +
                            "': model-parallel shards hold equal pieces (params '" + paramsPath + "' imply " +
                            formatShape(expected) + " in all, " + joined + " over " + std::to_string(ranks) +
                            " shards); is the shard from another model?");
            }
        // mapped, several shards: joining reads every value once, so they are checked here, each
        // piece against its own file (one shard's tensors stay views, checked where first read).
        const bool checkPiecesNow = mapped && ranks > 1;
        if (checkPiecesNow)
            for (size_t r = 0; r < pieces.size(); ++r) checkTensorFinite(pieces[r], shardPaths[r], name);
        if (join == Join::Replicated) {
            for (size_t r = 1; r < pieces.size(); ++r)
                if (headersOnly ? pieces[r].sizes() != pieces[0].sizes() : !at::equal(pieces[r], pieces[0]))
                    throw Error("tensor '" + name + "' differs between '" + shardPaths[0] + "' and '" + shardPaths[r] +
                                "' (model-parallel shards replicate it)");
            whole = pieces[0];
            how = "replicated";
        } else if (ranks == 1) {
            whole = pieces[0];  // nothing to join (mapped: stays a view of the file)
            how = "one shard";
        } else {
            whole = at::cat(pieces, join == Join::Dim0 ? 0 : 1);
            how = std::string("joined along dim ") + (join == Join::Dim0 ? "0" : "1") + " over " + std::to_string(ranks) + " shards";
        }
        for (size_t d = 0; d < expected.size(); ++d)
            if (expected[d] >= 0 && whole.size(static_cast<int64_t>(d)) != expected[d]) {
                throw Error("tensor '" + name + "' of Meta checkpoint '" + dirName + "' (" + how + ") has shape " +
                            formatShape(whole.sizes()) + " but params '" + paramsPath + "' imply " + formatShape(expected) +
                            (name.find("w1") != std::string::npos || name.find("w2") != std::string::npos ||
                                     name.find("w3") != std::string::npos
                                 ? " (MLP width " + std::to_string(hidden) + " from dim, multiple_of and ffn_dim_multiplier)"
                                 : ""));
            }
        if (headersOnly) {
            TensorOrigin origin{shardPaths[0], name, 0, shards[0]->info(name).dtype, whole.sizes().vec(), 0};
            for (const auto& shard : shards) origin.bytes += storedBytes(shard->info(name));
            origins[name] = origin;
            return whole;
        }
        if (mapped) {
            if (!checkPiecesNow)
                origins[name] = TensorOrigin{shardPaths[0], name, 0, shards[0]->info(name).dtype, whole.sizes().vec(),
                                             storedBytes(shards[0]->info(name))};
            return whole;
        }
        checkFinite(whole, dirName, name);
        return whole.contiguous();
    };

    LlamaCheckpoint checkpoint;
    checkpoint.source = dirName;
    LlamaConfig& c = checkpoint.config;
    LlamaWeights& w = checkpoint.weights;
    w.embed = take("tok_embeddings.weight", Join::Embedding, Shape{p.vocab, p.dim});
    const int64_t vocab = w.embed.size(0);
    fillUniformConfig(c, p.dim, p.layers, p.heads, p.kvHeads, hidden);
    c.vocab_size = vocab;
    c.rms_norm_eps = p.normEps;
    c.rope_theta = p.ropeTheta;
    if (p.useScaledRope) {
        const std::optional<double> factor = metaRopeScalingFactor();
        if (!factor)
            throw Error("params '" + paramsPath +
                        "' says use_scaled_rope but not its factor (Meta's Llama 3.1 and 3.3 use 8, Llama 3.2 1B/3B "
                        "use 32): give it with --rope-scaling-factor (or NPW_ROPE_SCALING_FACTOR)");
        // Meta's apply_scaling: low_freq_factor 1, high_freq_factor 4, old context 8192.
        c.rope_scaling.type = RopeScaling::Type::Llama3;
        c.rope_scaling.factor = *factor;
        c.rope_scaling.low_freq_factor = 1.0;
        c.rope_scaling.high_freq_factor = 4.0;
        c.rope_scaling.original_max_position_embeddings = 8192;
    }
    // params.json does not say the context; transformers' converter uses these per generation.
    c.max_position_embeddings = p.maxSeqLen ? *p.maxSeqLen
                                : p.useScaledRope        ? 131072
                                : p.ropeTheta >= 500000.0 ? 8192   // Llama 3
                                : p.normEps < 5e-6        ? 2048   // LLaMA-1 (norm_eps 1e-6)
                                                          : 4096;  // LLaMA-2
    const bool llama3Vocab = vocab >= 128000;
    c.bos_token_id = llama3Vocab ? 128000 : 1;
    c.eos_token_id = llama3Vocab ? 128001 : 2;
    const int64_t kvDim = p.kvHeads * headDim;
    w.layers.resize(static_cast<size_t>(p.layers));
    for (int64_t l = 0; l < p.layers; ++l) {
        LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
        const std::string pre = "layers." + std::to_string(l) + ".";
        L.wq = take(pre + "attention.wq.weight", Join::Dim0, Shape{p.dim, p.dim});
        L.wk = take(pre + "attention.wk.weight", Join::Dim0, Shape{kvDim, p.dim});
        L.wv = take(pre + "attention.wv.weight", Join::Dim0, Shape{kvDim, p.dim});
        L.wo = take(pre + "attention.wo.weight", Join::Dim1, Shape{p.dim, p.dim});
        L.w_gate = take(pre + "feed_forward.w1.weight", Join::Dim0, Shape{hidden, p.dim});
        L.w_down = take(pre + "feed_forward.w2.weight", Join::Dim1, Shape{p.dim, hidden});
        L.w_up = take(pre + "feed_forward.w3.weight", Join::Dim0, Shape{hidden, p.dim});
        L.attn_norm = take(pre + "attention_norm.weight", Join::Replicated, Shape{p.dim});
        L.ffn_norm = take(pre + "ffn_norm.weight", Join::Replicated, Shape{p.dim});
    }
    w.final_norm = take("norm.weight", Join::Replicated, Shape{p.dim});
    w.lm_head = take("output.weight", Join::Dim0, Shape{vocab, p.dim});
    // Llama 3.2 1B/3B share the classifier with the embedding; Meta's files store both. Only
    // their values tell (a headers-only load reads these two, shard by shard, when they are cut alike).
    if (headersOnly) {
        bool same = w.lm_head.sizes() == w.embed.sizes();
        for (size_t r = 0; same && r < shards.size(); ++r)
            same = shards[r]->info("output.weight").shape == shards[r]->info("tok_embeddings.weight").shape &&
                   at::equal(shards[r]->load("output.weight"), shards[r]->load("tok_embeddings.weight"));
        c.tie_word_embeddings = same;
    } else {
        c.tie_word_embeddings = at::equal(w.lm_head, w.embed);
    }
    if (c.tie_word_embeddings) w.lm_head = w.embed;
    for (size_t r = 0; r < shards.size(); ++r)
        for (const std::string& name : shards[r]->names())
            if (!taken.count(name) && name != "rope.freqs")  // LLaMA-1 saved its RoPE table; recomputed here
                throw Error("unexpected tensor '" + name + "' in '" + shardPaths[r] +
                            "': a LLaMA with params '" + paramsPath + "' has no such tensor (npw refuses a checkpoint it "
                            "does not fully understand)");
    c.validate(paramsPath);
    checkpoint.tokenizerPath = metaTokenizerFile(dirName);
    if (headersOnly || mapped) nameOrigins(checkpoint, origins, "");
    checkpoint.weightsMapped = mapped;
    return checkpoint;
}

// ---------------------------------------------------------------------------------------------
// llama2.c's ckpt.pt
// ---------------------------------------------------------------------------------------------

LlamaCheckpoint loadLlama2cTrainingCheckpoint(const std::string& path, bool headersOnly) {
    auto fail = [&](const std::string& problem) -> void { throw Error("llama2.c training checkpoint '" + path + "': " + problem); };
    TorchCheckpointOptions options;
    options.stateDictPath = "model";
    const std::shared_ptr<TorchCheckpoint> ck = TorchCheckpoint::open(path, options);
    const PickleValue* args = ck->root().get("model_args");
    if (!args || !args->is(PickleKind::Dict)) fail("it has no \"model_args\" dict (llama2.c's train.py saves one)");
    auto arg = [&](const char* key, std::optional<int64_t> fallback) -> int64_t {
        const PickleValue* v = args->get(key);
        if (!v || v->is(PickleKind::None)) {
            if (!fallback) fail(std::string("model_args has no '") + key + "'");
            return *fallback;
        }
        if (!v->is(PickleKind::Int)) fail(std::string("model_args '") + key + "' is " + describePickleValue(*v) + ", not an int");
        return v->integer;
    };
    const int64_t dim = arg("dim", std::nullopt), layers = arg("n_layers", std::nullopt), heads = arg("n_heads", std::nullopt);
    const int64_t kvHeads = arg("n_kv_heads", heads), vocab = arg("vocab_size", std::nullopt);
    const int64_t seqLen = arg("max_seq_len", std::nullopt);
    double normEps = 1e-5;  // llama2.c's ModelArgs.norm_eps; train.py does not save it
    if (const PickleValue* v = args->get("norm_eps"); v && v->is(PickleKind::Float)) normEps = v->real;
    if (dim <= 0 || layers <= 0 || layers > 100000 || heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0 || dim % heads != 0 ||
        (dim / heads) % 2 != 0 || vocab <= 0 || seqLen <= 0)
        fail("model_args (dim " + std::to_string(dim) + ", n_layers " + std::to_string(layers) + ", n_heads " +
             std::to_string(heads) + ", n_kv_heads " + std::to_string(kvHeads) + ", vocab_size " + std::to_string(vocab) +
             ", max_seq_len " + std::to_string(seqLen) + ") do not describe a LLaMA");

    // torch.compile wraps the model: its keys then start with "_orig_mod.".
    std::map<std::string, std::string> byName;  // key without the prefix → key in the file
    for (const std::string& name : ck->names()) {
        const std::string bare = name.rfind("_orig_mod.", 0) == 0 ? name.substr(10) : name;
        if (!byName.emplace(bare, name).second) fail("tensor '" + bare + "' appears twice (with and without _orig_mod.)");
    }
    std::set<std::string> taken;
    std::map<std::string, TensorOrigin> origins;  // headersOnly: by name without _orig_mod.
    auto take = [&](const std::string& bare, const Shape& expected) {
        auto it = byName.find(bare);
        if (it == byName.end()) fail("missing tensor '" + bare + "' in its \"model\" state dict");
        at::Tensor t = headersOnly ? shapeOnly(ck->info(it->second).shape) : ck->loadFloat(it->second);
        bool ok = t.dim() == static_cast<int64_t>(expected.size());
        for (size_t d = 0; ok && d < expected.size(); ++d) ok = expected[d] < 0 || t.size(static_cast<int64_t>(d)) == expected[d];
        if (!ok)
            fail("tensor '" + it->second + "' has shape " + formatShape(t.sizes()) + " but model_args imply " +
                 formatShape(expected));
        taken.insert(bare);
        if (headersOnly) {
            const TorchTensorInfo& info = ck->info(it->second);
            origins[bare] = TensorOrigin{path, it->second, 0, info.dtype, info.shape, storedBytes(info)};
            return t;
        }
        checkFinite(t, path, it->second);
        return t.contiguous();
    };

    const int64_t headDim = dim / heads, kvDim = kvHeads * headDim;
    // hidden_dim is not in model_args (ModelArgs computes it): the first w1 says it.
    auto w1 = byName.find("layers.0.feed_forward.w1.weight");
    if (w1 == byName.end()) fail("missing tensor 'layers.0.feed_forward.w1.weight' in its \"model\" state dict");
    const TorchTensorInfo& w1Info = ck->info(w1->second);
    if (w1Info.shape.size() != 2 || w1Info.shape[0] <= 0) fail("tensor '" + w1->second + "' is not a matrix");
    const int64_t hidden = w1Info.shape[0];

    LlamaCheckpoint checkpoint;
    checkpoint.source = path;
    LlamaConfig& c = checkpoint.config;
    fillUniformConfig(c, dim, layers, heads, kvHeads, hidden);
    c.vocab_size = vocab;
    c.max_position_embeddings = seqLen;
    c.rms_norm_eps = normEps;
    c.rope_theta = 10000.0;
    c.bos_token_id = 1;
    c.eos_token_id = 2;
    LlamaWeights& w = checkpoint.weights;
    w.embed = take("tok_embeddings.weight", Shape{vocab, dim});
    w.layers.resize(static_cast<size_t>(layers));
    for (int64_t l = 0; l < layers; ++l) {
        LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
        const std::string pre = "layers." + std::to_string(l) + ".";
        L.wq = take(pre + "attention.wq.weight", Shape{dim, dim});
        L.wk = take(pre + "attention.wk.weight", Shape{kvDim, dim});
        L.wv = take(pre + "attention.wv.weight", Shape{kvDim, dim});
        L.wo = take(pre + "attention.wo.weight", Shape{dim, dim});
        L.w_gate = take(pre + "feed_forward.w1.weight", Shape{hidden, dim});
        L.w_down = take(pre + "feed_forward.w2.weight", Shape{dim, hidden});
        L.w_up = take(pre + "feed_forward.w3.weight", Shape{hidden, dim});
        L.attn_norm = take(pre + "attention_norm.weight", Shape{dim});
        L.ffn_norm = take(pre + "ffn_norm.weight", Shape{dim});
    }
    w.final_norm = take("norm.weight", Shape{dim});
    // llama2.c ties output.weight to tok_embeddings.weight (one storage, saved under both keys).
    if (byName.count("output.weight")) {
        const TorchTensorInfo& out = ck->info(byName["output.weight"]);
        const TorchTensorInfo& emb = ck->info(byName["tok_embeddings.weight"]);
        const bool sameStorage = out.storageKey == emb.storageKey && out.storageOffset == emb.storageOffset &&
                                 out.shape == emb.shape && out.stride == emb.stride;
        w.lm_head = take("output.weight", Shape{vocab, dim});
        c.tie_word_embeddings =
            sameStorage || (headersOnly ? out.shape == emb.shape && at::equal(ck->load(byName["output.weight"]),
                                                                                ck->load(byName["tok_embeddings.weight"]))
                                        : at::equal(w.lm_head, w.embed));
    } else {
        c.tie_word_embeddings = true;
    }
    if (c.tie_word_embeddings) w.lm_head = w.embed;
    for (const auto& [bare, name] : byName)
        if (!taken.count(bare) && bare != "freqs_cos" && bare != "freqs_sin")  // RoPE buffers, recomputed
            fail("unexpected tensor '" + name + "' in its \"model\" state dict (npw refuses a checkpoint it does not fully "
                 "understand)");
    c.validate(path);
    if (headersOnly) nameOrigins(checkpoint, origins, "");
    return checkpoint;
}

} // namespace npw
