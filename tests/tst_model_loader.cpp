// Loading and saving LLaMA checkpoints: the real llama2.c stories260K, Hugging Face
// directories (single file, sharded, fp16/bf16), and the errors for broken ones.
#include "core/models/model_loader.h"
#include "core/eval/layerwise_perplexity.h"
#include "core/models/checkpoint_inspection.h"
#include "core/models/llama.h"
#include "core/models/weight_values.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include "error_of.h"
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <sys/stat.h>

using namespace npw;
using npw::test::errorOf;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kStories = std::string(NPW_TEST_DATA) + "/stories260K/stories260K.bin";

bool containsAll(const QString& message, const QStringList& parts) {
    for (const QString& part : parts)
        if (!message.contains(part)) return false;
    return !message.isEmpty();
}

std::vector<std::pair<std::string, at::Tensor>> testTensors(const LlamaWeights& weights) {
    std::vector<std::pair<std::string, at::Tensor>> named{{"embed", weights.embed}, {"final_norm", weights.final_norm},
                                                          {"lm_head", weights.lm_head}};
    for (size_t i = 0; i < weights.layers.size(); ++i) {
        const LlamaLayerWeights& l = weights.layers[i];
        const std::string p = "layers[" + std::to_string(i) + "].";
        for (const auto& [name, tensor] : {std::pair<const char*, at::Tensor>{"attn_norm", l.attn_norm}, {"wq", l.wq},
                                           {"wk", l.wk}, {"wv", l.wv}, {"wo", l.wo}, {"wo_bias", l.wo_bias},
                                           {"ffn_norm", l.ffn_norm}, {"w_gate", l.w_gate}, {"w_up", l.w_up},
                                           {"w_down", l.w_down}, {"w_down_bias", l.w_down_bias}})
            named.emplace_back(p + name, tensor);
    }
    return named;
}

// The first tensor that differs ("" when all are equal); undefined matches undefined.
QString firstDifference(const LlamaWeights& a, const LlamaWeights& b) {
    auto namedA = testTensors(a), namedB = testTensors(b);
    if (namedA.size() != namedB.size()) return "layer count";
    for (size_t i = 0; i < namedA.size(); ++i) {
        const at::Tensor &x = namedA[i].second, &y = namedB[i].second;
        if (x.defined() != y.defined() || (x.defined() && !at::equal(x, y))) return QString::fromStdString(namedA[i].first);
    }
    return {};
}

// A small random LLaMA with per-layer sizes; optional o_proj/down_proj biases on some layers.
LlamaCheckpoint tinyCheckpoint(std::vector<int64_t> heads, std::vector<int64_t> kvHeads, std::vector<int64_t> inter,
                               bool withBiases = false) {
    at::manual_seed(7);
    LlamaCheckpoint checkpoint;
    LlamaConfig& config = checkpoint.config;
    config.vocab_size = 32;
    config.hidden_size = 16;
    config.num_layers = static_cast<int64_t>(heads.size());
    config.head_dim = 4;
    config.num_heads = heads;
    config.num_kv_heads = kvHeads;
    config.intermediate_size = inter;
    config.max_position_embeddings = 64;
    config.rope_theta = 5000.0;
    config.rms_norm_eps = 1e-5;
    LlamaWeights& w = checkpoint.weights;
    const int64_t hidden = config.hidden_size;
    w.embed = at::randn({config.vocab_size, hidden});
    w.final_norm = at::randn({hidden});
    w.lm_head = at::randn({config.vocab_size, hidden});
    for (size_t i = 0; i < heads.size(); ++i) {
        LlamaLayerWeights layer;
        const int64_t q = heads[i] * config.head_dim, kv = kvHeads[i] * config.head_dim;
        layer.attn_norm = at::randn({hidden});
        layer.wq = at::randn({q, hidden});
        layer.wk = at::randn({kv, hidden});
        layer.wv = at::randn({kv, hidden});
        layer.wo = at::randn({hidden, q});
        layer.ffn_norm = at::randn({hidden});
        layer.w_gate = at::randn({inter[i], hidden});
        layer.w_up = at::randn({inter[i], hidden});
        layer.w_down = at::randn({hidden, inter[i]});
        w.layers.push_back(layer);
    }
    if (withBiases) {  // on different layers, so the writer must fill the others with zeros
        w.layers.front().wo_bias = at::randn({hidden});
        w.layers.back().w_down_bias = at::randn({hidden});
    }
    return checkpoint;
}

LlamaCheckpoint tinyUniform(bool withBiases = false) { return tinyCheckpoint({4, 4}, {2, 2}, {24, 24}, withBiases); }

