// The third round of hostile inputs through the real CLI: files that inflate to gigabytes, a
// 2 GiB text of NUL bytes, a named pipe where a shard belongs, a tiktoken token of hundreds of
// KB, a zero-shot item of 100,000 choices or an empty one, integer weights in a ckpt.pt, a
// Meta shard of another model, denormal config values, NaN flags, a damaged tokenizer given as
// npw tokenize's file. Each must end in exit 1 with a message naming the file and the field,
// within 60 s and 4 GiB of peak resident memory — both measured here, on the npw process itself
// (fork + wait4: its own rusage, not the suite's), and a run past 60 s is killed and fails.
// Every hostile file is built in a temporary folder at test time; the 2 GiB file is sparse
// (ftruncate), the gzip bombs are concatenated gzip members of one compressed megabyte.
#include "core/io/safetensors.h"
#include "core/text/tokenizer.h"
#include "core/util/error.h"
#include "error_of.h"
#include "core/util/paths.h"

#include <nlohmann/json.hpp>

#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

using namespace npw;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr double kSecondsLimit = 60.0;
constexpr double kMemoryLimitMiB = 4096.0;

struct Outcome {
    int rc = -1;  // exit status; -1 when killed
    bool timedOut = false;
    double seconds = 0;
    double maxRssMiB = 0;  // the npw process's peak resident memory (wait4's ru_maxrss)
    QString out, err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void writeFile(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// `copies` gzip members, each `chunk` compressed: a file of copies × ~1-2 KB that inflates to
// copies × chunk.size() (gzip readers, Python's and zlib's gzread, read every member).
void writeGzipBomb(const std::string& path, const std::string& chunk, int copies) {
    uLongf bound = compressBound(static_cast<uLong>(chunk.size())) + 64;
    std::string member(bound, '\0');
    z_stream zs{};
    deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);  // +16: a gzip header and trailer
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(chunk.data()));
    zs.avail_in = static_cast<uInt>(chunk.size());
    zs.next_out = reinterpret_cast<Bytef*>(member.data());
    zs.avail_out = static_cast<uInt>(member.size());
    const int rc = deflate(&zs, Z_FINISH);
    member.resize(zs.total_out);
    deflateEnd(&zs);
    QVERIFY(rc == Z_STREAM_END);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < copies; ++i) out.write(member.data(), static_cast<std::streamsize>(member.size()));
}

// JSON lines {"text": "aaaa…"} filling about 1 MiB.
std::string jsonLinesChunk(const char* field = "text") {
    const std::string line = std::string("{\"") + field + "\": \"" + std::string(1000, 'a') + "\"}\n";
    std::string chunk;
    while (chunk.size() + line.size() <= (size_t(1) << 20)) chunk += line;
    return chunk;
}

} // namespace

class TestCliHostile : public QObject {
    Q_OBJECT

    std::string npw_;
    QTemporaryDir tmp_;

    std::string path(const std::string& name) const { return (fs::path(tmp_.path().toStdString()) / name).string(); }

