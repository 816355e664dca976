// Nothing of the user's is lost through an output path, and kill -9 leaves nothing that piles up,
// through the real command line on the bundled demo:lm:
//  - `npw prune --out DIR` replaces DIR only when it is provably an earlier npw export (its
//    npw-manifest.json lists every file with its size, nothing else present); a user's folder
//    with a file named npw-manifest.json (JSON or not), an export of an older npw, or an export
//    with one extra file of the user's is refused, every byte left as it was;
//  - no output flag may name an input of the run (`sweep --csv` over its own --calib or --eval,
//    also through a symlink or a hard link), nor another output;
//  - a process killed mid-write (export-gguf; prune over an earlier export, between its two
//    renames) leaves its temporaries, and the next run removes them (or moves the earlier
//    export back) and writes a whole output.
// The kills happen at exact points of the write: NPW_TEST_STALL makes npw stop there and say so
// (core/util/atomic_file.h), so the test does not depend on timing on a loaded machine.
#include "core/util/atomic_file.h"
#include "core/util/output_guard.h"
#include "core/util/paths.h"
#include "cli_run.h"
#include "error_of.h"

#include <nlohmann/json.hpp>

#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

using Run = npw::test::CliRun;

QByteArray readBytes(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

void writeBytes(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) qFatal("cannot write %s", qPrintable(path));
    f.write(bytes);
}

// Every entry under `path` with its bytes ("<dir>" for a folder): "untouched" is this unchanged.
std::map<std::string, QByteArray> snapshot(const QString& path) {
    std::map<std::string, QByteArray> files;
    for (const auto& entry : fs::recursive_directory_iterator(path.toStdString()))
        files[entry.path().string()] = entry.is_regular_file() ? readBytes(QString::fromStdString(entry.path().string()))
                                                               : QByteArray("<dir>");
    return files;
}

// The names in `dir` that npw's temporaries of `target` carry: ".TARGET.npw-…".
QStringList temporariesOf(const QString& dir, const QString& target) {
    QStringList found;
    for (const QString& name : QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot | QDir::System))
        if (name.startsWith("." + target + ".npw-")) found << name;
    return found;
}

} // namespace

class TestCliOutputs : public QObject {
    Q_OBJECT

    QString npw_, calib_, eval_;
    QTemporaryDir dir_;

    Run run(const QStringList& args, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
        return npw::test::runCli(npw_, args, env);
    }

    // Starts npw with NPW_TEST_STALL=point, waits until it says it stopped there, then kills it
    // with SIGKILL, as a crash or kill -9 would.
    void killAt(const QStringList& args, const QString& point) { npw::test::killCliAt(npw_, args, point); }

    QStringList prune(const QString& out) {
        return {"prune", "demo:lm", "--method", "magnitude", "--ratio", "0.2", "--calib", calib_, "--nsamples", "2",
                "--seqlen", "16", "--out", out, "--json"};
    }