json readJson(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

void writeJson(const std::string& path, const json& value) { std::ofstream(path) << value.dump(2); }

using TensorMap = std::map<std::string, at::Tensor>;

TensorMap readAllTensors(const std::string& path) {
    auto file = SafeTensorsFile::open(path);
    TensorMap tensors;
    for (const std::string& name : file->names()) tensors[name] = file->load(name);
    return tensors;
}

void writeAllTensors(const std::string& path, const TensorMap& tensors) {
    writeSafeTensors(path, {tensors.begin(), tensors.end()}, {{"format", "pt"}});
}

// Applies edit to the tensors of dir/model.safetensors.
void editWeights(const std::string& dir, const std::function<void(TensorMap&)>& edit) {
    const std::string path = dir + "/model.safetensors";
    TensorMap tensors = readAllTensors(path);
    edit(tensors);
    writeAllTensors(path, tensors);
}

void editConfig(const std::string& dir, const std::function<void(json&)>& edit) {
    json config = readJson(dir + "/config.json");
    edit(config);
    writeJson(dir + "/config.json", config);
}

// Splits dir/model.safetensors into two shards (the first in F16, the second in BF16) with
// an index, the way transformers writes big models.
void shardHalfPrecision(const std::string& dir) {
    TensorMap all = readAllTensors(dir + "/model.safetensors");
    fs::remove(dir + "/model.safetensors");
    TensorMap first, second;
    json weightMap = json::object();
    for (const auto& [name, tensor] : all) {
        const bool inFirst = name.rfind("model.layers.0.", 0) == 0 || name.rfind("model.embed", 0) == 0;
        (inFirst ? first : second)[name] = tensor.to(inFirst ? at::kHalf : at::kBFloat16);
        weightMap[name] = inFirst ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    writeAllTensors(dir + "/model-00001-of-00002.safetensors", first);
    writeAllTensors(dir + "/model-00002-of-00002.safetensors", second);
    writeJson(dir + "/model.safetensors.index.json", {{"metadata", {{"total_size", 0}}}, {"weight_map", weightMap}});
}

// Rotary embedding of x [T, heads, head_dim] at positions 0..T-1, written here from the
// definitions (not npw's runtime): adjacent pairs (2i, 2i+1) or halves (i, i + d/2).
at::Tensor rotate(const at::Tensor& x, bool adjacentPairs, double theta) {
    const int64_t positions = x.size(0), d = x.size(2);
    at::Tensor inverseFrequency = at::pow(theta, at::arange(0, d / 2, at::kDouble) * (-2.0 / double(d)));
    at::Tensor angles = at::arange(0, positions, at::kDouble).unsqueeze(1) * inverseFrequency.unsqueeze(0);
    at::Tensor cos = angles.cos().to(at::kFloat).unsqueeze(1), sin = angles.sin().to(at::kFloat).unsqueeze(1);
    at::Tensor a = adjacentPairs ? x.slice(2, 0, d, 2) : x.slice(2, 0, d / 2);
    at::Tensor b = adjacentPairs ? x.slice(2, 1, d, 2) : x.slice(2, d / 2, d);
    at::Tensor ra = a * cos - b * sin, rb = a * sin + b * cos;
    return adjacentPairs ? at::stack({ra, rb}, -1).flatten(2) : at::cat({ra, rb}, 2);
}

// Attention logits q·k of one layer for input x [T, hidden]: [heads, T, T].
at::Tensor attentionScores(const LlamaConfig& config, const LlamaLayerWeights& layer, const at::Tensor& x,
                           bool adjacentPairs) {
    const int64_t positions = x.size(0), d = config.head_dim;
    const int64_t heads = config.num_heads[0], kvHeads = config.num_kv_heads[0];
    at::Tensor q = rotate(at::matmul(x, layer.wq.t()).view({positions, heads, d}), adjacentPairs, config.rope_theta);
    at::Tensor k = rotate(at::matmul(x, layer.wk.t()).view({positions, kvHeads, d}), adjacentPairs, config.rope_theta);
    k = k.repeat_interleave(heads / kvHeads, 1);
    return at::einsum("thd,shd->hts", {q, k});
}

// Reference values printed by tests/fixtures/stories260k_values.py (struct-based reader of
// the same file; output kept in tests/fixtures/stories260k_values.txt).
struct ReferenceValues {
    const char* label;
    std::function<at::Tensor(const LlamaWeights&)> tensor;
    int64_t flatStart;
    float values[4];
};

const std::vector<ReferenceValues>& storiesReference() {
    static const std::vector<ReferenceValues> reference = {
        {"embed[0]", [](const LlamaWeights& w) { return w.embed; }, 0,
         {-0.29474878311157227f, 0.5618956089019775f, 0.1754225343465805f, 0.34057360887527466f}},
        {"embed[511*64]", [](const LlamaWeights& w) { return w.embed; }, 511 * 64,
         {-0.24446307122707367f, 0.4325908422470093f, 0.21987290680408478f, 0.1838184893131256f}},
        {"layers[0].attn_norm[0]", [](const LlamaWeights& w) { return w.layers[0].attn_norm; }, 0,
         {0.9722429513931274f, 0.6754933595657349f, 0.8203195333480835f, 0.8715896606445312f}},
        {"layers[0].wq[0]", [](const LlamaWeights& w) { return w.layers[0].wq; }, 0,
         {0.04439278692007065f, 0.22455421090126038f, 0.055401116609573364f, 0.03573725000023842f}},
        {"layers[2].wk[5*64]", [](const LlamaWeights& w) { return w.layers[2].wk; }, 5 * 64,
         {-0.09573231637477875f, -0.0015584066277369857f, 0.040719226002693176f, 0.18864239752292633f}},
        {"layers[4].wv[31*64+60]", [](const LlamaWeights& w) { return w.layers[4].wv; }, 31 * 64 + 60,
         {-0.09909851849079132f, 0.1129368469119072f, -0.1368415802717209f, 0.08836912363767624f}},
        {"layers[1].wo[7*64]", [](const LlamaWeights& w) { return w.layers[1].wo; }, 7 * 64,
         {0.007528025656938553f, 0.04520951956510544f, 0.06738017499446869f, 0.047894664108753204f}},
        {"layers[3].ffn_norm[0]", [](const LlamaWeights& w) { return w.layers[3].ffn_norm; }, 0,
         {0.911358118057251f, 0.8842078447341919f, 1.1950972080230713f, 0.8745682835578918f}},
        {"layers[0].w_gate[0]", [](const LlamaWeights& w) { return w.layers[0].w_gate; }, 0,
         {0.21368665993213654f, 0.06993693113327026f, -0.043732721358537674f, -0.08667291700839996f}},
        {"layers[4].w_down[63*172]", [](const LlamaWeights& w) { return w.layers[4].w_down; }, 63 * 172,
         {-0.10412455350160599f, 0.15565508604049683f, -0.0965784415602684f, -0.04620424285531044f}},
        {"layers[2].w_up[100*64]", [](const LlamaWeights& w) { return w.layers[2].w_up; }, 100 * 64,
         {0.03423865884542465f, 0.06379755586385727f, -0.1349821537733078f, -0.05061396583914757f}},
        {"final_norm[60]", [](const LlamaWeights& w) { return w.final_norm; }, 60,
         {1.7217220067977905f, 0.9720380902290344f, 1.4526383876800537f, 1.7077769041061401f}},
    };
    return reference;
}

QByteArray llama2cBytes(const std::vector<int32_t>& header, const std::vector<float>& floats) {
    QByteArray bytes(reinterpret_cast<const char*>(header.data()), int(header.size() * 4));
    bytes.append(reinterpret_cast<const char*>(floats.data()), int(floats.size() * 4));
    return bytes;
}

QByteArray fileBytes(const std::string& path) {
    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", path.c_str());
    return file.readAll();
}

std::string writeFile(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
    QString path = dir.filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(path));
    return path.toStdString();
}

} // namespace

class TestModelLoader : public QObject {
    Q_OBJECT

private:
    QTemporaryDir tmp_;
    int dirCounter_ = 0;

    // A fresh directory holding a saved copy of the tiny model.
    std::string savedTiny(const LlamaCheckpoint& checkpoint) {
        std::string dir = tmp_.filePath(QString("hf%1").arg(dirCounter_++)).toStdString();
        saveHfLlamaDirectory(checkpoint, dir);
        return dir;
    }

private slots:
    void initTestCase() { QVERIFY(tmp_.isValid()); }

