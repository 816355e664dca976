// Hostile files through npw-studio's open, export and workspace paths (issue 16), without the
// window: each is reported as the CLI words it (the same text as core's error), nothing
// crashes, and nothing is written.
#include "app/studio/jobrunner.h"
#include "app/studio/stallmeter.h"
#include "app/studio/studiosession.h"
#include "core/experiments/workspace.h"
#include "core/models/language_model.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "error_of.h"

#include <QDir>
#include <QElapsedTimer>
#include <QRegularExpression>
#include <QSemaphore>
#include <QThreadPool>
#include <QFile>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "studio_session_helpers.h"

using namespace studio_test;

namespace {

// ---- Hostile inputs through the studio (issue 16): the builders follow tests/fuzz/hostile_inputs.py.

QByteArray readBytes(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void writeBytes(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY2(f.open(QIODevice::WriteOnly | QIODevice::Truncate), qPrintable(path));
    QCOMPARE(f.write(bytes), qint64(bytes.size()));
}

// demo:lm copied to dir/name (config.json, model.safetensors, tokenizer.json), to be spoilt.
QString copyDemoModel(const QTemporaryDir& dir, const QString& name) {
    const QString source = QString::fromStdString(npw::resolveModelPath("demo:lm"));
    QString target = dir.filePath(name);
    QDir().mkpath(target);
    for (const QString& file : QDir(source).entryList(QDir::Files))
        if (!QFile::copy(source + "/" + file, target + "/" + file)) qFatal("cannot copy %s", qPrintable(file));
    return target;
}

// Every file under `path` with its bytes: "nothing was written" is this map unchanged.
std::map<std::string, QByteArray> snapshot(const QString& path) {
    std::map<std::string, QByteArray> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path.toStdString()))
        files[entry.path().string()] = entry.is_regular_file() ? readBytes(QString::fromStdString(entry.path().string()))
                                                               : QByteArray("<dir>");
    return files;
}

// Names in `dir` that an interrupted atomic write would leave (staging directories, temp files).
QStringList leftovers(const QString& dir) {
    QStringList found;
    for (const QString& name : QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot))
        if (name.contains(QStringLiteral(".npw-")) ||
            name.contains(QStringLiteral(".tmp")))
            found << name;
    return found;
}

// A safetensors file from its header text and data bytes.
QByteArray safetensorsFile(const QByteArray& header, const QByteArray& data) {
    QByteArray out(8, '\0');
    quint64 n = quint64(header.size());
    for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
    return out + header + data;
}

// What core says about opening `path`: the text the CLI prints after "npw info: error: ".
QString coreError(const QString& path) {
    return npw::test::errorOf([&] { npw::openLanguageModel(path.toStdString(), npw::chooseRuntime("cpu")); });
}

// A hostile copy of demo:lm per kind; returns the path to open.
QString hostileModel(const QTemporaryDir& dir, const QString& kind) {
    QString m = copyDemoModel(dir, kind);
    const QString config = m + "/config.json";
    if (kind == "config-deep") {
        // 400,000 arrays deep: printing or copying it once overflowed the stack.
        writeBytes(config, "{\"rope_scaling\": " + QByteArray(400000, '[') + QByteArray(400000, ']') + "}");
    } else if (kind == "config-1e999") {
        QString text = QString::fromUtf8(readBytes(config));
        text.replace(QRegularExpression(QStringLiteral("\"vocab_size\"\\s*:\\s*\\d+")), QStringLiteral("\"vocab_size\": 1e999"));
        writeBytes(config, text.toUtf8());
    } else if (kind == "config-heads-overflow") {
        nlohmann::json j = nlohmann::json::parse(readBytes(config).toStdString());
        j["num_attention_heads"] = 4;
        j["num_key_value_heads"] = 4;
        j["head_dim"] = int64_t(1) << 62;  // 4 × 2^62 wraps to 0
        writeBytes(config, QByteArray::fromStdString(j.dump()));
    } else if (kind == "weights-truncated") {
        QFile f(m + "/model.safetensors");
        if (!f.resize(f.size() - 100)) qFatal("resize");
    } else if (kind == "weights-header-1e999") {
        writeBytes(m + "/model.safetensors",
                   safetensorsFile(R"({"a": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})", QByteArray(4, '\0')));
    } else if (kind == "weights-4TiB") {
        writeBytes(m + "/model.safetensors",
                   safetensorsFile(R"({"a": {"dtype": "F32", "shape": [1099511627776], "data_offsets": [0, 4398046511104]}})", {}));
    } else if (kind == "tokenizer-deep") {
        writeBytes(m + "/tokenizer.json", "{\"model\": " + QByteArray(400000, '[') + QByteArray(400000, ']') + "}");
    } else if (kind == "llama2c-huge-header") {
        // llama2.c's seven int32s near INT32_MAX: every product overflows 32 bits.
        QByteArray header;
        for (qint32 v : {2147483646, 2147483647, 2147483647, 2, 2, 2147483647, 2147483647})
            header.append(reinterpret_cast<const char*>(&v), 4);
        writeBytes(m + ".bin", header);
        return m + ".bin";
    } else {
        qFatal("unknown kind %s", qPrintable(kind));
    }
    return m;
}

} // namespace

