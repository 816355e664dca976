// The terminal as a user sees it: `npw sweep` draws its progress bar on stderr and prints its
// table on stdout, and in a terminal both land on one screen. Run under a pseudo-terminal
// (forkpty: stdout and stderr both the terminal, so the bar is drawn) and through a pipe with
// the two merged (no bar), the screen's lines, as a terminal would show them (carriage returns
// overwrite, newlines advance), must be the table's header, well-formed rows with every column
// separated by at least two spaces, and finished progress lines; never a row on a bar's line,
// never two columns run together (the bug: "128     1281.633e-04": seqlen 128, λ 1.633e-04).
// Also the start: `npw --help`, `npw COMMAND --help`, --version and an unknown command answer
// without loading LibTorch (the launcher, app/launcher), with npw-run's own texts, and every other
// command loads it once (glibc's loader reports each library initialisation under LD_DEBUG=libs).
#include "core/util/paths.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <cerrno>
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
        QCOMPARE(libtorchStarts(npw_, {"info", "demo:lm"}, &out, &exitCode), 1);  // once, not started twice
        QCOMPARE(exitCode, 0);
        QVERIFY(out.contains("demo:lm"));
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
