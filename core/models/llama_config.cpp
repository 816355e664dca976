#include "core/models/llama_config.h"

#include "core/text/json_fields.h"
#include "core/text/json_output.h"
#include "core/util/atomic_file.h"
#include "core/util/checked_math.h"
#include "core/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace npw {

using nlohmann::json;

namespace {

[[noreturn]] void failConfig(const std::string& path, const std::string& problem) {
    throw Error("config '" + path + "': " + problem);
}

// A key counts as given when it is present and not null (transformers writes nulls for
// unset optional fields).
bool given(const json& config, const char* key) { return config.contains(key) && !config[key].is_null(); }

int64_t readInteger(const std::string& path, const json& config, const char* key) {
    if (!given(config, key)) failConfig(path, std::string("'") + key + "' is missing");
    const json& value = config[key];
    if (!value.is_number_integer()) failConfig(path, std::string("'") + key + "' must be an integer, got " + json_fields::preview(value));
    return value.get<int64_t>();
}

int64_t readInteger(const std::string& path, const json& config, const char* key, int64_t fallback) {
    return given(config, key) ? readInteger(path, config, key) : fallback;
}

double readNumber(const std::string& path, const json& config, const char* key, double fallback) {
    if (!given(config, key)) return fallback;
    const json& value = config[key];
    if (!value.is_number()) failConfig(path, std::string("'") + key + "' must be a number, got " + json_fields::preview(value));
    return value.get<double>();
}

bool readBool(const std::string& path, const json& config, const char* key, bool fallback) {
    if (!given(config, key)) return fallback;
    const json& value = config[key];
    if (!value.is_boolean()) failConfig(path, std::string("'") + key + "' must be true or false, got " + json_fields::preview(value));
    return value.get<bool>();
}

// Pruned models have per-layer sizes; unpruned ones a scalar that holds for every layer.
std::vector<int64_t> readPerLayer(const std::string& path, const json& config, const char* key, int64_t numLayers) {
    if (!given(config, key)) failConfig(path, std::string("'") + key + "' is missing");
    const json& value = config[key];
    if (value.is_number_integer()) return std::vector<int64_t>(static_cast<size_t>(numLayers), value.get<int64_t>());
    std::string expected = std::string("'") + key + "' must be an integer or a list of " + std::to_string(numLayers) +
                           " integers (one per layer)";
    if (!value.is_array() || static_cast<int64_t>(value.size()) != numLayers)
        failConfig(path, expected + ", got " + json_fields::preview(value));
    std::vector<int64_t> perLayer;
    for (const json& item : value) {
        if (!item.is_number_integer()) failConfig(path, expected + ", got " + json_fields::preview(value));
        perLayer.push_back(item.get<int64_t>());
    }
    return perLayer;
}

// Llama 3.1 lists several end-of-sequence ids; npw stops at the first.
int64_t readTokenId(const std::string& path, const json& config, const char* key, int64_t fallback) {
    if (given(config, key) && config[key].is_array()) {
        const json& ids = config[key];
        if (ids.empty() || !ids[0].is_number_integer())
            failConfig(path, std::string("'") + key + "' must be an integer or a non-empty list of integers, got " + json_fields::preview(ids));
        return ids[0].get<int64_t>();
    }
    return readInteger(path, config, key, fallback);
}

ModelFamily readFamily(const std::string& path, const json& config) {
    if (!given(config, "model_type")) return ModelFamily::Llama;  // older LLaMA configs omit it
    const json& type = config["model_type"];
    if (type == "llama") return ModelFamily::Llama;
    if (type == "mistral") return ModelFamily::Mistral;
    if (type == "qwen2") return ModelFamily::Qwen2;
    if (type == "qwen3") return ModelFamily::Qwen3;
    failConfig(path, "model_type " + json_fields::preview(type) +
                         " is unsupported (npw reads \"llama\", \"mistral\", \"qwen2\" and \"qwen3\" models)");
}

void rejectUnsupported(const std::string& path, const json& config) {
    if (given(config, "hidden_act") && config["hidden_act"] != "silu")
        failConfig(path, "hidden_act " + json_fields::preview(config["hidden_act"]) + " is unsupported (this family uses \"silu\")");
    readBool(path, config, "attention_bias", false);  // type-checked only: the tensors decide which biases exist
    readBool(path, config, "mlp_bias", false);
}

// rope_scaling (or transformers' newer rope_parameters): default, linear or llama3.
RopeScaling readRopeScaling(const std::string& path, const json& config) {
    RopeScaling scaling;
    const char* key = given(config, "rope_scaling") ? "rope_scaling" : given(config, "rope_parameters") ? "rope_parameters" : nullptr;
    if (!key) return scaling;
    const json& r = config[key];
    const std::string where = std::string(key) + " " + json_fields::preview(r);
    if (!r.is_object()) failConfig(path, where + " must be an object");
    // transformers reads "rope_type" and, from configs written before it existed, "type".
    const char* typeKey = given(r, "rope_type") ? "rope_type" : given(r, "type") ? "type" : nullptr;
    if (!typeKey) failConfig(path, where + " has no \"rope_type\" (or \"type\")");
    if (!r[typeKey].is_string()) failConfig(path, where + ": its " + typeKey + " must be a string");
    const std::string type = r[typeKey].get<std::string>();
    auto number = [&](const char* field, bool required, double fallback) {
        if (!given(r, field)) {
            if (required) failConfig(path, where + ": rope type \"" + type + "\" needs \"" + field + "\"");
            return fallback;
        }
        if (!r[field].is_number()) failConfig(path, where + ": \"" + field + "\" must be a number");
        return r[field].get<double>();
    };
    if (type == "default") return scaling;
    if (type == "linear") {
        scaling.type = RopeScaling::Type::Linear;
        scaling.factor = number("factor", true, 1.0);
    } else if (type == "llama3") {
        scaling.type = RopeScaling::Type::Llama3;
        scaling.factor = number("factor", true, 8.0);
        scaling.low_freq_factor = number("low_freq_factor", true, 1.0);
        scaling.high_freq_factor = number("high_freq_factor", true, 4.0);
        const double original = number("original_max_position_embeddings", true, 8192);
        if (!(original >= 1) || original != std::floor(original))
            failConfig(path, where + ": original_max_position_embeddings must be a positive integer");
        scaling.original_max_position_embeddings = static_cast<int64_t>(original);
    } else {
        failConfig(path, "rope_scaling type \"" + type +
                             "\" is unsupported (npw implements default, linear and llama3 RoPE; a model with another "
                             "scaling would run wrong)");
    }
    if (!(scaling.factor > 0)) failConfig(path, where + ": factor must be positive");
    if (scaling.type == RopeScaling::Type::Llama3 &&
        !(scaling.low_freq_factor > 0 && scaling.high_freq_factor > scaling.low_freq_factor))
        failConfig(path, where + ": llama3 needs 0 < low_freq_factor < high_freq_factor");
    return scaling;
}

// The sliding window in effect: Mistral's sliding_window; Qwen's only with use_sliding_window
// and only when some layer uses it (layer_types, or layers from max_window_layers on).
void readSlidingWindow(const std::string& path, const json& config, LlamaConfig& result) {
    auto window = [&]() -> int64_t {
        if (!given(config, "sliding_window")) return 0;
        const int64_t w = readInteger(path, config, "sliding_window");
        if (w <= 0) failConfig(path, "sliding_window must be positive or null, got " + std::to_string(w));
        return w;
    };
    if (result.family == ModelFamily::Mistral) {
        result.sliding_window = window();
        return;
    }
    if (result.family != ModelFamily::Qwen2 && result.family != ModelFamily::Qwen3) return;
    if (!readBool(path, config, "use_sliding_window", false)) return;  // the window is then ignored
    const int64_t w = given(config, "sliding_window") ? window() : 4096;
    result.max_window_layers = readInteger(path, config, "max_window_layers", 28);
    bool anySliding = result.max_window_layers < result.num_layers;
    if (given(config, "layer_types") && config["layer_types"].is_array()) {
        anySliding = false;
        for (const json& t : config["layer_types"]) anySliding = anySliding || t == "sliding_attention";
    }
    if (anySliding) result.sliding_window = w;
}

} // namespace

