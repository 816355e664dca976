// The papers' data sets from the command line, as a user types them (issue 14): `npw eval
// --dataset`, `npw prune --calib NAME:FILE`, `npw sweep --calib/--eval NAME:FILE`, on the bundled
// demo:lm and the fixtures of tests/data/text_datasets (see tst_text_datasets for how they were
// made). The eval JSON must report what a user checks against their own pipeline: the corpus
// token count, the windows (count, seqlen, stride) and what was read.
#include "core/data/text_datasets.h"
#include "core/text/tokenizer.h"
#include "core/util/paths.h"

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace npw;
using Json = nlohmann::json;

namespace {

const QString dataDir = QStringLiteral(NPW_TEST_DATA "/text_datasets/");

struct Run {
    int rc = -1;
    QString out, err;
    Json json() const { return Json::parse(out.toStdString()); }
};

} // namespace

class TestCliDatasets : public QObject {
    Q_OBJECT

    QString npw_;

    Run run(const QStringList& args) {
        QProcess p;
        p.start(npw_, args);
        p.waitForFinished(600000);
        return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
    }

    // demo:lm's tokenizer on the prepared text, BOS first: the tokens the eval must report.
    std::vector<int32_t> demoIds(const std::string& spec, int64_t seqlen) {
        auto ref = parseTextDatasetRef(spec);
        const TextDataset data = readTextDataset(*ref, TextDatasetUse::Evaluation);
        const auto tokenizer = Tokenizer::fromFile(resourcesDir() + "/demo/lm/tokenizer.json");
        return evaluationCorpus(data, [&](const std::string& t) { return tokenizer->encode(t, true); }, seqlen).ids;
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
    }