class TestStudioHostile : public QObject {
    Q_OBJECT
private slots:
    void hostileModelIsReportedAsTheCliDoes_data();
    void hostileModelIsReportedAsTheCliDoes();
    void failedOpenKeepsTheOpenModel();
    void catastrophicTokenizerRegexFailsTheRun();
    void exportOverASourceWritesNothing();
    void cancelledExportLeavesNothing();
    void hostileWorkspacesAreReported();
    void workspaceOverASourceWritesNothing();
};

void TestStudioHostile::hostileModelIsReportedAsTheCliDoes_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected");  // a fragment of core's message
    QTest::newRow("config nested 400,000 deep") << "config-deep" << "nested deeper than 512";
    QTest::newRow("config 1e999") << "config-1e999" << "out of range";
    QTest::newRow("heads x head_dim overflows") << "config-heads-overflow" << "overflows";
    QTest::newRow("weights truncated") << "weights-truncated" << "truncated";
    QTest::newRow("safetensors header 1e999") << "weights-header-1e999" << "out of range";
    QTest::newRow("a tensor declared 4 TiB") << "weights-4TiB" << "4398046511104";
    QTest::newRow("tokenizer.json nested 400,000 deep") << "tokenizer-deep" << "nested deeper than 512";
    QTest::newRow("llama2.c header near INT32_MAX") << "llama2c-huge-header" << "does not describe";
}

void TestStudioHostile::hostileModelIsReportedAsTheCliDoes() {
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const QString model = hostileModel(dir, kind);
    const QString cli = coreError(model);
    QVERIFY2(cli.contains(expected), qPrintable(cli));
    const auto before = snapshot(dir.path());

    StudioSession session;
    QSignalSpy failed(session.jobs(), &JobRunner::failed);
    QSignalSpy log(&session, &StudioSession::logMessage);
    QSignalSpy changed(&session, &StudioSession::modelChanged);
    QVERIFY(session.openModel(model));
    QVERIFY(waitIdle(session));
    QCOMPARE(failed.count(), 1);
    // The same words as the CLI (which prints "npw info: error: " and core's message): the file
    // and the field named.
    QCOMPARE(failed.first().at(1).toString(), cli);
    QVERIFY(failed.first().at(1).toString().contains(QFileInfo(model).fileName()));
    bool logged = false;
    for (const auto& entry : log) logged |= entry.at(0).toString().contains(cli);
    QVERIFY(logged);
    QVERIFY(!session.hasModel());
    QCOMPARE(changed.count(), 0);
    QVERIFY(snapshot(dir.path()) == before);  // read, never written
}

void TestStudioHostile::failedOpenKeepsTheOpenModel() {
    QTemporaryDir dir;
    StudioSession session;
    openAndScore(session);
    const auto scores = session.currentScores();
    const npw::Mask mask = session.selection()->selection.mask;
    QSignalSpy failed(session.jobs(), &JobRunner::failed);
    QVERIFY(session.openModel(hostileModel(dir, QStringLiteral("config-1e999"))));
    QVERIFY(waitIdle(session));
    QCOMPARE(failed.count(), 1);
    QCOMPARE(session.modelReference(), QStringLiteral("demo:lm"));
    QVERIFY(session.currentScores() == scores);
    QVERIFY(session.selection()->selection.mask.keepChannels == mask.keepChannels);
}

