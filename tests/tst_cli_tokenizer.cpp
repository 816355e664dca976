// Real tokenizers wired into the commands (issue 14), tested through the npw binary of this build
// tree as a user runs it: `--tokenizer FILE` of every kind (tokenizer.json, SentencePiece
// tokenizer.model, LLaMA-3's tiktoken tokenizer.model, llama2.c tokenizer.bin), the lookup
// beside a model (a folder with only tokenizer.model; tokenizer.json winning over it; a llama2.c
// .bin with tokenizer.bin beside it), `npw tokenize` against the ids of independent
// implementations (python3-sentencepiece and run.c in tests/data/sentencepiece/expected.json,
// transformers.js in tests/data/tokenizers/expected.json), the tokenizer copied by prune, and bad
// tokenizer files named in the errors. Also, in process: the tiktoken reader against LLaMA-3's
// tokenizer.json (the same merges, the same ids on a broad text set) and the GGUF metadata of a
// SentencePiece tokenizer.model.
#include "core/models/gguf_export.h"
#include "core/models/language_model.h"
#include "core/models/model_loader.h"
#include "core/text/sentencepiece_tokenizer.h"
#include "core/text/tiktoken.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_files.h"
#include "core/text/utf8.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <QCoreApplication>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest/QtTest>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace npw;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kData = NPW_TEST_DATA;
const std::string kSpm = kData + "/sentencepiece/";
const std::string kTokenizers = kData + "/tokenizers/";
const std::string kBabyModel = kData + "/babyllama/model5000.bin";  // llama2.c, vocab 105

struct Run {
    int exitCode = -1;
    std::string out, err;
    json result;  // stdout parsed when it is JSON
};

std::string fileBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void copyFile(const std::string& from, const std::string& to) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// Texts of a fixture that a command line can carry and SentencePiece sees as they are: valid
// UTF-8, no NUL, not starting with '-' (a flag), at most `maxBytes`.
bool usableOnCommandLine(const std::string& text, std::size_t maxBytes = 160) {
    return !text.empty() && text.size() <= maxBytes && text.find('\0') == std::string::npos && text[0] != '-' &&
           utf8::findInvalid(text) == std::string::npos;
}

} // namespace

class TestCliTokenizer : public QObject {
    Q_OBJECT
    QString npw_;
    QTemporaryDir dir_;
    json spmExpected_, jsExpected_;

    Run npw(const QStringList& arguments) {
        QProcess p;
        p.start(npw_, arguments);
        if (!p.waitForFinished(300000)) {
            p.kill();
            qFatal("npw %s did not finish", qPrintable(arguments.join(' ')));
        }
        Run r;
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = p.readAllStandardOutput().toStdString();
        r.err = p.readAllStandardError().toStdString();
        if (r.exitCode == 0 && arguments.contains("--json")) r.result = json::parse(r.out, nullptr, false);
        return r;
    }

    std::string path(const std::string& name) const { return dir_.filePath(QString::fromStdString(name)).toStdString(); }

    const json& spmModel(const std::string& file) const {
        for (const json& m : spmExpected_.at("models"))
            if (m.at("file") == file) return m;
        throw std::runtime_error("no model " + file);
    }

    // (text, python3-sentencepiece's ids without BOS) for the first `count` usable texts.
    std::vector<std::pair<std::string, std::vector<int32_t>>> spmCases(const std::string& file, size_t count) const {
        std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
        const json& model = spmModel(file);
        const json& texts = spmExpected_.at("texts");
        for (size_t i = 0; i < texts.size() && cases.size() < count; ++i) {
            if (!texts[i].contains("text")) continue;  // invalid UTF-8 is stored as bytes
            const std::string text = texts[i].at("text");
            if (usableOnCommandLine(text)) cases.emplace_back(text, model.at("cases")[i].at("ids").get<std::vector<int32_t>>());
        }
        return cases;
    }

    // `npw tokenize SOURCE --string TEXT --json [extra]`: its ids, with the run checked.
    std::vector<int32_t> tokenizeIds(const QStringList& source, const std::string& text, const QStringList& extra = {}) {
        const Run r = npw(QStringList{"tokenize"} + source + QStringList{"--string", QString::fromStdString(text), "--json"} + extra);
        if (r.exitCode != 0) qFatal("npw tokenize failed: %s", r.err.c_str());
        return r.result.at("ids").get<std::vector<int32_t>>();
    }