    void evalReportsCorpusAndWindows() {
        const QString spec = "wikitext2:" + dataDir + "wikitext-2-raw/wiki.test.raw";
        const Run r = run({"eval", "demo:lm", "--dataset", spec, "--seqlen", "32", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        const auto ids = demoIds(spec.toStdString(), 32);
        QCOMPARE(j["corpus_tokens"].get<int64_t>(), int64_t(ids.size()));
        QCOMPARE(j["windows"].get<int64_t>(), int64_t(ids.size()) / 32);
        QCOMPARE(j["seqlen"].get<int64_t>(), int64_t(32));
        QCOMPARE(j["stride"].get<int64_t>(), int64_t(32));
        QCOMPARE(j["tokens"].get<int64_t>(), (int64_t(ids.size()) / 32) * 31);
        QCOMPARE(j["dataset"]["name"].get<std::string>(), std::string("wikitext2"));
        QCOMPARE(j["dataset"]["split"].get<std::string>(), std::string("test"));
        QCOMPARE(j["dataset"]["form"].get<std::string>(), std::string("raw-text"));
        QCOMPARE(j["dataset"]["rows"].get<int64_t>(), int64_t(33));
        QVERIFY(std::isfinite(j["ppl"].get<double>()) && j["ppl"].get<double>() > 1);
    }

    void evalCutsC4() {
        const QString spec = "c4:" + dataDir + "c4/c4-validation.00000-of-00008.json.gz";
        const Run r = run({"eval", "demo:lm", "--dataset", spec, "--seqlen", "8", "--max-windows", "4", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        QCOMPARE(j["corpus_tokens"].get<int64_t>(), int64_t(256 * 8));
        QVERIFY(j["dataset"]["tokens_before_cut"].get<int64_t>() > 256 * 8);
        QCOMPARE(j["dataset"]["rows"].get<int64_t>(), int64_t(1100));
        QCOMPARE(j["dataset"]["form"].get<std::string>(), std::string("json-lines"));
        QCOMPARE(j["windows"].get<int64_t>(), int64_t(4));
    }

    void wrongInputsExitOneWithTheFile() {
        struct Case {
            QStringList args;
            QStringList words;
        };
        const std::vector<Case> cases = {
            {{"eval", "demo:lm", "--dataset", "wikitext2:" + dataDir + "bad/no-text-test.jsonl"},
             {"npw eval: error:", "no-text-test.jsonl", "line 2", "\"text\""}},
            {{"eval", "demo:lm", "--dataset", "c4:" + dataDir + "bad/not-gzip-validation.json.gz"},
             {"not-gzip-validation.json.gz", "not gzip"}},
            {{"eval", "demo:lm", "--dataset", "wikitext2:" + dataDir + "hf-rows/rows.jsonl.gz"},
             {"cannot tell which split", "wikitext2-test:"}},
            {{"eval", "demo:lm", "--dataset", "wiki:" + dataDir + "wikitext-2-raw/wiki.test.raw"},
             {"--dataset", "is not wikitext2:FILE"}},
            {{"eval", "demo:lm", "--dataset", "ptb:x", "--text", "y"}, {"exactly one of --text FILE, --ids FILE or --dataset"}},
            {{"prune", "demo:lm", "--method", "flap", "--ratio", "0.2", "--out", "/nonexistent/p", "--calib",
              "wikitext2:" + dataDir + "wikitext-2-raw/wiki.test.raw"},
             {"npw prune: error:", "wiki.test.raw", "test split", "wikitext2-train:"}},
            {{"prune", "demo:lm", "--method", "flap", "--ratio", "0.2", "--out", "/nonexistent/p", "--calib-ids", "--calib",
              "ptb:" + dataDir + "ptb/ptb.train.txt"},
             {"is a data set", "--calib-ids"}},
            // npw sweep reads its flags through core's SweepRequest (as the studio's Sweep tab).
            {{"sweep", "demo:lm", "--methods", "flap", "--ratios", "0.2", "--calib", "ptb:" + dataDir + "ptb/ptb.train.txt",
              "--eval", dataDir + "ptb/ptb.test.txt"},
             {"npw sweep: error:", "evaluation set", "ptb.test.txt", "must be text:FILE, ids:FILE or a data set"}},
            {{"sweep", "demo:lm", "--methods", "flap", "--ratios", "0.2", "--calib-per-line", "--calib",
              "ptb:" + dataDir + "ptb/ptb.train.txt", "--eval", "text:x"},
             {"is a data set", "--calib-per-line"}},
        };
        for (const Case& c : cases) {
            const Run r = run(c.args);
            QVERIFY2(r.rc == 1, qPrintable(c.args.join(' ') + " → " + QString::number(r.rc) + ": " + r.err));
            for (const QString& w : c.words)
                QVERIFY2(r.err.contains(w), qPrintable(c.args.join(' ') + " → " + r.err + " (missing: " + w + ")"));
        }
    }

    void pruneCalibratesOnC4Documents() {
        QTemporaryDir dir;
        const Run r = run({"prune", "demo:lm", "--method", "flap", "--ratio", "0.2", "--nsamples", "6", "--seqlen", "32",
                           "--calib", "c4:" + dataDir + "c4/c4-train.00000-of-01024.json.gz", "--out",
                           dir.filePath("pruned"), "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        const Json j = r.json();
        QVERIFY(j["calibration"]["source"].get<std::string>().rfind("c4-train:", 0) == 0);
        QCOMPARE(j["calibration"]["samples"].get<int64_t>(), int64_t(6));
        QCOMPARE(j["calibration"]["tokens"].get<int64_t>(), int64_t(6 * 32));
        QVERIFY(QFileInfo::exists(dir.filePath("pruned/config.json")));
    }

    void sweepTakesDataSets() {
        const Run r = run({"sweep", "demo:lm", "--methods", "flap", "--ratios", "0.2", "--seeds", "1", "--nsamples", "4",
                           "--seqlen", "32", "--calib", "ptb:" + dataDir + "ptb/ptb.train.txt", "--eval",
                           "wikitext2:" + dataDir + "wikitext-2-raw/wiki.test.raw,c4:" + dataDir +
                               "c4/c4-validation.00000-of-00008.json.gz",
                           "--eval-seqlen", "16", "--max-windows", "8", "--json"});
        QVERIFY2(r.rc == 0, qPrintable(r.err));
        std::set<std::string> sets;
        const Json j = r.json();  // kept: a loop over a temporary's ["rows"] would outlive it
        for (const Json& row : j["rows"]) sets.insert(row["eval"].get<std::string>());
        QCOMPARE(sets, (std::set<std::string>{"wikitext2-test", "c4-validation"}));
    }
};

QTEST_GUILESS_MAIN(TestCliDatasets)
#include "tst_cli_datasets.moc"
