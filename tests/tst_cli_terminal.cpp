// The terminal as a user sees it: `npw sweep` draws its progress bar on stderr and prints its
// table on stdout, and in a terminal both land on one screen. Run under a pseudo-terminal
// (forkpty: stdout and stderr both the terminal, so the bar is drawn) and through a pipe with
// the two merged (no bar), the screen's lines, as a terminal would show them (carriage returns
// overwrite, newlines advance), must be the table's header, well-formed rows with every column
// separated by at least two spaces, and finished progress lines; never a row on a bar's line,
// never two columns run together (the bug: "128     1281.633e-04": seqlen 128, λ 1.633e-04).
// Also the start: `npw --help`, `npw COMMAND --help`, --version and an unknown command answer
// without loading LibTorch (the launcher, app/launcher), with npw-run's own texts, and every other
// command loads it once (glibc's loader reports each library initialisation under LD_DEBUG=libs),
// but `npw tokenize` and `npw info` of a llama2.c .bin, a Hugging Face folder or a GGUF file, which
// need no tensor (npw-text).
#include "app/npw/commands.h"  // sweepSummaryText
#include "app/npw/text_table.h"
#include "core/io/safetensors.h"
#include "core/util/paths.h"

#include <ATen/ATen.h>

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStandardPaths>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <functional>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// The bytes a program writes to a terminal, run through the two controls npw uses.
QStringList screenLines(const QByteArray& bytes) {
    QStringList lines;
    QString current;  // the line the cursor is on
    int col = 0;
    const QString text = QString::fromUtf8(bytes);
    for (const QChar ch : text) {
        if (ch == '\r') {
            col = 0;
        } else if (ch == '\n') {
            lines << current;
            current.clear();
            col = 0;
        } else {
            if (col < current.size()) current[col] = ch;
            else current += ch;
            ++col;
        }
    }
    if (!current.isEmpty()) lines << current;
    for (QString& l : lines) {
        while (l.endsWith(' ')) l.chop(1);
    }
    return lines;
}

} // namespace

class TestCliTerminal : public QObject {
    Q_OBJECT
    QString npw_;
    QTemporaryDir dir_;
    QStringList sweepArgs_;

