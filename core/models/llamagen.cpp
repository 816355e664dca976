#include "core/models/llamagen.h"
#include "core/models/non_finite.h"

#include "core/io/safetensors.h"
#include "core/io/shape_text.h"
#include "core/io/torch_checkpoint.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/models/model_files.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <set>

namespace fs = std::filesystem;

namespace npw {

using nlohmann::json;
using Shape = std::vector<int64_t>;

int64_t llamaGenFfnHidden(int64_t dim, int64_t multipleOf) {
    // FeedForward in gpt.py: hidden = int(2 * (4 * dim) / 3), then find_multiple.
    const int64_t hidden = static_cast<int64_t>(2.0 * static_cast<double>(4 * dim) / 3.0);
    if (multipleOf <= 0) return hidden;
    return hidden % multipleOf == 0 ? hidden : hidden + multipleOf - hidden % multipleOf;
}

void LlamaGenConfig::validate(const std::string& source) const {
    auto fail = [&](const std::string& problem) {
        throw Error("LlamaGen model '" + source + "': " + problem);
    };
    transformer.validate(source);
    if (cls_token_num != 1) fail("cls_token_num is " + std::to_string(cls_token_num) + "; c2i models use 1");
    if (num_classes <= 0) fail("num_classes must be positive, got " + std::to_string(num_classes));
    if (grid <= 0) fail("the token grid must be positive, got " + std::to_string(grid));
    if (transformer.head_dim % 4 != 0)
        fail("head_dim " + std::to_string(transformer.head_dim) +
             " is not divisible by 4: the 2D rotary embedding splits each half of a head's pairs over x and y");
    if (transformer.max_position_embeddings != cls_token_num + blockSize())
        fail("context " + std::to_string(transformer.max_position_embeddings) + " ≠ class tokens + grid² = " +
             std::to_string(cls_token_num + blockSize()));
    if (transformer.rope_layout != RopeLayout::AdjacentPairs) fail("LlamaGen rotates adjacent pairs");
    for (int64_t l = 0; l < transformer.num_layers; ++l)
        if (transformer.num_kv_heads[l] != transformer.num_heads[l])
            fail("layer " + std::to_string(l) + " has " + std::to_string(transformer.num_kv_heads[l]) +
                 " kv heads for " + std::to_string(transformer.num_heads[l]) + " heads; c2i models are MHA");
}

std::string LlamaGenConfig::describe() const {
    const LlamaConfig& t = transformer;
    std::string heads = t.isUniform() ? std::to_string(t.num_heads.empty() ? 0 : t.num_heads[0]) : "per-layer";
    std::string ffn = t.isUniform() ? std::to_string(t.intermediate_size.empty() ? 0 : t.intermediate_size[0]) : "per-layer";
    return name + " (" + std::to_string(t.num_layers) + " layers, dim " + std::to_string(t.hidden_size) + ", " +
           heads + " heads of " + std::to_string(t.head_dim) + ", FFN " + ffn + "), " + std::to_string(grid) + "×" +
           std::to_string(grid) + " tokens, vocab " + std::to_string(t.vocab_size) + ", " +
           std::to_string(num_classes) + " classes";
}

namespace {

struct NamedSize {
    const char* name;
    int64_t layers, heads, dim;
};
// gpt.py's GPT_models for class-conditional generation.
constexpr NamedSize kNamedSizes[] = {
    {"B", 12, 12, 768}, {"L", 24, 16, 1024}, {"XL", 36, 20, 1280}, {"XXL", 48, 24, 1536}, {"3B", 24, 32, 3200}};

LlamaGenConfig makeConfig(const std::string& name, int64_t dim, int64_t layers, int64_t heads, int64_t ffn,
                          int64_t grid, int64_t vocab, int64_t classes, int64_t downsample) {
    LlamaGenConfig c;
    c.name = name;
    c.num_classes = classes;
    c.grid = grid;
    c.downsample = downsample;
    c.image_size = grid * downsample;
    LlamaConfig& t = c.transformer;
    t.vocab_size = vocab;
    t.hidden_size = dim;
    t.num_layers = layers;
    t.head_dim = heads > 0 ? dim / heads : 0;
    t.num_heads.assign(static_cast<size_t>(layers), heads);
    t.num_kv_heads.assign(static_cast<size_t>(layers), heads);
    t.intermediate_size.assign(static_cast<size_t>(layers), ffn);
    t.max_position_embeddings = c.cls_token_num + grid * grid;
    t.rope_theta = 10000.0;
    t.rms_norm_eps = 1e-5;
    t.tie_word_embeddings = false;
    t.rope_layout = RopeLayout::AdjacentPairs;
    t.bos_token_id = -1;
    t.eos_token_id = -1;
    return c;
}

std::string upper(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

} // namespace

std::vector<std::string> llamaGenModelNames() {
    std::vector<std::string> names;
    for (const NamedSize& s : kNamedSizes) names.emplace_back(s.name);
    return names;
}

LlamaGenConfig llamaGenNamedConfig(const std::string& name, int64_t imageSize, int64_t vocabSize, int64_t numClasses,
                                   int64_t downsample) {
    std::string key = upper(name);
    if (key.rfind("GPT-", 0) == 0) key = key.substr(4);
    for (const NamedSize& s : kNamedSizes) {
        if (key != s.name) continue;
        if (downsample <= 0 || imageSize <= 0 || imageSize % downsample != 0)
            throw Error("image size " + std::to_string(imageSize) + " is not a multiple of the tokenizer's downsampling " +
                        std::to_string(downsample) + " (LlamaGen uses 256 or 384 with VQ-16)");
        return makeConfig(std::string("GPT-") + s.name, s.dim, s.layers, s.heads, llamaGenFfnHidden(s.dim), imageSize / downsample,
                          vocabSize, numClasses, downsample);
    }
    std::string list;
    for (const NamedSize& s : kNamedSizes) list += std::string(list.empty() ? "" : ", ") + s.name;
    throw Error("unknown LlamaGen model '" + name + "': the class-conditional sizes are " + list);
}

LlamaGenConfig llamaGenCustomConfig(const LlamaGenSizes& s) {
    if (s.dim <= 0 || s.layers <= 0 || s.heads <= 0 || s.grid <= 0 || s.vocab <= 0 || s.classes <= 0)
        throw Error("LlamaGen sizes must all be positive (dim, layers, heads, grid, vocab, classes)");
    if (s.dim % s.heads != 0)
        throw Error("dim " + std::to_string(s.dim) + " is not divisible by " + std::to_string(s.heads) + " heads");
    const int64_t ffn = s.ffnHidden > 0 ? s.ffnHidden : llamaGenFfnHidden(s.dim, s.multipleOf);
    LlamaGenConfig c = makeConfig("custom", s.dim, s.layers, s.heads, ffn, s.grid, s.vocab, s.classes, s.downsample);
    c.validate("custom sizes");
    return c;
}

LlamaCheckpoint LlamaGenCheckpoint::transformer() const {
    LlamaCheckpoint ckpt;
    ckpt.config = config.transformer;
    ckpt.weights = weights;
    ckpt.source = source;
    return ckpt;
}

LlamaGenCheckpoint LlamaGenCheckpoint::withTransformer(const LlamaCheckpoint& pruned) const {
    LlamaGenCheckpoint out = *this;
    out.config.transformer = pruned.config;
    out.weights = pruned.weights;
    return out;
}

// ---------------------------------------------------------------------------------------------
// Loading

namespace {

// Where the tensors come from: a PyTorch checkpoint or an npw safetensors file.
struct TensorStore {
    std::string file;
    std::function<bool(const std::string&)> has;
    std::function<Shape(const std::string&)> shape;
    std::function<at::Tensor(const std::string&)> loadFloat;
    std::vector<std::string> names;
    std::set<std::string> taken;

