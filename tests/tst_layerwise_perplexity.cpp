// Layer-wise evaluation (issue 17, "Evaluation larger than memory") against whole-model
// evaluation, the independent reference here: the same windows must give the same perplexity to
// 1e-6 relative (both run the forward in float32; the scoring is float64). Rows cover the
// bundled demo (multi-head), its GQA sibling, a llama2.c .bin (GQA, adjacent-pair RoPE, mapped
// too) and an F16 safetensors file (its matrices read as stored, widened as the GEMMs read
// them). Also: the weights really are views of the file (their addresses lie in a mapping of it,
// per /proc/self/maps), the size rule that makes npw eval choose the path, and a truncated file
// refused by name.
#include "core/eval/layerwise_perplexity.h"
#include "core/eval/perplexity.h"
#include "core/io/safetensors.h"
#include "core/models/llama.h"
#include "core/models/llama_init.h"
#include "core/models/model_loader.h"
#include "core/util/paths.h"
#include "error_of.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace npw;
namespace fs = std::filesystem;

namespace {

const std::string kStories = std::string(NPW_TEST_DATA) + "/stories260K/stories260K.bin";

// Whether [p, p+bytes) lies inside one mapping of `file` (a line of /proc/self/maps naming it).
bool insideMappingOf(const void* p, size_t bytes, const std::string& file) {
    const std::string wanted = fs::canonical(file).string();
    std::ifstream maps("/proc/self/maps");
    const auto address = reinterpret_cast<uintptr_t>(p);
    for (std::string line; std::getline(maps, line);) {
        std::istringstream in(line);
        std::string range, perms, offset, dev, inode, path;
        in >> range >> perms >> offset >> dev >> inode;
        std::getline(in >> std::ws, path);
        if (path != wanted) continue;
        const size_t dash = range.find('-');
        const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
        const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
        if (address >= lo && address + bytes <= hi) return true;
    }
    return false;
}

// A small GQA model with q/k/v biases, saved as Hugging Face safetensors, then rewritten with
// every tensor in F16 (the loader's Copy path converts to float32 on loading, the Mapped path
// per block): the folder's path.
std::string writeF16Model(const QTemporaryDir& dir) {
    LlamaCheckpoint ck = test::tinyLlama({4, 2, 4}, {2, 1, 1}, {24, 16, 0}, 11);
    for (LlamaLayerWeights& L : ck.weights.layers) {
        L.wq_bias = 0.1 * at::randn({L.wq.size(0)});
        L.wk_bias = 0.1 * at::randn({L.wk.size(0)});
        L.wv_bias = 0.1 * at::randn({L.wv.size(0)});
    }
    ck.config.qkv_bias = true;
    std::string path = dir.filePath("f16").toStdString();
    saveHfLlamaDirectory(ck, path);
    const std::string file = path + "/model.safetensors";
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    {
        auto st = SafeTensorsFile::open(file);
        for (const std::string& name : st->names()) tensors.emplace_back(name, st->loadFloat(name).to(at::kHalf));
    }
    writeSafeTensors(file, tensors, {{"format", "pt"}});
    return path;
}

std::vector<int32_t> idsFor(const LlamaConfig& config, int64_t n, uint64_t seed) {
    return test::randomIds(n, config.vocab_size, seed);
}

} // namespace