    void llama2cStories260K() {
        QVERIFY2(fs::exists(kStories), "tests/data/stories260K/stories260K.bin is missing");
        LlamaCheckpoint checkpoint = loadLlama2cCheckpoint(kStories);
        const LlamaConfig& c = checkpoint.config;
        QCOMPARE(c.hidden_size, int64_t(64));
        QCOMPARE(c.num_layers, int64_t(5));
        QCOMPARE(c.num_heads, std::vector<int64_t>(5, 8));
        QCOMPARE(c.num_kv_heads, std::vector<int64_t>(5, 4));
        QCOMPARE(c.intermediate_size, std::vector<int64_t>(5, 172));
        QCOMPARE(c.vocab_size, int64_t(512));
        QCOMPARE(c.head_dim, int64_t(8));
        QCOMPARE(c.max_position_embeddings, int64_t(512));
        QVERIFY(c.tie_word_embeddings);
        QVERIFY(c.rope_layout == RopeLayout::AdjacentPairs);
        QCOMPARE(c.rope_theta, 10000.0);
        QCOMPARE(c.rms_norm_eps, 1e-5);
        QCOMPARE(c.bos_token_id, int64_t(1));
        QCOMPARE(c.eos_token_id, int64_t(2));
        QCOMPARE(QString::fromStdString(checkpoint.source), QString::fromStdString(kStories));
        QVERIFY(checkpoint.weights.lm_head.is_same(checkpoint.weights.embed));
        QCOMPARE(checkpoint.weights.layers[3].wk.sizes().vec(), (std::vector<int64_t>{32, 64}));
        QCOMPARE(checkpoint.weights.layers[3].w_down.sizes().vec(), (std::vector<int64_t>{64, 172}));
        QCOMPARE(c.parameterCount(), int64_t(260032));  // every float of the file but the legacy RoPE tables

        for (const ReferenceValues& reference : storiesReference()) {
            at::Tensor flat = reference.tensor(checkpoint.weights).flatten();
            for (int k = 0; k < 4; ++k)
                QVERIFY2(flat[reference.flatStart + k].item<float>() == reference.values[k], reference.label);
        }
        QVERIFY(loadLlamaCheckpoint(kStories).config.num_layers == 5);  // dispatch by .bin
    }

    void llama2cWrongSizeIsRefused() {
        QVERIFY2(fs::exists(kStories), "tests/data/stories260K/stories260K.bin is missing");
        QByteArray bytes = fileBytes(kStories);
        std::string truncated = writeFile(tmp_, "truncated.bin", bytes.left(bytes.size() - 100));
        QString message = errorOf([&] { loadLlama2cCheckpoint(truncated); });
        QVERIFY2(containsAll(message, {QString::fromStdString(truncated), "1056540 bytes", "1056440", "truncated"}),
                 qPrintable(message));
        std::string longer = writeFile(tmp_, "longer.bin", bytes + QByteArray(4, '\0'));
        message = errorOf([&] { loadLlama2cCheckpoint(longer); });
        QVERIFY2(containsAll(message, {QString::fromStdString(longer), "1056544", "trailing data"}), qPrintable(message));
        std::string headerOnly = writeFile(tmp_, "short.bin", bytes.left(10));
        message = errorOf([&] { loadLlama2cCheckpoint(headerOnly); });
        QVERIFY2(containsAll(message, {QString::fromStdString(headerOnly), "10 bytes", "28"}), qPrintable(message));
    }

    // A negative vocab_size means a separate classifier (wcls) after the RoPE tables.
    void llama2cUntiedClassifier() {
        // dim 4, hidden 6, 1 layer, 2 heads, 1 kv head, vocab 3 (untied), seq_len 2
        const std::vector<int32_t> header{4, 6, 1, 2, 1, -3, 2};
        const int floatsBeforeWcls = 12 + 4 + 16 + 8 + 8 + 16 + 4 + 24 + 24 + 24 + 4 + 4;
        std::vector<float> floats(floatsBeforeWcls + 12);
        for (size_t i = 0; i < floats.size(); ++i) floats[i] = 0.01f * float(i);
        std::string path = writeFile(tmp_, "untied.bin", llama2cBytes(header, floats));
        LlamaCheckpoint checkpoint = loadLlama2cCheckpoint(path);
        QVERIFY(!checkpoint.config.tie_word_embeddings);
        QCOMPARE(checkpoint.config.vocab_size, int64_t(3));
        QCOMPARE(checkpoint.config.num_kv_heads, std::vector<int64_t>{1});
        const LlamaWeights& w = checkpoint.weights;
        QCOMPARE(w.lm_head.sizes().vec(), (std::vector<int64_t>{3, 4}));
        QCOMPARE(w.lm_head[0][0].item<float>(), floats[floatsBeforeWcls]);
        QCOMPARE(w.layers[0].wk.sizes().vec(), (std::vector<int64_t>{2, 4}));
        QCOMPARE(w.layers[0].wk[0][0].item<float>(), floats[12 + 4 + 16]);
        QCOMPARE(w.layers[0].w_gate[0][0].item<float>(), floats[12 + 4 + 16 + 8 + 8 + 16 + 4]);  // w1
        QCOMPARE(w.layers[0].w_down.sizes().vec(), (std::vector<int64_t>{4, 6}));                  // w2
        QCOMPARE(w.layers[0].w_up[0][0].item<float>(), floats[12 + 4 + 16 + 8 + 8 + 16 + 4 + 48]);  // w3
        QCOMPARE(w.final_norm[3].item<float>(), floats[floatsBeforeWcls - 5]);

        std::string bad = writeFile(tmp_, "bad_heads.bin", llama2cBytes({4, 6, 1, 3, 1, 3, 2}, floats));
        QString message = errorOf([&] { loadLlama2cCheckpoint(bad); });
        QVERIFY2(containsAll(message, {QString::fromStdString(bad), "n_heads=3", "does not describe"}), qPrintable(message));
    }

    void llama2cLookalikesAreNamed() {
        std::string versioned = writeFile(tmp_, "versioned.bin", llama2cBytes({0x616b3432, 2, 0, 0, 0, 0, 0}, {}));
        QString message = errorOf([&] { loadLlamaCheckpoint(versioned); });
        QVERIFY2(containsAll(message, {QString::fromStdString(versioned), "ak42", "legacy"}), qPrintable(message));
        std::string zip = writeFile(tmp_, "pytorch_model.bin", QByteArray("PK\x03\x04") + QByteArray(40, '\0'));
        message = errorOf([&] { loadLlamaCheckpoint(zip); });
        QVERIFY2(containsAll(message, {QString::fromStdString(zip), "zip (PyTorch)"}), qPrintable(message));
    }