    // Runs npw with stdout and stderr on one pseudo-terminal; returns everything written.
    QByteArray runOnTerminal(const QStringList& args, int* exitCode) {
        std::vector<std::string> storage{npw_.toStdString()};
        for (const QString& a : args) storage.push_back(a.toStdString());
        std::vector<char*> argv;
        argv.reserve(storage.size() + 1);
        for (std::string& s : storage) argv.push_back(s.data());
        argv.push_back(nullptr);
        struct winsize size = {50, 200, 0, 0};
        int master = -1;
        const pid_t pid = forkpty(&master, nullptr, nullptr, &size);
        if (pid < 0) qFatal("forkpty failed: %s", strerror(errno));
        if (pid == 0) {
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        QByteArray out;
        char buffer[4096];
        for (;;) {
            const ssize_t n = ::read(master, buffer, sizeof buffer);
            if (n > 0) out.append(buffer, static_cast<int>(n));
            else if (n < 0 && errno == EINTR) continue;
            else break;  // EIO once the child has exited and closed the terminal
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        ::close(master);
        *exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return out;
    }

    // Every line of the screen is the header, a table row, a progress line, a warning or the
    // summary; rows have their nine columns, two spaces or more apart.
    void checkTable(const QStringList& lines, bool expectBar) {
        static const QRegularExpression row(
            R"(^(\S+) {2,}(\d\.\d\d) {2,}(\d+) {2,}(\d+) {2,}(\d+) {2,}(-|\d\.\d{3}e[-+]\d\d) {2,}(\S+) {2,}(\d\.\d{3}) {2,}(\d+\.\d\d)$)");
        static const QRegularExpression bar(R"(\[[# ]{30}\] +\d+\.\d%  eta +\d+s$)");
        int header = 0, rows = 0, finiteLambda = 0, bars = 0;
        bool summary = false;
        for (const QString& line : lines) {
            if (line.isEmpty()) continue;
            if (line.startsWith("mean ± std over seeds")) {
                summary = true;
                continue;
            }
            if (summary) continue;  // the summary table: checked by its own tests
            if (line.startsWith("warning: ") || line.startsWith("note: ")) continue;
            if (line == "method              ratio  seed  samples  seqlen     lambda  eval        achieved         ppl") {
                ++header;
                continue;
            }
            if (bar.match(line).hasMatch()) {
                QVERIFY2(line.indexOf('[') == line.lastIndexOf('['), qPrintable("two bars on one line: " + line));
                ++bars;
                continue;
            }
            const QRegularExpressionMatch m = row.match(line);
            QVERIFY2(m.hasMatch(), qPrintable("a line that is neither a row, the header nor a progress line: '" + line + "'"));
            ++rows;
            finiteLambda += m.captured(6) != "-";
        }
        QCOMPARE(header, 1);
        QCOMPARE(rows, 1 + 2 * 2);  // dense, then 2 methods × 2 seeds
        QVERIFY(finiteLambda >= 2);  // numerical's λ, the wide column of the bug
        QVERIFY(summary);
        if (expectBar) QVERIFY2(bars > 0, "no finished progress line: was the bar drawn at all?");
        else QCOMPARE(bars, 0);
    }

    // Folders in a Hugging Face folder's form that npw info must read or refuse as loading does,
    // each `from`'s config.json with other tensors or bytes: biases whose zeros decide the
    // structure, tensors left over, and hostile files (truncated, a lying header length, deep
    // nesting, an index that lies). Also dir_/hf-tied-head-stored: a tied folder that stores its
    // classifier anyway (npw-run's: only the values say whether it is the embedding).
    QString writeHostileHfFolders(const QString& from) {
        using Tensors = std::vector<std::pair<std::string, at::Tensor>>;
        auto tensorsOf = [](const QString& file) {
            Tensors out;
            const auto st = npw::SafeTensorsFile::open(file.toStdString());
            for (const std::string& name : st->names()) out.emplace_back(name, st->load(name));
            return out;
        };
        QString root = dir_.filePath("hf-hostile");
        auto folder = [&](const QString& name, const QString& source = QString()) {
            QString path = name.startsWith('/') ? name : root + "/" + name;
            QDir().mkpath(path);
            QFile::copy((source.isEmpty() ? from : source) + "/config.json", path + "/config.json");
            return path;
        };
        auto write = [](const QString& path, const QByteArray& bytes) {
            QFile f(path);
            if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(path));
        };
        auto withHeader = [](const QByteArray& header, const QByteArray& rest = QByteArray()) {
            QByteArray bytes(8, '\0');
            const quint64 n = static_cast<quint64>(header.size());
            std::memcpy(bytes.data(), &n, 8);
            return bytes + header + rest;
        };
        const Tensors base = tensorsOf(from + "/model.safetensors");
        auto width = [&](const std::string& name) {
            for (const auto& [n, t] : base)
                if (n == name) return t.size(0);
            qFatal("no tensor %s", name.c_str());
        };
        auto edited = [&](const QString& name, const std::function<void(Tensors&)>& edit) {
            Tensors t = base;
            edit(t);
            npw::writeSafeTensors((folder(name) + "/model.safetensors").toStdString(), t);
        };
        edited("zero-qkv-biases", [&](Tensors& t) {  // npw's FLAP exports: zeros, dropped
            for (int layer = 0; layer < 2; ++layer)
                for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
                    const std::string prefix = "model.layers." + std::to_string(layer) + ".self_attn." + proj;
                    t.emplace_back(prefix + ".bias", at::zeros({width(prefix + ".weight")}));
                }
        });
        edited("nonzero-gate-bias", [&](Tensors& t) {
            t.emplace_back("model.layers.0.mlp.gate_proj.bias", at::ones({width("model.layers.0.mlp.gate_proj.weight")}));
        });
        edited("nonzero-q-bias-in-one-layer", [&](Tensors& t) {
            t.emplace_back("model.layers.0.self_attn.q_proj.bias", at::ones({width("model.layers.0.self_attn.q_proj.weight")}));
        });
        edited("unexpected-tensor", [&](Tensors& t) { t.emplace_back("model.extra.weight", at::zeros({3})); });
        edited("first-tensor-bf16-one-row", [&](Tensors& t) { t[0].second = t[0].second.narrow(0, 0, 1).to(at::kBFloat16); });
        QFile original(from + "/model.safetensors");
        if (!original.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(original.fileName()));
        const QByteArray whole = original.readAll();
        write(folder("truncated") + "/model.safetensors", whole.left(whole.size() / 2));
        QByteArray lying = whole;
        const quint64 huge = quint64(1) << 40;
        std::memcpy(lying.data(), &huge, 8);
        write(folder("lying-header-length") + "/model.safetensors", lying);
        write(folder("deep-nesting") + "/model.safetensors",
              withHeader("{\"x\":" + QByteArray(100000, '[') + QByteArray(100000, ']') + "}"));
        write(folder("empty-file") + "/model.safetensors", QByteArray());
        // An index that lists a tensor its shard lacks, and one whose shard lies outside the folder.
        const QString sharded = from + "_sharded";
        for (const char* name : {"index-lists-a-missing-tensor", "index-escapes-the-folder"}) {
            const QString path = folder(name, sharded);
            for (const QString& shard : QDir(sharded).entryList({"model-*.safetensors"}))
                QFile::copy(sharded + "/" + shard, path + "/" + shard);
            QFile index(sharded + "/model.safetensors.index.json");
            if (!index.open(QIODevice::ReadOnly)) qFatal("cannot read the index");
            nlohmann::json j = nlohmann::json::parse(index.readAll().toStdString());
            if (QString(name).contains("missing")) j["weight_map"]["model.extra.weight"] = "model-00001-of-00002.safetensors";
            else j["weight_map"]["model.embed_tokens.weight"] = "../model-00001-of-00002.safetensors";
            write(path + "/model.safetensors.index.json", QByteArray::fromStdString(j.dump(2)));
        }
        // Tied, with the classifier stored anyway (equal to the embedding).
        const QString tiedFrom = QStringLiteral(NPW_TEST_DATA) + "/llama_ref/gqa_halfsplit_tied";
        Tensors tied = tensorsOf(tiedFrom + "/model.safetensors");
        for (const auto& [n, t] : Tensors(tied))
            if (n == "model.embed_tokens.weight") tied.emplace_back("lm_head.weight", t.clone());
        npw::writeSafeTensors((folder(dir_.filePath("hf-tied-head-stored"), tiedFrom) + "/model.safetensors").toStdString(), tied);
        return root;
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QVERIFY(dir_.isValid());
        const QString calib = QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-ot.txt");
        const QString eval = QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-nt.txt");
        sweepArgs_ = {"sweep",     "demo:lm", "--methods", "numerical,magnitude", "--ratios", "0.2", "--seeds", "2",
                      "--nsamples", "2",      "--seqlen",  "128", "--calib", calib, "--eval", "text:" + eval,
                      "--eval-seqlen", "64", "--max-windows", "3"};
    }