const char* familyName(ModelFamily family) {
    switch (family) {
    case ModelFamily::Llama: return "llama";
    case ModelFamily::Mistral: return "mistral";
    case ModelFamily::Qwen2: return "qwen2";
    case ModelFamily::Qwen3: return "qwen3";
    }
    return "llama";
}

const char* ropeScalingName(RopeScaling::Type type) {
    switch (type) {
    case RopeScaling::Type::None: return "default";
    case RopeScaling::Type::Linear: return "linear";
    case RopeScaling::Type::Llama3: return "llama3";
    }
    return "default";
}

std::vector<double> LlamaConfig::ropeInverseFrequencies() const {
    const double pi = 3.14159265358979323846;
    std::vector<double> inv;
    for (int64_t j = 0; j < head_dim / 2; ++j) {
        double f = std::pow(rope_theta, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
        const RopeScaling& s = rope_scaling;
        if (s.type == RopeScaling::Type::Linear) {
            f /= s.factor;
        } else if (s.type == RopeScaling::Type::Llama3) {
            // transformers' _compute_llama3_parameters, term by term.
            const double original = static_cast<double>(s.original_max_position_embeddings);
            const double lowFreqWavelen = original / s.low_freq_factor, highFreqWavelen = original / s.high_freq_factor;
            const double wavelen = 2 * pi / f;
            if (wavelen > lowFreqWavelen) {
                f /= s.factor;
            } else if (!(wavelen < highFreqWavelen)) {
                const double smooth = (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                f = (1 - smooth) * f / s.factor + smooth * f;
            }
        }
        inv.push_back(f);
    }
    return inv;
}

int64_t LlamaConfig::attentionSpan() const {
    return sliding_window > 0 ? std::min(sliding_window, max_position_embeddings) : max_position_embeddings;
}

void LlamaConfig::checkAttentionSpan(int64_t positions, const std::string& what) const {
    if (sliding_window > 0 && positions > sliding_window)
        throw Error(what + " of " + std::to_string(positions) + " positions is longer than the model's sliding_window of " +
                    std::to_string(sliding_window) + " (" + familyName(family) + " attends only to the last " +
                    std::to_string(sliding_window) +
                    " positions; npw runs full attention, which agrees only up to that length): use " +
                    std::to_string(sliding_window) + " or fewer");
}

bool LlamaConfig::isUniform() const {
    auto allEqual = [](const std::vector<int64_t>& sizes) {
        return std::all_of(sizes.begin(), sizes.end(), [&](int64_t size) { return size == sizes.front(); });
    };
    return allEqual(num_heads) && allEqual(num_kv_heads) && allEqual(intermediate_size);
}

int64_t LlamaConfig::parameterCount(bool withAttnBias, bool withMlpBias) const {
    int64_t count = vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2) + hidden_size;
    for (int64_t layer = 0; layer < num_layers; ++layer) {
        const auto i = static_cast<size_t>(layer);
        int64_t qWidth = num_heads[i] * head_dim, kvWidth = num_kv_heads[i] * head_dim;
        count += 2 * hidden_size;                                      // the two RMSNorms
        count += 2 * hidden_size * qWidth + 2 * hidden_size * kvWidth;  // q, o; k, v
        count += 3 * hidden_size * intermediate_size[i];               // gate, up, down
        if (qkv_bias) count += qWidth + 2 * kvWidth;                   // q/k/v biases
        if (qk_norm && num_heads[i] > 0) count += 2 * head_dim;        // Qwen3's q/k norms
        if (withAttnBias) count += hidden_size;                        // o_proj bias
        if (withMlpBias) count += hidden_size;                         // down_proj bias
    }
    return count;
}

void LlamaConfig::validate(const std::string& source) const {
    auto fail = [&](const std::string& problem) { throw Error("model config of '" + source + "': " + problem); };
    if (vocab_size <= 0) fail("vocab_size must be positive, got " + std::to_string(vocab_size));
    if (hidden_size <= 0) fail("hidden_size must be positive, got " + std::to_string(hidden_size));
    if (num_layers <= 0) fail("num_layers must be positive, got " + std::to_string(num_layers));
    if (head_dim <= 0 || head_dim % 2 != 0)
        fail("head_dim must be positive and even (RoPE rotates pairs), got " + std::to_string(head_dim));
    if (max_position_embeddings <= 0)
        fail("max_position_embeddings must be positive, got " + std::to_string(max_position_embeddings));
    // Every real-valued field: a normal, finite number in a range that real models stay far
    // inside. A denormal factor (1e-320) or epsilon is "positive" but divides to infinity.
    const auto inRange = [&](const std::string& name, double value, double low, double high) {
        if (!std::isnormal(value) || !(value >= low && value <= high)) {
            std::ostringstream out;
            out << name << " must be a normal, finite number from " << low << " to " << high << ", got "
                << std::setprecision(17) << value;
            fail(out.str());
        }
    };
    inRange("rope_theta", rope_theta, 1.0, 1e12);  // 10,000 (LLaMA-2) to 1e6 (Qwen, Mistral) and beyond
    inRange("rms_norm_eps", rms_norm_eps, 1e-12, 1.0);  // 1e-5, 1e-6
    for (const auto& [name, sizes] : {std::pair<const char*, const std::vector<int64_t>&>{"num_heads", num_heads},
                                      {"num_kv_heads", num_kv_heads},
                                      {"intermediate_size", intermediate_size}}) {
        if (static_cast<int64_t>(sizes.size()) != num_layers)
            fail(std::string(name) + " has " + std::to_string(sizes.size()) + " entries but there are " +
                 std::to_string(num_layers) + " layers");
        for (size_t layer = 0; layer < sizes.size(); ++layer)
            if (sizes[layer] < 0) fail(std::string(name) + " of layer " + std::to_string(layer) + " is negative");
    }
    if (rope_scaling.type != RopeScaling::Type::None)
        inRange("rope_scaling factor", rope_scaling.factor, 1e-3, 1e6);  // 2 to 32 in released models
    if (rope_scaling.type == RopeScaling::Type::Llama3) {
        inRange("rope_scaling low_freq_factor", rope_scaling.low_freq_factor, 1e-3, 1e6);    // 1
        inRange("rope_scaling high_freq_factor", rope_scaling.high_freq_factor, 1e-3, 1e6);  // 4
        if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor))
            fail("rope_scaling needs low_freq_factor < high_freq_factor");
        if (rope_scaling.original_max_position_embeddings < 1 ||
            rope_scaling.original_max_position_embeddings > (int64_t(1) << 31))
            fail("rope_scaling original_max_position_embeddings must be from 1 to 2^31, got " +
                 std::to_string(rope_scaling.original_max_position_embeddings));
    }
    if (sliding_window < 0) fail("sliding_window must not be negative");
    if (qk_norm && family != ModelFamily::Qwen3) fail(std::string("q/k norms belong to qwen3, not ") + familyName(family));
    for (size_t layer = 0; layer < num_heads.size(); ++layer) {
        int64_t heads = num_heads[layer], kvHeads = num_kv_heads[layer];
        std::string counts = " (layer " + std::to_string(layer) + ": " + std::to_string(heads) + " heads, " +
                             std::to_string(kvHeads) + " key/value heads)";
        if ((heads == 0) != (kvHeads == 0)) fail("a layer without query heads must have no key/value heads and vice versa" + counts);
        if (kvHeads > 0 && heads % kvHeads != 0) fail("the key/value heads must divide the query heads" + counts);
    }
    // Every size the model is built from must be computable: a config whose products overflow
    // (heads × head_dim wrapping to 0) is refused here, not inside LibTorch. The total is
    // parameterCount's sum, weights and biases.
    const std::string what = "model config of '" + source + "'";
    int64_t total = checkedAdd(checkedMul(checkedMul(vocab_size, hidden_size, what), int64_t{2}, what), hidden_size, what);
    for (size_t layer = 0; layer < num_heads.size(); ++layer) {
        const int64_t qWidth = checkedMul(num_heads[layer], head_dim, what);
        const int64_t kvWidth = checkedMul(num_kv_heads[layer], head_dim, what);
        const int64_t attention = checkedMul(checkedMul(checkedAdd(qWidth, kvWidth, what), int64_t{2}, what), hidden_size, what);
        const int64_t mlp = checkedMul(checkedMul(intermediate_size[layer], int64_t{3}, what), hidden_size, what);
        total = checkedAdd(total, checkedAdd(checkedAdd(attention, mlp, what), checkedMul(hidden_size, int64_t{4}, what), what), what);
    }
    checkedMul(max_position_embeddings, head_dim, what);
}

