// A result that becomes non-finite is an error naming what and where, never a null with exit 0;
// JSON text is always valid UTF-8. Through the npw binary of this build: a small model whose
// layer 1 has finite but huge MLP weights (±3e38: they pass the NaN/Inf check on loading, and
// overflow float32 in the first matrix product) makes eval, generate, compare, prune, zeroshot
// and sweep exit 1 with a message naming layer 1's MLP; the same model with ordinary weights
// works; `generate --json` over a byte-fallback tokenizer.bin whose ids decode to a lone byte
// writes U+FFFD in the text and the ids exactly. And json_fields::dumpJson, the one writer of
// JSON text, on its own: a non-finite number is refused naming its field, invalid UTF-8 becomes
// U+FFFD.
#include "core/models/llama.h"
#include "core/models/model_loader.h"
#include "core/models/non_finite.h"
#include "core/text/json_output.h"
#include "core/util/error.h"
#include "core/util/finite.h"
#include "tests/tiny_llama.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

using namespace npw;
using json = nlohmann::json;

namespace {

// llama_bpe.bin: a llama2.c tokenizer.bin with SentencePiece's byte fallback, 1000 pieces,
// <0x00>..<0xFF> at ids 3..258.
const std::string kTokenizer = std::string(NPW_TEST_DATA) + "/sentencepiece/llama_bpe.bin";
constexpr int64_t kVocab = 1000;
constexpr int32_t kLoneByteE2 = 3 + 0xE2;  // <0xE2>: the first byte of a 3-byte UTF-8 character

// A 3-layer LLaMA over llama_bpe.bin's vocabulary; `hugeLayer` >= 0 sets that layer's MLP up
// projection to ±3e38 (finite, and past float32's range once multiplied by anything above 1.2).
LlamaCheckpoint model(int64_t hugeLayer) {
    LlamaCheckpoint c = test::tinyLlama({2, 2, 2}, {2, 2, 2}, {12, 12, 12}, 11);
    c.config.vocab_size = kVocab;
    c.config.max_position_embeddings = 64;
    c.weights.embed = at::randn({kVocab, c.config.hidden_size});
    c.weights.lm_head = at::randn({kVocab, c.config.hidden_size}) * 0.25;
    if (hugeLayer >= 0) {
        at::Tensor& up = c.weights.layers[static_cast<size_t>(hugeLayer)].w_up;
        up = at::where(up >= 0, at::full_like(up, 3e38), at::full_like(up, -3e38));
    }
    c.tokenizerPath = kTokenizer;
    return c;
}

} // namespace