    at::Tensor take(const std::string& name, const Shape& expected, const std::string& why) {
        if (!has(name))
            throw Error("LlamaGen checkpoint '" + file + "': tensor '" + name + "' is missing (expected shape " +
                        formatShape(expected) + why + ")");
        const Shape actual = shape(name);
        if (actual != expected)
            throw Error("LlamaGen checkpoint '" + file + "': tensor '" + name + "' has shape " + formatShape(actual) +
                        ", expected " + formatShape(expected) + why);
        at::Tensor t = loadFloat(name);
        if (!allFinite(t))
            throw Error("LlamaGen checkpoint '" + file + "': tensor '" + name + "' holds NaN or Inf values");
        taken.insert(name);
        return t;
    }
    at::Tensor takeIfPresent(const std::string& name, const Shape& expected, const std::string& why) {
        return has(name) ? take(name, expected, why) : at::Tensor();
    }
};

std::string layerName(int64_t layer, const std::string& suffix) {
    return "layers." + std::to_string(layer) + "." + suffix;
}

// Reads every tensor the configuration implies, in LlamaGen's names, and rejects leftovers
// that would be model weights (more layers than configured, unknown keys).
LlamaGenCheckpoint readWeights(TensorStore& store, const LlamaGenConfig& config, const std::string& source) {
    config.validate(source);
    const LlamaConfig& t = config.transformer;
    const int64_t D = t.hidden_size, hd = t.head_dim;
    const std::string why = " for " + config.describe();
    LlamaGenCheckpoint ck;
    ck.config = config;
    ck.source = source;
    ck.classEmbedding =
        store.take("cls_embedding.embedding_table.weight", Shape{config.num_classes + 1, D}, why + " (the last row is the null class)");
    LlamaWeights& w = ck.weights;
    w.embed = store.take("tok_embeddings.weight", Shape{t.vocab_size, D}, why);
    w.layers.resize(static_cast<size_t>(t.num_layers));
    for (int64_t l = 0; l < t.num_layers; ++l) {
        LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
        const int64_t q = t.num_heads[l] * hd, kv = t.num_kv_heads[l] * hd, inter = t.intermediate_size[l];
        L.attn_norm = store.take(layerName(l, "attention_norm.weight"), Shape{D}, why);
        at::Tensor wqkv = store.take(layerName(l, "attention.wqkv.weight"), Shape{q + 2 * kv, D}, why + " (q, k, v rows)");
        L.wq = wqkv.narrow(0, 0, q).contiguous();
        L.wk = wqkv.narrow(0, q, kv).contiguous();
        L.wv = wqkv.narrow(0, q + kv, kv).contiguous();
        L.wo = store.take(layerName(l, "attention.wo.weight"), Shape{D, q}, why);
        L.wo_bias = store.takeIfPresent(layerName(l, "attention.wo.bias"), Shape{D}, why);
        L.ffn_norm = store.take(layerName(l, "ffn_norm.weight"), Shape{D}, why);
        L.w_gate = store.take(layerName(l, "feed_forward.w1.weight"), Shape{inter, D}, why);
        L.w_up = store.take(layerName(l, "feed_forward.w3.weight"), Shape{inter, D}, why);
        L.w_down = store.take(layerName(l, "feed_forward.w2.weight"), Shape{D, inter}, why);
        L.w_down_bias = store.takeIfPresent(layerName(l, "feed_forward.w2.bias"), Shape{D}, why);
    }
    w.final_norm = store.take("norm.weight", Shape{D}, why);
    w.lm_head = store.take("output.weight", Shape{t.vocab_size, D}, why);
    for (const std::string& name : store.names) {
        if (store.taken.count(name)) continue;
        // LlamaGen's modules have no other parameters or buffers; anything else means the
        // configuration does not match the checkpoint (e.g. more layers than the named size).
        int64_t layer = -1;
        if (name.rfind("layers.", 0) == 0) layer = std::atoll(name.c_str() + 7);
        if (layer >= t.num_layers)
            throw Error("LlamaGen checkpoint '" + store.file + "': tensor '" + name + "' belongs to layer " +
                        std::to_string(layer) + ", but " + config.describe() + " has " +
                        std::to_string(t.num_layers) + " layers");
        throw Error("LlamaGen checkpoint '" + store.file + "': unexpected tensor '" + name + "' (shape " +
                    formatShape(store.shape(name)) + ") for " + config.describe());
    }
    return ck;
}

int64_t intField(const PickleValue* v) { return v && v->is(PickleKind::Int) ? v->integer : -1; }

// LlamaGen's training scripts save their argparse arguments beside the weights: the model's
// name and image size are there (inert data, never executed).
std::optional<LlamaGenConfig> configFromArgs(const TorchCheckpoint& ck, int64_t vocab, int64_t classes) {
    const PickleValue* args = ck.root().get("args");
    if (!args || !args->is(PickleKind::Object) || !args->state) return std::nullopt;
    const PickleValue* state = args->state;
    if (state->is(PickleKind::Tuple) && !state->items.empty()) state = state->items[0];
    if (!state->is(PickleKind::Dict)) return std::nullopt;
    const PickleValue* model = state->get("gpt_model");
    const int64_t imageSize = intField(state->get("image_size"));
    if (!model || !model->is(PickleKind::String) || imageSize <= 0) return std::nullopt;
    int64_t downsample = intField(state->get("downsample_size"));
    if (downsample <= 0) downsample = 16;
    return llamaGenNamedConfig(model->text, imageSize, vocab, classes, downsample);
}

LlamaGenCheckpoint loadTorchGpt(const std::string& path, const LlamaGenLoadOptions& options) {
    std::shared_ptr<TorchCheckpoint> ck = TorchCheckpoint::open(path);
    if (!ck->has("tok_embeddings.weight") && ck->stateDictPath().empty()) {
        // Other wrappers LlamaGen's sampling script accepts.
        for (const char* key : {"module", "state_dict"}) {
            const PickleValue* v = ck->root().get(key);
            if (v && v->is(PickleKind::Dict)) {
                TorchCheckpointOptions o;
                o.stateDictPath = key;
                ck = TorchCheckpoint::open(path, o);
                break;
            }
        }
    }
    TensorStore store;
    store.file = path;
    store.names = ck->names();
    store.has = [ck](const std::string& n) { return ck->has(n); };
    store.shape = [ck](const std::string& n) { return ck->info(n).shape; };
    store.loadFloat = [ck](const std::string& n) { return ck->loadFloat(n); };

    // Vocabulary and class count are arguments of LlamaGen's scripts too (--codebook-size,
    // --num-classes); the checkpoint's tables say them, the named size says the rest.
    const std::string cls = "cls_embedding.embedding_table.weight", tok = "tok_embeddings.weight";
    for (const std::string& name : {cls, tok})
        if (!ck->has(name))
            throw Error("LlamaGen checkpoint '" + path + "': tensor '" + name +
                        "' is missing: not a class-conditional LlamaGen GPT state dict" +
                        (ck->stateDictPath().empty() ? std::string(" (read the root dict)")
                                                     : " (read '" + ck->stateDictPath() + "')"));
    for (const std::string& name : {cls, tok})
        if (ck->info(name).shape.size() != 2)
            throw Error("LlamaGen checkpoint '" + path + "': tensor '" + name + "' has shape " +
                        formatShape(ck->info(name).shape) + "; an embedding table is 2-D [rows, dim]");
    const int64_t classes = ck->info(cls).shape.at(0) - 1;
    const int64_t vocab = ck->info(tok).shape.at(0);
    LlamaGenConfig config;
    if (options.config) {
        config = *options.config;
        if (config.name != "custom") {  // a named size: the tables decide vocabulary and classes
            config.transformer.vocab_size = vocab;
            config.num_classes = classes;
        }
    } else if (auto fromArgs = configFromArgs(*ck, vocab, classes)) {
        config = *fromArgs;
    } else {
        throw LlamaGenSizeUnknown("LlamaGen checkpoint '" + path +
                                  "' does not say its size: give its size (B, L, XL, XXL or 3B) and image size "
                                  "(256 or 384)");
    }
    return readWeights(store, config, path);
}

std::vector<int64_t> intList(const json& j, const char* key, int64_t layers, const std::string& file) {
    if (!j.contains(key)) throw Error("LlamaGen config '" + file + "': missing '" + key + "'");
    const json& v = j.at(key);
    std::vector<int64_t> out;
    if (v.is_number_integer()) {
        out.assign(static_cast<size_t>(layers), v.get<int64_t>());
    } else if (v.is_array()) {
        for (const json& x : v) {
            if (!x.is_number_integer()) throw Error("LlamaGen config '" + file + "': '" + key + "' must hold integers");
            out.push_back(x.get<int64_t>());
        }
    } else {
        throw Error("LlamaGen config '" + file + "': '" + key + "' must be an integer or a list of integers");
    }
    if (static_cast<int64_t>(out.size()) != layers)
        throw Error("LlamaGen config '" + file + "': '" + key + "' lists " + std::to_string(out.size()) +
                    " values for " + std::to_string(layers) + " layers");
    return out;
}

LlamaGenConfig readNpwConfigFields(const json& j, const std::string& file);

LlamaGenConfig readNpwConfig(const std::string& file) {
    const json j = json_fields::readJsonFile(file, "LlamaGen config '" + file + "'");
    if (!j.is_object() || !j.contains("model_type") || j["model_type"] != "llamagen-c2i")
        throw Error("'" + file + "' is not an npw LlamaGen config (model_type must be \"llamagen-c2i\")");
    // Every field is type-checked: a wrong type names the file and the field.
    try {
        return readNpwConfigFields(j, file);
    } catch (const Error& e) {
        if (std::string(e.what()).find(file) != std::string::npos) throw;
        throw Error("LlamaGen config '" + file + "': " + e.what());
    }
}

LlamaGenConfig readNpwConfigFields(const json& j, const std::string& file) {
    auto num = [&](const char* key) -> int64_t {
        if (!j.contains(key) || !j.at(key).is_number_integer())
            throw Error("LlamaGen config '" + file + "': missing or non-integer '" + key + "'");
        return j.at(key).get<int64_t>();
    };
    // Bounded before anything is sized from them (per-layer lists, grid², products).
    auto sized = [&](const char* key, int64_t most) {
        const int64_t value = num(key);
        if (value < 1 || value > most)
            throw Error("LlamaGen config '" + file + "': '" + key + "' is " + std::to_string(value) + "; expected 1 to " +
                        std::to_string(most));
        return value;
    };
    LlamaGenConfig c = makeConfig(json_fields::stringOr(j, "name", "custom", ""), sized("dim", 1 << 24), sized("n_layer", 100000),
                                  1, 0, sized("grid_size", 1 << 16), sized("vocab_size", INT32_MAX),
                                  sized("num_classes", INT32_MAX), sized("downsample_size", 1 << 16));
    LlamaConfig& t = c.transformer;
    t.head_dim = num("head_dim");
    t.num_heads = intList(j, "n_head", t.num_layers, file);
    t.num_kv_heads = j.contains("n_kv_head") ? intList(j, "n_kv_head", t.num_layers, file) : t.num_heads;
    t.intermediate_size = intList(j, "ffn_hidden", t.num_layers, file);
    t.rope_theta = json_fields::numberOr(j, "rope_base", 10000.0, "");
    t.rms_norm_eps = json_fields::numberOr(j, "norm_eps", 1e-5, "");
    c.cls_token_num = json_fields::intOr(j, "cls_token_num", 1, "");
    c.image_size = json_fields::intOr(j, "image_size", c.grid * c.downsample, "");
    t.max_position_embeddings = c.cls_token_num + c.blockSize();
    return c;
}

LlamaGenCheckpoint loadNpwDirectory(const std::string& dir) {
    const std::string configPath = (fs::path(dir) / "config.json").string();
    const std::string weightsPath = (fs::path(dir) / "model.safetensors").string();
    LlamaGenConfig config = readNpwConfig(configPath);
    if (!fs::is_regular_file(weightsPath)) throw Error("LlamaGen model '" + dir + "' has no model.safetensors");
    auto file = SafeTensorsFile::open(weightsPath);
    TensorStore store;
    store.file = weightsPath;
    store.names = file->names();
    store.has = [file](const std::string& n) { return file->has(n); };
    store.shape = [file](const std::string& n) { return file->info(n).shape; };
    store.loadFloat = [file](const std::string& n) { return file->loadFloat(n); };
    LlamaGenCheckpoint ck = readWeights(store, config, dir);
    return ck;
}

} // namespace

LlamaGenCheckpoint loadLlamaGenCheckpoint(const std::string& model, const LlamaGenLoadOptions& options) {
    const std::string path = resolveModelPath(model);
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        if (!fs::is_regular_file(fs::path(path) / "config.json"))
            throw Error("LlamaGen model '" + model + "': directory '" + path + "' has no config.json");
        return loadNpwDirectory(path);
    }
    if (!fs::exists(path, ec)) throw Error("LlamaGen model '" + model + "' not found: no file or directory '" + path + "'");
    return loadTorchGpt(path, options);
}

bool isLlamaGenModel(const std::string& model) {
    std::string path;
    try {
        path = resolveModelPath(model);
    } catch (const Error&) {
        return false;
    }
    std::error_code ec;
    if (fs::is_directory(path, ec)) return isLlamaGenDirectory(path);
    if (!fs::is_regular_file(path, ec)) return false;
    try {
        auto ck = TorchCheckpoint::open(path);
        if (ck->has("cls_embedding.embedding_table.weight")) return true;
        for (const char* key : {"module", "state_dict"})
            if (const PickleValue* v = ck->root().get(key); v && v->is(PickleKind::Dict)) {
                TorchCheckpointOptions o;
                o.stateDictPath = key;
                return TorchCheckpoint::open(path, o)->has("cls_embedding.embedding_table.weight");
            }
    } catch (const std::exception&) {
        // Not readable as a LlamaGen checkpoint (a hostile or foreign file): not one. The loader
        // that opens it next reports why, with the file named.
    }
    return false;
}

std::string llamaGenConfigJson(const LlamaGenConfig& c, const std::string& extraConfigJson) {
    const LlamaConfig& t = c.transformer;
    json j = {{"model_type", "llamagen-c2i"},
              {"name", c.name},
              {"dim", t.hidden_size},
              {"n_layer", t.num_layers},
              {"head_dim", t.head_dim},
              {"n_head", t.num_heads},
              {"n_kv_head", t.num_kv_heads},
              {"ffn_hidden", t.intermediate_size},
              {"vocab_size", t.vocab_size},
              {"num_classes", c.num_classes},
              {"cls_token_num", c.cls_token_num},
              {"grid_size", c.grid},
              {"image_size", c.image_size},
              {"downsample_size", c.downsample},
              {"rope_base", t.rope_theta},
              {"norm_eps", t.rms_norm_eps}};
    if (!extraConfigJson.empty()) {
        try {
            j.update(json::parse(extraConfigJson));
        } catch (const json::exception& e) {
            throw Error(std::string("internal: extra config JSON is invalid: ") + e.what());
        }
    }
    return json_fields::dumpJson(j, 2, "config.json") + "\n";
}

void saveLlamaGenDirectory(const LlamaGenCheckpoint& ck, const std::string& dir, const std::string& extraConfigJson) {
    if (!ck.source.empty()) ensureNotOverwritingSource(ck.source, dir);
    const LlamaGenConfig& c = ck.config;
    c.validate(ck.source.empty() ? dir : ck.source);
    const LlamaConfig& t = c.transformer;
    const std::string configJson = llamaGenConfigJson(c, extraConfigJson);
    auto cpu = [](const at::Tensor& x) { return x.to(at::kCPU, at::kFloat).contiguous(); };
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    tensors.emplace_back("cls_embedding.embedding_table.weight", cpu(ck.classEmbedding));
    tensors.emplace_back("tok_embeddings.weight", cpu(ck.weights.embed));
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const LlamaLayerWeights& L = ck.weights.layers[static_cast<size_t>(l)];
        tensors.emplace_back(layerName(l, "attention_norm.weight"), cpu(L.attn_norm));
        tensors.emplace_back(layerName(l, "attention.wqkv.weight"), cpu(at::cat({L.wq, L.wk, L.wv}, 0)));
        tensors.emplace_back(layerName(l, "attention.wo.weight"), cpu(L.wo));
        if (L.wo_bias.defined()) tensors.emplace_back(layerName(l, "attention.wo.bias"), cpu(L.wo_bias));
        tensors.emplace_back(layerName(l, "ffn_norm.weight"), cpu(L.ffn_norm));
        tensors.emplace_back(layerName(l, "feed_forward.w1.weight"), cpu(L.w_gate));
        tensors.emplace_back(layerName(l, "feed_forward.w3.weight"), cpu(L.w_up));
        tensors.emplace_back(layerName(l, "feed_forward.w2.weight"), cpu(L.w_down));
        if (L.w_down_bias.defined()) tensors.emplace_back(layerName(l, "feed_forward.w2.bias"), cpu(L.w_down_bias));
    }
    tensors.emplace_back("norm.weight", cpu(ck.weights.final_norm));
    tensors.emplace_back("output.weight", cpu(ck.weights.lm_head));
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create the directory '" + dir + "': " + ec.message());
    writeSafeTensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
    writeTextAtomically((fs::path(dir) / "config.json").string(), configJson);
}