    // Saving the llama2.c model to HF format permutes wq/wk rows to the half-split RoPE
    // layout; the attention logits (with each layout's own RoPE) must stay the same.
    void llama2cSavedAsHfKeepsAttentionScores() {
        QVERIFY2(fs::exists(kStories), "tests/data/stories260K/stories260K.bin is missing");
        LlamaCheckpoint original = loadLlama2cCheckpoint(kStories);
        std::string dir = tmp_.filePath("stories_hf").toStdString();
        saveHfLlamaDirectory(original, dir);
        LlamaCheckpoint converted = loadHfLlamaDirectory(dir);
        QVERIFY(converted.config.rope_layout == RopeLayout::HalfSplit);
        QVERIFY(converted.config.tie_word_embeddings);
        QVERIFY(!SafeTensorsFile::open(dir + "/model.safetensors")->has("lm_head.weight"));
        QCOMPARE(converted.config.num_kv_heads, original.config.num_kv_heads);
        QCOMPARE(converted.config.rms_norm_eps, original.config.rms_norm_eps);

        at::manual_seed(3);
        at::Tensor x = at::randn({6, 64});
        for (size_t layer = 0; layer < 5; ++layer) {
            const LlamaLayerWeights &before = original.weights.layers[layer], &after = converted.weights.layers[layer];
            QVERIFY(at::equal(before.wv, after.wv) && at::equal(before.wo, after.wo) && at::equal(before.w_up, after.w_up));
            at::Tensor expected = attentionScores(original.config, before, x, /*adjacentPairs=*/true);
            at::Tensor actual = attentionScores(converted.config, after, x, /*adjacentPairs=*/false);
            QVERIFY2(at::allclose(actual, expected, 1e-4, 1e-5), qPrintable(QString("layer %1").arg(layer)));
            // Not vacuous: without the permutation the logits differ.
            QVERIFY(!at::allclose(attentionScores(original.config, before, x, false), expected, 1e-4, 1e-5));
        }
    }

    void hfRoundTripWithBiasesAndTokenizer() {
        LlamaCheckpoint checkpoint = tinyUniform(/*withBiases=*/true);
        std::string tokenizer = writeFile(tmp_, "tokenizer.json", R"({"model": {"type": "BPE"}})");
        checkpoint.tokenizerPath = tokenizer;
        std::string dir = savedTiny(checkpoint);

        json config = readJson(dir + "/config.json");
        QCOMPARE(config["architectures"], json({"LlamaForCausalLM"}));
        QCOMPARE(config["model_type"], json("llama"));
        QCOMPARE(config["torch_dtype"], json("float32"));
        QCOMPARE(config["num_attention_heads"], json(4));  // uniform: scalars, readable by transformers
        QCOMPARE(config["num_key_value_heads"], json(2));
        QCOMPARE(config["intermediate_size"], json(24));
        QCOMPARE(config["head_dim"], json(4));
        QCOMPARE(config["attention_bias"], json(true));
        QCOMPARE(config["mlp_bias"], json(true));
        QCOMPARE(config["rope_theta"], json(5000.0));

        auto file = SafeTensorsFile::open(dir + "/model.safetensors");
        QCOMPARE(file->metadata().at("format"), std::string("pt"));  // transformers requires it
        // transformers' attention_bias/mlp_bias give every projection a bias: npw stores zeros.
        QVERIFY(at::equal(file->loadFloat("model.layers.1.self_attn.q_proj.bias"), at::zeros({16})));
        QVERIFY(at::equal(file->loadFloat("model.layers.0.mlp.up_proj.bias"), at::zeros({24})));
        QVERIFY(at::equal(file->loadFloat("model.layers.1.self_attn.o_proj.bias"), at::zeros({16})));

        LlamaCheckpoint loaded = loadHfLlamaDirectory(dir);
        QCOMPARE(QString::fromStdString(loaded.tokenizerPath), QString::fromStdString(dir + "/tokenizer.json"));
        QCOMPARE(fileBytes(loaded.tokenizerPath), fileBytes(tokenizer));
        QCOMPARE(QString::fromStdString(loaded.source), QString::fromStdString(dir));
        // Layers without a bias come back with a zero one.
        checkpoint.weights.layers[1].wo_bias = at::zeros({16});
        checkpoint.weights.layers[0].w_down_bias = at::zeros({16});
        QCOMPARE(firstDifference(loaded.weights, checkpoint.weights), QString());
        QCOMPARE(loaded.config.num_heads, checkpoint.config.num_heads);
        QCOMPARE(loaded.config.rope_theta, 5000.0);
        QCOMPARE(loaded.config.max_position_embeddings, int64_t(64));
        QVERIFY(!loaded.config.tie_word_embeddings);
    }

    void hfRoundTripNonUniform() {
        LlamaCheckpoint checkpoint = tinyCheckpoint({4, 2, 0}, {2, 1, 0}, {24, 8, 0});
        std::string dir = savedTiny(checkpoint);
        json config = readJson(dir + "/config.json");
        QCOMPARE(config["num_attention_heads"], json({4, 2, 0}));
        QCOMPARE(config["num_key_value_heads"], json({2, 1, 0}));
        QCOMPARE(config["intermediate_size"], json({24, 8, 0}));
        QCOMPARE(config["attention_bias"], json(false));
        LlamaCheckpoint loaded = loadLlamaCheckpoint(dir);  // dispatch by directory
        QCOMPARE(loaded.config.num_heads, checkpoint.config.num_heads);
        QCOMPARE(loaded.config.intermediate_size, checkpoint.config.intermediate_size);
        QCOMPARE(loaded.config.head_dim, int64_t(4));
        QCOMPARE(firstDifference(loaded.weights, checkpoint.weights), QString());
        QVERIFY(loaded.tokenizerPath.empty());

        int64_t stored = 0;
        for (const auto& [name, tensor] : testTensors(loaded.weights)) stored += tensor.defined() ? tensor.numel() : 0;
        QCOMPARE(loaded.config.parameterCount(), stored);
        QVERIFY(!loaded.config.isUniform());
    }