class TestLayerwisePerplexity : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string f16Model_;

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        f16Model_ = writeF16Model(dir_);
    }

    void equalsWholeModel_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("seqlen");
        QTest::addColumn<int>("batch");
        QTest::newRow("demo:lm (multi-head), ragged last batch") << "demo:lm" << 64 << 3;
        QTest::newRow("demo:lm-gqa (6 heads, 2 KV heads)") << "demo:lm-gqa" << 48 << 2;
        QTest::newRow("stories260K.bin (llama2.c, GQA, adjacent pairs)") << QString::fromStdString(kStories) << 32 << 4;
        QTest::newRow("F16 safetensors, GQA, q/k/v biases, a layer without MLP") << "f16" << 16 << 2;
    }
    void equalsWholeModel() {
        QFETCH(QString, model);
        QFETCH(int, seqlen);
        QFETCH(int, batch);
        const std::string path = model == "f16" ? f16Model_ : model.toStdString();
        if (path == kStories) QVERIFY2(fs::exists(kStories), "tests/data/stories260K/stories260K.bin is missing");
        const Runtime cpu = chooseRuntime("cpu");
        const LlamaModel whole(loadLlamaCheckpoint(path), cpu);
        const LlamaCheckpoint mapped = loadLlamaCheckpoint(path, WeightStorage::Mapped);
        const std::vector<int32_t> ids = idsFor(mapped.config, 7 * seqlen + 5, 3);
        PerplexityOptions o;
        o.seqlen = seqlen;
        o.batchWindows = batch;
        const PerplexityResult a = evaluatePerplexity(whole, ids, o);
        const PerplexityResult b = evaluatePerplexityLayerwise(mapped, cpu, ids, o);
        QCOMPARE(b.windows, int64_t(7));
        QCOMPARE(b.tokens, a.tokens);
        QCOMPARE(a.path, std::string("whole-model"));
        QCOMPARE(b.path, std::string("layerwise"));
        QVERIFY2(std::abs(b.ppl - a.ppl) <= 1e-6 * a.ppl,
                 qPrintable(QString("layer-wise %1 vs whole-model %2").arg(b.ppl, 0, 'g', 17).arg(a.ppl, 0, 'g', 17)));
        QVERIFY(a.ppl > 1.5);  // a model that predicts something: not a trivially equal pair
        QVERIFY(b.seconds > 0 && b.tokensPerSecond() > 0);
    }

    void maxWindowsAndBitsPerByteFollowTheProtocol() {
        const Runtime cpu = chooseRuntime("cpu");
        const LlamaModel whole(loadLlamaCheckpoint("demo:lm"), cpu);
        const LlamaCheckpoint mapped = loadLlamaCheckpoint("demo:lm", WeightStorage::Mapped);
        const std::vector<int32_t> ids = idsFor(mapped.config, 400, 9);
        PerplexityOptions o;
        o.seqlen = 50;
        o.maxWindows = 3;
        DecodeFn decode = [](const std::vector<int32_t>& v) { return std::string(v.size() * 2 + v.front() % 3, 'x'); };
        const PerplexityResult a = evaluatePerplexity(whole, ids, o, nullptr, decode);
        const PerplexityResult b = evaluatePerplexityLayerwise(mapped, cpu, ids, o, decode);
        QCOMPARE(b.windows, int64_t(3));
        QCOMPARE(b.bytes, a.bytes);
        QVERIFY(std::abs(b.bitsPerByte - a.bitsPerByte) <= 1e-6 * a.bitsPerByte);
    }

    void mappedWeightsAreViewsOfTheFile_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("file");
        const QString demo = QString::fromStdString(resolveModelPath("demo:lm"));
        QTest::newRow("safetensors") << "demo:lm" << demo + "/model.safetensors";
        QTest::newRow("llama2.c .bin") << QString::fromStdString(kStories) << QString::fromStdString(kStories);
    }
    void mappedWeightsAreViewsOfTheFile() {
        QFETCH(QString, model);
        QFETCH(QString, file);
        LlamaCheckpoint mapped = loadLlamaCheckpoint(model.toStdString(), WeightStorage::Mapped);
        const at::Tensor& w = mapped.weights.layers.at(0).w_up;
        QVERIFY(insideMappingOf(w.data_ptr(), w.nbytes(), file.toStdString()));
        const at::Tensor& e = mapped.weights.embed;
        QVERIFY(insideMappingOf(e.data_ptr(), e.nbytes(), file.toStdString()));
        // Copy loads, and copyWeightsIntoMemory makes owned copies of the same numbers.
        const LlamaCheckpoint copied = loadLlamaCheckpoint(model.toStdString());
        QVERIFY(!insideMappingOf(copied.weights.layers.at(0).w_up.data_ptr(), 4, file.toStdString()));
        QVERIFY(mapped.weightsMapped && !copied.weightsMapped);
        copyWeightsIntoMemory(mapped);
        QVERIFY(!mapped.weightsMapped);
        QVERIFY(!insideMappingOf(mapped.weights.layers.at(0).w_up.data_ptr(), 4, file.toStdString()));
        QVERIFY(at::equal(mapped.weights.layers.at(0).w_up, copied.weights.layers.at(0).w_up));
        QVERIFY(at::equal(mapped.weights.embed, copied.weights.embed));
        QCOMPARE(mapped.weights.lm_head.is_same(mapped.weights.embed), copied.weights.lm_head.is_same(copied.weights.embed));
    }

    void f16IsMappedInItsStoredDtype() {
        const LlamaCheckpoint mapped = loadLlamaCheckpoint(f16Model_, WeightStorage::Mapped);
        QCOMPARE(mapped.weights.layers.at(1).wq.scalar_type(), at::kHalf);
        // On the CPU the block's matrices stay the file's float16 views (widened as the forward
        // reads them); its vectors (norms, biases) become float32.
        const LlamaLayerWeights block = llamaLayerOnRuntime(mapped.weights.layers.at(1), chooseRuntime("cpu"));
        QCOMPARE(block.wq.scalar_type(), at::kHalf);
        QCOMPARE(block.wq.data_ptr(), mapped.weights.layers.at(1).wq.data_ptr());
        QCOMPARE(block.wq_bias.scalar_type(), at::kFloat);
        QCOMPARE(block.attn_norm.scalar_type(), at::kFloat);
        QVERIFY(at::equal(block.wq_bias, mapped.weights.layers.at(1).wq_bias.to(at::kFloat)));
    }

    void theSizeRuleChoosesLayerwise() {
        const LlamaConfig c = loadLlamaCheckpoint("demo:lm", WeightStorage::Mapped).config;
        const Runtime cpu = chooseRuntime("cpu");
        const int64_t bytes = modelRuntimeBytes(c, cpu);
        QCOMPARE(bytes, c.parameterCount() * 4);
        QVERIFY(evaluationBelongsLayerwise(c, cpu, 2 * bytes - 2));  // more than half
        QVERIFY(!evaluationBelongsLayerwise(c, cpu, 2 * bytes));     // exactly half: fits
        QVERIFY(!evaluationBelongsLayerwise(c, cpu, 0));             // unknown RAM: never
        QCOMPARE(layerwiseEvalHiddenBytes(c, cpu, 3, 10), int64_t(3 * 10 * c.hidden_size * 4));
    }

    void truncatedSafetensorsIsRefusedByName() {
        const fs::path copy = fs::path(dir_.path().toStdString()) / "truncated";
        fs::create_directories(copy);
        const fs::path demo = resolveModelPath("demo:lm");
        for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) fs::copy_file(demo / f, copy / f);
        const fs::path file = copy / "model.safetensors";
        fs::resize_file(file, fs::file_size(file) - 1000);
        const QString message = test::errorOf([&] { loadLlamaCheckpoint(copy.string(), WeightStorage::Mapped); });
        QVERIFY2(message.contains(QString::fromStdString(file.string())), qPrintable(message));
        QVERIFY2(message.contains("truncated") && message.contains("tensor '"), qPrintable(message));
    }

    void badWeightsAreRefused() {
        LlamaCheckpoint mapped = loadLlamaCheckpoint("demo:lm", WeightStorage::Mapped);
        mapped.weights.layers.pop_back();
        PerplexityOptions o;
        o.seqlen = 8;
        const QString message = test::errorOf(
            [&] { evaluatePerplexityLayerwise(mapped, chooseRuntime("cpu"), idsFor(mapped.config, 16, 1), o); });
        QVERIFY2(message.contains("layers"), qPrintable(message));
    }
};

QTEST_GUILESS_MAIN(TestLayerwisePerplexity)
#include "tst_layerwise_perplexity.moc"