class TestCliNonFinite : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;
    QString huge_, normal_, text_, task_;

    struct Run {
        int rc;
        QByteArray out;
        QString err;
    };
    Run run(const QStringList& args) {
        QProcess p;
        p.start(npw_, args);
        p.waitForFinished(300000);
        return {p.exitCode(), p.readAllStandardOutput(), QString::fromUtf8(p.readAllStandardError())};
    }

    // Exit 1, an error that says a result became non-finite and names layer 1's MLP (where the
    // overflow starts), and no JSON on stdout (nothing that reads as a result).
    void expectNonFiniteError(const QStringList& args, const QString& what) {
        const Run r = run(args + QStringList{"--json"});
        QVERIFY2(r.rc == 1, qPrintable(args.join(' ') + ": exit " + QString::number(r.rc) + "\n" + r.err));
        QVERIFY2(r.err.contains("non-finite"), qPrintable(r.err));
        QVERIFY2(r.err.contains(what), qPrintable(what + " not in: " + r.err));
        QVERIFY2(!r.err.contains("internal error"), qPrintable(r.err));
        QVERIFY2(r.out.trimmed().isEmpty(), r.out.constData());
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        QVERIFY2(QFileInfo::exists(npw_), "build the npw target first");
        QVERIFY(dir_.isValid());
        huge_ = dir_.filePath("huge");
        normal_ = dir_.filePath("normal");
        saveHfLlamaDirectory(model(1), huge_.toStdString());
        saveHfLlamaDirectory(model(-1), normal_.toStdString());
        text_ = dir_.filePath("text.txt");
        std::ofstream text(text_.toStdString());
        for (int i = 0; i < 60; ++i) text << "In the beginning God created the heaven and the earth. And the earth was without form. ";
        text.close();
        task_ = dir_.filePath("task.jsonl");
        std::ofstream task(task_.toStdString());
        for (int i = 0; i < 4; ++i)
            task << R"({"context": "In the beginning God created", "choices": [" the heaven", " a stone"], "gold": 0})" << "\n";
    }

    // The checked path in core: where the forward first becomes non-finite.
    void locatesTheFirstNonFiniteStep() {
        const LlamaModel huge(model(1), Runtime{});
        const at::Tensor ids = at::arange(1, 9, at::kLong).unsqueeze(0);
        const std::string where = locateNonFinite(huge, ids);
        QVERIFY2(where.rfind("layer 1's MLP output became non-finite", 0) == 0, where.c_str());
        const LlamaModel normal(model(-1), Runtime{});
        QCOMPARE(locateNonFinite(normal, ids), std::string());
        QCOMPARE(nonFiniteValues(at::tensor({1.0, std::nan(""), INFINITY})), std::string("NaN, inf"));
        QCOMPARE(nonFiniteValues(at::tensor({-INFINITY})), std::string("-inf"));
        QCOMPARE(nonFiniteValues(at::tensor({1.0f, 3e38f})), std::string());
        try {
            requireFinite(std::numeric_limits<double>::infinity(), "the perplexity");
            QFAIL("an infinite result was accepted");
        } catch (const Error& e) {
            QCOMPARE(std::string(e.what()), std::string("the perplexity became non-finite (inf)"));
        }
    }

    // allFinite reads the bits (NaN and ±inf: every exponent bit set) where at::isfinite builds a
    // bool tensor: the two must agree on every dtype, at every position of a bad value (the
    // first and last element, block and thread-chunk boundaries), on views that are not
    // contiguous, on the largest finite values and on subnormals.
    void allFiniteAgreesWithLibTorch() {
        const int64_t n = (int64_t(1) << 20) * 3 + 17;  // more than one parallel chunk, a ragged end
        const std::vector<int64_t> positions = {0, 1, (1 << 14) - 1, 1 << 14, (1 << 20) - 1, 1 << 20, n - 1};
        const std::vector<double> bad = {std::nan(""), INFINITY, -INFINITY};
        for (const at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
            const QByteArray name = c10::toString(dtype);
            at::Tensor t = at::randn({n}, at::kDouble).mul_(100).to(dtype);
            QVERIFY2(allFinite(t), name.constData());
            // The extremes of the type stay finite: max, lowest, the smallest subnormal.
            const at::Tensor edges = at::tensor({1e300, -1e300, 1e-320, 0.0, -0.0}, at::kDouble).to(dtype);
            QCOMPARE(allFinite(edges), at::isfinite(edges).all().item<bool>());
            for (const int64_t pos : positions)
                for (const double v : bad) {
                    at::Tensor u = t.clone();
                    u[pos] = v;
                    const QByteArray what = name + " at " + QByteArray::number(qint64(pos)) + " = " + QByteArray::number(v);
                    QVERIFY2(!allFinite(u), what.constData());
                    QVERIFY2(!allFinite(u.view({-1, 1}).t()), what.constData());        // a 1 × n view
                    QVERIFY2(!allFinite(u.narrow(0, 0, n - 1).view({-1})) || pos == n - 1, what.constData());
                }
            // A strided view (every other element) sees a bad value only where it lies.
            at::Tensor u = t.clone();
            u[1] = std::nan("");
            QVERIFY(!u.slice(0, 1, n, 2).is_contiguous());
            QVERIFY(!allFinite(u.slice(0, 1, n, 2)));
            QVERIFY(allFinite(u.slice(0, 0, n, 2)));
        }
        QVERIFY(allFinite(at::Tensor()));
        QVERIFY(allFinite(at::empty({0}, at::kFloat)));
        QVERIFY(allFinite(at::arange(10, at::kLong)));
    }

    void everyCommandRefusesTheResult() {
        expectNonFiniteError({"eval", huge_, "--text", text_, "--seqlen", "32"}, "in window 1 of");
        expectNonFiniteError({"eval", huge_, "--text", text_, "--seqlen", "32"}, "layer 1's MLP output");
        expectNonFiniteError({"eval", huge_, "--text", text_, "--seqlen", "32", "--layerwise"}, "layer 1's output");
        expectNonFiniteError({"eval", normal_, "--text", text_, "--seqlen", "32", "--reference", huge_},
                             "KL divergence from the reference model");
        expectNonFiniteError({"generate", huge_, "--prompt", "In the", "--tokens", "4"}, "layer 1's MLP output");
        expectNonFiniteError({"compare", normal_, huge_, "--prompt", "In the", "--tokens", "4"}, "layer 1's MLP output");
        expectNonFiniteError({"zeroshot", huge_, "--task", "mc:" + task_}, "layer 1's MLP output");
        const QString out = dir_.filePath("pruned");
        expectNonFiniteError({"prune", huge_, "--method", "numerical", "--ratio", "0.2", "--calib", text_, "--nsamples", "4",
                              "--seqlen", "32", "--out", out},
                             "layer 1's MLP activation (down_proj's input) became non-finite");
        QVERIFY2(!QFileInfo::exists(out), "a refused prune left an output behind");
        expectNonFiniteError({"sweep", huge_, "--methods", "magnitude", "--ratios", "0.2", "--calib", text_, "--nsamples",
                              "4", "--seqlen", "32", "--eval", "text:" + text_},
                             "sweep: method dense");
    }

    // The same commands on the same model with ordinary weights: finite results, exit 0.
    void anOrdinaryModelStillWorks() {
        Run r = run({"eval", normal_, "--text", text_, "--seqlen", "32", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const json e = json::parse(r.out.toStdString());
        QVERIFY(e.at("ppl").is_number() && std::isfinite(e.at("ppl").get<double>()) && e.at("ppl").get<double>() > 1);
        r = run({"zeroshot", normal_, "--task", "mc:" + task_, "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QVERIFY(json::parse(r.out.toStdString()).at("tasks").at(0).at("acc").is_number());
        r = run({"prune", normal_, "--method", "numerical", "--ratio", "0.2", "--calib", text_, "--nsamples", "4",
                 "--seqlen", "32", "--out", dir_.filePath("pruned-normal"), "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
    }

    // A byte-fallback piece that is one byte of a multi-byte character: the decoded text is not
    // UTF-8; the JSON holds U+FFFD there and the ids as they are.
    void jsonTextIsValidUtf8() {
        const Run r = run({"generate", normal_, "--prompt-ids", "1 " + QString::number(kLoneByteE2), "--tokens", "3",
                           "--temperature", "1", "--seed", "3", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const json j = json::parse(r.out.toStdString());  // throws on invalid UTF-8
        QCOMPARE(j.at("prompt_ids"), json::array({1, kLoneByteE2}));
        QVERIFY2(j.at("prompt").get<std::string>().find("\xEF\xBF\xBD") != std::string::npos, r.out.constData());
        QCOMPARE(j.at("ids").size(), size_t(3));
    }

    void theJsonWriter() {
        json j = {{"a", {{"b", json::array({1.5, std::numeric_limits<double>::quiet_NaN()})}}}, {"text", "ok"}};
        try {
            json_fields::dumpJson(j);
            QFAIL("a NaN was written");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).rfind("'a.b[1]' of the JSON output is not finite (NaN)", 0) == 0, e.what());
        }
        j = {{"x", -std::numeric_limits<double>::infinity()}};
        try {
            json_fields::dumpJson(j, 2, "workspace w.npw.json");
            QFAIL("-inf was written");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).rfind("'x' of workspace w.npw.json is not finite (-inf)", 0) == 0, e.what());
        }
        j = {{"text", std::string("a\xE2") + "b"}, {"ids", {1, 229}}, {"p", 0.1}};
        const std::string text = json_fields::dumpJson(j);
        QCOMPARE(text, std::string("{\"ids\":[1,229],\"p\":0.1,\"text\":\"a\xEF\xBF\xBD" "b\"}"));
        QCOMPARE(json::parse(text).at("ids"), json::array({1, 229}));
    }
};

QTEST_MAIN(TestCliNonFinite)
#include "tst_cli_non_finite.moc"