    void expectFailure(const QStringList& arguments, const QStringList& mustMention) {
        const Run r = npw(arguments);
        QVERIFY2(r.exitCode == 1, qPrintable("exit " + QString::number(r.exitCode) + " for npw " + arguments.join(' ') + ": " +
                                             QString::fromStdString(r.err)));
        const QString err = QString::fromStdString(r.err);
        QVERIFY2(!err.contains("internal error"), qPrintable(err));
        for (const QString& word : mustMention)
            QVERIFY2(err.contains(word), qPrintable("'" + word + "' missing from: " + err));
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        QVERIFY2(QFileInfo::exists(npw_), "build the npw target first");
        QVERIFY(dir_.isValid());
        spmExpected_ = json::parse(fileBytes(kSpm + "expected.json"));
        jsExpected_ = json::parse(fileBytes(kTokenizers + "expected.json")).at("tokenizers");
    }

    // ---- LLaMA-3's tiktoken tokenizer.model (core/text/tiktoken.h) ---------------------------------

    // The file built from LLaMA-3's tokenizer.json (tests/fixtures/make_tiktoken_fixture.py) must
    // give back that tokenizer.json's vocabulary and its 280,147 merges in the same order, as
    // transformers' converter derives them.
    void tiktokenGivesTheTokenizerJsonsMerges() {
        const json built = tiktokenAsTokenizerJson(fileBytes(kTokenizers + "llama3/tokenizer.model"), "tokenizer.model");
        const json original = json::parse(fileBytes(kTokenizers + "llama3/tokenizer.json"));
        QCOMPARE(built.at("model").at("vocab"), original.at("model").at("vocab"));
        const json& want = original.at("model").at("merges");
        const json& got = built.at("model").at("merges");
        QCOMPARE(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            const std::string joined = got[i][0].get<std::string>() + " " + got[i][1].get<std::string>();
            const std::string expected = want[i].is_string() ? want[i].get<std::string>()
                                                             : want[i][0].get<std::string>() + " " + want[i][1].get<std::string>();
            if (joined != expected) QFAIL(qPrintable(QString("merge %1: %2, expected %3").arg(i).arg(joined.c_str(), expected.c_str())));
        }
        QCOMPARE(built.at("added_tokens"), original.at("added_tokens"));
        QCOMPARE(built.at("pre_tokenizer"), original.at("pre_tokenizer"));
    }