void TestStudioHostile::catastrophicTokenizerRegexFailsTheRun() {
    // A Split pre-tokenizer `(a+)+$` (catastrophic backtracking) on 40 a's and a '!': the run
    // ends with the regex's limit, the window stays usable, and a sane text then works.
    QTemporaryDir dir;
    const QString model = copyDemoModel(dir, QStringLiteral("regex"));
    nlohmann::json tok = nlohmann::json::parse(readBytes(model + "/tokenizer.json").toStdString());
    tok["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}, {"invert", false}};
    writeBytes(model + "/tokenizer.json", QByteArray::fromStdString(tok.dump()));
    const QString text = dir.filePath(QStringLiteral("aaaa.txt"));
    writeBytes(text, QByteArray(40, 'a') + "!");

    StudioSession session;
    QVERIFY(session.openModel(model));
    QVERIFY(waitIdle(session));
    QVERIFY(session.hasModel());
    studio::RunSettings s = smallSettings();
    s.calibration.source = text.toStdString();
    session.setSettings(s);
    QSignalSpy failed(session.jobs(), &JobRunner::failed);
    QVERIFY(session.runScoring());
    QVERIFY(waitIdle(session));
    QCOMPARE(failed.count(), 1);
    const QString message = failed.first().at(1).toString();
    QVERIFY2(message.contains(QStringLiteral("time limit")) && message.contains(QStringLiteral("tokenizer.json")),
             qPrintable(message));
    QVERIFY(session.stats() == nullptr);
    QVERIFY(session.hasModel());
}

void TestStudioHostile::exportOverASourceWritesNothing() {
    QTemporaryDir dir;
    const QString model = copyDemoModel(dir, QStringLiteral("source"));
    const QString other = dir.filePath(QStringLiteral("notes"));  // a directory that is not an export
    QDir().mkpath(other);
    writeBytes(other + "/keep.txt", "mine");
    StudioSession session;
    QVERIFY(session.openModel(model));
    QVERIFY(waitIdle(session));
    openAndScore(session);
    QThreadPool::globalInstance()->waitForDone();  // the per-layer losses: they write nothing either
    const auto before = snapshot(dir.path());
    const QStringList targets = {model, model + "/", model + "/sub", model + "/config.json",
                                 model + "/model.safetensors", other};
    for (const QString& target : targets) {
        QSignalSpy failed(session.jobs(), &JobRunner::failed);
        QVERIFY(session.exportPrunedModel(target));
        QVERIFY(waitIdle(session));
        QCOMPARE(failed.count(), 1);
        QVERIFY2(failed.first().at(1).toString().contains(QStringLiteral("refusing")),
                 qPrintable(failed.first().at(1).toString()));
        QVERIFY2(snapshot(dir.path()) == before, qPrintable(target));
    }
}

void TestStudioHostile::cancelledExportLeavesNothing() {
    QTemporaryDir dir;
    StudioSession session;
    openAndScore(session);
    QThreadPool* pool = QThreadPool::globalInstance();
    pool->waitForDone();
    const QString target = dir.filePath(QStringLiteral("pruned"));

    // Cancelled before it starts: every pool thread is held until Cancel was pressed.
    {
        QSemaphore hold;
        const int threads = pool->maxThreadCount();
        for (int i = 0; i < threads; ++i) pool->start([&hold] { hold.acquire(); });
        QSignalSpy cancelled(session.jobs(), &JobRunner::cancelled);
        QVERIFY(session.exportPrunedModel(target));
        session.cancel();
        hold.release(threads);
        QVERIFY(waitIdle(session));
        pool->waitForDone();  // the holders are gone before `hold` is
        QCOMPARE(cancelled.count(), 1);
        QVERIFY(!QFileInfo::exists(target));
        QCOMPARE(leftovers(dir.path()), QStringList());
    }
    // Cancelled as soon as it reports (while it prunes or writes): either it stopped and wrote
    // nothing, or it had passed its last check and the export is whole; never a part of one.
    for (int attempt = 0; attempt < 3; ++attempt) {
        const QString t = dir.filePath(QStringLiteral("pruned%1").arg(attempt));
        QSignalSpy cancelled(session.jobs(), &JobRunner::cancelled);
        QSignalSpy finished(session.jobs(), &JobRunner::finished);
        auto conn = connect(session.jobs(), &JobRunner::progressed, &session, [&session] { session.cancel(); });
        QVERIFY(session.exportPrunedModel(t));
        QVERIFY(waitIdle(session));
        disconnect(conn);
        QCOMPARE(cancelled.count() + finished.count(), 1);
        if (cancelled.count()) {
            QVERIFY(!QFileInfo::exists(t));
        } else {
            for (const char* file : {"config.json", "model.safetensors", "npw-manifest.json", "tokenizer.json"})
                QVERIFY2(QFile::exists(t + "/" + file), file);
        }
        QCOMPARE(leftovers(dir.path()), QStringList());
    }
}

void TestStudioHostile::hostileWorkspacesAreReported() {
    QTemporaryDir dir;
    const QString good = dir.filePath(QStringLiteral("good.npw.json"));
    {
        StudioSession first;
        openAndScore(first);
        first.saveWorkspace(good);
    }
    const nlohmann::json base = nlohmann::json::parse(readBytes(good).toStdString());
    const QByteArray stats = readBytes(QString::fromStdString(npw::workspaceStatsPath(good.toStdString())));
    const QString hostile = hostileModel(dir, QStringLiteral("config-1e999"));

    struct Case {
        const char* name;
        std::function<QByteArray()> json;  // the workspace file's bytes
        QString expected;                  // a fragment of the error
        bool truncateStats = false;
    };
    auto edited = [&base](const std::function<void(nlohmann::json&)>& edit) {
        return [base, edit] {
            nlohmann::json j = base;
            edit(j);
            return QByteArray::fromStdString(j.dump());
        };
    };
    const std::vector<Case> cases = {
        {"nested 400,000 deep", [] { return "{\"format\": " + QByteArray(400000, '[') + QByteArray(400000, ']') + "}"; },
         "nested deeper than 512"},
        {"cut in the middle", [&base] { return QByteArray::fromStdString(base.dump()).left(200); }, "not valid JSON"},
        {"1e999 in the knobs",
         [&base] {
             QByteArray text = QByteArray::fromStdString(base.dump());
             return text.replace("\"knobs\":{", "\"knobs\":{\"big\":1e999,");
         },
         "out of range"},
        {"a newer version", edited([](nlohmann::json& j) { j["version"] = 99; }), "newer"},
        {"the mask's units are strings",
         edited([](nlohmann::json& j) { j["mask"]["pruned_units"] = nlohmann::json::array({{"x"}}); }), "mask.pruned_units[0]"},
        {"the model is hostile", edited([&hostile](nlohmann::json& j) { j["model"] = hostile.toStdString(); }),
         coreError(hostile)},
        {"the statistics are truncated", [&base] { return QByteArray::fromStdString(base.dump()); }, "stats.safetensors",
         true},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const QString path = dir.filePath(QStringLiteral("hostile%1.npw.json").arg(i));
        writeBytes(path, c.json());
        const QString statsPath = QString::fromStdString(npw::workspaceStatsPath(path.toStdString()));
        writeBytes(statsPath, c.truncateStats ? stats.left(stats.size() / 2) : stats);
        const auto before = snapshot(dir.path());
        StudioSession session;
        QSignalSpy failed(session.jobs(), &JobRunner::failed);
        QVERIFY(session.openWorkspace(path));
        QVERIFY(waitIdle(session));
        QVERIFY2(failed.count() == 1, c.name);
        const QString message = failed.first().at(1).toString();
        QVERIFY2(message.contains(c.expected), qPrintable(QString("%1: %2").arg(c.name, message)));
        if (!c.truncateStats && QString(c.name) != "the model is hostile")
            QVERIFY2(message.contains(path), qPrintable(QString("%1: %2").arg(c.name, message)));
        QVERIFY2(!session.hasModel(), c.name);
        QVERIFY2(snapshot(dir.path()) == before, c.name);
    }

    // A mask for another model (its layer count wrong): the workspace opens, the log says so.
    const QString path = dir.filePath(QStringLiteral("othermask.npw.json"));
    nlohmann::json j = base;
    j["mask"]["pruned_units"].push_back(nlohmann::json::array());
    writeBytes(path, QByteArray::fromStdString(j.dump()));
    writeBytes(QString::fromStdString(npw::workspaceStatsPath(path.toStdString())), stats);
    StudioSession session;
    QSignalSpy log(&session, &StudioSession::logMessage);
    QSignalSpy failed(session.jobs(), &JobRunner::failed);
    QVERIFY(session.openWorkspace(path));
    QVERIFY(waitIdle(session));
    QCOMPARE(failed.count(), 0);
    QVERIFY(session.hasModel());
    bool told = false;
    for (const auto& entry : log) told |= entry.at(0).toString().contains(QStringLiteral("does not fit"));
    QVERIFY(told);
}

void TestStudioHostile::workspaceOverASourceWritesNothing() {
    QTemporaryDir dir;
    const QString model = copyDemoModel(dir, QStringLiteral("source"));
    StudioSession session;
    QVERIFY(session.openModel(model));
    QVERIFY(waitIdle(session));
    openAndScore(session);
    QThreadPool::globalInstance()->waitForDone();
    const auto before = snapshot(dir.path());
    for (const QString& path : {model + "/config.json", model + "/model.safetensors", model + "/tokenizer.json", model}) {
        const QString error = npw::test::errorOf([&] { session.saveWorkspace(path); });
        QVERIFY2(error.contains(QStringLiteral("refusing")), qPrintable(path + ": " + error));
        QVERIFY2(snapshot(dir.path()) == before, qPrintable(path));
    }
    // The image model's folder is guarded as well as the language model's.
    const QString images = copyDemoModel(dir, QStringLiteral("images"));
    const auto withImages = snapshot(dir.path());
    const QString error = npw::test::errorOf(
        [&] { session.saveWorkspace(images + "/config.json", nullptr, images.toStdString()); });
    QVERIFY2(error.contains(QStringLiteral("refusing")), qPrintable(error));
    QVERIFY(snapshot(dir.path()) == withImages);
}

QTEST_MAIN(TestStudioHostile)
#include "tst_studio_hostile.moc"