LlamaConfig readHfLlamaConfig(const std::string& configJsonPath) {
    const json config = json_fields::readJsonFile(configJsonPath, "config '" + configJsonPath + "'");
    if (!config.is_object()) failConfig(configJsonPath, "not a JSON object");
    LlamaConfig result;
    result.family = readFamily(configJsonPath, config);
    rejectUnsupported(configJsonPath, config);

    result.vocab_size = readInteger(configJsonPath, config, "vocab_size");
    result.hidden_size = readInteger(configJsonPath, config, "hidden_size");
    result.num_layers = readInteger(configJsonPath, config, "num_hidden_layers");
    // Bounded before per-layer lists are allocated from it; the deepest LLaMAs have ~130 layers.
    constexpr int64_t kMaxLayers = 100'000;
    if (result.num_layers <= 0 || result.num_layers > kMaxLayers)
        failConfig(configJsonPath, "num_hidden_layers must be between 1 and " + std::to_string(kMaxLayers) + ", got " +
                                       std::to_string(result.num_layers));
    result.num_heads = readPerLayer(configJsonPath, config, "num_attention_heads", result.num_layers);
    result.num_kv_heads = given(config, "num_key_value_heads")
                              ? readPerLayer(configJsonPath, config, "num_key_value_heads", result.num_layers)
                              : result.num_heads;  // no key: multi-head attention (transformers' default)
    result.intermediate_size = readPerLayer(configJsonPath, config, "intermediate_size", result.num_layers);

    // head_dim = hidden / heads holds only for the unpruned model. A list of head counts
    // means a pruned one, whose original head count is unknown, so head_dim must be given
    // (npw always writes it). A scalar head count is taken as the unpruned one.
    if (given(config, "head_dim")) {
        result.head_dim = readInteger(configJsonPath, config, "head_dim");
    } else if (result.family == ModelFamily::Qwen3) {
        result.head_dim = 128;  // Qwen3Config's default (not hidden / heads)
    } else if (config["num_attention_heads"].is_array()) {
        failConfig(configJsonPath, "head_dim is missing: with per-layer num_attention_heads it cannot be derived from "
                                   "hidden_size (the unpruned head count is unknown)");
    } else {
        int64_t heads = result.num_heads.front();
        if (heads <= 0 || result.hidden_size % heads != 0)
            failConfig(configJsonPath, "head_dim is missing and hidden_size " + std::to_string(result.hidden_size) +
                                           " is not a multiple of num_attention_heads " + std::to_string(heads));
        result.head_dim = result.hidden_size / heads;
    }

    // Defaults are transformers' defaults of the family, so a terse config means what it means there.
    const int64_t defaultContext = result.family == ModelFamily::Llama     ? 2048
                                   : result.family == ModelFamily::Mistral ? 4096 * 32
                                                                           : 32768;
    result.max_position_embeddings = readInteger(configJsonPath, config, "max_position_embeddings", defaultContext);
    result.rope_theta = readNumber(configJsonPath, config, "rope_theta", 10000.0);
    result.rms_norm_eps = readNumber(configJsonPath, config, "rms_norm_eps", 1e-6);
    result.tie_word_embeddings = readBool(configJsonPath, config, "tie_word_embeddings", false);
    result.bos_token_id = readTokenId(configJsonPath, config, "bos_token_id", 1);
    result.eos_token_id = readTokenId(configJsonPath, config, "eos_token_id", 2);
    result.rope_layout = RopeLayout::HalfSplit;
    if (given(config, "rope_parameters") && config["rope_parameters"].is_object() && !given(config, "rope_theta"))
        result.rope_theta = readNumber(configJsonPath, config["rope_parameters"], "rope_theta", result.rope_theta);
    result.rope_scaling = readRopeScaling(configJsonPath, config);
    readSlidingWindow(configJsonPath, config, result);
    result.qkv_bias = result.family == ModelFamily::Qwen2;
    result.qk_norm = result.family == ModelFamily::Qwen3;
    return result;
}