    void hfShardedHalfPrecision() {
        LlamaCheckpoint checkpoint = tinyUniform();
        std::string dir = savedTiny(checkpoint);
        shardHalfPrecision(dir);
        LlamaCheckpoint loaded = loadHfLlamaDirectory(dir);
        QVERIFY(at::equal(loaded.weights.embed, checkpoint.weights.embed.to(at::kHalf).to(at::kFloat)));
        QVERIFY(at::equal(loaded.weights.layers[0].wq, checkpoint.weights.layers[0].wq.to(at::kHalf).to(at::kFloat)));
        QVERIFY(at::equal(loaded.weights.layers[1].w_down,
                          checkpoint.weights.layers[1].w_down.to(at::kBFloat16).to(at::kFloat)));
        QVERIFY(at::equal(loaded.weights.lm_head, checkpoint.weights.lm_head.to(at::kBFloat16).to(at::kFloat)));
        QCOMPARE(loaded.weights.final_norm.scalar_type(), at::kFloat);
    }

    void hfShardIndexMustAgreeWithShards() {
        std::string dir = savedTiny(tinyUniform());
        shardHalfPrecision(dir);
        const std::string index = dir + "/model.safetensors.index.json";
        json original = readJson(index);

        json moved = original;
        moved["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
        writeJson(index, moved);
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {QString::fromStdString(index), "'model.norm.weight'", "model-00001-of-00002",
                                       "does not contain it"}),
                 qPrintable(message));

