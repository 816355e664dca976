// GGUF: the writer and the strict reader agree on every value type, arrays, alignment and
// offsets; corrupt files are refused with errors naming the file and what was expected; the
// exporter writes llama for uniform and deci (per-layer arrays) for non-uniform models, pads the
// layers llama.cpp would mis-build, permutes Q/K rows to adjacent pairs, keeps norms F32 in F16
// files, and refuses what it cannot export. (tst_gguf_llamacpp runs the files in llama.cpp.)
#include "core/io/gguf.h"
#include "core/models/gguf_export.h"
#include "core/io/safetensors.h"
#include "core/models/model_loader.h"
#include "core/util/atomic_file.h"
#include "gguf_models.h"
#include "error_of.h"

#include <QCryptographicHash>
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <set>
#include <filesystem>
#include <fstream>

using namespace npw;
using namespace npw::test;

namespace {

GgufTensorToWrite floats(const std::string& name, std::vector<int64_t> ne, std::vector<float> values) {
    GgufTensorToWrite t;
    t.info.name = name;
    t.info.ne = std::move(ne);
    t.info.type = GgmlType::F32;
    t.writeData = [values = std::move(values)](std::ostream& out) {
        out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
    };
    return t;
}

std::vector<float> floatsOf(const std::string& bytes) {
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
}

std::string fileBytes(const std::string& path) { return readTextFile(path); }

void writeBytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

at::Tensor tensorOf(const GgufFile& f, const std::string& name) {
    const GgufTensorInfo* t = f.findTensor(name);
    if (!t) throw Error("test: tensor '" + name + "' is missing from " + f.path);
    std::vector<int64_t> shape(t->ne.rbegin(), t->ne.rend());
    const std::string bytes = readGgufTensorBytes(f, *t);
    const auto dtype = t->type == GgmlType::F16 ? at::kHalf : at::kFloat;
    return at::from_blob(const_cast<char*>(bytes.data()), shape, dtype).to(at::kFloat).clone();
}

// SHA-256 of `npw export-gguf demo:lm` (f32, f16) as the main branch wrote it before the
// export was streamed tensor by tensor.
constexpr const char* kMainF32Sha256 = "8c6f67af89814bd496c338213bbf4a26458a9f46d965f1d72c0a62f893cb8f78";
constexpr const char* kMainF16Sha256 = "875a5baf172a360d1034501afce4bbad1f23d42aa44e0de36e753d08a01cc63c";

} // namespace