    // An export is whole: its manifest lists every file with the size it has.
    void verifyWholeExport(const QString& out) {
        const Json manifest = Json::parse(readBytes(out + "/npw-manifest.json").toStdString());
        QVERIFY(manifest.contains("files") && manifest["files"].is_object());
        size_t files = 0;
        for (const auto& entry : fs::recursive_directory_iterator(out.toStdString())) {
            if (!entry.is_regular_file() || entry.path().filename() == "npw-manifest.json") continue;
            const std::string rel = entry.path().lexically_relative(out.toStdString()).generic_string();
            QVERIFY2(manifest["files"].contains(rel), rel.c_str());
            QCOMPARE(manifest["files"][rel].get<uint64_t>(), uint64_t(entry.file_size()));
            ++files;
        }
        QCOMPARE(files, manifest["files"].size());
        for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) QVERIFY(manifest["files"].contains(name));
        const Run info = run({"info", out, "--json"});
        QVERIFY2(info.rc == 0, qPrintable(info.err));
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QVERIFY(dir_.isValid());
        // The run's own texts, in the test's folder: what an output must never overwrite.
        calib_ = dir_.filePath("calib.txt");
        eval_ = dir_.filePath("eval.txt");
        writeBytes(calib_, readBytes(QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-ot.txt")).left(60000));
        writeBytes(eval_, readBytes(QString::fromStdString(npw::resourcesDir() + "/demo/data/kjv-nt.txt")).left(20000));
    }

    // A user's folder with their own files and a file named npw-manifest.json: refused, untouched.
    void usersFolderIsNeverReplaced_data() {
        QTest::addColumn<QByteArray>("manifest");
        QTest::addColumn<QString>("named");
        QTest::newRow("not JSON") << QByteArray("my notes about the manifest\n") << QString("not valid JSON");
        QTest::newRow("JSON, not npw's") << QByteArray("{\"author\": \"me\"}") << QString("\"format\"");
        QTest::newRow("an older npw's, no file list")
            << QByteArray("{\"format\": \"npw-pruned-model\", \"method\": \"numerical\", \"ratio\": 0.3}") << QString("\"files\"");
        QTest::newRow("npw's form, but not listing the user's file")
            << QByteArray("{\"format\": \"npw-pruned-model\", \"files\": {}}") << QString("which npw-manifest.json does not list");
        QTest::newRow("a wrong size")
            << QByteArray("{\"format\": \"npw-pruned-model\", \"files\": {\"thesis.tex\": 3, \"figures/plot.pdf\": 1000}}")
            << QString("'thesis.tex' is 19 bytes, but npw-manifest.json says npw wrote 3");
        QTest::newRow("a path out of the folder")
            << QByteArray("{\"format\": \"npw-pruned-model\", \"files\": {\"../thesis.tex\": 19}}") << QString("'../thesis.tex'");
    }
    void usersFolderIsNeverReplaced() {
        QFETCH(QByteArray, manifest);
        QFETCH(QString, named);
        const QString folder = dir_.filePath("mine-" + QString::fromLatin1(QTest::currentDataTag()).replace(' ', '-'));
        QVERIFY(QDir().mkpath(folder + "/figures"));
        writeBytes(folder + "/thesis.tex", "\\section{Results}\n\n");
        writeBytes(folder + "/figures/plot.pdf", QByteArray(1000, 'x'));
        writeBytes(folder + "/npw-manifest.json", manifest);
        const auto before = snapshot(folder);
        const Run r = run(prune(folder));
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("refusing to write '" + folder + "'") && r.err.contains("not an npw export"), qPrintable(r.err));
        QVERIFY2(r.err.contains(named), qPrintable(r.err));
        QVERIFY2(r.err.contains("delete the folder or choose another output directory"), qPrintable(r.err));
        QVERIFY(snapshot(folder) == before);
        QCOMPARE(temporariesOf(dir_.path(), QFileInfo(folder).fileName()), QStringList());
    }