        json escaping = original;
        escaping["weight_map"]["model.norm.weight"] = "../model-00002-of-00002.safetensors";
        writeJson(index, escaping);
        message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {QString::fromStdString(index), "not a plain file name"}), qPrintable(message));

        json unlisted = original;
        unlisted["weight_map"].erase("model.norm.weight");
        writeJson(index, unlisted);
        message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'model.norm.weight'", "model-00002-of-00002.safetensors", "not assigned"}),
                 qPrintable(message));
    }

    // A shard of the index that is a named pipe: refused at once, never opened for a blocking read.
    void hfFifoShardIsRefused() {
        std::string dir = savedTiny(tinyUniform());
        shardHalfPrecision(dir);
        const std::string shard = dir + "/model-00002-of-00002.safetensors";
        std::filesystem::remove(shard);
        QVERIFY(mkfifo(shard.c_str(), 0644) == 0);
        QElapsedTimer timer;
        timer.start();
        const QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {QString::fromStdString(shard), "a FIFO (named pipe), not a regular file"}),
                 qPrintable(message));
        QVERIFY(timer.elapsed() < 10000);
    }

    void hfMissingTensor() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) { t.erase("model.layers.1.mlp.up_proj.weight"); });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"missing tensor 'model.layers.1.mlp.up_proj.weight'",
                                       QString::fromStdString(dir + "/model.safetensors"), "[24, 16]"}),
                 qPrintable(message));
    }

    void hfWrongShape() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) { t["model.embed_tokens.weight"] = at::zeros({31, 16}); });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'model.embed_tokens.weight'", QString::fromStdString(dir + "/model.safetensors"),
                                       "[31, 16]", "[32, 16]", QString::fromStdString(dir + "/config.json")}),
                 qPrintable(message));
    }

    void hfNanWeight() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) { t["model.layers.0.self_attn.k_proj.weight"][1][2] = NAN; });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'model.layers.0.self_attn.k_proj.weight'",
                                       QString::fromStdString(dir + "/model.safetensors"), "NaN", "index 18"}),
                 qPrintable(message));
    }

    // Header-only inspection against the full loader on every format and family in the test
    // data: the same config, the same tensors by name and shape, and a stored dtype for each.
    void inspectionAgreesWithTheLoader() {
        const std::string data = NPW_TEST_DATA;
        const std::vector<std::string> models = {
            kStories, "demo:lm", data + "/llama_ref/mha_halfsplit_bf16", data + "/llama_ref/mha_halfsplit_sharded",
            data + "/llama_ref/gqa_halfsplit_tied", data + "/llama_ref/nonuniform_bias",
            data + "/llama_ref/llama2c_gqa/llama2c_gqa.bin", data + "/family_ref/mistral", data + "/family_ref/qwen2_tied",
            data + "/family_ref/qwen3", data + "/family_ref/llama31_rope", data + "/family_ref/meta_llama2_2shards",
            data + "/family_ref/llama2c_ckpt/ckpt.pt"};
        for (const std::string& model : models) {
            const CheckpointInspection seen = inspectLlamaCheckpoint(model);
            LlamaCheckpoint loaded = loadLlamaCheckpoint(model);
            const QString where = QString::fromStdString(model);
            QVERIFY2(json::parse(hfLlamaConfigJson(seen.config, {})) == json::parse(hfLlamaConfigJson(loaded.config, {})),
                     qPrintable(where));
            QCOMPARE(seen.config.qkv_bias, loaded.config.qkv_bias);
            QCOMPARE(seen.config.rope_layout, loaded.config.rope_layout);
            QCOMPARE(seen.tokenizerPath, loaded.tokenizerPath);
            QVERIFY2(seen.weightBytes > 0 && !seen.files.empty() && !seen.bytesByDtype.empty(), qPrintable(where));
            const auto named = namedTensors(loaded.weights);
            QVERIFY2(named.size() == seen.tensors.size(), qPrintable(where));
            for (const auto& [name, tensor] : named) {
                auto it = seen.tensors.find(name);
                QVERIFY2(it != seen.tensors.end(), qPrintable(where + ": " + QString::fromStdString(name)));
                QVERIFY2(it->second.shape == tensor->sizes().vec(), qPrintable(where + ": " + QString::fromStdString(name)));
            }
        }
        const CheckpointInspection bf16 = inspectLlamaCheckpoint(data + "/llama_ref/mha_halfsplit_bf16");
        QCOMPARE(bf16.bytesByDtype.size(), size_t(1));
        QCOMPARE(bf16.bytesByDtype.begin()->first, std::string("BF16"));
        QCOMPARE(bf16.weightBytes, uint64_t(fs::file_size(data + "/llama_ref/mha_halfsplit_bf16/model.safetensors")) -
                                       uint64_t(8) - [&] {
                                           std::ifstream in(data + "/llama_ref/mha_halfsplit_bf16/model.safetensors", std::ios::binary);
                                           uint64_t n = 0;
                                           in.read(reinterpret_cast<char*>(&n), 8);
                                           return n;
                                       }());
    }

    // A NaN in a file is not seen by a header-only inspection or a Mapped load (no value is
    // read), and is reported with file, tensor and index where the values are first read.
    void mappedLoadsCheckValuesWhereRead() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) { t["model.layers.0.self_attn.k_proj.weight"][1][2] = NAN; });
        const CheckpointInspection seen = inspectLlamaCheckpoint(dir);
        QCOMPARE(seen.config.num_layers, int64_t(2));
        LlamaCheckpoint mapped = loadHfLlamaDirectory(dir, WeightStorage::Mapped);
        QVERIFY(!mapped.valuesChecked);
        checkLayerValues(mapped, 1);  // layer 1 is clean
        const QStringList expected = {"'model.layers.0.self_attn.k_proj.weight'", QString::fromStdString(dir + "/model.safetensors"),
                                      "NaN", "index 18"};
        QString message = errorOf([&] { checkLayerValues(mapped, 0); });
        QVERIFY2(containsAll(message, expected), qPrintable(message));
        message = errorOf([&] { copyWeightsIntoMemory(mapped); });
        QVERIFY2(containsAll(message, expected), qPrintable(message));
        // Layer-wise evaluation reads the mapped file block by block: the NaN stops it, named.
        LlamaCheckpoint again = loadHfLlamaDirectory(dir, WeightStorage::Mapped);
        PerplexityOptions options;
        options.seqlen = 8;
        message = errorOf([&] { evaluatePerplexityLayerwise(again, Runtime{}, std::vector<int32_t>(17, 3), options); });
        QVERIFY2(containsAll(message, expected), qPrintable(message));

        // llama2.c: a layer's matrix is a slice of its block; the index is the block's.
        QByteArray bytes = fileBytes(kStories);
        std::vector<int32_t> header(7);
        std::memcpy(header.data(), bytes.constData(), 28);
        const int64_t dim = header[0], vocab = std::abs(header[5]), layers = header[2];
        const int64_t wqAt = vocab * dim + layers * dim + 3 * dim * dim + 5;  // layer 3's wq, element 5
        float nan = NAN;
        bytes.replace(int(28 + 4 * wqAt), 4, reinterpret_cast<const char*>(&nan), 4);
        const std::string bin = writeFile(tmp_, "nan_stories.bin", bytes);
        QCOMPARE(inspectLlamaCheckpoint(bin).config.hidden_size, dim);
        LlamaCheckpoint mappedBin = loadLlama2cCheckpoint(bin, WeightStorage::Mapped);
        checkLayerValues(mappedBin, 2);
        message = errorOf([&] { checkAllWeightValues(mappedBin); });
        QVERIFY2(containsAll(message, {"tensor 'wq'", QString::fromStdString(bin),
                                       "index " + QString::number(3 * dim * dim + 5) + ")"}),
                 qPrintable(message));
        message = errorOf([&] { loadLlama2cCheckpoint(bin); });  // Copy: at load, the same words
        QVERIFY2(containsAll(message, {"tensor 'wq'", "index " + QString::number(3 * dim * dim + 5) + ")"}), qPrintable(message));
    }

    // A bf16 checkpoint opened mapped (views of the file in bf16, converted once) gives exactly
    // the logits of the copying load: both hold the same float32 numbers (tolerance 0).
    void mappedBf16LogitsEqualCopied() {
        const std::string dir = std::string(NPW_TEST_DATA) + "/llama_ref/mha_halfsplit_bf16";
        LlamaCheckpoint mapped = loadHfLlamaDirectory(dir, WeightStorage::Mapped);
        QCOMPARE(mapped.weights.layers[0].wq.scalar_type(), at::kBFloat16);
        copyWeightsIntoMemory(mapped);
        const LlamaModel a(loadHfLlamaDirectory(dir), Runtime{});
        const LlamaModel b(std::move(mapped), Runtime{});
        const at::Tensor ids = at::arange(0, 24, at::kLong).remainder(a.config().vocab_size).unsqueeze(0);
        const at::Tensor la = a.logits(ids), lb = b.logits(ids);
        QVERIFY(at::isfinite(la).all().item<bool>());
        QVERIFY(at::equal(la, lb));
    }

    void hfUnsupportedDtype() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) { t["model.norm.weight"] = t["model.norm.weight"].to(at::kDouble); });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'model.norm.weight'", "dtype F64", QString::fromStdString(dir)}), qPrintable(message));
    }

    // config.json says one thing, the weights another: the shape check names both files.
    void hfLyingConfig() {
        std::string dir = savedTiny(tinyUniform());
        editConfig(dir, [](json& c) { c["intermediate_size"] = 30; });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'model.layers.0.mlp.gate_proj.weight'", "[24, 16]", "[30, 16]",
                                       QString::fromStdString(dir + "/config.json")}),
                 qPrintable(message));
        editConfig(dir, [](json& c) { c["intermediate_size"] = 24; c["tie_word_embeddings"] = true; });
        message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'lm_head.weight'", "differs from the embedding", "tie_word_embeddings"}),
                 qPrintable(message));
    }

    void hfUnexpectedTensors() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) { t["model.layers.0.self_attn.rotary_emb.inv_freq"] = at::ones({2}); });
        QVERIFY(loadHfLlamaDirectory(dir).config.num_layers == 2);  // old transformers' RoPE buffer: ignored
        editWeights(dir, [](TensorMap& t) { t["model.layers.2.mlp.up_proj.weight"] = at::ones({24, 16}); });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"unexpected tensor 'model.layers.2.mlp.up_proj.weight'",
                                       QString::fromStdString(dir + "/model.safetensors")}),
                 qPrintable(message));
    }

    void hfBiasesOnlyWhereNpwHasThem() {
        std::string dir = savedTiny(tinyUniform());
        editWeights(dir, [](TensorMap& t) {
            t["model.layers.1.self_attn.o_proj.bias"] = at::ones({16});
            t["model.layers.1.self_attn.q_proj.bias"] = at::zeros({16});  // zero: harmless, dropped
        });
        LlamaCheckpoint loaded = loadHfLlamaDirectory(dir);
        QVERIFY(!loaded.weights.layers[0].wo_bias.defined());
        QVERIFY(at::equal(loaded.weights.layers[1].wo_bias, at::ones({16})));
        editWeights(dir, [](TensorMap& t) { t["model.layers.1.self_attn.v_proj.bias"] = at::ones({8}); });
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        // Non-zero q/k/v biases (Qwen2, LLaMA's attention_bias) are read when every layer has all three.
        QVERIFY2(containsAll(message, {"'model.layers.0.self_attn.q_proj.bias' is missing",
                                       "non-zero bias 'model.layers.1.self_attn.v_proj.bias'"}),
                 qPrintable(message));
        editWeights(dir, [](TensorMap& t) { t["model.layers.1.mlp.up_proj.bias"] = at::ones({24}); });
        message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {"'model.layers.1.mlp.up_proj.bias'", "non-zero bias", "unsupported"}), qPrintable(message));
    }

    void hfConfigRules_data() {
        QTest::addColumn<QString>("edit");  // JSON merged into a valid config.json
        QTest::addColumn<QStringList>("expected");
        QTest::newRow("rope_scaling") << R"({"rope_scaling": {"rope_type": "yarn", "factor": 8.0}})"
                                      << QStringList{"rope_scaling", "yarn", "unsupported"};
        QTest::newRow("model_type") << R"({"model_type": "gpt2"})" << QStringList{"model_type", "gpt2", "unsupported"};
        QTest::newRow("hidden_act") << R"({"hidden_act": "gelu"})" << QStringList{"hidden_act", "unsupported"};
        QTest::newRow("lists_without_head_dim") << R"({"num_attention_heads": [4, 4], "head_dim": null})"
                                                << QStringList{"head_dim is missing", "per-layer"};
        QTest::newRow("list_of_wrong_length") << R"({"intermediate_size": [24]})"
                                              << QStringList{"'intermediate_size'", "list of 2 integers"};
        QTest::newRow("missing_hidden_size") << R"({"hidden_size": null})" << QStringList{"'hidden_size' is missing"};
        QTest::newRow("absurd_layers") << R"({"num_hidden_layers": 1000000000})" << QStringList{"between 1 and 100000"};
        QTest::newRow("string_layers") << R"({"num_hidden_layers": "2"})" << QStringList{"'num_hidden_layers' must be an integer"};
        QTest::newRow("kv_not_dividing") << R"({"num_key_value_heads": 3})"
                                         << QStringList{"must divide the query heads", "layer 0", "3 key/value heads"};
        QTest::newRow("odd_head_dim") << R"({"head_dim": 3})" << QStringList{"head_dim must be positive and even"};
        QTest::newRow("not_json") << "" << QStringList{"not valid JSON"};
        // Real values: normal, finite and in range (a denormal factor is "positive" and gives NaN).
        QTest::newRow("rope_scaling_denormal") << R"({"rope_scaling": {"rope_type": "linear", "factor": 1e-320}})"
                                               << QStringList{"rope_scaling factor", "normal, finite number from 0.001 to 1e+06"};
        QTest::newRow("rope_theta_zero") << R"({"rope_theta": 0})" << QStringList{"rope_theta", "from 1 to 1e+12", "got 0"};
        QTest::newRow("rms_norm_eps_denormal") << R"({"rms_norm_eps": 1e-320})" << QStringList{"rms_norm_eps", "from 1e-12 to 1"};
        QTest::newRow("rms_norm_eps_huge") << R"({"rms_norm_eps": 1e300})" << QStringList{"rms_norm_eps", "got 1.0000000000000001e+300"};
        QTest::newRow("llama3_high_freq_huge")
            << R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 1e30, "original_max_position_embeddings": 8192}})"
            << QStringList{"high_freq_factor", "from 0.001 to 1e+06"};
    }

    void hfConfigRules() {
        QFETCH(QString, edit);
        QFETCH(QStringList, expected);
        std::string dir = savedTiny(tinyUniform());
        const std::string configPath = dir + "/config.json";
        if (edit.isEmpty()) std::ofstream(configPath) << "{ not json";
        else editConfig(dir, [&](json& c) { c.merge_patch(json::parse(edit.toStdString())); });
        if (edit.contains("\"head_dim\": null")) {  // merge_patch deletes keys set to null
            json c = readJson(configPath);
            QVERIFY(!c.contains("head_dim"));
        }
        QString message = errorOf([&] { loadHfLlamaDirectory(dir); });
        expected << QString::fromStdString(configPath);
        QVERIFY2(containsAll(message, expected), qPrintable(message));
    }

    void hfConfigDefaults() {
        std::string dir = savedTiny(tinyCheckpoint({2, 2}, {2, 2}, {24, 24}));
        editConfig(dir, [](json& c) {
            for (const char* key : {"num_key_value_heads", "head_dim", "rope_theta", "rms_norm_eps", "max_position_embeddings",
                                    "tie_word_embeddings", "bos_token_id"})
                c.erase(key);
            c["hidden_size"] = 16;
            c["num_attention_heads"] = 4;  // head_dim = 16 / 4 = 4 when not given
            c["eos_token_id"] = {7, 8};    // Llama 3.1 style: the first one is used
        });
        LlamaConfig config = readHfLlamaConfig(dir + "/config.json");
        QCOMPARE(config.head_dim, int64_t(4));
        QCOMPARE(config.num_kv_heads, (std::vector<int64_t>{4, 4}));  // defaults to the query heads
        QCOMPARE(config.rope_theta, 10000.0);
        QCOMPARE(config.rms_norm_eps, 1e-6);
        QCOMPARE(config.max_position_embeddings, int64_t(2048));
        QCOMPARE(config.bos_token_id, int64_t(1));
        QCOMPARE(config.eos_token_id, int64_t(7));
        QVERIFY(!config.tie_word_embeddings);
    }

    void hfMissingFiles() {
        std::string empty = tmp_.filePath("empty_dir").toStdString();
        fs::create_directories(empty);
        QString message = errorOf([&] { loadHfLlamaDirectory(empty); });
        QVERIFY2(containsAll(message, {QString::fromStdString(empty), "no config.json"}), qPrintable(message));
        std::string dir = savedTiny(tinyUniform());
        fs::remove(dir + "/model.safetensors");
        message = errorOf([&] { loadHfLlamaDirectory(dir); });
        QVERIFY2(containsAll(message, {QString::fromStdString(dir), "no model.safetensors"}), qPrintable(message));
    }

    void saveRefusesTheSourceAndBadExtras() {
        std::string dir = savedTiny(tinyUniform());
        LlamaCheckpoint loaded = loadHfLlamaDirectory(dir);
        QString message = errorOf([&] { saveHfLlamaDirectory(loaded, dir); });
        QVERIFY2(containsAll(message, {QString::fromStdString(dir), "refusing"}), qPrintable(message));

        std::string out = tmp_.filePath("with_extras/nested").toStdString();  // created on the way
        saveHfLlamaDirectory(loaded, out, R"({"npw": {"pruned_from": "x", "ratio": 0.2}})");
        QCOMPARE(readJson(out + "/config.json")["npw"]["ratio"], json(0.2));
        QVERIFY(loadHfLlamaDirectory(out).config.num_layers == 2);

        const std::string other = tmp_.filePath("extras_rejected").toStdString();
        message = errorOf([&] { saveHfLlamaDirectory(loaded, other, "[1]"); });
        QVERIFY2(containsAll(message, {"must be a JSON object"}), qPrintable(message));
        message = errorOf([&] { saveHfLlamaDirectory(loaded, other, R"({"hidden_size": 8})"); });
        QVERIFY2(containsAll(message, {"'hidden_size'", "override"}), qPrintable(message));

        LlamaCheckpoint inconsistent = loaded;
        inconsistent.weights.layers[1].w_up = at::zeros({23, 16});
        message = errorOf([&] { saveHfLlamaDirectory(inconsistent, other); });
        QVERIFY2(containsAll(message, {"'model.layers.1.mlp.up_proj.weight'", "[23, 16]", "[24, 16]"}), qPrintable(message));
        QVERIFY(!fs::exists(other + "/config.json"));
    }

    // The one decision of what a model path is (locateCheckpoint), which the loader, the
    // tokenizer lookup and the inspection share: each layout, and a consolidated.NN.pth named
    // alone is its whole release folder for all three.
    void oneLayoutDecisionForEveryReader() {
        const std::string data = NPW_TEST_DATA;
        const std::string meta = data + "/family_ref/meta_llama2_2shards";
        const std::string text = writeFile(tmp_, "layout.txt", "hello");
        const std::string fifo = tmp_.filePath("layout.fifo").toStdString();
        QVERIFY(mkfifo(fifo.c_str(), 0644) == 0);
        const std::string sliced = tmp_.filePath("layout_sliced").toStdString();
        fs::create_directories(sliced);
        writeFile(tmp_, "layout_sliced/npw-sliced.safetensors", "x");
        writeFile(tmp_, "layout_sliced/npw-sliced-config.json", "{}");
        const std::vector<std::pair<std::string, CheckpointLayout>> expected = {
            {kStories, CheckpointLayout::Llama2cBin},
            {"demo:lm", CheckpointLayout::HfDirectory},
            {tmp_.filePath("layout_absent").toStdString(), CheckpointLayout::Missing},
            {meta, CheckpointLayout::MetaRelease},
            {meta + "/consolidated.01.pth", CheckpointLayout::MetaRelease},
            {data + "/family_ref/llama2c_ckpt/ckpt.pt", CheckpointLayout::Llama2cCkpt},
            {data + "/torch_checkpoints/llamagen_like.pt", CheckpointLayout::Llama2cCkpt},
            {text, CheckpointLayout::UnknownFile},
            {fifo, CheckpointLayout::NotAFileOrFolder},
            {sliced, CheckpointLayout::SlicedDirectory},
        };
        for (const auto& [model, layout] : expected)
            QVERIFY2(locateCheckpoint(model).layout == layout, qPrintable(QString::fromStdString(model)));
        QVERIFY(fs::equivalent(locateCheckpoint(meta + "/consolidated.01.pth").path, meta));

        // The file names its release: the same tokenizer, format and source as the folder.
        QCOMPARE(tokenizerFileOfModel(meta + "/consolidated.00.pth"), tokenizerFileOfModel(meta));
        const CheckpointInspection viaFile = inspectLlamaCheckpoint(meta + "/consolidated.00.pth");
        QCOMPARE(viaFile.format, std::string("meta-pth"));
        QCOMPARE(viaFile.files.size(), size_t(2));
        QCOMPARE(inspectLlamaCheckpoint(data + "/family_ref/llama2c_ckpt/ckpt.pt").format, std::string("llama2.c-ckpt"));
        QCOMPARE(inspectLlamaCheckpoint("demo:lm").format, std::string("safetensors"));
        QCOMPARE(inspectLlamaCheckpoint(kStories).format, std::string("llama2.c"));

        // What is no LLaMA is refused alike by the loader and the tokenizer lookup.
        for (const std::string& model : {sliced, fifo}) {
            const QString loading = errorOf([&] { loadLlamaCheckpoint(model); });
            QVERIFY2(!loading.isEmpty() && loading == errorOf([&] { tokenizerFileOfModel(model); }), qPrintable(loading));
        }
        QVERIFY(errorOf([&] { loadLlamaCheckpoint(sliced); }).contains("SliceGPT"));
        QVERIFY(errorOf([&] { loadLlamaCheckpoint(fifo); }).contains("none of"));
        QCOMPARE(tokenizerFileOfModel(text), std::string());  // the loader names what it is not
        // The vocabulary from a config (npw tokenize without LibTorch) decides by the same layouts.
        QCOMPARE(vocabularyFromConfig(kStories).value_or(-1), int64_t(512));
        QVERIFY(!vocabularyFromConfig(meta + "/consolidated.00.pth").has_value());
        QCOMPARE(errorOf([&] { vocabularyFromConfig(fifo); }), errorOf([&] { loadLlamaCheckpoint(fifo); }));
        QCOMPARE(errorOf([&] { vocabularyFromConfig(sliced); }), errorOf([&] { loadLlamaCheckpoint(sliced); }));
    }

    void dispatchRefusesUnknownInputs() {
        std::string text = writeFile(tmp_, "model.txt", "hello");
        QString message = errorOf([&] { loadLlamaCheckpoint(text); });
        QVERIFY2(containsAll(message, {QString::fromStdString(text), "none of"}), qPrintable(message));
        // A PyTorch checkpoint that is not llama2.c's ckpt.pt (LlamaGen-like): named, not guessed at.
        const std::string llamagen = std::string(NPW_TEST_DATA) + "/torch_checkpoints/llamagen_like.pt";
        message = errorOf([&] { loadLlamaCheckpoint(llamagen); });
        QVERIFY2(containsAll(message, {"llamagen_like.pt", "model_args"}), qPrintable(message));
        message = errorOf([&] { loadLlamaCheckpoint(tmp_.filePath("absent").toStdString()); });
        QVERIFY2(containsAll(message, {"absent", "not found"}), qPrintable(message));
        message = errorOf([&] { loadLlamaCheckpoint("demo:no-such-demo"); });
        QVERIFY2(containsAll(message, {"demo:no-such-demo"}), qPrintable(message));
    }
};

QTEST_GUILESS_MAIN(TestModelLoader)
#include "tst_model_loader.moc"