    // Both files of LLaMA-3 give the same ids on a broad text set: the 24 texts of
    // tests/data/tokenizers (also against transformers.js), the 309 UTF-8 texts of the
    // SentencePiece fixtures (code, CJK, emoji, whitespace runs, control characters, random
    // Unicode), and the Bible lines of demo's corpus.
    void tiktokenAgreesWithTokenizerJson() {
        const auto fromTiktoken = Tokenizer::fromAnyFile(kTokenizers + "llama3/tokenizer.model");
        const auto fromJson = Tokenizer::fromAnyFile(kTokenizers + "llama3/tokenizer.json");
        QCOMPARE(fromTiktoken->kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(fromTiktoken->vocabSize(), 128256);
        QCOMPARE(fromTiktoken->bosId(), 128000);
        QCOMPARE(fromTiktoken->eosId(), 128001);
        int transformersJs = 0, agreed = 0, texts = 0;
        for (const json& c : jsExpected_.at("llama3").at("cases")) {
            const std::string text = c.at("text");
            const auto ids = fromTiktoken->encode(text, /*addBos=*/false);
            QCOMPARE(ids, fromJson->encode(text, false));
            QCOMPARE(ids, c.at("ids").get<std::vector<int32_t>>());
            QCOMPARE(fromTiktoken->decode(ids), fromJson->decode(ids));
            ++transformersJs;
        }
        std::vector<std::string> all;
        for (const json& t : spmExpected_.at("texts"))
            if (t.contains("text") && utf8::findInvalid(t.at("text").get<std::string>()) == std::string::npos)
                all.push_back(t.at("text"));
        std::ifstream bible(std::string(NPW_TEST_DATA) + "/../../resources/demo/data/kjv-ot.txt");
        std::string line;
        for (int i = 0; i < 400 && std::getline(bible, line); ++i) all.push_back(line);
        for (const std::string& text : all) {
            ++texts;
            const auto ids = fromTiktoken->encode(text, true);
            if (ids == fromJson->encode(text, true)) ++agreed;
            else qWarning("differs: %s", json(text).dump().c_str());
        }
        qInfo("tiktoken tokenizer.model = tokenizer.json on %d of %d texts; = transformers.js on %d texts", agreed, texts,
              transformersJs);
        QCOMPARE(agreed, texts);
        QVERIFY(texts > 600);
    }

    void tiktokenRefusesWhatItCannotRead_data() {
        QTest::addColumn<QString>("content");
        QTest::addColumn<QString>("mention");
        // The first lines of LLaMA-3's file (so that the file is taken as tiktoken), then a bad one.
        const QString start = "IQ== 0\nIg== 1\nIw== 2\nJA== 3\nJQ== 4\n";
        QTest::newRow("bad base64") << start + "J=Y= 5\n" << "line 6: the token is not base64";
        QTest::newRow("rank twice") << start + "Jg== 4\n" << "line 6: rank 4 is given twice";
        QTest::newRow("token twice") << start + "IQ== 5\n" << "line 6: its token is already ranked 0";
        QTest::newRow("rank not a number") << start + "Jg== 5x\n" << "line 6: the rank '5x' is not an integer";
        QTest::newRow("two fields") << start + "Jg==\n" << "line 6 is not";
        QTest::newRow("another tiktoken file") << start << "has 5 ranks";
        // Tokens are tens of bytes (LLaMA-3's longest: 128); a long one is refused by its length.
        QTest::newRow("token of 1500 bytes") << start + QString("YWFh").repeated(500) + " 5\n"
                                             << "line 6: the token is about 1500 bytes long; npw refuses tokens of more than 1024 bytes";
        QTest::newRow("token of 1025 bytes") << start + QString("YWFh").repeated(341) + "YWE= 5\n"
                                             << "line 6: the token is 1025 bytes long";
    }

    void tiktokenRefusesWhatItCannotRead() {
        QFETCH(QString, content);
        QFETCH(QString, mention);
        const std::string file = path("bad-tiktoken.model");
        writeTextAtomically(file, content.toStdString());
        try {
            Tokenizer::fromAnyFile(file);
            QFAIL("no error");
        } catch (const Error& e) {
            const QString message = e.what();
            QVERIFY2(message.contains(mention) && message.contains(QString::fromStdString(file)), qPrintable(message));
        }
    }

    // ---- npw tokenize ---------------------------------------------------------------------------------

    // Each file kind, given as the TOKENIZER argument and as --tokenizer of a model, against
    // python3-sentencepiece (tokenizer.model) and run.c (tokenizer.bin).
    void tokenizeSentencePieceAgreesWithPython() {
        for (const char* file : {"tok105.model", "llama_bpe.model", "unigram_bytes.model"}) {
            int checked = 0;
            for (const auto& [text, ids] : spmCases(file, 8)) {
                QCOMPARE(tokenizeIds({QString::fromStdString(kSpm + file)}, text, {"--no-bos"}), ids);
                ++checked;
            }
            QVERIFY(checked == 8);
        }
        // BOS first by default, as eval and generate encode.
        const auto [text, ids] = spmCases("llama_bpe.model", 3).back();
        const Run r = npw({"tokenize", QString::fromStdString(kSpm + "llama_bpe.model"), "--string", QString::fromStdString(text), "--json"});
        QCOMPARE(r.exitCode, 0);
        std::vector<int32_t> withBos = {1};
        withBos.insert(withBos.end(), ids.begin(), ids.end());
        QCOMPARE(r.result.at("ids").get<std::vector<int32_t>>(), withBos);
        QCOMPARE(r.result.at("bos").get<bool>(), true);
        QCOMPARE(r.result.at("file").get<std::string>(), std::string("SentencePiece model"));
        QCOMPARE(r.result.at("kind").get<std::string>(), std::string("sentencepiece-bpe"));
        QCOMPARE(r.result.at("pieces").size(), withBos.size());
        QCOMPARE(r.result.at("pieces")[0].get<std::string>(), std::string("<s>"));
    }

    void tokenizeLlama2cBinAgreesWithRunC() {
        const json* cases = nullptr;
        for (const json& b : spmExpected_.at("llama2c"))
            if (b.at("file") == "llama_bpe.bin") cases = &b.at("cases");
        QVERIFY(cases);
        int checked = 0;
        for (const json& c : *cases) {
            const json& t = spmExpected_.at("texts")[c.at("text").get<size_t>()];
            if (!t.contains("text") || !usableOnCommandLine(t.at("text")) || checked >= 12) continue;
            const QStringList bos = c.at("bos").get<int>() ? QStringList{} : QStringList{"--no-bos"};
            QCOMPARE(tokenizeIds({QString::fromStdString(kSpm + "llama_bpe.bin")}, t.at("text"), bos),
                     c.at("ids").get<std::vector<int32_t>>());
            ++checked;
        }
        QVERIFY(checked >= 10);
    }

    void tokenizeJsonAndTiktokenAgreeWithTransformersJs() {
        for (const auto& [name, file] : std::vector<std::pair<std::string, std::string>>{
                 {"llama2", "llama2/tokenizer.json"}, {"llama3", "llama3/tokenizer.json"}, {"llama3", "llama3/tokenizer.model"}}) {
            int checked = 0;
            for (const json& c : jsExpected_.at(name).at("cases")) {
                const std::string text = c.at("text");
                if (!usableOnCommandLine(text) || checked >= 6) continue;
                QCOMPARE(tokenizeIds({QString::fromStdString(kTokenizers + file)}, text, {"--no-bos"}),
                         c.at("ids").get<std::vector<int32_t>>());
                ++checked;
            }
            QCOMPARE(checked, 6);
        }
        const Run r = npw({"tokenize", QString::fromStdString(kTokenizers + "llama3/tokenizer.model"), "--string", "Hello world", "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("file").get<std::string>(), std::string("tiktoken BPE file"));
        QCOMPARE(r.result.at("ids").get<std::vector<int32_t>>(), (std::vector<int32_t>{128000, 9906, 1917}));
        QCOMPARE(r.result.at("pieces")[2].get<std::string>(), std::string("\u0120world"));
    }

    // Qwen defines no BOS: none is added, and tokenize says so.
    void noBosWhenTheTokenizerHasNone() {
        const Run r = npw({"tokenize", QString::fromStdString(kTokenizers + "qwen3/tokenizer.json"), "--string", "Hello world", "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("bos").get<bool>(), false);
        QVERIFY(r.result.at("bos_id").is_null());
        QCOMPARE(r.result.at("ids").get<std::vector<int32_t>>(), jsExpected_.at("qwen3").at("cases")[0].at("ids").get<std::vector<int32_t>>());
        const Run human = npw({"tokenize", QString::fromStdString(kTokenizers + "qwen3/tokenizer.json"), "--string", "Hello world"});
        QVERIFY2(QString::fromStdString(human.out).contains("none (the tokenizer defines no BOS)"), human.out.c_str());
    }

    // ---- The tokenizer beside a model, and --tokenizer ----------------------------------------------

    // A Hugging Face folder with tokenizer.json and tokenizer.model uses tokenizer.json; with only
    // tokenizer.model, that.
    void folderLookupAndPrecedence() {
        const std::string folder = path("hf-model");
        saveHfLlamaDirectory(loadLlamaCheckpoint("demo:lm"), folder);
        QVERIFY(fs::exists(folder + "/tokenizer.json"));
        copyFile(kSpm + "tok105.model", folder + "/tokenizer.model");
        Run r = npw({"info", QString::fromStdString(folder), "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), folder + "/tokenizer.json");
        QCOMPARE(tokenizerFileOfModel(folder), folder + "/tokenizer.json");

        fs::remove(folder + "/tokenizer.json");
        // tok105.model covers 105 of demo:lm's 2,048 ids: refused, naming both, unless asked for.
        r = npw({"info", QString::fromStdString(folder), "--json"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.find("105 tokens") != std::string::npos && r.err.find("2048") != std::string::npos &&
                     r.err.find("--allow-small-vocab") != std::string::npos,
                 r.err.c_str());
        r = npw({"info", QString::fromStdString(folder), "--allow-small-vocab", "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), folder + "/tokenizer.model");
        QCOMPARE(r.result.at("tokenizer_kind").get<std::string>(), std::string("sentencepiece-bpe"));
        for (const auto& [text, ids] : spmCases("tok105.model", 4))
            QCOMPARE(tokenizeIds({QString::fromStdString(folder)}, text, {"--no-bos"}), ids);
        // eval encodes its text with it (BOS first).
        const std::string text = path("hello.txt");
        writeTextAtomically(text, "hello there, said the little bird to the big tree.");
        r = npw({"eval", QString::fromStdString(folder), "--text", QString::fromStdString(text), "--seqlen", "16",
                 "--allow-small-vocab", "--json"});
        QVERIFY2(r.exitCode == 0, r.err.c_str());
        QCOMPARE(r.result.at("corpus_tokens").get<size_t>(),
                 tokenizeIds({QString::fromStdString(kSpm + "tok105.model")}, readTextFile(text)).size());
    }

    // Meta's release: tokenizer.model beside consolidated.NN.pth (LLaMA-2's SentencePiece or
    // LLaMA-3's tiktoken file); in a Hugging Face repository's original/ folder the tokenizer.json
    // above it wins. Only the lookup is checked (the weights are empty files here).
    void metaReleaseLookup() {
        const std::string repo = path("meta-repo"), original = repo + "/original";
        fs::create_directories(original);
        for (const char* name : {"params.json", "consolidated.00.pth"}) writeTextAtomically(original + "/" + name, "");
        copyFile(kTokenizers + "llama3/tokenizer.model", original + "/tokenizer.model");
        QCOMPARE(tokenizerFileOfModel(original), original + "/tokenizer.model");
        QCOMPARE(tokenizerFileOfModel(original + "/consolidated.00.pth"), original + "/tokenizer.model");
        copyFile(kTokenizers + "llama3/tokenizer.json", repo + "/tokenizer.json");
        QCOMPARE(tokenizerFileOfModel(original), repo + "/tokenizer.json");
        QCOMPARE(tokenizerFileOfModel(original + "/"), repo + "/tokenizer.json");
        const std::string plain = path("llama-2-7b");
        fs::create_directories(plain);
        for (const char* name : {"params.json", "consolidated.00.pth"}) writeTextAtomically(plain + "/" + name, "");
        QCOMPARE(tokenizerFileOfModel(plain), std::string());
        copyFile(kSpm + "llama_bpe.model", plain + "/tokenizer.model");
        QCOMPARE(tokenizerFileOfModel(plain), plain + "/tokenizer.model");
    }

    // A llama2.c .bin uses tokenizer.bin beside it (run.c's tokenizer), read with the model's vocab_size.
    void llama2cBinUsesTokenizerBinBesideIt() {
        const std::string folder = path("llama2c");
        fs::create_directories(folder);
        copyFile(kBabyModel, folder + "/model5000.bin");
        Run r = npw({"info", QString::fromStdString(folder + "/model5000.bin"), "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), std::string());
        expectFailure({"eval", QString::fromStdString(folder + "/model5000.bin"), "--text", QString::fromStdString(kSpm + "README.md")},
                      {"no tokenizer", "tokenizer.model", "tokenizer.bin", "--tokenizer"});

        copyFile(kSpm + "tok105.bin", folder + "/tokenizer.bin");
        r = npw({"info", QString::fromStdString(folder + "/model5000.bin"), "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), folder + "/tokenizer.bin");
        QCOMPARE(r.result.at("tokenizer_kind").get<std::string>(), std::string("llama2c"));
        const json* cases = nullptr;
        for (const json& b : spmExpected_.at("llama2c"))
            if (b.at("file") == "tok105.bin") cases = &b.at("cases");
        QVERIFY(cases);
        int checked = 0;
        for (const json& c : *cases) {
            const json& t = spmExpected_.at("texts")[c.at("text").get<size_t>()];
            if (!c.at("bos").get<int>() || !t.contains("text") || !usableOnCommandLine(t.at("text")) || checked >= 6) continue;
            QCOMPARE(tokenizeIds({QString::fromStdString(folder + "/model5000.bin")}, t.at("text")), c.at("ids").get<std::vector<int32_t>>());
            ++checked;
        }
        QCOMPARE(checked, 6);
        // tokenizer.bin is read with the vocabulary the model's header gives: no weight is read,
        // so a NaN in the weights changes nothing here, while eval, which reads them, names it.
        const std::vector<int32_t> before = tokenizeIds({QString::fromStdString(folder + "/model5000.bin")}, "Once upon a time");
        {
            std::fstream bin(folder + "/model5000.bin", std::ios::in | std::ios::out | std::ios::binary);
            const float nan = NAN;
            bin.seekp(28 + 4 * 10);
            bin.write(reinterpret_cast<const char*>(&nan), 4);
        }
        QCOMPARE(tokenizeIds({QString::fromStdString(folder + "/model5000.bin")}, "Once upon a time"), before);
        QCOMPARE(npw({"info", QString::fromStdString(folder + "/model5000.bin"), "--json"}).exitCode, 0);
        expectFailure({"eval", QString::fromStdString(folder + "/model5000.bin"), "--text", QString::fromStdString(kSpm + "README.md")},
                      {"'token_embedding_table'", "model5000.bin", "index 10)"});

        // llama2.c's own naming for a model with its own vocabulary: tok{V}.model (SentencePiece)
        // beside model5000.bin (V = 105 from its header), as babyllama ships; tokenizer.bin first.
        copyFile(kSpm + "tok105.model", folder + "/tok105.model");
        r = npw({"info", QString::fromStdString(folder + "/model5000.bin"), "--json"});
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), folder + "/tokenizer.bin");
        fs::remove(folder + "/tokenizer.bin");
        r = npw({"info", QString::fromStdString(folder + "/model5000.bin"), "--json"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), folder + "/tok105.model");
        QCOMPARE(r.result.at("tokenizer_kind").get<std::string>(), std::string("sentencepiece-bpe"));
        fs::rename(folder + "/tok105.model", folder + "/tok512.model");  // another vocabulary's: not taken
        r = npw({"info", QString::fromStdString(folder + "/model5000.bin"), "--json"});
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), std::string());
    }

    // Text on a model without a tokenizer is refused, never silently replaced: generate --prompt
    // (which would otherwise start from BOS), compare --prompt and zeroshot's text choices, each
    // naming the model and the way forward; token ids still run (run.c's first ids after 461).
    void textWithoutTokenizerIsRefused() {
        const QString stories = QString::fromStdString(kData + "/stories260K/stories260K.bin");
        expectFailure({"generate", stories, "--prompt", "Once", "--tokens", "2"},
                      {"stories260K.bin", "no tokenizer", "cannot be encoded", "--tokenizer", "--prompt-ids"});
        expectFailure({"compare", stories, stories, "--prompt", "Once", "--tokens", "2"},
                      {"stories260K.bin", "no tokenizer", "cannot be encoded", "--tokenizer"});
        const std::string task = path("task-no-tokenizer.jsonl");
        writeTextAtomically(task, "{\"context\": \"Once upon\", \"choices\": [\" a time\", \" the\"], \"gold\": 0}\n");
        expectFailure({"zeroshot", stories, "--task", QString::fromStdString("mc:" + task)},
                      {"stories260K.bin", "no tokenizer", "--tokenizer"});
        const Run ids = npw({"generate", stories, "--prompt-ids", "1", "--tokens", "3", "--json"});
        QCOMPARE(ids.exitCode, 0);
        QCOMPARE(ids.result.at("ids").get<std::vector<int32_t>>(), (std::vector<int32_t>{461, 461, 401}));
    }

    // --tokenizer on a model: each kind, on info, eval, export-gguf and prune (which copies the
    // file, byte for byte, under its kind's name).
    void tokenizerFlagOnCommands() {
        const QString model = QString::fromStdString(kBabyModel);
        for (const auto& [file, kind] : std::vector<std::pair<std::string, std::string>>{
                 {kSpm + "tok105.model", "sentencepiece-bpe"}, {kSpm + "tok105.bin", "llama2c"}}) {
            const Run r = npw({"info", model, "--tokenizer", QString::fromStdString(file), "--json"});
            QCOMPARE(r.exitCode, 0);
            QCOMPARE(r.result.at("tokenizer").get<std::string>(), file);
            QCOMPARE(r.result.at("tokenizer_kind").get<std::string>(), kind);
        }
        const std::string text = path("story.txt");
        writeTextAtomically(text, "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
                                  "One day, she saw a big red ball in the park. She ran to get it and played with her friends.\n");
        Run r = npw({"eval", model, "--tokenizer", QString::fromStdString(kSpm + "tok105.model"), "--text",
                     QString::fromStdString(text), "--seqlen", "64", "--json"});
        QCOMPARE(r.exitCode, 0);
        const auto expectedTokens = Tokenizer::fromAnyFile(kSpm + "tok105.model")->encode(readTextFile(text), true).size();
        QCOMPARE(r.result.at("corpus_tokens").get<size_t>(), expectedTokens);
        QVERIFY2(r.result.at("ppl").get<double>() < 3.0, r.out.c_str());  // a TinyStories sentence: this model knows it

        // export-gguf: tok105.model and tok105.bin have no byte pieces and no newline, which
        // llama.cpp needs to load a vocabulary: written with the unknown piece as the newline, and
        // said so (tst_gguf_llamacpp runs both); LLaMA's settings (llama_bpe.model) export
        // without a note; unused pieces are noted.
        for (const std::string file : {"tok105.model", "tok105.bin"}) {
            r = npw({"export-gguf", model, "--tokenizer", QString::fromStdString(kSpm + file), "--out",
                     QString::fromStdString(path("baby.gguf")), "--json"});
            QVERIFY2(r.exitCode == 0, r.err.c_str());
            QCOMPARE(r.result.at("tokenizer").get<std::string>(), std::string("llama"));
            QVERIFY2(r.result.at("notes").dump().find("no newline piece") != std::string::npos, r.out.c_str());
        }
        // A model without a tokenizer: refused, naming --tokenizer and --no-tokenizer; with
        // --no-tokenizer a placeholder vocabulary (ids only), said so; not both flags.
        const QString stories = QString::fromStdString(kData + "/stories260K/stories260K.bin");
        expectFailure({"export-gguf", stories, "--out", QString::fromStdString(path("s.gguf"))},
                      {"stories260K.bin", "no tokenizer", "--tokenizer FILE", "--no-tokenizer"});
        r = npw({"export-gguf", stories, "--no-tokenizer", "--out", QString::fromStdString(path("s.gguf")), "--json"});
        QVERIFY2(r.exitCode == 0, r.err.c_str());
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), std::string("none (placeholder ids)"));
        QVERIFY2(r.result.at("notes").dump().find("token ids only") != std::string::npos, r.out.c_str());
        expectFailure({"export-gguf", stories, "--no-tokenizer", "--tokenizer", QString::fromStdString(kSpm + "tok105.bin"),
                       "--out", QString::fromStdString(path("s2.gguf"))},
                      {"--no-tokenizer", "--tokenizer"});
        r = npw({"export-gguf", "demo:lm", "--tokenizer", QString::fromStdString(kSpm + "llama_bpe.model"), "--out",
                 QString::fromStdString(path("llama-bpe.gguf")), "--json"});
        QVERIFY2(r.exitCode == 0, r.err.c_str());
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), std::string("llama"));
        QCOMPARE(r.result.at("notes"), json::array());
        r = npw({"export-gguf", "demo:lm", "--tokenizer", QString::fromStdString(kSpm + "unused_bpe.model"), "--out",
                 QString::fromStdString(path("unused-bpe.gguf")), "--json"});
        QVERIFY2(r.exitCode == 0, r.err.c_str());
        QVERIFY2(r.result.at("notes").dump().find("unused pieces") != std::string::npos, r.out.c_str());

        const std::string out = path("pruned-baby");
        r = npw({"prune", model, "--tokenizer", QString::fromStdString(kSpm + "tok105.model"), "--method", "magnitude",
                 "--ratio", "0.2", "--calib", QString::fromStdString(text), "--nsamples", "2", "--seqlen", "16", "--out",
                 QString::fromStdString(out), "--json"});
        QVERIFY2(r.exitCode == 0, r.err.c_str());
        QCOMPARE(fileBytes(out + "/tokenizer.model"), fileBytes(kSpm + "tok105.model"));
        QVERIFY(!fs::exists(out + "/tokenizer.json"));
        r = npw({"info", QString::fromStdString(out), "--json"});
        QCOMPARE(r.result.at("tokenizer").get<std::string>(), out + "/tokenizer.model");
    }

    void badTokenizerFilesAreNamed() {
        const QString model = QString::fromStdString(kBabyModel);
        const std::string garbage = path("garbage.model");
        writeTextAtomically(garbage, "this is not a tokenizer\n");
        expectFailure({"info", model, "--tokenizer", QString::fromStdString(garbage)},
                      {QString::fromStdString(garbage), "none of the tokenizer files", "tokenizer.model"});
        expectFailure({"eval", model, "--tokenizer", QString::fromStdString(path("missing.model")), "--text", QString::fromStdString(garbage)},
                      {"missing.model", "no such file"});
        // LLaMA-2's 32,000 tokens on a model of 105.
        expectFailure({"info", model, "--tokenizer", QString::fromStdString(kTokenizers + "llama2/tokenizer.json")},
                      {"llama2/tokenizer.json", "32000 tokens", "105"});
        // A tokenizer.model cut short: the protobuf reader names the file and field.
        const std::string truncated = path("truncated.model");
        const std::string whole = fileBytes(kSpm + "llama_bpe.model");
        writeFileAtomically(truncated, [&](std::ostream& o) { o.write(whole.data(), 5000); });
        expectFailure({"tokenize", QString::fromStdString(truncated), "--string", "x"}, {QString::fromStdString(truncated)});
        // A tokenizer.bin with fewer tokens (1,000) than the model's vocabulary (demo:lm's 2,048).
        expectFailure({"info", "demo:lm", "--tokenizer", QString::fromStdString(kSpm + "llama_bpe.bin")}, {"llama_bpe.bin"});
        // export-gguf: a unigram model and a charsmap are refused by name.
        expectFailure({"export-gguf", "demo:lm", "--tokenizer", QString::fromStdString(kSpm + "unigram_bytes.model"), "--out",
                       QString::fromStdString(path("u.gguf"))},
                      {"unigram_bytes.model", "unigram"});
        expectFailure({"export-gguf", "demo:lm", "--tokenizer", QString::fromStdString(kSpm + "default_bpe.model"), "--out",
                       QString::fromStdString(path("d.gguf"))},
                      {"default_bpe.model", "charsmap"});
        expectFailure({"tokenize", "demo:lm"}, {"--text", "--string"});
    }

    // ---- export-gguf of a SentencePiece tokenizer.model -------------------------------------------

    void ggufMetadataOfTokenizerModel() {
        const auto spm = SentencePieceTokenizer::fromFile(kSpm + "llama_bpe.model");
        std::string modelName;
        std::vector<std::string> notes;
        const GgufMetadata kv = ggufTokenizerMetadata(kSpm + "llama_bpe.model", 1003, &modelName, &notes);
        QCOMPARE(modelName, std::string("llama"));
        QVERIFY(notes.empty());  // LLaMA's settings: llama.cpp represents them exactly
        std::map<std::string, const GgufValue*> byKey;
        for (const auto& [key, value] : kv) byKey[key] = &value;
        QCOMPARE(byKey.at("tokenizer.ggml.model")->string, std::string("llama"));
        const auto& tokens = byKey.at("tokenizer.ggml.tokens")->elements;
        QCOMPARE(tokens.size(), size_t(1003));
        for (int32_t i = 0; i < spm->vocabSize(); ++i) {
            QCOMPARE(tokens[i].string, spm->pieces()[i].text);
            QCOMPARE(static_cast<float>(byKey.at("tokenizer.ggml.scores")->elements[i].real), spm->pieces()[i].score);
            QCOMPARE(byKey.at("tokenizer.ggml.token_type")->elements[i].integer, static_cast<int64_t>(spm->pieces()[i].type));
        }
        QCOMPARE(tokens[1002].string, std::string("[PAD1002]"));
        QCOMPARE(byKey.at("tokenizer.ggml.token_type")->elements[1002].integer, 5ll);
        QCOMPARE(byKey.at("tokenizer.ggml.bos_token_id")->integer, 1ll);
        QCOMPARE(byKey.at("tokenizer.ggml.unknown_token_id")->integer, 0ll);
        QCOMPARE(byKey.at("tokenizer.ggml.add_space_prefix")->boolean, true);
        QVERIFY(!ggufTokenizerMetadata(kSpm + "nodummy_bpe.model", 400).empty());
        for (const auto& [key, value] : ggufTokenizerMetadata(kSpm + "nodummy_bpe.model", 400))
            if (key == "tokenizer.ggml.add_space_prefix") QCOMPARE(value.boolean, false);
    }
};

QTEST_GUILESS_MAIN(TestCliTokenizer)
#include "tst_cli_tokenizer.moc"