std::string hfLlamaConfigJson(const LlamaConfig& config, const HfBiasFlags& biases) {
    // Scalars keep a uniform model readable by transformers; a pruned model needs the lists.
    const bool uniform = config.isUniform();
    auto perLayerJson = [&](const std::vector<int64_t>& sizes) {
        return uniform && !sizes.empty() ? json(sizes.front()) : json(sizes);
    };
    const char* architecture = config.family == ModelFamily::Mistral ? "MistralForCausalLM"
                               : config.family == ModelFamily::Qwen2 ? "Qwen2ForCausalLM"
                               : config.family == ModelFamily::Qwen3 ? "Qwen3ForCausalLM"
                                                                     : "LlamaForCausalLM";
    json out = {
        {"architectures", {architecture}},
        {"model_type", familyName(config.family)},
        {"torch_dtype", "float32"},
        {"hidden_act", "silu"},
        {"vocab_size", config.vocab_size},
        {"hidden_size", config.hidden_size},
        {"num_hidden_layers", config.num_layers},
        {"num_attention_heads", perLayerJson(config.num_heads)},
        {"num_key_value_heads", perLayerJson(config.num_kv_heads)},
        {"intermediate_size", perLayerJson(config.intermediate_size)},
        {"head_dim", config.head_dim},
        {"max_position_embeddings", config.max_position_embeddings},
        {"rope_theta", config.rope_theta},
        {"rms_norm_eps", config.rms_norm_eps},
        {"tie_word_embeddings", config.tie_word_embeddings},
        {"bos_token_id", config.bos_token_id},
        {"eos_token_id", config.eos_token_id},
        {"attention_bias", biases.attentionBias},
        {"mlp_bias", biases.mlpBias},
    };
    const RopeScaling& r = config.rope_scaling;
    if (r.type == RopeScaling::Type::None) {
        out["rope_scaling"] = nullptr;
    } else {
        out["rope_scaling"] = {{"rope_type", ropeScalingName(r.type)}, {"factor", r.factor}};
        if (r.type == RopeScaling::Type::Llama3) {
            out["rope_scaling"]["low_freq_factor"] = r.low_freq_factor;
            out["rope_scaling"]["high_freq_factor"] = r.high_freq_factor;
            out["rope_scaling"]["original_max_position_embeddings"] = r.original_max_position_embeddings;
        }
    }
    if (config.family == ModelFamily::Mistral)
        out["sliding_window"] = config.sliding_window > 0 ? json(config.sliding_window) : json(nullptr);
    if (config.family == ModelFamily::Qwen2 || config.family == ModelFamily::Qwen3) {
        out["use_sliding_window"] = config.sliding_window > 0;
        out["sliding_window"] = config.sliding_window > 0 ? json(config.sliding_window) : json(nullptr);
        out["max_window_layers"] = config.sliding_window > 0 ? config.max_window_layers : config.num_layers;
    }
    return json_fields::dumpJson(out, 2, "config.json") + "\n";
}

} // namespace npw