    // Runs npw with `args`; its stdout and stderr go to files. Killed after 2 × the limit (the
    // check below fails it at 1 ×, and a hang must not hang the suite).
    Outcome npw(const QStringList& args) {
        static int runs = 0;
        const std::string outPath = path("run" + std::to_string(++runs) + ".out"), errPath = outPath + ".err";
        std::vector<std::string> argv = {npw_};
        for (const QString& a : args) argv.push_back(a.toStdString());
        std::vector<char*> cargv;
        cargv.reserve(argv.size() + 1);
        for (std::string& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        const auto start = std::chrono::steady_clock::now();
        const pid_t pid = fork();
        if (pid == 0) {
            const int o = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int e = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int in = ::open("/dev/null", O_RDONLY);
            dup2(o, 1);
            dup2(e, 2);
            dup2(in, 0);
            execv(cargv[0], cargv.data());
            _exit(127);
        }
        Outcome r;
        int status = 0;
        struct rusage usage {};
        for (;;) {
            const pid_t done = wait4(pid, &status, WNOHANG, &usage);
            if (done == pid) break;
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (elapsed > 2 * kSecondsLimit && !r.timedOut) {
                r.timedOut = true;
                kill(pid, SIGKILL);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.maxRssMiB = double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
        r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        r.out = QString::fromStdString(slurp(outPath));
        r.err = QString::fromStdString(slurp(errPath));
        return r;
    }

    // Exit 1, every word in the message, inside the time and memory bounds.
    void expectRefused(const QStringList& args, const QStringList& words) {
        const Outcome r = npw(args);
        const QString what = "npw " + args.join(' ') + " → exit " + QString::number(r.rc) + " in " +
                             QString::number(r.seconds, 'f', 1) + " s, " + QString::number(r.maxRssMiB, 'f', 0) +
                             " MiB: " + r.err.left(600);
        qInfo("%s", qPrintable(what));
        QVERIFY2(!r.timedOut && r.seconds < kSecondsLimit, qPrintable("too slow: " + what));
        QVERIFY2(r.maxRssMiB < kMemoryLimitMiB, qPrintable("too much memory: " + what));
        QVERIFY2(r.rc == 1, qPrintable(what));
        QVERIFY2(!r.err.contains("internal error"), qPrintable(what));
        for (const QString& w : words) QVERIFY2(r.err.contains(w), qPrintable(what + "  (missing: " + w + ")"));
    }

    // A copy of demo:lm's folder (config.json, tokenizer.json, model.safetensors).
    std::string demoCopy(const std::string& name) {
        std::string dir = path(name);
        fs::create_directories(dir);
        for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
            fs::copy_file(resourcesDir() + "/demo/lm/" + f, dir + "/" + f, fs::copy_options::overwrite_existing);
        return dir;
    }

private slots:
    void initTestCase() {
        npw_ = (QCoreApplication::applicationDirPath() + "/../app/npw").toStdString();
        if (!QFileInfo::exists(QString::fromStdString(npw_))) QSKIP("the npw binary is not built in this tree");
        QVERIFY(tmp_.isValid());
    }

    // ~1-4 MB of gzip that inflates to 2-4 GiB: refused after reading at most 16 MiB of it (the
    // ratio check), with the file named. C4's evaluation needs only its first 1100 documents:
    // a bomb's first megabyte holds them, so it is answered, not refused.
    void gzipBombsAreRefusedEarly() {
        fs::create_directories(path("c4bomb"));
        const std::string train = path("c4bomb/c4-train.00000-of-01024.json.gz");
        writeGzipBomb(train, jsonLinesChunk(), 2048);  // 2 GiB of JSON lines
        QVERIFY(fs::file_size(train) < (uintmax_t(8) << 20));
        expectRefused({"prune", "demo:lm", "--method", "flap", "--ratio", "0.2", "--out", QString::fromStdString(path("p1")),
                       "--calib", QString::fromStdString("c4:" + train)},
                      {"c4-train.00000-of-01024.json.gz", "inflates more than 100-fold"});
        const std::string wiki = path("wiki-bomb-test.jsonl.gz");
        writeGzipBomb(wiki, jsonLinesChunk(), 4096);  // 4 GiB
        expectRefused({"eval", "demo:lm", "--dataset", QString::fromStdString("wikitext2:" + wiki)},
                      {"wiki-bomb-test.jsonl.gz", "inflates more than 100-fold"});
        const std::string validation = path("c4bomb/c4-validation.00000-of-00008.json.gz");
        writeGzipBomb(validation, jsonLinesChunk(), 4096);
        const Outcome r = npw({"eval", "demo:lm", "--dataset", QString::fromStdString("c4:" + validation), "--seqlen", "8",
                               "--max-windows", "2", "--json"});
        qInfo("c4 evaluation of a 4 GiB bomb: exit %d in %.1f s, %.0f MiB", r.rc, r.seconds, r.maxRssMiB);
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QVERIFY(r.seconds < kSecondsLimit && r.maxRssMiB < kMemoryLimitMiB);
        const Json j = Json::parse(r.out.toStdString());
        QCOMPARE(j["dataset"]["rows"].get<int64_t>(), int64_t(1100));
    }

    // A 2 GiB file of NUL bytes (sparse: no disk) as --text, --calib and a data set: refused
    // before it is read (its size) or at its first byte (a NUL), naming the file.
    void nulFilesAreRefusedBeforeReading() {
        const std::string big = path("nul-2g.txt");
        {
            const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            QVERIFY(fd >= 0);
            QVERIFY(ftruncate(fd, off_t(2) << 30) == 0);
            ::close(fd);
        }
        const QString bigArg = QString::fromStdString(big);
        expectRefused({"eval", "demo:lm", "--text", bigArg}, {"evaluation text", "nul-2g.txt", "2147483648 bytes", "256 MiB"});
        expectRefused({"prune", "demo:lm", "--method", "flap", "--ratio", "0.2", "--out", QString::fromStdString(path("p2")),
                       "--calib", bigArg},
                      {"calibration text", "nul-2g.txt", "2147483648 bytes"});
        expectRefused({"eval", "demo:lm", "--ids", bigArg}, {"token id file", "nul-2g.txt", "2147483648 bytes"});
        const std::string raw = path("nul-2g.test.raw");
        fs::rename(big, raw);
        expectRefused({"eval", "demo:lm", "--dataset", QString::fromStdString("wikitext2:" + raw)},
                      {"nul-2g.test.raw", "binary, not text", "NUL byte at offset 0"});
        // Under the size bound, a NUL anywhere: refused where it is.
        const std::string small = path("nul-later.txt");
        writeFile(small, std::string(100000, 'a') + std::string(10, '\0') + "tail");
        expectRefused({"eval", "demo:lm", "--text", QString::fromStdString(small)},
                      {"nul-later.txt", "binary, not text", "NUL byte at offset 100000"});
    }

    // A named pipe wherever npw reads a file: refused at once (open() never waits for a writer).
    void fifosAreRefusedNotWaitedOn() {
        const std::string dir = demoCopy("fifo-model");
        const auto lm = SafeTensorsFile::open(resourcesDir() + "/demo/lm/model.safetensors");
        Json index = {{"metadata", Json::object()}, {"weight_map", Json::object()}};
        for (const std::string& name : lm->names()) index["weight_map"][name] = "model-00001-of-00001.safetensors";
        fs::remove(dir + "/model.safetensors");
        writeFile(dir + "/model.safetensors.index.json", index.dump());
        QVERIFY(mkfifo((dir + "/model-00001-of-00001.safetensors").c_str(), 0644) == 0);
        expectRefused({"info", QString::fromStdString(dir)},
                      {"model-00001-of-00001.safetensors", "a FIFO (named pipe), not a regular file"});
        const std::string fifo = path("pipe.test.raw");
        QVERIFY(mkfifo(fifo.c_str(), 0644) == 0);
        const QString f = QString::fromStdString(fifo);
        expectRefused({"eval", "demo:lm", "--text", f}, {"pipe.test.raw", "FIFO"});
        expectRefused({"eval", "demo:lm", "--dataset", "wikitext2:" + f}, {"pipe.test.raw", "FIFO"});
        expectRefused({"zeroshot", "demo:lm", "--task", "mc:" + f}, {"pipe.test.raw", "FIFO"});
        expectRefused({"tokenize", f, "--string", "a"}, {"pipe.test.raw", "FIFO"});
        expectRefused({"eval", "demo:lm", "--tokenizer", f, "--text", f}, {"pipe.test.raw", "FIFO"});
    }

    // A tiktoken tokenizer.model with one token of 300 KB: refused at its line, not minutes of
    // splitting it at every byte.
    void tiktokenLongTokenIsRefused() {
        const std::string real = slurp(NPW_TEST_DATA "/tokenizers/llama3/tokenizer.model");
        QVERIFY(!real.empty());
        // base64 of 300,000 'a' bytes (300,000 is a multiple of 3: no padding).
        const std::string longToken(400000, 'Y');  // "YWFh" repeats as "aaa"; any base64 letters decode
        const std::string file = path("long-token/tokenizer.model");
        fs::create_directories(path("long-token"));
        writeFile(file, real.substr(0, real.find('\n', 1000) + 1) + longToken + " 127999\n" + real.substr(real.find('\n', 1000) + 1));
        expectRefused({"tokenize", QString::fromStdString(file), "--string", "hello"},
                      {"tokenizer.model", "tiktoken", "bytes long", "1024 bytes"});
    }

    // Zero-shot items: 100,000 choices, and a choice that is the empty string.
    void zeroShotChoicesAreBounded() {
        Json many = {{"context", "Pick one:"}, {"gold", 0}, {"choices", Json::array()}};
        for (int i = 0; i < 100000; ++i) many["choices"].push_back("choice " + std::to_string(i));
        const std::string manyFile = path("many-choices.jsonl");
        writeFile(manyFile, many.dump() + "\n");
        expectRefused({"zeroshot", "demo:lm", "--task", QString::fromStdString("mc:" + manyFile)},
                      {"many-choices.jsonl", "line 1", "100000 choices", "at most 16"});
        const std::string emptyFile = path("empty-choice.jsonl");
        writeFile(emptyFile, R"({"context": "The sky is", "choices": ["blue", "green"], "gold": 0})" "\n"
                             R"({"context": "The sky is", "choices": ["blue", ""], "gold": 1})" "\n");
        expectRefused({"zeroshot", "demo:lm", "--task", QString::fromStdString("mc:" + emptyFile)},
                      {"empty-choice.jsonl", "line 2", "choice 1", "the empty string"});
    }

    // llama2.c's ckpt.pt with int32 weights (tests/fixtures/make_int32_checkpoint.py).
    void integerWeightsAreRefused() {
        const QString ckpt = NPW_TEST_DATA "/torch_checkpoints/llama2c_int32_weights.pt";
        const std::string ids = path("ids.txt");
        writeFile(ids, "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
        expectRefused({"eval", ckpt, "--ids", QString::fromStdString(ids), "--seqlen", "8"},
                      {"llama2c_int32_weights.pt", "tok_embeddings.weight", "has dtype I32", "floating-point"});
    }

    // consolidated.01.pth of another model of the family (LLaMA-3.1's beside LLaMA-2's).
    void metaShardOfAnotherModelIsNamed() {
        const std::string dir = path("meta-mixed");
        fs::create_directories(dir);
        const std::string llama2 = NPW_TEST_DATA "/family_ref/meta_llama2_2shards/";
        const std::string llama31 = NPW_TEST_DATA "/family_ref/meta_llama31_2shards/";
        fs::copy_file(llama2 + "params.json", dir + "/params.json");
        fs::copy_file(llama2 + "consolidated.00.pth", dir + "/consolidated.00.pth");
        fs::copy_file(llama31 + "consolidated.01.pth", dir + "/consolidated.01.pth");
        expectRefused({"info", QString::fromStdString(dir)},
                      {"consolidated.01.pth", "tok_embeddings.weight", "consolidated.00.pth", "has shape",
                       "model-parallel shards hold equal pieces"});
    }

    // Denormal and absurd real values in config.json.
    void configRealsAreNormalAndInRange_data() {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("named");
        QTest::newRow("rope_scaling factor 1e-320")
            << "rope_scaling" << R"({"rope_type": "linear", "factor": 1e-320})" << "rope_scaling factor";
        QTest::newRow("rope_theta 1e-320") << "rope_theta" << "1e-320" << "rope_theta";
        QTest::newRow("rms_norm_eps 1e-320") << "rms_norm_eps" << "1e-320" << "rms_norm_eps";
        QTest::newRow("rms_norm_eps 1e300") << "rms_norm_eps" << "1e300" << "rms_norm_eps";
        QTest::newRow("llama3 low_freq_factor 1e-310")
            << "rope_scaling"
            << R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1e-310, "high_freq_factor": 4, "original_max_position_embeddings": 8192})"
            << "low_freq_factor";
    }
    void configRealsAreNormalAndInRange() {
        QFETCH(QString, field);
        QFETCH(QString, value);
        QFETCH(QString, named);
        static int copies = 0;
        const std::string dir = demoCopy("config-" + std::to_string(++copies));
        Json config = Json::parse(slurp(dir + "/config.json"));
        config[field.toStdString()] = Json::parse(value.toStdString());
        writeFile(dir + "/config.json", config.dump());
        expectRefused({"eval", QString::fromStdString(dir), "--text", NPW_TEST_DATA "/text_datasets/wikitext-2-raw/wiki.test.raw"},
                      {"config", named, "normal, finite number from"});
    }

    // Real-valued flags refuse NaN, and ranged flags their outside.
    void flagsRefuseNanAndOutOfRange() {
        expectRefused({"prune", "demo:lm", "--alpha", "nan", "--out", QString::fromStdString(path("p3"))}, {"--alpha", "nan"});
        expectRefused({"generate", "demo:lm", "--prompt", "a", "--temperature", "nan"}, {"--temperature", "nan"});
        // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): NPW_TEST_DATA "/..." is one path, the macro joined to it
        expectRefused({"eval", "demo:lm", "--text", NPW_TEST_DATA "/text_datasets/wikitext-2-raw/wiki.test.raw", "--seqlen", "0"},
                      {"--seqlen", "0"});
    }

    // npw tokenize FILE with a damaged tokenizer.bin / tokenizer.model: the tokenizer reader's
    // own error, as --tokenizer gives it, never "has no tokenizer beside it".
    void damagedTokenizerFilesGetTheReadersError() {
        for (const char* source : {"tok105.bin", "tok105.model"}) {
            const std::string whole = slurp(NPW_TEST_DATA "/sentencepiece/" + std::string(source));
            QVERIFY(whole.size() > 100);
            const std::string dir = path(std::string("damaged-") + source);
            fs::create_directories(dir);
            const std::string file = dir + (std::string(source).find(".bin") != std::string::npos ? "/tokenizer.bin" : "/tokenizer.model");
            writeFile(file, whole.substr(0, whole.size() / 2));
            // The reader's own message, as Tokenizer::fromAnyFile (what --tokenizer reads through) gives it.
            const QString readers = test::errorOf([&] { Tokenizer::fromAnyFile(file); });
            QVERIFY2(!readers.isEmpty() && readers.contains(QString::fromStdString(file)), qPrintable(readers));
            expectRefused({"tokenize", QString::fromStdString(file), "--string", "hello"}, {readers});
            QVERIFY(!npw({"tokenize", QString::fromStdString(file), "--string", "hello"}).err.contains("has no tokenizer"));
        }
    }
};

QTEST_GUILESS_MAIN(TestCliHostile)
#include "tst_cli_hostile.moc"
