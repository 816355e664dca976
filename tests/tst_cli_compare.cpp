// `npw compare` through the npw binary of this build: a model compared with itself (no divergence,
// KL 0, the same ids as `npw generate`), the JSON's pieces adding up to the text, and bad input
// answered with exit 1 and a message naming the file.
#include <QCoreApplication>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>
#include <nlohmann/json.hpp>

using json = nlohmann::json;

class TestCliCompare : public QObject {
    Q_OBJECT

    QString npw_;
    QTemporaryDir dir_;

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

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        QVERIFY2(QFileInfo::exists(npw_), "build the npw target first");
        QVERIFY(dir_.isValid());
    }

    void modelAgainstItself() {
        const QStringList sampling = {"--tokens", "12", "--temperature", "0.9", "--top-p", "0.95", "--seed", "5"};
        const Run c = run(QStringList{"compare", "demo:lm", "demo:lm", "--prompt", "And he said", "--json"} + sampling);
        QVERIFY2(c.rc == 0, qPrintable(c.err));
        const json j = json::parse(c.out.toStdString());
        const json& models = j.at("prompts").at(0).at("models");
        QCOMPARE(models.size(), size_t(2));
        QCOMPARE(models[1].at("divergence").get<int>(), -1);
        QCOMPARE(models[0].at("kl").get<double>(), 0.0);
        QVERIFY(std::abs(models[1].at("kl").get<double>()) < 1e-9);
        QCOMPARE(models[1].at("ids"), models[0].at("ids"));
        std::string joined;
        for (const auto& p : models[0].at("pieces")) joined += p.get<std::string>();
        QCOMPARE(joined, models[0].at("text").get<std::string>());
        // The dense continuation is what `npw generate` samples with the same options.
        const Run g = run(QStringList{"generate", "demo:lm", "--prompt", "And he said", "--json"} + sampling);
        QVERIFY2(g.rc == 0, qPrintable(g.err));
        const json gj = json::parse(g.out.toStdString());
        QCOMPARE(models[0].at("ids"), gj.at("ids"));
        QCOMPARE(models[0].at("text").get<std::string>(), gj.at("text").get<std::string>());
        // Human output: one line per model and the table.
        const Run h = run(QStringList{"compare", "demo:lm", "demo:lm", "--prompt", "And he said"} + sampling);
        QVERIFY2(h.rc == 0, qPrintable(h.err));
        QVERIFY(h.out.contains("never"));
        QVERIFY(h.out.contains("KL(dense"));
    }

    void promptsFile() {
        const QString path = dir_.filePath("prompts.txt");
        std::ofstream(path.toStdString()) << "In the beginning\n\nBlessed are\n";
        const Run c = run({"compare", "demo:lm", "demo:lm", "--prompts", path, "--tokens", "4", "--json"});
        QVERIFY2(c.rc == 0, qPrintable(c.err));
        const json j = json::parse(c.out.toStdString());
        QCOMPARE(j.at("prompts").size(), size_t(2));  // the empty line is not a prompt
        QCOMPARE(j.at("prompts")[1].at("prompt").get<std::string>(), std::string("Blessed are"));
    }

    void badInput() {
        Run c = run({"compare", "demo:lm", "demo:lm", "--prompts", dir_.filePath("missing.txt")});
        QCOMPARE(c.rc, 1);
        QVERIFY2(c.err.contains("missing.txt") && c.err.contains("--prompts"), qPrintable(c.err));
        c = run({"compare", "demo:lm", "--prompt", "x"});
        QCOMPARE(c.rc, 1);
        QVERIFY2(c.err.contains("PRUNED"), qPrintable(c.err));
        c = run({"compare", "demo:lm", dir_.filePath("nothing-here"), "--prompt", "x"});
        QCOMPARE(c.rc, 1);
        QVERIFY2(c.err.contains("nothing-here"), qPrintable(c.err));
        QVERIFY(!c.err.contains("internal error"));
    }
};

QTEST_GUILESS_MAIN(TestCliCompare)
#include "tst_cli_compare.moc"