    void sweepOnATerminal() {
        int exitCode = -1;
        const QByteArray raw = runOnTerminal(sweepArgs_, &exitCode);
        QVERIFY2(exitCode == 0, raw.constData());
        QVERIFY2(raw.contains("eta"), "the progress bar was not drawn on the terminal");  // else the test proves nothing
        checkTable(screenLines(raw), /*expectBar=*/true);
    }

    // The summary over seeds sizes its columns from their content: a perplexity of 10^9 (a model
    // pruned to pieces), a long method and data set name, a zero-shot and a speed row. Every cell
    // appears whole, two spaces or more after its neighbour, left-aligned columns start and
    // right-aligned ones end at one position on every line. (The fixed widths before ran
    // "0.300" and "1234567890.25" together.)
    void summaryColumnsNeverTouch() {
        std::vector<npw::SweepSummaryRow> summary(5);
        const char* methods[] = {"dense", "numerical", "a-very-long-method-name-x", "magnitude", "numerical"};
        const char* evals[] = {"text:kjv-nt.txt", "wikitext2:wiki.test.raw", "text:kjv-nt.txt", "piqa", "speed"};
        const double ppl[] = {1.7584, 1234567890.25, 61029.5, NAN, NAN};
        for (size_t i = 0; i < summary.size(); ++i) {
            npw::SweepSummaryRow& r = summary[i];
            r.first.method = methods[i];
            r.first.ratio = 0.1 * static_cast<double>(i);
            r.first.evalSet = evals[i];
            r.count = i == 1 ? 3 : 1;
            r.pplMean = ppl[i];
            r.pplStd = 12345.678;
            r.achievedRatioMean = 0.3;
            r.accMean = i == 3 ? 0.61 : NAN;
            r.decodeMean = i == 4 ? 5354 : NAN;
            r.decodeSlowest = 5000;
            r.decodeFastest = 5400;
            r.first.speedRuns = 3;
            r.weightsMiBMean = 1.5;
        }
        const QStringList lines = QString::fromStdString(npw::cli::sweepSummaryText(summary)).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 6);  // the header and the rows
        const QList<QStringList> cells = {
            {"method", "ratio", "eval", "achieved", "ppl"},
            {"dense", "0.00", "text:kjv-nt.txt", "0.300", "1.76", "(1 seed)"},
            {"numerical", "0.10", "wikitext2:wiki.test.raw", "0.300", "1234567890.25", "± 12345.68"},
            {"a-very-long-method-name-x", "0.20", "text:kjv-nt.txt", "0.300", "61029.50", "(1 seed)"},
            {"magnitude", "0.30", "piqa", "0.300", "", "acc 0.6100 (1 seed)"},
            {"numerical", "0.40", "speed", "0.300", "", "decode 5354 tok/s (median of 3 runs, 5000–5400), weights 1.50 MiB"}};
        const bool right[] = {false, true, false, true, true, false};
        QMap<int, qsizetype> edge;  // column → its start (left-aligned) or end (right-aligned)
        for (int row = 0; row < lines.size(); ++row) {
            const QString& line = lines[row];
            qsizetype at = 0;
            for (int col = 0; col < cells[row].size(); ++col) {
                const QString& cell = cells[row][col];
                if (cell.isEmpty()) continue;
                const qsizetype found = line.indexOf(cell, at);
                QVERIFY2(found >= 0, qPrintable("'" + cell + "' is not whole in: " + line));
                if (col > 0) QVERIFY2(found >= at + 2 && line.mid(at, found - at).trimmed().isEmpty(), qPrintable(line));
                const qsizetype position = right[col] ? found + cell.size() : found;
                if (edge.contains(col)) QVERIFY2(edge[col] == position, qPrintable("column " + QString::number(col) + " moves: " + line));
                edge[col] = position;
                at = found + cell.size();
            }
            QCOMPARE(at, line.size());  // nothing after the last cell, no trailing spaces
        }
    }

    // The layer-wise road of npw prune on a terminal: every stage over the layers draws its own
    // bar with its own ETA and ends on a finished line — calibration, the relative λ's solves,
    // the scores, the L* ranking, and the compensation and writing of each layer.
    void layerwisePruneShowsEveryStage() {
        const QString calib = QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-ot.txt");
        int exitCode = -1;
        const QByteArray raw = runOnTerminal({"prune", "demo:lm", "--calib", calib, "--nsamples", "4", "--seqlen", "32",
                                              "--ratio", "0.3", "--layerwise", "--out", dir_.filePath("layerwise")},
                                             &exitCode);
        QVERIFY2(exitCode == 0, raw.constData());
        const QStringList lines = screenLines(raw);
        for (const char* stage : {"calibrate", "score: solve", "score", "score: L* ranking", "apply"}) {
            const QRegularExpression finished("^" + QRegularExpression::escape(stage) +
                                              R"( +\[#{30}\] 100\.0%  eta +\d+s$)");
            bool found = false;
            for (const QString& line : lines) found = found || finished.match(line).hasMatch();
            QVERIFY2(found, qPrintable(QString("no finished progress line for '") + stage + "' in:\n" + lines.join('\n')));
        }
    }

    // --speed: each figure is the median of --speed-repeats runs with their range and the load
    // average, or says "1 run"; the summary never shows "± 0" for what was measured once.
    void speedSaysHowItWasMeasured() {
        const QString calib = QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-ot.txt");
        for (const int repeats : {1, 3}) {
            QProcess p;
            p.start(npw_, {"sweep", "demo:lm", "--methods", "magnitude", "--ratios", "0.2", "--seeds", "1", "--nsamples", "2",
                           "--seqlen", "32", "--calib", calib, "--speed", "--speed-tokens", "8", "--speed-repeats",
                           QString::number(repeats)});
            QVERIFY(p.waitForFinished(600000));
            const QString out = QString::fromUtf8(p.readAllStandardOutput());
            QVERIFY2(p.exitCode() == 0, qPrintable(out + p.readAllStandardError()));
            static const QRegularExpression median(R"(decode \d+ tok/s \(median of 3 runs, (\d+)–(\d+)\))");
            int speedLines = 0;
            for (const QString& line : out.split('\n')) {
                if (!line.contains("decode ")) continue;
                ++speedLines;
                QVERIFY2(!line.contains(QRegularExpression("± 0\\b")), qPrintable(line));
                if (repeats == 1) {
                    QVERIFY2(line.contains("decode ") && line.contains("(1 run)"), qPrintable(line));
                } else {
                    const QRegularExpressionMatch m = median.match(line);
                    QVERIFY2(m.hasMatch(), qPrintable(line));
                    QVERIFY(m.captured(1).toInt() <= m.captured(2).toInt());
                }
                if (line.contains("prefill")) QVERIFY2(line.contains(", load "), qPrintable(line));  // a row, not the summary
            }
            QCOMPARE(speedLines, 4);  // dense and magnitude: a row each, and a summary line each
        }
    }

    void startsLibTorchOnlyWhenNeeded() {
        const QString worker = QCoreApplication::applicationDirPath() + "/../app/npw-run";
        QVERIFY(QFileInfo::exists(worker));
        auto libtorchStarts = [](const QString& program, const QStringList& args, QByteArray* out, int* exitCode) {
            QProcess p;
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert("LD_DEBUG", "libs");
            env.remove("OMP_WAIT_POLICY");  // as a user starts it
            p.setProcessEnvironment(env);
            p.start(program, args);
            if (!p.waitForFinished(300000)) qFatal("npw did not finish");
            *out = p.readAllStandardOutput();
            *exitCode = p.exitCode();
            return QString::fromUtf8(p.readAllStandardError()).count(QRegularExpression("calling init: \\S*libtorch_cpu"));
        };
        QByteArray out, expected;
        int exitCode = -1, expectedExit = -1;
        const QList<QStringList> helpOnly = {{"--help"}, {"prune", "--help"}, {"export-gguf", "--help"}, {"sweep", "-h"},
                                             {"--version"}, {"no-such-command"}, {}};
        for (const QStringList& args : helpOnly) {
            QCOMPARE(libtorchStarts(npw_, args, &out, &exitCode), 0);
            // The same text and exit status as the program with the command table itself.
            libtorchStarts(worker, args, &expected, &expectedExit);
            QCOMPARE(out, expected);
            QCOMPARE(exitCode, expectedExit);
        }
        // Meta's release: npw-text hands it to npw-run, which loads LibTorch once, not twice.
        const QString metaRelease = QStringLiteral(NPW_TEST_DATA) + "/family_ref/meta_llama2_1shard";
        QCOMPARE(libtorchStarts(npw_, {"info", metaRelease}, &out, &exitCode), 1);
        QCOMPARE(exitCode, 0);
        QVERIFY(out.contains("meta_llama2_1shard"));

        // `npw tokenize` needs no tensor: npw-text answers it without LibTorch, with npw-run's
        // answer byte for byte (stdout, stderr, exit status), on a tokenizer file, on models whose
        // tokenizer is found beside them (a safetensors folder, a llama2.c .bin with tok105.model,
        // and one with a tokenizer.bin, whose size the model's header gives), and on its errors.
        const QString data = QStringLiteral(NPW_TEST_DATA);
        const QString llama2c = dir_.filePath("llama2c-with-tokenizer-bin");
        QVERIFY(QDir().mkpath(llama2c));
        QVERIFY(QFile::copy(data + "/babyllama/model5000.bin", llama2c + "/model5000.bin"));
        QVERIFY(QFile::copy(data + "/sentencepiece/tok105.bin", llama2c + "/tokenizer.bin"));
        const QList<QStringList> tokenize = {
            {"tokenize", data + "/sentencepiece/tok105.model", "--string", "Once upon a time"},
            {"tokenize", "demo:lm", "--string", "And God said", "--json"},
            {"tokenize", data + "/babyllama/model5000.bin", "--string", "Lily", "--no-bos"},
            {"tokenize", llama2c + "/model5000.bin", "--string", "Once upon a time", "--json"},
            {"tokenize", data + "/sentencepiece/no-such.model", "--string", "x"},  // errors: the same words
            {"tokenize", "demo:lm", "--string", "x", "--no-such-flag"},
            {"tokenize", "demo:lm", "--text", "x", "--string", "y"},
            {"tokenize", data + "/sentencepiece/tok105.model", "--string", "x", "--tokenizer", data + "/sentencepiece/tok105.bin"}};
        // `npw info` of a llama2.c .bin reads its header only: npw-text answers without LibTorch,
        // byte for byte as npw-run (a tokenizer beside it or given, refused as too small or allowed,
        // a missing file, a truncated one, an unknown flag).
        const QString truncated = dir_.filePath("truncated.bin");
        {
            QFile whole(data + "/stories260K/stories260K.bin");
            QFile part(truncated);
            QVERIFY(whole.open(QIODevice::ReadOnly) && part.open(QIODevice::WriteOnly));
            part.write(whole.read(4096));
        }
        const QString stories = data + "/stories260K/stories260K.bin", baby = data + "/babyllama/model5000.bin";
        const QList<QStringList> info = {{"info", stories},
                                         {"info", baby},
                                         {"info", llama2c + "/model5000.bin"},
                                         {"info", stories, "--tokenizer", data + "/sentencepiece/tok105.model"},
                                         {"info", stories, "--tokenizer", data + "/sentencepiece/tok105.model", "--allow-small-vocab"},
                                         {"info", stories, "--tokenizer", dir_.filePath("no-such.model")},
                                         {"info", dir_.filePath("no-such.bin")},
                                         {"info", truncated},
                                         {"info", stories, "--no-such-flag"}};
        // `npw info` of a Hugging Face folder reads config.json and the safetensors headers
        // (sharded, F32/F16/BF16, GQA, biases, each family), of a GGUF file its header: npw-text
        // answers them too, --json and --device cpu included (the CPU's runtime needs no
        // LibTorch to name), and refuses hostile files in npw-run's words.
        const QString ref = data + "/llama_ref/", family = data + "/family_ref/";
        const QString gguf = dir_.filePath("demo.gguf");
        {
            QProcess exporter;
            exporter.start(npw_, {"export-gguf", "demo:lm", "--out", gguf});
            QVERIFY(exporter.waitForFinished(300000));
            QCOMPARE(exporter.exitCode(), 0);
        }
        const QString hostile = writeHostileHfFolders(ref + "mha_halfsplit");
        QFile wholeGguf(gguf), shortGguf(dir_.filePath("truncated.gguf")), textGguf(dir_.filePath("text.gguf"));
        QVERIFY(wholeGguf.open(QIODevice::ReadOnly) && shortGguf.open(QIODevice::WriteOnly) && textGguf.open(QIODevice::WriteOnly));
        shortGguf.write(wholeGguf.read(200));  // inside the metadata
        textGguf.write("not a GGUF file\n");
        shortGguf.close();
        textGguf.close();
        QList<QStringList> torchFreeInfo = {{"info", "demo:lm"}, {"info", "demo:lm-gqa", "--json", "--device", "cpu"},
                                            {"info", "demo:classifier"},  // no LLaMA: its config refused alike
                                            {"info", gguf}, {"info", gguf, "--json"},
                                            {"info", dir_.filePath("no-such.gguf")},
                                            {"info", shortGguf.fileName()}, {"info", textGguf.fileName()},
                                            {"info", stories, "--json", "--device", "cpu"},
                                            {"info", baby, "--device", "cpu", "--dtype", "float32"},
                                            {"info", ref + "mha_halfsplit/model.safetensors"},  // a file: none of the layouts
                                            {"info", dir_.path()}};                             // no config.json
        for (const char* folder : {"gqa_halfsplit_tied", "mha_halfsplit", "mha_halfsplit_bf16", "mha_halfsplit_f16",
                                   "mha_halfsplit_sharded", "nonuniform_bias"})
            torchFreeInfo.append({"info", ref + folder});
        for (const char* folder : {"llama31_rope", "llama_linear_rope", "mistral", "qwen2_tied", "qwen3"})
            torchFreeInfo.append({"info", family + folder, "--json", "--device", "cpu"});
        for (const QString& folder : QDir(hostile).entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
            torchFreeInfo.append({"info", hostile + "/" + folder});
        auto sameAsNpwRun = [&](const QStringList& args) {
            QProcess viaNpw, viaWorker;
            viaNpw.start(npw_, args);
            viaWorker.start(worker, args);
            QVERIFY(viaNpw.waitForFinished(300000) && viaWorker.waitForFinished(300000));
            QCOMPARE(viaNpw.readAllStandardOutput(), viaWorker.readAllStandardOutput());
            QCOMPARE(viaNpw.readAllStandardError(), viaWorker.readAllStandardError());
            QCOMPARE(viaNpw.exitCode(), viaWorker.exitCode());
        };
        for (const QStringList& args : tokenize + info + torchFreeInfo) {
            QVERIFY2(libtorchStarts(npw_, args, &out, &exitCode) == 0, qPrintable(args.join(' ')));
            sameAsNpwRun(args);
            if (QTest::currentTestFailed()) return qWarning("differs: npw %s", qPrintable(args.join(' ')));
        }
        // --json's "device" with --device auto: the CPU here unless LibTorch has CUDA (npw-run's
        // answer then); the same answer either way.
        for (const QStringList& args : QList<QStringList>{{"info", stories, "--json"}, {"info", "demo:lm", "--json"}})
            sameAsNpwRun(args);
        // What needs LibTorch is npw-run's: another dtype, an image model, Meta's release, llama2.c's
        // ckpt.pt, a tied folder that stores its classifier anyway (is it the embedding?): LibTorch once.
        const QList<QStringList> viaNpwRun = {{"info", stories, "--device", "cpu", "--dtype", "bf16"},
                                             {"info", "demo:c2i"},  // an image model (LlamaGen)
                                             {"info", family + "meta_llama2_1shard"},
                                             {"info", family + "llama2c_ckpt/ckpt.pt"},
                                             {"info", dir_.filePath("hf-tied-head-stored")}};
        for (const QStringList& args : viaNpwRun) {
            QVERIFY2(libtorchStarts(npw_, args, &out, &exitCode) == 1, qPrintable(args.join(' ')));
            sameAsNpwRun(args);
            if (QTest::currentTestFailed()) return qWarning("differs: npw %s", qPrintable(args.join(' ')));
        }

        // Where only the tensors say the vocabulary (Meta's params.json with vocab_size -1, for a
        // tokenizer.bin), npw-text hands the command to npw-run: LibTorch starts once.
        const QStringList meta = {"tokenize", data + "/family_ref/meta_llama2_2shards", "--tokenizer",
                                  data + "/sentencepiece/tok105.bin", "--string", "x", "--json"};
        QCOMPARE(libtorchStarts(npw_, meta, &out, &exitCode), 1);
        libtorchStarts(worker, meta, &expected, &expectedExit);
        QCOMPARE(out, expected);
        QCOMPARE(exitCode, expectedExit);
    }

    // OpenBLAS picks its kernels by the CPU's model number; one newer than the OpenBLAS release
    // falls back to SSE3 "Prescott" kernels, 4.5x slower for every float32/float64 product here
    // (core/util/library_environment.h). Started as a user starts it (the launcher, or npw-run
    // directly), npw must run AVX2-class kernels on a CPU that has AVX2 and FMA, and must keep a
    // core the user chose.
    void runsTheBlasKernelsOfThisCpu() {
        QFile cpuinfo("/proc/cpuinfo");
        QVERIFY(cpuinfo.open(QIODevice::ReadOnly));
        QString flags;
        for (const QString& line : QString::fromUtf8(cpuinfo.readAll()).split('\n'))
            if (line.startsWith("flags")) {
                flags = " " + line.section(':', 1) + " ";
                break;
            }
        const bool avx2 = flags.contains(" avx2 ") && flags.contains(" fma ");
        const QStringList bench = {"bench", "demo:lm", "--prompt-tokens", "4", "--decode-tokens", "2", "--repeats", "1", "--json"};
        auto blasOf = [&](const QString& program, const QString& coreType) {
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            for (const char* name : {"OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "NPW_OPENBLAS_DETECTED_CORE"}) env.remove(name);
            if (!coreType.isEmpty()) env.insert("OPENBLAS_CORETYPE", coreType);
            QProcess p;
            p.setProcessEnvironment(env);
            p.start(program, bench);
            if (!p.waitForFinished(300000) || p.exitCode() != 0) qFatal("npw bench failed: %s", p.readAllStandardError().constData());
            return QString::fromStdString(
                nlohmann::json::parse(p.readAllStandardOutput().toStdString())["blas"].get<std::string>());
        };
        const QString worker = QCoreApplication::applicationDirPath() + "/../app/npw-run";
        for (const QString& program : {npw_, worker}) {
            const QString blas = blasOf(program, "");
            if (blas.isEmpty()) QSKIP("the BLAS LibTorch loads here is not OpenBLAS");
            QVERIFY2(blas.startsWith("OpenBLAS "), qPrintable(blas));
            const QString core = blas.section(' ', 1, 1).toLower();
            const QStringList preAvx2 = {"unknown", "katmai", "coppermine", "northwood", "prescott", "banias", "atom",
                                         "core2", "penryn", "dunnington", "nehalem", "athlon", "opteron", "opteron_sse3",
                                         "barcelona", "nano", "sandybridge", "bobcat", "bulldozer", "piledriver"};
            if (avx2) QVERIFY2(!preAvx2.contains(core), qPrintable(program + ": " + blas + " on a CPU with AVX2 and FMA"));
            QCOMPARE(blasOf(program, "Prescott"), QString("OpenBLAS Prescott (OPENBLAS_CORETYPE set by the user)"));
        }
    }

    // `npw bench MODEL --llamacpp` shows that llama.cpp ran the same model: the greedy ids of
    // both, and how many agree (all of them on demo:lm's float32 GGUF, whose logits agree with
    // npw's to float32 rounding).
    void benchBesideLlamaCppGivesBothIds() {
        if (!QFileInfo::exists(QString(NPW_TEST_DATA) + "/../fixtures/llamacpp/node_modules/node-llama-cpp/package.json") ||
            QStandardPaths::findExecutable("node").isEmpty())
            QSKIP("node-llama-cpp is not installed (packaging/setup.sh installs it where Node.js is)");
        QProcess p;
        p.start(npw_, {"bench", "demo:lm", "--prompt-tokens", "8", "--decode-tokens", "8", "--repeats", "1", "--llamacpp",
                       "--json"});
        QVERIFY2(p.waitForFinished(300000) && p.exitCode() == 0, p.readAllStandardError().constData());
        const nlohmann::json j = nlohmann::json::parse(p.readAllStandardOutput().toStdString());
        const nlohmann::json& l = j.at("llamacpp");
        QCOMPARE(QString::fromStdString(l.at("gguf_dtype").get<std::string>()), QString("f32"));
        const auto npwIds = l.at("npw_ids").get<std::vector<int>>();
        const auto llamaIds = l.at("llamacpp_ids").get<std::vector<int>>();
        QCOMPARE(npwIds.size(), size_t(8));
        QVERIFY(llamaIds.size() >= npwIds.size());
        QCOMPARE(l.at("greedy_ids_agreeing").get<size_t>(), size_t(8));
        QVERIFY(l.at("same_greedy_ids").get<bool>());
        QVERIFY(std::equal(npwIds.begin(), npwIds.end(), llamaIds.begin()));
    }

    void sweepThroughAPipe() {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(npw_, sweepArgs_);
        QVERIFY(p.waitForFinished(600000));
        const QByteArray out = p.readAll();
        QVERIFY2(p.exitCode() == 0, out.constData());
        QVERIFY2(!out.contains('\r'), "progress drawn into a pipe");
        checkTable(QString::fromUtf8(out).split('\n'), /*expectBar=*/false);
    }
};

QTEST_GUILESS_MAIN(TestCliTerminal)
#include "tst_cli_terminal.moc"
