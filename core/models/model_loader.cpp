#include "core/models/model_loader.h"
#include "core/models/checkpoint_summary.h"
#include "core/models/hf_llama_files.h"
#include "core/models/hf_streamed_resume.h"
#include "core/models/sliced_llama.h"

#include "core/io/mapped_file.h"
#include "core/io/safetensors.h"
#include "core/io/shape_text.h"
#include "core/models/torch_llama.h"
#include "core/models/weight_values.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"
#include "core/text/tokenizer_files.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/regular_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <fstream>
#include <set>
#include <vector>

namespace fs = std::filesystem;

namespace npw {

using nlohmann::json;

namespace {

using Shape = HfShape;

// The tensors of HfSafetensorsListing (hf_llama_files.h) as LibTorch's: float32 (Mapped: a view
// of the file in its stored dtype). Copy checks finiteness here, as it reads every value anyway;
// Mapped reads no value (the header only) and leaves that to whoever reads the block
// (weight_values.h).
class HfTensorStore {
public:
    using Tensor = at::Tensor;
    HfTensorStore(const fs::path& dir, std::string configPath, WeightStorage storage)
        : listing_(dir, std::move(configPath), [](const std::string& path) { return SafeTensorsFile::open(path); }),
          storage_(storage) {}

    bool has(const std::string& name) const { return listing_.has(name); }
    at::Tensor take(const std::string& name, const Shape& expected) {
        // Every file of the listing is a SafeTensorsFile: the constructor opened them as such.
        const auto& file = static_cast<const SafeTensorsFile&>(listing_.take(name, expected));
        const TensorInfo& info = file.info(name);
        const bool mapped = storage_ == WeightStorage::Mapped;
        at::Tensor tensor = mapped && file.canView(name) ? file.view(name) : file.loadFloat(name);
        if (!mapped) checkTensorFinite(tensor, file.path(), name);
        origins_[name] = TensorOrigin{file.path(), name, 0, info.dtype, info.shape, info.end - info.begin};
        return tensor;
    }
    static bool defined(const at::Tensor& t) { return t.defined(); }
    static bool nonZero(const at::Tensor& t) { return at::count_nonzero(t).item<int64_t>() != 0; }
    static bool equal(const at::Tensor& a, const at::Tensor& b) { return at::equal(a, b); }
    const std::string& fileOf(const std::string& name) const { return listing_.fileOf(name); }
    const std::string& configPath() const { return listing_.configPath(); }
    void rejectUntaken() const { listing_.rejectUntaken(); }
    const std::map<std::string, TensorOrigin>& origins() const { return origins_; }

private:
    HfSafetensorsListing listing_;
    WeightStorage storage_;
    std::map<std::string, TensorOrigin> origins_;  // of every tensor taken
};

// llama2.c and Meta's original checkpoints rotate adjacent pairs (2i, 2i+1) of each head;
// Hugging Face LLaMA rotates (i, i + head_dim/2). Reordering each head's rows of wq and wk
// (its even rows, then its odd rows) is the permute of transformers'
// convert_llama_weights_to_hf.py: the rotated q and k come out permuted the same way within
// each head, so every q·k, and so the model's output, is unchanged.
at::Tensor adjacentPairRowsToHalfSplit(const at::Tensor& weight, int64_t heads, int64_t headDim) {
    const int64_t columns = weight.size(1);
    return weight.reshape({heads, headDim / 2, 2, columns}).transpose(1, 2).reshape({heads * headDim, columns});
}

LlamaLayerWeights layerWithHalfSplitRope(const LlamaConfig& config, size_t i, LlamaLayerWeights layer) {
    if (config.rope_layout == RopeLayout::HalfSplit) return layer;
    {
        layer.wq = adjacentPairRowsToHalfSplit(layer.wq, config.num_heads[i], config.head_dim);
        layer.wk = adjacentPairRowsToHalfSplit(layer.wk, config.num_kv_heads[i], config.head_dim);
        if (layer.wq_bias.defined())
            layer.wq_bias = adjacentPairRowsToHalfSplit(layer.wq_bias.unsqueeze(1), config.num_heads[i], config.head_dim).squeeze(1);
        if (layer.wk_bias.defined())
            layer.wk_bias = adjacentPairRowsToHalfSplit(layer.wk_bias.unsqueeze(1), config.num_kv_heads[i], config.head_dim).squeeze(1);
        if (layer.q_norm.defined() || layer.k_norm.defined())
            throw Error("q/k norms in the adjacent-pair rotary layout cannot be converted to Hugging Face's");
    }
    return layer;
}

LlamaWeights withHalfSplitRope(const LlamaConfig& config, LlamaWeights weights) {
    for (size_t i = 0; i < weights.layers.size(); ++i) weights.layers[i] = layerWithHalfSplitRope(config, i, weights.layers[i]);
    return weights;
}

std::string hfConfigText(const LlamaConfig& config, const HfBiasFlags& biases, const std::vector<std::string>& outside,
                         const std::string& extraConfigJson, const std::string& dir) {
    json merged = json::parse(hfLlamaConfigJson(config, biases));
    if (!outside.empty()) {
        // transformers' class of this family has no place for them: it would drop them. npw reads them.
        merged["npw_biases_outside_family"] = outside;
    }
    if (extraConfigJson.empty()) return json_fields::dumpJson(merged, 2, "config.json") + "\n";
    const json extras = json_fields::parseJsonLimited(extraConfigJson, "extra config.json fields for '" + dir + "'");
    if (!extras.is_object())
        throw Error("extra config.json fields for '" + dir + "' must be a JSON object, got " + json_fields::preview(extras));
    for (const auto& item : extras.items()) {
        // An override of a model field would write a config that lies about the weights.
        if (merged.contains(item.key()))
            throw Error("extra config.json field '" + item.key() + "' for '" + dir +
                        "' would override the model's own field");
        merged[item.key()] = item.value();
    }
    return json_fields::dumpJson(merged, 2, "config.json") + "\n";
}

// The model's tokenizer file, byte for byte, under the name its kind has in a model folder
// (tokenizer.json, tokenizer.model, tokenizer.bin), so that the folder reopens with it. Another
// tokenizer file left there by an earlier export would win over it on loading: removed.
void copyTokenizerInto(const std::string& tokenizerPath, const fs::path& root) {
    const std::string bytes = readTokenizerFileBytes(tokenizerPath);
    const TokenizerFileKind kind = detectTokenizerFile(bytes);
    const char* name = tokenizerFileNameFor(kind);
    if (*name == '\0')
        throw Error("tokenizer '" + tokenizerPath + "' is none of the tokenizer files npw reads (tokenizer.json, "
                    "tokenizer.model, tokenizer.bin); not copied into '" + root.string() + "'");
    const fs::path target = root / name;
    std::error_code ec;
    if (!fs::equivalent(target, tokenizerPath, ec))
        writeFileAtomically(target.string(), [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
    for (const char* other : {"tokenizer.json", "tokenizer.model", "tokenizer.bin"})
        if (std::string(other) != name) fs::remove(root / other, ec);
}

// Sizes come from an untrusted header: products are overflow-checked.
int64_t checkedProduct(const Shape& factors, const std::string& path) {
    int64_t product = 1;
    for (int64_t factor : factors)
        if (__builtin_mul_overflow(product, factor, &product))
            throw Error("llama2.c checkpoint '" + path + "': the header's sizes overflow");
    return product;
}

} // namespace

LlamaCheckpoint loadLlamaCheckpoint(const std::string& model, WeightStorage storage) {
    const CheckpointLocation at = locateCheckpoint(model);
    switch (at.layout) {
    case CheckpointLayout::Missing: throw Error(modelNotFound(model, at));
    case CheckpointLayout::SlicedDirectory: throw Error(slicedModelIsNoLlama(model));
    case CheckpointLayout::MetaRelease: return loadMetaCheckpoint(at.path, false, storage == WeightStorage::Mapped);
    case CheckpointLayout::HfDirectory: return loadHfLlamaDirectory(at.path, storage);
    case CheckpointLayout::Llama2cBin: return loadLlama2cCheckpoint(at.path, storage);
    case CheckpointLayout::Llama2cCkpt: return loadLlama2cTrainingCheckpoint(at.path);
    case CheckpointLayout::UnknownFile:
    case CheckpointLayout::NotAFileOrFolder: break;
    }
    throw Error(modelIsNoneOfTheLayouts(model, at));
}

LlamaCheckpoint loadHfLlamaDirectory(const std::string& dir, WeightStorage storage) {
    LlamaCheckpoint checkpoint;
    checkpoint.source = dir;
    const std::string configPath = hfConfigPath(dir);
    checkpoint.config = readHfDirectoryConfig(configPath);
    HfTensorStore store(dir, configPath, storage);
    takeHfLlamaTensors(checkpoint.config, store, checkpoint.weights);

    checkpoint.tokenizerPath = findTokenizerFile(dir);
    checkpoint.weightsMapped = storage == WeightStorage::Mapped;
    checkpoint.origins = store.origins();
    checkpoint.valuesChecked = storage != WeightStorage::Mapped;
    return checkpoint;
}

LlamaCheckpoint loadLlama2cCheckpoint(const std::string& binPath, WeightStorage storage) {
    auto fail = [&](const std::string& problem) { throw Error("llama2.c checkpoint '" + binPath + "': " + problem); };
    // The header, checked against the file's size (model_files.h; npw tokenize reads it too).
    const Llama2cLayout layout = readLlama2cLayout(binPath);
    const int64_t numLayers = layout.layers, totalFloats = layout.totalFloats;
    const bool tied = layout.tied;
    const uint64_t fileBytes = layout.fileBytes, kHeaderBytes = Llama2cLayout::kHeaderBytes;
    const std::vector<Llama2cLayout::Block>& blocks = layout.blocks;
    std::ifstream in(binPath, std::ios::binary);
    if (!in || !in.seekg(static_cast<std::streamoff>(kHeaderBytes))) fail(std::string("cannot open: ") + std::strerror(errno));

    // Only now, with the sizes confirmed by the file, are per-layer lists allocated.
    LlamaCheckpoint checkpoint;
    checkpoint.source = binPath;
    checkpoint.config = llama2cConfig(layout);  // checkpoint_summary.h: npw info reads it without LibTorch

    at::Tensor floats;
    if (storage == WeightStorage::Mapped) {
        // The floats start at byte 28 of a page-aligned mapping: aligned for float32 views.
        std::shared_ptr<const MappedFile> mapping = MappedFile::open(binPath, "llama2.c checkpoint");
        if (mapping->size() != fileBytes) fail("the file changed size while it was opened");
        floats = at::from_blob(const_cast<uint8_t*>(mapping->bytes() + kHeaderBytes), {totalFloats},
                               [mapping](void*) {}, at::TensorOptions().dtype(at::kFloat));
    } else {
        floats = at::empty({totalFloats}, at::kFloat);
        in.read(reinterpret_cast<char*>(floats.data_ptr<float>()), static_cast<std::streamsize>(totalFloats * 4));
        if (!in) fail("reading the weights failed");
    }

    // Copy checks every block's values here (it has read them); Mapped reads none, and each
    // layer's part of a block is checked when it is first read (weight_values.h).
    std::map<std::string, at::Tensor> byName;
    int64_t offset = 0;
    for (const Llama2cLayout::Block& block : blocks) {
        const int64_t count = checkedProduct(block.shape, binPath);
        byName[block.name] = floats.narrow(0, offset, count).view(block.shape);
        if (storage != WeightStorage::Mapped) checkTensorFinite(byName[block.name], binPath, block.name);
        offset += count;
    }

    // Copy: per-layer tensors are copied out of the blocks so that no tensor pins the whole file.
    // Mapped: views of the mapping, which every tensor shares anyway.
    auto own = [&](const at::Tensor& t) { return storage == WeightStorage::Mapped ? t : t.clone(); };
    LlamaWeights& weights = checkpoint.weights;
    weights.embed = own(byName["token_embedding_table"]);
    weights.final_norm = own(byName["rms_final_weight"]);
    weights.lm_head = tied ? weights.embed : own(byName["wcls"]);
    weights.layers.resize(static_cast<size_t>(numLayers));
    for (int64_t i = 0; i < numLayers; ++i) {
        LlamaLayerWeights& layer = weights.layers[static_cast<size_t>(i)];
        // llama2.c stores matrices as [out, in] like nn.Linear; w1 is the gate, w3 the up, w2 the down projection.
        layer.attn_norm = own(byName["rms_att_weight"][i]);
        layer.wq = own(byName["wq"][i]);
        layer.wk = own(byName["wk"][i]);
        layer.wv = own(byName["wv"][i]);
        layer.wo = own(byName["wo"][i]);
        layer.ffn_norm = own(byName["rms_ffn_weight"][i]);
        layer.w_gate = own(byName["w1"][i]);
        layer.w_down = own(byName["w2"][i]);
        layer.w_up = own(byName["w3"][i]);
    }
    // Where each tensor lies in the file: a layer's matrix is the i-th slice of its block.
    auto origin = [&](const std::string& hfName, const char* block, int64_t layer) {
        const at::Tensor& whole = byName.at(block);
        const at::Tensor part = layer < 0 ? whole : whole[layer];
        checkpoint.origins[hfName] = TensorOrigin{binPath, block, layer < 0 ? 0 : layer * part.numel(), "F32",
                                                  part.sizes().vec(), static_cast<uint64_t>(part.numel()) * 4};
    };
    origin("model.embed_tokens.weight", "token_embedding_table", -1);
    origin("model.norm.weight", "rms_final_weight", -1);
    if (!tied) origin("lm_head.weight", "wcls", -1);
    for (int64_t i = 0; i < numLayers; ++i) {
        origin(hfLayerTensorName(i, "input_layernorm.weight"), "rms_att_weight", i);
        origin(hfLayerTensorName(i, "self_attn.q_proj.weight"), "wq", i);
        origin(hfLayerTensorName(i, "self_attn.k_proj.weight"), "wk", i);
        origin(hfLayerTensorName(i, "self_attn.v_proj.weight"), "wv", i);
        origin(hfLayerTensorName(i, "self_attn.o_proj.weight"), "wo", i);
        origin(hfLayerTensorName(i, "post_attention_layernorm.weight"), "rms_ffn_weight", i);
        origin(hfLayerTensorName(i, "mlp.gate_proj.weight"), "w1", i);
        origin(hfLayerTensorName(i, "mlp.down_proj.weight"), "w2", i);
        origin(hfLayerTensorName(i, "mlp.up_proj.weight"), "w3", i);
    }
    checkpoint.tokenizerPath = llama2cTokenizerFile(binPath);
    checkpoint.weightsMapped = storage == WeightStorage::Mapped;
    checkpoint.valuesChecked = storage != WeightStorage::Mapped;
    return checkpoint;
}

namespace {

// What a Hugging Face directory of this model holds, planned from its config and which layers
// carry o_proj / down_proj biases: the config text and every tensor by name and shape, in the
// order written (embedding, layer by layer, final norm and classifier), with the layer it
// belongs to (-1: before the layers, num_layers: after them). saveHfLlamaDirectory and the
// streamed writer share it, so that the two write the same names, shapes and config.
struct HfDirectoryPlan {
    std::string configText;
    struct Entry {
        std::string name;
        Shape shape;
        int64_t group;  // -1, a layer, or num_layers
    };
    std::vector<Entry> entries;
    bool writeQkvBias = false, writeOBias = false, writeDownBias = false, writeMlpBias = false;
};

HfDirectoryPlan planHfDirectory(const LlamaConfig& config, const std::vector<bool>& oBias,
                                const std::vector<bool>& downBias, const std::string& extraConfigJson,
                                const std::string& dir) {
    HfDirectoryPlan plan;
    const bool anyO = std::find(oBias.begin(), oBias.end(), true) != oBias.end();
    const bool anyDown = std::find(downBias.begin(), downBias.end(), true) != downBias.end();
    // What transformers' class of the family can hold: LLaMA's attention_bias (q, k, v, o) and
    // mlp_bias (gate, up, down); Qwen3's attention_bias; Qwen2's fixed q/k/v biases; Mistral none.
    HfBiasFlags flags;
    std::vector<std::string> outside;
    switch (config.family) {
    case ModelFamily::Llama:
        flags.attentionBias = config.qkv_bias || anyO;
        flags.mlpBias = anyDown;
        break;
    case ModelFamily::Qwen3:
        flags.attentionBias = config.qkv_bias || anyO;
        if (anyDown) outside.emplace_back("mlp.down_proj.bias");
        break;
    case ModelFamily::Qwen2:
        if (anyO) outside.emplace_back("self_attn.o_proj.bias");
        if (anyDown) outside.emplace_back("mlp.down_proj.bias");
        break;
    case ModelFamily::Mistral:
        if (config.qkv_bias) outside.insert(outside.end(), {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"});
        if (anyO) outside.emplace_back("self_attn.o_proj.bias");
        if (anyDown) outside.emplace_back("mlp.down_proj.bias");
        break;
    }
    plan.writeQkvBias = (config.qkv_bias || flags.attentionBias) && !config.qkv_bias;  // zeros where npw has none
    plan.writeOBias = anyO || flags.attentionBias;
    plan.writeDownBias = anyDown;
    plan.writeMlpBias = flags.mlpBias;
    plan.configText = hfConfigText(config, flags, outside, extraConfigJson, dir);

    LlamaWeights none;
    none.layers.resize(static_cast<size_t>(config.num_layers));
    const std::string layerPrefix = "model.layers.";
    forEachRequiredHfTensor(config, none, [&](const std::string& name, const Shape& shape, const at::Tensor&) {
        int64_t group = name == "model.embed_tokens.weight" ? -1 : config.num_layers;
        if (name.rfind(layerPrefix, 0) == 0) group = std::stoll(name.substr(layerPrefix.size()));
        plan.entries.push_back({name, shape, group});
    });
    // The biases after the required tensors of their layer (the required ones are in layer order).
    std::vector<HfDirectoryPlan::Entry> ordered;
    size_t next = 0;
    for (int64_t i = -1; i <= config.num_layers; ++i) {
        while (next < plan.entries.size() && plan.entries[next].group == i) ordered.push_back(plan.entries[next++]);
        if (i < 0 || i >= config.num_layers) continue;
        const auto l = static_cast<size_t>(i);
        const int64_t qWidth = config.num_heads[l] * config.head_dim, kvWidth = config.num_kv_heads[l] * config.head_dim;
        auto add = [&](const char* suffix, int64_t width) { ordered.push_back({hfLayerTensorName(i, suffix), Shape{width}, i}); };
        if (plan.writeQkvBias) {
            add("self_attn.q_proj.bias", qWidth);
            add("self_attn.k_proj.bias", kvWidth);
            add("self_attn.v_proj.bias", kvWidth);
        }
        if (plan.writeOBias) add("self_attn.o_proj.bias", config.hidden_size);
        if (plan.writeDownBias) add("mlp.down_proj.bias", config.hidden_size);
        if (plan.writeMlpBias)
            for (const ZeroBias& bias : zeroMlpBiases(config, l)) add(bias.suffix, bias.width);
    }
    plan.entries = std::move(ordered);
    return plan;
}

// The tensors of layer `i` (weights in the Hugging Face rotary layout already) by name, as the
// plan lists them: the biases npw lacks as zeros of the weights' dtype.
std::map<std::string, at::Tensor> hfLayerTensors(const LlamaConfig& config, const HfDirectoryPlan& plan, int64_t i,
                                                 const LlamaLayerWeights& layer, at::ScalarType dtype) {
    std::map<std::string, at::Tensor> out;
    LlamaWeights one;
    one.layers.resize(static_cast<size_t>(config.num_layers));
    one.layers[static_cast<size_t>(i)] = layer;
    forEachRequiredHfTensor(config, one, [&](const std::string& name, const Shape&, const at::Tensor& tensor) {
        if (tensor.defined()) out[name] = tensor;
    });
    auto bias = [&](const char* suffix, const at::Tensor& t) {
        const std::string name = hfLayerTensorName(i, suffix);
        for (const HfDirectoryPlan::Entry& e : plan.entries)
            // A required tensor (Qwen2's and qkv_bias's q/k/v biases) is the layer's own, never zeros.
            if (e.name == name && !out.count(name))
                out[name] = t.defined() ? t : at::zeros(e.shape, at::TensorOptions().dtype(dtype));
    };
    bias("self_attn.q_proj.bias", at::Tensor());
    bias("self_attn.k_proj.bias", at::Tensor());
    bias("self_attn.v_proj.bias", at::Tensor());
    bias("self_attn.o_proj.bias", layer.wo_bias);
    bias("mlp.down_proj.bias", layer.w_down_bias);
    bias("mlp.gate_proj.bias", at::Tensor());
    bias("mlp.up_proj.bias", at::Tensor());
    return out;
}

} // namespace

void saveHfLlamaDirectory(const LlamaCheckpoint& checkpoint, const std::string& dir, const std::string& extraConfigJson) {
    if (!checkpoint.source.empty()) ensureNotOverwritingSource(checkpoint.source, dir);
    const LlamaConfig& config = checkpoint.config;
    config.validate(checkpoint.source.empty() ? dir : checkpoint.source);
    const LlamaWeights& weights = checkpoint.weights;
    auto fail = [&](const std::string& problem) { throw Error("cannot save the model to '" + dir + "': " + problem); };
    if (static_cast<int64_t>(weights.layers.size()) != config.num_layers)
        fail("the weights have " + std::to_string(weights.layers.size()) + " layers but the config says " +
             std::to_string(config.num_layers));
    forEachRequiredHfTensor(config, weights, [&](const std::string& name, const Shape& shape, const at::Tensor& tensor) {
        if (!tensor.defined()) fail("tensor '" + name + "' is missing");
        if (tensor.sizes() != at::IntArrayRef(shape))
            fail("tensor '" + name + "' has shape " + formatShape(tensor.sizes()) + " but the config implies " +
                 formatShape(shape));
    });
    if (config.tie_word_embeddings && weights.lm_head.defined() && !weights.lm_head.is_same(weights.embed) &&
        !at::equal(weights.lm_head.cpu(), weights.embed.cpu()))
        fail("the config says tie_word_embeddings but lm_head differs from the embedding");

    std::vector<bool> oBias, downBias;
    for (const LlamaLayerWeights& layer : weights.layers) {
        oBias.push_back(layer.wo_bias.defined());
        downBias.push_back(layer.w_down_bias.defined());
    }
    const HfDirectoryPlan plan = planHfDirectory(config, oBias, downBias, extraConfigJson, dir);
    std::map<std::string, at::Tensor> byName;
    const LlamaWeights hfWeights = withHalfSplitRope(config, weights);
    forEachRequiredHfTensor(config, hfWeights, [&](const std::string& name, const Shape&, const at::Tensor& tensor) {
        byName[name] = tensor;
    });
    for (size_t i = 0; i < hfWeights.layers.size(); ++i) {
        const LlamaLayerWeights& layer = hfWeights.layers[i];
        auto check = [&](const char* suffix, const at::Tensor& bias) {
            if (bias.defined() && bias.sizes() != at::IntArrayRef(Shape{config.hidden_size}))
                fail("tensor '" + hfLayerTensorName(static_cast<int64_t>(i), suffix) + "' has shape " +
                     formatShape(bias.sizes()) + " but the config implies [" + std::to_string(config.hidden_size) + "]");
        };
        check("self_attn.o_proj.bias", layer.wo_bias);
        check("mlp.down_proj.bias", layer.w_down_bias);
        for (auto& [name, tensor] : hfLayerTensors(config, plan, static_cast<int64_t>(i), layer, at::kFloat))
            byName[name] = tensor;
    }
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const HfDirectoryPlan::Entry& e : plan.entries) tensors.emplace_back(e.name, byName.at(e.name).to(at::kCPU, at::kFloat));

    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail("cannot create the directory: " + ec.message());
    const fs::path root(dir);
    // transformers refuses safetensors files without format metadata.
    writeSafeTensors((root / "model.safetensors").string(), tensors, {{"format", "pt"}});
    if (!checkpoint.tokenizerPath.empty()) copyTokenizerInto(checkpoint.tokenizerPath, root);
    // Last, so that a directory with a config.json has its weights.
    writeTextAtomically((root / "config.json").string(), plan.configText);
}

void saveHfLlamaDirectoryStreamed(const HfStreamedModel& model, const std::string& dir,
                                  const std::string& extraConfigJson,
                                  const std::function<LlamaLayerWeights(size_t layer)>& layerAt) {
    saveHfLlamaDirectoryStreamed(model, dir, extraConfigJson, layerAt, HfStreamedShards{});
}

void saveHfLlamaDirectoryStreamed(const HfStreamedModel& model, const std::string& dir,
                                  const std::string& extraConfigJson,
                                  const std::function<LlamaLayerWeights(size_t layer)>& layerAt,
                                  const HfStreamedShards& resume) {
    if (!model.source.empty()) ensureNotOverwritingSource(model.source, dir);
    const LlamaConfig& config = model.config;
    config.validate(model.source.empty() ? dir : model.source);
    auto fail = [&](const std::string& problem) { throw Error("cannot save the model to '" + dir + "': " + problem); };
    const auto layers = static_cast<size_t>(config.num_layers);
    if (model.oBias.size() != layers || model.downBias.size() != layers)
        fail("the bias plan lists " + std::to_string(model.oBias.size()) + " layers but the config says " +
             std::to_string(layers));
    const HfDirectoryPlan plan = planHfDirectory(config, model.oBias, model.downBias, extraConfigJson, dir);
    const int64_t element = static_cast<int64_t>(c10::elementSize(model.dtype));

    // Shards of whole groups (the embedding, one layer, the final norm and classifier), a new one
    // when the next group would take the current one past shardBytes.
    struct Shard {
        std::vector<SafeTensorsEntry> entries;
        int64_t bytes = 0;
        int64_t lastGroup = 0;
    };
    std::vector<Shard> shards(1);
    std::map<std::string, size_t> shardOf;
    for (size_t k = 0; k < plan.entries.size();) {
        const int64_t group = plan.entries[k].group;
        int64_t groupBytes = 0;
        size_t end = k;
        for (; end < plan.entries.size() && plan.entries[end].group == group; ++end) {
            int64_t n = element;
            for (int64_t d : plan.entries[end].shape) n *= d;
            groupBytes += n;
        }
        if (!shards.back().entries.empty() && shards.back().bytes + groupBytes > model.shardBytes) shards.emplace_back();
        for (; k < end; ++k) {
            shards.back().entries.push_back({plan.entries[k].name, model.dtype, plan.entries[k].shape});
            shardOf[plan.entries[k].name] = shards.size() - 1;
        }
        shards.back().bytes += groupBytes;
        shards.back().lastGroup = group;
    }
    auto shardName = [&](size_t s) {
        if (shards.size() == 1) return std::string("model.safetensors");
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
        return std::string(name);
    };

    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail("cannot create the directory: " + ec.message());
    const fs::path root(dir);
    // The shards an earlier run finished (a prefix), and each shard's layers.
    std::vector<bool> done(shards.size(), false);
    for (size_t s = 0; s < shards.size() && resume.finished && resume.finished(s, shardName(s)); ++s) done[s] = true;
    std::vector<std::vector<size_t>> layersOf(shards.size());
    for (size_t i = 0; i < layers; ++i)
        for (const HfDirectoryPlan::Entry& e : plan.entries)
            if (e.group == static_cast<int64_t>(i)) {
                layersOf[shardOf.at(e.name)].push_back(i);
                break;
            }
    std::unique_ptr<SafeTensorsStreamWriter> writer;
    size_t current = 0;
    auto commit = [&] {
        writer->commit();
        writer.reset();
        if (resume.committed) resume.committed(current, shardName(current), layersOf[current]);
    };
    auto write = [&](const std::string& name, const at::Tensor& tensor) {
        const size_t s = shardOf.at(name);
        if (done[s]) return;
        if (!writer || s != current) {
            if (writer) commit();
            current = s;
            writer = std::make_unique<SafeTensorsStreamWriter>((root / shardName(s)).string(), shards[s].entries,
                                                               std::map<std::string, std::string>{{"format", "pt"}});
        }
        writer->write(name, tensor.to(at::kCPU, model.dtype).contiguous());
    };
    auto requireShape = [&](const std::string& name, const at::Tensor& tensor) {
        for (const HfDirectoryPlan::Entry& e : plan.entries)
            if (e.name == name && tensor.sizes() != at::IntArrayRef(e.shape))
                fail("tensor '" + name + "' has shape " + formatShape(tensor.sizes()) + " but the config implies " +
                     formatShape(e.shape));
    };
    requireShape("model.embed_tokens.weight", model.embed);
    write("model.embed_tokens.weight", model.embed);
    for (size_t i = 0; i < layers; ++i) {
        bool written = false;  // the layer's shard is finished already
        for (const HfDirectoryPlan::Entry& e : plan.entries)
            if (e.group == static_cast<int64_t>(i)) {
                written = done[shardOf.at(e.name)];
                break;
            }
        if (written) continue;
        const LlamaLayerWeights layer = layerWithHalfSplitRope(config, i, layerAt(i));
        for (const auto& [name, tensor] : hfLayerTensors(config, plan, static_cast<int64_t>(i), layer, model.dtype)) {
            requireShape(name, tensor);
            write(name, tensor);
        }
    }
    write("model.norm.weight", model.finalNorm);
    if (!config.tie_word_embeddings) {
        requireShape("lm_head.weight", model.lmHead);
        write("lm_head.weight", model.lmHead);
    }
    if (writer) commit();
    if (shards.size() > 1) {
        nlohmann::json index;
        int64_t total = 0;
        for (const Shard& shard : shards) total += shard.bytes;
        index["metadata"] = {{"total_size", total}};
        index["weight_map"] = nlohmann::json::object();
        for (const auto& [name, s] : shardOf) index["weight_map"][name] = shardName(s);
        writeTextAtomically((root / "model.safetensors.index.json").string(), index.dump(2) + "\n");
    }
    if (!model.tokenizerPath.empty()) copyTokenizerInto(model.tokenizerPath, root);
    // Last, so that a directory with a config.json has its weights.
    writeTextAtomically((root / "config.json").string(), plan.configText);
}

} // namespace npw