// ---------------------------------------------------------------------------------------------
// Forward

std::pair<at::Tensor, at::Tensor> llamaGenRopeTables(const LlamaGenConfig& config, int64_t start, int64_t length,
                                                     const at::TensorOptions& options) {
    // precompute_freqs_cis_2d: half_dim = head_dim/2 pairs; the first half_dim/2 rotate by the
    // row with frequencies base^(−2j/half_dim), the second half_dim/2 by the column.
    const int64_t hd = config.transformer.head_dim, halfDim = hd / 2, quarter = halfDim / 2;
    auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor freqs = at::pow(config.transformer.rope_theta, -at::arange(0, halfDim, 2, f64) / static_cast<double>(halfDim))
                           .narrow(0, 0, quarter);
    at::Tensor angles = at::zeros({length, halfDim}, f64);
    for (int64_t i = 0; i < length; ++i) {
        const int64_t p = start + i - config.cls_token_num;
        if (p < 0) continue;  // the class token: cos = sin = 0
        const int64_t gridRow = p / config.grid, gridCol = p % config.grid;  // the token's place in the image
        const double row = static_cast<double>(gridRow), col = static_cast<double>(gridCol);
        angles[i].narrow(0, 0, quarter).copy_(freqs * row);
        angles[i].narrow(0, quarter, quarter).copy_(freqs * col);
    }
    at::Tensor isToken = (at::arange(start, start + length, f64) >= static_cast<double>(config.cls_token_num))
                             .to(at::kDouble)
                             .unsqueeze(1);
    return {(angles.cos() * isToken).to(options), (angles.sin() * isToken).to(options)};
}