class TestGguf : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const char* name) { return dir_.filePath(name).toStdString(); }

    std::string writeSmall() {
        GgufMetadata kv;
        kv.emplace_back("general.architecture", GgufValue::str("llama"));
        kv.emplace_back("a.u32", GgufValue::u32(4000000000u));
        kv.emplace_back("a.i32", GgufValue::i32(-7));
        kv.emplace_back("a.u64", GgufValue::u64(1ull << 63));
        kv.emplace_back("a.f32", GgufValue::f32(0.25f));
        kv.emplace_back("a.bool", GgufValue::boolValue(true));
        kv.emplace_back("a.strings", GgufValue::strings({"▁the", "", "<0x0A>"}));
        kv.emplace_back("a.i32s", GgufValue::i32s({6, 0, -1}));
        kv.emplace_back("a.f32s", GgufValue::f32s({-1.5f, 2.f}));
        std::vector<GgufTensorToWrite> tensors;
        tensors.push_back(floats("odd", {3}, {1, 2, 3}));             // 12 bytes: the next one is padded to 32
        tensors.push_back(floats("matrix", {2, 3}, {1, 2, 3, 4, 5, 6}));  // PyTorch shape [3, 2]
        std::string p = path("small.gguf");
        writeGguf(p, kv, std::move(tensors));
        return p;
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void roundTrip() {
        const GgufFile f = readGgufFile(writeSmall());
        QCOMPARE(f.version, 3u);
        QCOMPARE(f.alignment, 32u);
        QCOMPARE(f.at("general.alignment").integer, 32);
        QCOMPARE(f.at("general.architecture").string, std::string("llama"));
        QCOMPARE(f.at("a.u32").integer, 4000000000ll);
        QCOMPARE(f.at("a.u32").type, GgufValueType::Uint32);
        QCOMPARE(f.at("a.i32").integer, -7ll);
        QCOMPARE(f.at("a.u64").uinteger, 1ull << 63);
        QCOMPARE(f.at("a.f32").real, 0.25);
        QCOMPARE(f.at("a.bool").boolean, true);
        const GgufValue& s = f.at("a.strings");
        QCOMPARE(s.elementType, GgufValueType::String);
        QCOMPARE(s.elements.size(), size_t(3));
        QCOMPARE(s.elements[0].string, std::string("▁the"));
        QCOMPARE(s.elements[1].string, std::string());
        QCOMPARE(f.at("a.i32s").elements[2].integer, -1ll);
        QCOMPARE(f.at("a.f32s").elements[0].real, -1.5);
        QCOMPARE(f.tensors.size(), size_t(2));
        QCOMPARE(f.tensors[0].offset, 0ull);
        QCOMPARE(f.tensors[1].offset, 32ull);
        QCOMPARE(f.dataOffset % 32, 0ull);
        QCOMPARE(f.tensors[1].ne, (std::vector<int64_t>{2, 3}));
        QCOMPARE(floatsOf(readGgufTensorBytes(f, f.tensors[1])), (std::vector<float>{1, 2, 3, 4, 5, 6}));
        QCOMPARE(f.fileSize, f.dataOffset + 32 + 32);
        QVERIFY(f.find("a.missing") == nullptr);
        QVERIFY(errorOf([&] { (void)f.at("a.missing"); }).contains("'a.missing' is missing"));
    }

    void writerRefuses() {
        auto one = [] { std::vector<GgufTensorToWrite> t; t.push_back(floats("x", {1}, {1})); return t; };
        GgufMetadata twice{{"k", GgufValue::u32(1)}, {"k", GgufValue::u32(2)}};
        QVERIFY(errorOf([&] { writeGguf(path("bad.gguf"), twice, one()); }).contains("'k' is given twice"));
        std::vector<GgufTensorToWrite> dup = one();
        dup.push_back(floats("x", {1}, {2}));
        QVERIFY(errorOf([&] { writeGguf(path("bad.gguf"), {}, std::move(dup)); }).contains("tensor 'x' is given twice"));
        std::vector<GgufTensorToWrite> longName;
        longName.push_back(floats(std::string(64, 'n'), {1}, {1}));
        QVERIFY(errorOf([&] { writeGguf(path("bad.gguf"), {}, std::move(longName)); }).contains("1..63 bytes"));
        std::vector<GgufTensorToWrite> shortData;
        shortData.push_back(floats("short", {4}, {1, 2}));
        const QString e = errorOf([&] { writeGguf(path("bad.gguf"), {}, std::move(shortData)); });
        QVERIFY2(e.contains("'short' wrote 8 bytes; expected 16"), qPrintable(e));
        QVERIFY(!std::filesystem::exists(path("bad.gguf")));  // atomic: nothing left behind
    }

    void readerRefusesCorruptFiles() {
        const std::string good = fileBytes(writeSmall());
        const std::string p = path("corrupt.gguf");
        auto errorFor = [&](const std::string& bytes) {
            writeBytes(p, bytes);
            return errorOf([&] { readGgufFile(p); });
        };
        QString e = errorFor("GGUX" + good.substr(4));
        QVERIFY2(e.contains(QString::fromStdString(p)) && e.contains("not a GGUF file"), qPrintable(e));
        std::string v = good;
        v[4] = 9;
        QVERIFY(errorFor(v).contains("version 9 is not supported; expected 2 or 3"));
        e = errorFor(good.substr(0, 100));
        QVERIFY2(e.contains("truncated") || e.contains("left"), qPrintable(e));
        e = errorFor(good.substr(0, good.size() - 12));  // the last tensor's data is cut (8 bytes of padding, 4 of data)
        QVERIFY2(e.contains("tensor 'matrix'") && e.contains("not within the file bounds"), qPrintable(e));
        std::string badType = good;
        const size_t at = badType.find("general.architecture") + std::strlen("general.architecture");
        badType[at] = 42;  // the value type that follows the key
        e = errorFor(badType);
        QVERIFY2(e.contains("'general.architecture' has value type 42; expected 0..12"), qPrintable(e));
        QVERIFY(errorOf([&] { readGgufFile(path("absent.gguf")); }).contains("absent.gguf"));
    }

    void denseExportIsLlama() {
        const LlamaCheckpoint c = loadLlamaCheckpoint("demo:lm");
        const std::string p = path("lm.gguf");
        const GgufExportReport r = exportGguf(c, p);
        QCOMPARE(r.architecture, std::string("llama"));
        QCOMPARE(r.tokenizerModel, std::string("llama"));
        const GgufFile f = readGgufFile(p);
        QCOMPARE(f.at("general.architecture").string, std::string("llama"));
        QCOMPARE(f.at("llama.block_count").integer, 6ll);
        QCOMPARE(f.at("llama.embedding_length").integer, 192ll);
        QCOMPARE(f.at("llama.context_length").integer, 512ll);
        QCOMPARE(f.at("llama.attention.head_count").type, GgufValueType::Uint32);
        QCOMPARE(f.at("llama.attention.head_count").integer, 6ll);
        QCOMPARE(f.at("llama.feed_forward_length").integer, 448ll);
        QCOMPARE(f.at("llama.rope.dimension_count").integer, 32ll);
        QCOMPARE(f.at("llama.attention.key_length").integer, 32ll);
        QCOMPARE(f.at("llama.rope.freq_base").real, 10000.0);
        QCOMPARE(f.at("llama.attention.layer_norm_rms_epsilon").real, double(1e-5f));
        QCOMPARE(f.at("tokenizer.ggml.tokens").elements.size(), size_t(2048));
        QCOMPARE(f.at("tokenizer.ggml.scores").elements.size(), size_t(2048));
        QCOMPARE(f.at("tokenizer.ggml.bos_token_id").integer, 1ll);
        QCOMPARE(f.at("tokenizer.ggml.eos_token_id").integer, 2ll);
        QCOMPARE(f.at("tokenizer.ggml.unknown_token_id").integer, 0ll);
        QCOMPARE(f.at("tokenizer.ggml.add_bos_token").boolean, true);
        QCOMPARE(f.at("tokenizer.ggml.add_space_prefix").boolean, true);
        const auto& types = f.at("tokenizer.ggml.token_type").elements;
        QCOMPARE(types[0].integer, 2ll);  // <unk>
        QCOMPARE(types[1].integer, 3ll);  // <s>: control
        const auto& tokens = f.at("tokenizer.ggml.tokens").elements;
        for (size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i].string == "<0x0A>") QCOMPARE(types[i].integer, 6ll);  // byte fallback token
        QVERIFY(f.findTensor("output.weight") == nullptr);  // tied: llama.cpp reuses token_embd
        QCOMPARE(f.findTensor("token_embd.weight")->ne, (std::vector<int64_t>{192, 2048}));
        QCOMPARE(f.tensors.size(), size_t(2 + 6 * 9));

        // Q rows: head h's output dim 2i is HF's dim i, 2i+1 is HF's i + 16; V rows unchanged.
        const at::Tensor q = tensorOf(f, "blk.2.attn_q.weight");
        const at::Tensor hf = c.weights.layers[2].wq;
        QCOMPARE(q.sizes(), hf.sizes());
        QVERIFY(at::equal(q[32 + 2 * 5], hf[32 + 5]));
        QVERIFY(at::equal(q[32 + 2 * 5 + 1], hf[32 + 5 + 16]));
        QVERIFY(!at::equal(q, hf));
        QVERIFY(at::equal(tensorOf(f, "blk.2.attn_v.weight"), c.weights.layers[2].wv));
        QVERIFY(at::equal(tensorOf(f, "blk.2.ffn_down.weight"), c.weights.layers[2].w_down));
    }

    void adjacentPairsAreNotPermuted() {
        const LlamaCheckpoint c = adjacentPairsDemoVocab();
        const std::string p = path("adjacent.gguf");
        exportGguf(c, p);
        const GgufFile f = readGgufFile(p);
        QVERIFY(at::equal(tensorOf(f, "blk.1.attn_q.weight"), c.weights.layers[1].wq));
        QVERIFY(at::equal(tensorOf(f, "blk.1.attn_k.weight"), c.weights.layers[1].wk));
        QVERIFY(at::equal(tensorOf(f, "output.weight"), c.weights.lm_head));  // untied: written
    }

    void f16KeepsNormsF32() {
        const LlamaCheckpoint c = loadLlamaCheckpoint("demo:lm-gqa");
        const std::string p = path("gqa-f16.gguf");
        exportGguf(c, p, {GgufDtype::F16, "my model"});
        const GgufFile f = readGgufFile(p);
        QCOMPARE(f.at("general.name").string, std::string("my model"));
        QCOMPARE(f.at("general.file_type").integer, 1ll);
        QCOMPARE(f.at("llama.attention.head_count_kv").integer, 2ll);
        QCOMPARE(f.findTensor("blk.0.attn_k.weight")->ne, (std::vector<int64_t>{192, 64}));
        QCOMPARE(f.findTensor("blk.0.attn_q.weight")->type, GgmlType::F16);
        QCOMPARE(f.findTensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
        QCOMPARE(f.findTensor("output_norm.weight")->type, GgmlType::F32);
        const at::Tensor v = tensorOf(f, "blk.0.attn_v.weight");
        QVERIFY(at::allclose(v, c.weights.layers[0].wv.to(at::kHalf).to(at::kFloat), 0, 0));
    }

    void nonUniformIsDeciWithPadding() {
        const LlamaCheckpoint c = extremeDemo();
        const std::string p = path("extreme.gguf");
        const GgufExportReport r = exportGguf(c, p);
        QCOMPARE(r.architecture, std::string("deci"));
        const GgufFile f = readGgufFile(p);
        auto ints = [&](const char* key) {
            std::vector<int64_t> v;
            for (const GgufValue& e : f.at(key).elements) v.push_back(e.integer);
            return v;
        };
        // layer 0: no head → one zero head (llama.cpp sizes heads from layer 0); 1: no channel
        // → one zero channel; 2: no head but a bias → one zero head; 3: empty; 4: no channel but
        // a down bias and heads → one zero channel.
        QCOMPARE(ints("deci.attention.head_count"), (std::vector<int64_t>{1, 6, 1, 0, 2, 6}));
        QCOMPARE(ints("deci.attention.head_count_kv"), (std::vector<int64_t>{1, 6, 1, 0, 2, 6}));
        QCOMPARE(ints("deci.feed_forward_length"), (std::vector<int64_t>{200, 1, 448, 0, 1, 448}));
        QCOMPARE(f.at("deci.attention.head_count").elementType, GgufValueType::Int32);
        QCOMPARE(f.at("deci.attention.key_length").integer, 32ll);
        QVERIFY(tensorOf(f, "blk.0.attn_q.weight").abs().max().item<float>() == 0.f);
        QVERIFY(tensorOf(f, "blk.1.ffn_down.weight").abs().max().item<float>() == 0.f);
        QVERIFY(at::equal(tensorOf(f, "blk.2.attn_output.bias"), c.weights.layers[2].wo_bias));
        QVERIFY(f.findTensor("blk.3.attn_norm.weight") == nullptr);
        QVERIFY(f.findTensor("blk.3.ffn_norm.weight") == nullptr);
        QVERIFY(at::equal(tensorOf(f, "blk.4.ffn_down.bias"), c.weights.layers[4].w_down_bias));
        QCOMPARE(r.notes.size(), size_t(4));
    }

    // Issue 13's families: Qwen as qwen2/qwen3 (no Q/K permutation: llama.cpp rotates their halves),
    // Llama 3.1's rope_freqs.weight, linear scaling keys, and the refusals by name.
    void familyArchitectures() {
        const LlamaCheckpoint q2 = demoAsFamily(ModelFamily::Qwen2);
        GgufExportPlan plan = planGgufExport(q2, {});
        QCOMPARE(plan.report.architecture, std::string("qwen2"));
        auto names = [](const GgufExportPlan& p) {
            std::set<std::string> n;
            for (const auto& t : p.tensors) n.insert(t.info.name);
            return n;
        };
        QVERIFY(names(plan).count("blk.3.attn_k.bias"));
        const std::string p2 = path("qwen2.gguf");
        exportGguf(q2, p2);
        GgufFile f = readGgufFile(p2);
        QVERIFY(at::equal(tensorOf(f, "blk.1.attn_q.weight"), q2.weights.layers[1].wq));  // not permuted
        QVERIFY(at::equal(tensorOf(f, "blk.1.attn_q.bias"), q2.weights.layers[1].wq_bias));
        QCOMPARE(f.at("qwen2.attention.head_count").integer, 6ll);

        const LlamaCheckpoint q3 = qwen3DemoVocab();
        plan = planGgufExport(q3, {});
        QCOMPARE(plan.report.architecture, std::string("qwen3"));
        QVERIFY(names(plan).count("blk.1.attn_q_norm.weight") && names(plan).count("blk.1.attn_k_norm.weight"));

        const LlamaCheckpoint l31 = demoAsFamily(ModelFamily::Llama, RopeScaling::Type::Llama3);
        const std::string p3 = path("llama31.gguf");
        exportGguf(l31, p3);
        f = readGgufFile(p3);
        const at::Tensor factors = tensorOf(f, "rope_freqs.weight");
        QCOMPARE(factors.size(0), int64_t(16));
        QCOMPARE(factors[0].item<float>(), 1.0f);   // highest frequency: kept
        QCOMPARE(factors[15].item<float>(), 8.0f);  // lowest: divided by the factor
        const LlamaCheckpoint lin = demoAsFamily(ModelFamily::Llama, RopeScaling::Type::Linear);
        plan = planGgufExport(lin, {});
        bool linear = false;
        for (const auto& [key, value] : plan.metadata) linear = linear || (key == "llama.rope.scaling.type" && value.string == "linear");
        QVERIFY(linear);
        QCOMPARE(planGgufExport(demoAsFamily(ModelFamily::Mistral), {}).report.architecture, std::string("llama"));
    }

    void familyRefusals() {
        // Non-uniform Qwen: llama.cpp's qwen2/qwen3 take layer 0's sizes, deci lacks their parts.
        LlamaCheckpoint q3 = qwen3DemoVocab();
        Mask mask;
        mask.keepHeads = {{true, true}, {true, false}};
        mask.keepChannels = {std::vector<bool>(96, true), std::vector<bool>(96, true)};
        PruneSettings settings;
        settings.compensation = CompensationKind::None;
        const LlamaCheckpoint nonUniform = applyMask(q3, ModelStats{}, mask, settings).checkpoint;
        QString e = errorOf([&] { planGgufExport(nonUniform, {}); });
        QVERIFY2(e.contains("qwen3") && e.contains("layer 0's sizes") && e.contains("q/k norms"), qPrintable(e));
        // Qwen2 with pruned heads: zero heads pad q_proj back to hidden × hidden (llama.cpp's qwen2).
        const LlamaCheckpoint q2Pruned = prunedUniformly(demoAsFamily(ModelFamily::Qwen2), 4, false);
        const GgufExportPlan padded = planGgufExport(q2Pruned, {});
        QCOMPARE(padded.report.layers[0].heads, int64_t(6));
        QCOMPARE(padded.report.layers[0].kvHeads, int64_t(6));
        for (const auto& t : padded.tensors)
            if (t.info.name == "blk.0.attn_q.weight") QCOMPARE(t.info.ne, (std::vector<int64_t>{192, 192}));
        LlamaCheckpoint q2 = demoAsFamily(ModelFamily::Qwen2);
        q2.weights.layers[0].wo_bias = at::zeros({q2.config.hidden_size});
        e = errorOf([&] { planGgufExport(q2, {}); });
        QVERIFY2(e.contains("qwen2") && e.contains("bias"), qPrintable(e));
    }

    // The exporter makes each tensor only when it writes it. From a Mapped load (views of the
    // file) the file is byte for byte what a copying load gives, and what npw wrote before the
    // export was streamed (SHA-256 of the main branch's files for demo:lm, recorded when the
    // streaming was introduced).
    void streamedExportIsByteIdentical() {
        const std::vector<std::pair<GgufDtype, const char*>> recorded = {
            {GgufDtype::F32, kMainF32Sha256}, {GgufDtype::F16, kMainF16Sha256}};
        for (const auto& [dtype, sha] : recorded) {
            const std::string copied = path("copied.gguf"), mapped = path("mapped.gguf");
            exportGguf(loadLlamaCheckpoint("demo:lm"), copied, {dtype, ""});
            const LlamaCheckpoint view = loadLlamaCheckpoint("demo:lm", WeightStorage::Mapped);
            QVERIFY(view.weightsMapped);
            exportGguf(view, mapped, {dtype, ""});
            const std::string bytes = fileBytes(mapped);
            QVERIFY(bytes == fileBytes(copied));
            QCOMPARE(QCryptographicHash::hash(QByteArray::fromStdString(bytes), QCryptographicHash::Sha256).toHex(),
                     QByteArray(sha));
        }
    }

    void bf16KeepsNormsF32() {
        const LlamaCheckpoint c = loadLlamaCheckpoint("demo:lm-gqa", WeightStorage::Mapped);
        const std::string p = path("gqa-bf16.gguf");
        const GgufExportReport r = exportGguf(c, p, {GgufDtype::BF16, ""});
        QCOMPARE(r.dtype, std::string("bf16"));
        const GgufFile f = readGgufFile(p);
        QCOMPARE(f.at("general.file_type").integer, 32ll);  // llama.cpp's MOSTLY_BF16
        QCOMPARE(f.findTensor("blk.0.attn_v.weight")->type, GgmlType::BF16);
        QCOMPARE(f.findTensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
        const GgufTensorInfo* v = f.findTensor("blk.0.attn_v.weight");
        const std::string bytes = readGgufTensorBytes(f, *v);
        const at::Tensor stored = at::from_blob(const_cast<char*>(bytes.data()), {v->ne[1], v->ne[0]}, at::kBFloat16).clone();
        QVERIFY(at::equal(stored, c.weights.layers[0].wv.to(at::kFloat).to(at::kBFloat16)));
    }

    // A NaN in a mapped checkpoint is found when its tensor is written: named by file, tensor
    // and index, and no output file is left.
    void mappedNanIsNamedOnExport() {
        const std::string copy = path("lm-nan");
        std::filesystem::copy(resolveModelPath("demo:lm"), copy);
        const std::string weights = copy + "/model.safetensors";
        std::vector<std::pair<std::string, at::Tensor>> tensors;
        {
            const auto file = SafeTensorsFile::open(weights);
            for (const std::string& name : file->names()) tensors.emplace_back(name, file->load(name));
        }
        for (auto& [name, t] : tensors)
            if (name == "model.layers.4.mlp.up_proj.weight") t.view({-1})[777] = NAN;
        std::filesystem::remove(weights);
        writeSafeTensors(weights, tensors);
        const LlamaCheckpoint c = loadLlamaCheckpoint(copy, WeightStorage::Mapped);  // headers only: no error
        const QString e = errorOf([&] { exportGguf(c, path("nan.gguf")); });
        QVERIFY2(e.contains("'model.layers.4.mlp.up_proj.weight'") && e.contains(QString::fromStdString(weights)) &&
                     e.contains("index 777)"),
                 qPrintable(e));
        QVERIFY(!std::filesystem::exists(path("nan.gguf")));
        for (const auto& entry : std::filesystem::directory_iterator(dir_.path().toStdString()))
            QVERIFY2(entry.path().filename().string().rfind("nan.gguf", 0) != 0, entry.path().c_str());  // no temporary left
    }

    void refusals() {
        // On a copy: were the check broken, the demo model itself must not be overwritten.
        const std::string copy = path("lm-copy");
        std::filesystem::copy(resolveModelPath("demo:lm"), copy);
        LlamaCheckpoint c = loadLlamaCheckpoint(copy);
        QString e = errorOf([&] { exportGguf(c, dir_.path().toStdString()); });
        QVERIFY2(e.contains("is a folder"), qPrintable(e));
        e = errorOf([&] { exportGguf(c, c.source + "/model.safetensors"); });
        QVERIFY2(e.contains("refusing") && e.contains("lm-copy"), qPrintable(e));
        QCOMPARE(loadLlamaCheckpoint(copy).config.num_layers, 6);  // still intact
        exportGguf(c, copy + "/beside.gguf");                       // a new file beside it is fine
        c.tokenizerPath.clear();
        e = errorOf([&] { exportGguf(c, path("none.gguf")); });
        QVERIFY2(e.contains("no tokenizer.json") && e.contains(QString::fromStdString(c.source)), qPrintable(e));
        c = loadLlamaCheckpoint(copy);
        c.weights.layers[1].w_up = c.weights.layers[1].w_up.clone();
        c.weights.layers[1].w_up[0][0] = 1e6f;
        e = errorOf([&] { exportGguf(c, path("big.gguf"), {GgufDtype::F16, ""}); });
        QVERIFY2(e.contains("'blk.1.ffn_up.weight'") && e.contains("as f32"), qPrintable(e));
        QVERIFY(!std::filesystem::exists(path("big.gguf")));
        QVERIFY(errorOf([] { parseGgufDtype("q8"); }).contains("f32, f16, bf16"));
    }
};

QTEST_GUILESS_MAIN(TestGguf)
#include "tst_gguf.moc"
