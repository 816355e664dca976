// Replays tests/fuzz/regressions/<target>/* — every input that ever broke npw's contract on
// hostile files (issue 16: the campaign's inputs and what the fuzzers found since) — through
// the same targets the libFuzzer harnesses run (tests/fuzz/fuzz_targets.h), on every ordinary
// build, without clang. Each input must be accepted consistently or refused with npw::Error,
// within a time bound (a hang is a failure too).
#include "tests/fuzz/fuzz_targets.h"

#include <QtTest/QtTest>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

constexpr double kMaxSecondsPerInput = 30;

std::string readBytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
}

} // namespace

class TestFuzzRegressions : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { npw::fuzz::initialize(); }

    void everyTargetHasRegressions() {
        // Each format's folder exists and holds inputs: the campaign covered all of them.
        for (const npw::fuzz::Target& target : npw::fuzz::targets()) {
            const fs::path dir = fs::path(NPW_FUZZ_DIR) / "regressions" / target.name;
            QVERIFY2(fs::is_directory(dir), qPrintable(QString::fromStdString(dir.string() + " is missing")));
            QVERIFY2(!fs::is_empty(dir), qPrintable(QString::fromStdString(dir.string() + " is empty")));
        }
    }

    void replay_data() {
        QTest::addColumn<QString>("target");
        QTest::addColumn<QString>("input");
        for (const npw::fuzz::Target& target : npw::fuzz::targets()) {
            const fs::path dir = fs::path(NPW_FUZZ_DIR) / "regressions" / target.name;
            if (!fs::is_directory(dir)) continue;
            std::vector<fs::path> inputs;
            for (const auto& entry : fs::directory_iterator(dir))
                if (entry.is_regular_file() && entry.path().filename() != "README.md") inputs.push_back(entry.path());
            std::sort(inputs.begin(), inputs.end());
            for (const fs::path& input : inputs) {
                const std::string row = std::string(target.name) + "/" + input.filename().string();
                QTest::newRow(row.c_str()) << QString(target.name) << QString::fromStdString(input.string());
            }
        }
    }

    void replay() {
        QFETCH(QString, target);
        QFETCH(QString, input);
        const std::string bytes = readBytes(input.toStdString());
        const auto start = std::chrono::steady_clock::now();
        std::string refusal;
        const std::string problem = npw::fuzz::check(npw::fuzz::target(target.toStdString()), bytes, &refusal);
        // What npw answered, in the log: "accepted" or the first 300 characters of its error.
        qInfo("%s", refusal.empty() ? "accepted" : refusal.substr(0, 300).c_str());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QVERIFY2(problem.empty(), problem.c_str());
        QVERIFY2(seconds < kMaxSecondsPerInput,
                 qPrintable(QString("took %1 s (a hang): %2").arg(seconds).arg(input)));
    }
};

QTEST_GUILESS_MAIN(TestFuzzRegressions)
#include "tst_fuzz_regressions.moc"