at::Tensor llamaGenForward(const LlamaGenConfig& config, const LlamaWeights& w, const at::Tensor& classEmbedding,
                           const at::Tensor& classes, const at::Tensor& tokens, KvCache* cache,
                           const ActivationTap& tap) {
    const int64_t start = cache ? cache->length : 0;
    std::vector<at::Tensor> parts;
    if (classes.defined()) {
        if (classes.dim() != 1) throw Error("llamaGenForward: classes must be [batch]");
        if (start != 0) throw Error("llamaGenForward: the class token starts a sequence; the cache must be empty");
        const int64_t lo = classes.min().item<int64_t>(), hi = classes.max().item<int64_t>();
        if (lo < 0 || hi > config.num_classes)
            throw Error("class id " + std::to_string(lo < 0 ? lo : hi) + " is outside 0.." +
                        std::to_string(config.num_classes) + " (" + std::to_string(config.num_classes) +
                        " is the null class)");
        parts.push_back(at::embedding(classEmbedding, classes).unsqueeze(1));
    }
    if (tokens.defined() && tokens.numel() > 0) {
        if (tokens.dim() != 2) throw Error("llamaGenForward: tokens must be [batch, length]");
        const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
        if (lo < 0 || hi >= config.transformer.vocab_size)
            throw Error("image token " + std::to_string(lo < 0 ? lo : hi) + " is outside the codebook of " +
                        std::to_string(config.transformer.vocab_size));
        parts.push_back(at::embedding(w.embed, tokens));
    }
    if (parts.empty()) throw Error("llamaGenForward: neither classes nor tokens given");
    at::Tensor x = parts.size() == 1 ? parts[0] : at::cat(parts, 1);
    auto [cos, sin] = llamaGenRopeTables(config, start, x.size(1), w.embed.options());
    return llamaForwardEmbeddings(config.transformer, w, x, cos, sin, cache, tap);
}

LlamaGenModel::LlamaGenModel(LlamaGenCheckpoint checkpoint, Runtime runtime)
    : checkpoint_(std::move(checkpoint)), transformer_(checkpoint_.transformer(), runtime) {
    checkpoint_.config.validate(checkpoint_.source);
    classEmbedding_ = checkpoint_.classEmbedding.to(runtime.device, runtime.dtype).contiguous();
}

at::Tensor LlamaGenModel::logits(const at::Tensor& classes, const at::Tensor& tokens, KvCache* cache, bool keepOnDevice,
                                 const ActivationTap& tap) const {
    c10::InferenceMode guard;
    const c10::Device device = runtime().device;
    at::Tensor out = llamaGenForward(config(), transformer_.deviceWeights(), classEmbedding_,
                                     classes.defined() ? classes.to(device, at::kLong) : classes,
                                     tokens.defined() ? tokens.to(device, at::kLong) : tokens, cache, tap)
                         .to(at::kFloat);
    return keepOnDevice ? out : out.cpu();
}

} // namespace npw