    // npw's own earlier export is replaced; with one file of the user's added, it is refused.
    void earlierExportIsReplacedUnlessTheUserAddedAFile() {
        const QString out = dir_.filePath("pruned");
        Run r = run(prune(out));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        verifyWholeExport(out);
        r = run(prune(out));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        verifyWholeExport(out);

        writeBytes(out + "/my-notes.txt", "keep me\n");
        const auto before = snapshot(out);
        r = run(prune(out));
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("'my-notes.txt', which npw-manifest.json does not list"), qPrintable(r.err));
        QVERIFY(snapshot(out) == before);
        // A file npw wrote, changed by the user: refused too.
        QFile::remove(out + "/my-notes.txt");
        writeBytes(out + "/tokenizer.json", readBytes(out + "/tokenizer.json") + " ");
        const auto changed = snapshot(out);
        r = run(prune(out));
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("'tokenizer.json' is") && r.err.contains("changed since"), qPrintable(r.err));
        QVERIFY(snapshot(out) == changed);

        // An empty folder may be written into.
        const QString empty = dir_.filePath("empty");
        QVERIFY(QDir().mkpath(empty));
        r = run(prune(empty));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        verifyWholeExport(empty);
    }

    // No output flag may be an input of the run: sweep --csv over its --calib or --eval text,
    // directly, through a symlink or a hard link; prune --save-stats over --calib; an export
    // folder holding the calibration text; two outputs that are one file.
    void outputsNeverOverwriteInputs() {
        const QString link = dir_.filePath("calib-link.csv"), hard = dir_.filePath("eval-hard.csv");
        QVERIFY(QFile::link(calib_, link));
        QVERIFY(::link(eval_.toLocal8Bit().constData(), hard.toLocal8Bit().constData()) == 0);
        const QByteArray calibBytes = readBytes(calib_), evalBytes = readBytes(eval_);
        const QStringList sweep = {"sweep", "demo:lm", "--methods", "magnitude", "--ratios", "0.2", "--calib", calib_,
                                   "--nsamples", "2", "--seqlen", "16", "--eval", "text:" + eval_, "--max-windows", "1"};
        const std::vector<std::pair<QString, QString>> cases = {
            {calib_, "it is --calib '" + calib_ + "'"}, {eval_, "it is --eval '" + eval_ + "'"},
            {link, "it is --calib '" + calib_ + "'"},   {hard, "it is --eval '" + eval_ + "'"}};
        for (const auto& [csv, named] : cases) {
            const Run r = run(sweep + QStringList{"--csv", csv});
            QCOMPARE(r.rc, 1);
            QVERIFY2(r.err.contains("refusing to write --csv '" + csv + "'") && r.err.contains(named) &&
                         r.err.contains("an input of this run"),
                     qPrintable(r.err));
        }
        Run r = run(prune(dir_.filePath("p-stats")) + QStringList{"--save-stats", calib_});
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("refusing to write --save-stats") && r.err.contains("--calib"), qPrintable(r.err));
        r = run({"make-verse-task", "--text", eval_, "--out", hard});
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("it is --text"), qPrintable(r.err));
        // --out a folder that holds the calibration text: replacing it would delete it.
        r = run(prune(dir_.path()));
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("refusing to write --out") && r.err.contains("holds --calib"), qPrintable(r.err));
        // Two outputs that are one file.
        const QString scores = dir_.filePath("s.safetensors");
        r = run(prune(dir_.filePath("p2")) + QStringList{"--save-scores", scores, "--save-stats", scores});
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.err.contains("is written by this run too"), qPrintable(r.err));
        QCOMPARE(readBytes(calib_), calibBytes);
        QCOMPARE(readBytes(eval_), evalBytes);
        QVERIFY(!QFileInfo::exists(dir_.filePath("p-stats")) && !QFileInfo::exists(dir_.filePath("p2")));
    }

    // kill -9 while export-gguf's temporary is complete but not yet renamed: the earlier .gguf
    // is intact, the temporary stays; the next export removes it and writes a whole file.
    void killedGgufExportLeavesNothingBehind() {
        const QString sub = dir_.filePath("gguf");
        QVERIFY(QDir().mkpath(sub));
        const QString out = sub + "/model.gguf";
        const QStringList args = {"export-gguf", "demo:lm", "--out", out};
        Run r = run(args);
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const QByteArray whole = readBytes(out);
        QVERIFY(whole.size() > 1000000);
        for (int round = 0; round < 2; ++round) {
            killAt(args, "file-written");
            QCOMPARE(readBytes(out), whole);  // never half-written
            QCOMPARE(temporariesOf(sub, "model.gguf").size(), qsizetype(1));
        }
        // A temporary of a live process (this one) and a look-alike that is not npw's stay.
        const QString live = sub + "/.model.gguf.npw-tmp-" + QString::number(::getpid()) + "-1";
        const QString lookalike = sub + "/.model.gguf.npw-tmp-mine";
        writeBytes(live, "x");
        writeBytes(lookalike, "y");
        r = run(args);
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QCOMPARE(readBytes(out), whole);  // the same export, whole
        QCOMPARE(temporariesOf(sub, "model.gguf"), QStringList({".model.gguf.npw-tmp-" + QString::number(::getpid()) + "-1",
                                                                ".model.gguf.npw-tmp-mine"}));
        const Run info = run({"info", out, "--json"});
        QVERIFY2(info.rc == 0, qPrintable(info.err));
    }

    // kill -9 of `npw prune --out` over an earlier export, at each point of the replacement:
    // with the new export staged, and between "move the earlier one aside" and "move the new one
    // in" (the folder is absent then). The next run leaves no staging or previous folder, and the
    // export is whole.
    void killedPruneOverAnExportLeavesNothingBehind_data() {
        QTest::addColumn<QString>("point");
        QTest::newRow("staged") << QString("export-staged");
        QTest::newRow("moved aside") << QString("export-moved-aside");
    }
    void killedPruneOverAnExportLeavesNothingBehind() {
        QFETCH(QString, point);
        const QString sub = dir_.filePath("kill-" + point);
        QVERIFY(QDir().mkpath(sub));
        const QString out = sub + "/pruned";
        Run r = run(prune(out));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const auto earlier = snapshot(out);
        killAt(prune(out), point);
        const QStringList left = temporariesOf(sub, "pruned");
        QVERIFY2(left.filter(".npw-staging-").size() == 1, qPrintable(left.join(' ')));
        if (point == "export-moved-aside") {
            QVERIFY(!QFileInfo::exists(out));
            QVERIFY2(left.filter(".npw-previous-").size() == 1, qPrintable(left.join(' ')));
        } else {
            QVERIFY(snapshot(out) == earlier);
        }
        r = run(prune(out));
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        QCOMPARE(temporariesOf(sub, "pruned"), QStringList());
        verifyWholeExport(out);
    }

    // The rule under the cleanup: only names npw's writers make, of processes that are gone.
    void staleTemporariesAreOnlyNpwsOfDeadProcesses() {
        QTemporaryDir d;
        const QString target = d.filePath("t.csv");
        // A PID that is certainly gone: a child that has exited and been reaped.
        QProcess child;
        child.start("/bin/true");
        QVERIFY(child.waitForFinished());
        const QString dead = QString::number(child.processId() > 0 ? child.processId() : 999999);
        const QString mine = QString::number(::getpid());
        const QStringList removed = {".t.csv.npw-tmp-" + dead + "-1", ".t.csv.npw-stats-" + dead + "-2"};
        const QStringList kept = {".t.csv.npw-tmp-" + mine + "-3",  ".t.csv.npw-tmp-1-4" /* init lives */,
                                  ".t.csv.npw-tmp-" + dead + "-x", ".t.csv.npw-junk-" + dead + "-5",
                                  ".u.csv.npw-tmp-" + dead + "-6", "t.csv.npw-tmp-" + dead + "-7",
                                  ".t.csv.npw-staging-" + dead + "-8" /* a file, not npw's folder */};
        for (const QString& name : removed + kept) writeBytes(d.filePath(name), "x");
        npw::removeStaleTemporaries(target.toStdString());
        for (const QString& name : removed) QVERIFY2(!QFileInfo::exists(d.filePath(name)), qPrintable(name));
        for (const QString& name : kept) QVERIFY2(QFileInfo::exists(d.filePath(name)), qPrintable(name));
    }

    // The working files of a benchmark killed with -9 (npw-runtime-bench-PID, npw-bench-PID-N.gguf
    // in the temporary folder, 4–8 GB at 1b) are removed by the next run; nothing else is.
    void benchmarkWorkOfDeadProcessesIsRemoved() {
        QTemporaryDir d;
        QProcess child;
        child.start("/bin/true");
        QVERIFY(child.waitForFinished());
        const QString dead = QString::number(child.processId() > 0 ? child.processId() : 999999);
        const QString mine = QString::number(::getpid());
        QVERIFY(QDir(d.path()).mkpath("npw-runtime-bench-" + dead + "/synthetic-1b-bf16"));
        writeBytes(d.filePath("npw-runtime-bench-" + dead + "/synthetic-1b.bin"), "x");
        QVERIFY(QDir(d.path()).mkpath("npw-runtime-bench-" + mine));
        const QStringList removedFiles = {"npw-bench-" + dead + "-123.gguf"};
        const QStringList keptFiles = {"npw-bench-" + mine + "-1.gguf", "npw-bench-" + dead + "-1.txt",
                                       "npw-bench-" + dead + "x.gguf", "npw-runtime-bench-" + dead + "x",
                                       "npw-runtime-bench-abc", "my-npw-runtime-bench-" + dead};
        for (const QString& name : removedFiles + keptFiles) writeBytes(d.filePath(name), "x");
        npw::removeWorkOfDeadProcesses(d.path().toStdString(), "npw-runtime-bench-");
        npw::removeWorkOfDeadProcesses(d.path().toStdString(), "npw-bench-", ".gguf");
        QVERIFY(!QFileInfo::exists(d.filePath("npw-runtime-bench-" + dead)));
        QVERIFY(QFileInfo::exists(d.filePath("npw-runtime-bench-" + mine)));
        for (const QString& name : removedFiles) QVERIFY2(!QFileInfo::exists(d.filePath(name)), qPrintable(name));
        for (const QString& name : keptFiles) QVERIFY2(QFileInfo::exists(d.filePath(name)), qPrintable(name));
    }
};

QTEST_GUILESS_MAIN(TestCliOutputs)
#include "tst_cli_outputs.moc"
