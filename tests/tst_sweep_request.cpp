// core/experiments/sweep_request.h: the one translation of a sweep as asked (`npw sweep`'s flags,
// the studio's Sweep tab) into core's SweepSpec. Checked against the tokenizer called directly
// on the same files (the calibration stream and text evaluation sets), the ids written by the
// test (id files), the data set's label, and the request's axes and defaults; bad items are
// refused with an npw::Error naming them. On demo:lm.
#include "core/experiments/run_settings.h"
#include "core/experiments/sweep_request.h"
#include "core/util/atomic_file.h"
#include "core/util/content_hash.h"
#include "core/util/error.h"

#include "error_of.h"

#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

using namespace npw;

namespace {

const std::string kCalibText =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness "
    "was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there "
    "be light: and there was light.\n";
const std::string kEvalText = "Blessed are the poor in spirit: for theirs is the kingdom of heaven.\n";
const std::string kWikiTest = NPW_TEST_DATA "/text_datasets/wikitext-2-raw/wiki.test.raw";

} // namespace

class TestSweepRequest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        lm_ = openLanguageModel("demo:lm", chooseRuntime("cpu"));
        QVERIFY(dir_.isValid());
        calib_ = dir_.filePath(QStringLiteral("calib.txt")).toStdString();
        eval_ = dir_.filePath(QStringLiteral("held-out.txt")).toStdString();
        ids_ = dir_.filePath(QStringLiteral("some.ids")).toStdString();
        lines_ = dir_.filePath(QStringLiteral("lines.ids")).toStdString();
        writeTextAtomically(calib_, kCalibText);
        writeTextAtomically(eval_, kEvalText);
        writeTextAtomically(ids_, "5 17 3\n9 2\n");
        writeTextAtomically(lines_, "1 2 3 4 5 6 7 8 9 10\n11 12 13 14 15 16 17 18 19 20\n21 22 23 24 25 26 27 28 29 30\n");
    }

    void everyFieldReachesTheSpec() {
        SweepRequest r;
        r.methods = {"numerical", "flap"};
        r.ratios = {0.1, 0.5};
        r.seeds = 2;
        r.evaluation.seqlen = 16;
        r.evaluation.maxWindows = 3;
        r.calibration.source = calib_;
        r.calibration.samples = 6;
        r.calibration.seqlen = 12;
        r.lambdaRel = 2;
        r.alpha = 0.5;
        r.alphaMode = AlphaMode::Paper;
        r.zeroShotTask = defaultZeroShotTask();
        r.zeroShotLimit = 5;
        r.measureSpeed = true;
        r.speedTokens = 7;
        r.speedRepeats = 2;
        r.evalSources = {"text:" + eval_, "ids:" + ids_, "wikitext2:" + kWikiTest};
        const SweepSpec spec = buildSweepSpec(lm_, r);

        QCOMPARE(spec.methods, r.methods);
        QCOMPARE(spec.ratios, r.ratios);
        QCOMPARE(spec.seeds, 2);
        // No axes given: the calibration's samples and length; relative λ (NaN) at λ_rel.
        QCOMPARE(spec.calibSamples, std::vector<int64_t>{6});
        QCOMPARE(spec.calibSeqlens, std::vector<int64_t>{12});
        QCOMPARE(spec.lambdas.size(), size_t(1));
        QVERIFY(std::isnan(spec.lambdas[0]));
        QCOMPARE(spec.lambdaRel, 2.0);
        QCOMPARE(spec.alpha, 0.5);
        QVERIFY(spec.alphaMode == AlphaMode::Paper);
        QCOMPARE(spec.evaluation.seqlen, int64_t(16));
        QCOMPARE(spec.evaluation.maxWindows, int64_t(3));
        // The calibration pool: the text tokenized once with BOS, as the tokenizer gives it.
        QCOMPARE(spec.calibStream, lm_.encode(kCalibText, true));
        QCOMPARE(spec.calibSource, calib_);
        QVERIFY(spec.calibSequences.empty() && spec.calibDocuments.empty());
        QCOMPARE(spec.zeroShotTasks.size(), size_t(1));
        QCOMPARE(spec.zeroShotTasks[0].items.size(), size_t(5));
        QVERIFY(spec.measureSpeed);
        QCOMPARE(spec.speedPromptTokens, int64_t(7));
        QCOMPARE(spec.speedDecodeTokens, int64_t(7));
        QCOMPARE(spec.speedRepeats, 2);

        QCOMPARE(spec.evalSets.size(), size_t(3));
        QCOMPARE(spec.evalSets[0].name, std::string("held-out"));
        QVERIFY(spec.evalSets[0].isText);
        QCOMPARE(spec.evalSets[0].ids, lm_.encode(kEvalText, true));
        QCOMPARE(spec.evalSets[1].name, std::string("some"));
        QVERIFY(!spec.evalSets[1].isText);
        QCOMPARE(spec.evalSets[1].ids, (std::vector<int32_t>{5, 17, 3, 9, 2}));
        QCOMPARE(spec.evalSets[2].name, std::string("wikitext2-test"));
        QVERIFY(spec.evalSets[2].isText);
        QVERIFY(!spec.evalSets[2].ids.empty());
        // Which texts, exactly: each file's content hash (the rows carry them).
        QCOMPARE(spec.evalSets[0].hash, fileContentHash(eval_));
        QCOMPARE(spec.evalSets[1].hash, fileContentHash(ids_));
        QCOMPARE(spec.evalSets[2].hash, fileContentHash(kWikiTest));
        QCOMPARE(spec.calibSourceHash, fileContentHash(calib_));
        QVERIFY(spec.evalSets[0].hash != spec.calibSourceHash);
    }

    void axesAndPerLineCalibration() {
        SweepRequest r;
        r.calibration.source = lines_;
        r.calibration.perLine = true;
        r.calibSamples = {2, 3};
        r.calibSeqlens = {4, 8};
        r.lambdas = {1e-3, 1e-1};  // absolute: one curve each
        r.evalSources = {};
        const SweepSpec spec = buildSweepSpec(lm_, r);
        QCOMPARE(spec.calibSamples, (std::vector<int64_t>{2, 3}));
        QCOMPARE(spec.calibSeqlens, (std::vector<int64_t>{4, 8}));
        QCOMPARE(spec.lambdas, (std::vector<double>{1e-3, 1e-1}));
        QCOMPARE(spec.calibSequences.size(), size_t(3));  // one per line
        QCOMPARE(spec.calibSequences[1].front(), 11);
        QVERIFY(spec.evalSets.empty() && spec.zeroShotTasks.empty() && !spec.measureSpeed);
        // The defaults are the studio form's quick look.
        QCOMPARE(spec.methods, (std::vector<std::string>{"numerical", "flap", "wanda-sp"}));
        QCOMPARE(spec.ratios, (std::vector<double>{0.1, 0.2, 0.3}));
    }

    void badItemsAreNamed() {
        SweepRequest r;
        r.calibration.source = calib_;
        r.evalSources = {eval_};  // a bare path: the CLI asks for text:FILE
        QString e = test::errorOf([&] { buildSweepSpec(lm_, r); });
        QVERIFY2(e.contains(QStringLiteral("evaluation set '%1'").arg(QString::fromStdString(eval_))), qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("text:FILE, ids:FILE or a data set")), qPrintable(e));
        r.evalSources = {"text:/nonexistent/held-out.txt"};
        e = test::errorOf([&] { buildSweepSpec(lm_, r); });
        QVERIFY2(e.contains(QStringLiteral("/nonexistent/held-out.txt")), qPrintable(e));
        r.evalSources = {"ids:" + calib_};  // words, not ids
        QVERIFY(test::errorOf([&] { buildSweepSpec(lm_, r); }).contains(QString::fromStdString(calib_)));
        r.evalSources = {};
        r.calibration.source = "/nonexistent/calib.txt";
        QVERIFY(test::errorOf([&] { buildSweepSpec(lm_, r); }).contains(QStringLiteral("/nonexistent/calib.txt")));
        r.calibration.source = calib_;
        r.zeroShotTask = "mc:/nonexistent/task.jsonl";
        QVERIFY(test::errorOf([&] { buildSweepSpec(lm_, r); }).contains(QStringLiteral("/nonexistent/task.jsonl")));
    }

    void formPathsBecomeTextSources() {
        QCOMPARE(evalSourceOfPath("/data/kjv-nt.txt"), std::string("text:/data/kjv-nt.txt"));
        QCOMPARE(evalSourceOfPath("text:/data/a.txt"), std::string("text:/data/a.txt"));
        QCOMPARE(evalSourceOfPath("ids:/data/a.ids"), std::string("ids:/data/a.ids"));
        QCOMPARE(evalSourceOfPath("wikitext2:/data/wiki.test.raw"), std::string("wikitext2:/data/wiki.test.raw"));
        QCOMPARE(evalSourceOfPath("c4-validation:/d/c4.json.gz"), std::string("c4-validation:/d/c4.json.gz"));
        // A data set's name with a bad split stays, so that building the spec says what is wrong.
        QCOMPARE(evalSourceOfPath("ptb-sideways:/d/p.txt"), std::string("ptb-sideways:/d/p.txt"));
    }

    void rowsInOneLine() {
        SweepRow ppl;
        ppl.method = "numerical";
        ppl.ratio = 0.2;
        ppl.achievedRatio = 0.19876;
        ppl.ppl = 61.234;
        QCOMPARE(sweepRowSummary(ppl), std::string("numerical at ρ = 0.2: 19.9% of attention + MLP removed, perplexity 61.23"));
        SweepRow acc = ppl;
        acc.evalSet = "nt-verse-endings";
        acc.acc = 0.625;
        acc.evalTokens = 8;
        QCOMPARE(sweepRowSummary(acc), std::string("numerical at ρ = 0.2: nt-verse-endings accuracy 0.625 (8 items)"));
        SweepRow speed;
        speed.method = "dense";
        speed.evalSet = kSpeedEvalSet;
        speed.decodeTokensPerSecond = 412.4;
        speed.prefillTokensPerSecond = 1999.6;
        speed.weightsMiB = 1.234;
        speed.kvCacheMiB = 0.0626;
        speed.speedRuns = 5;
        speed.decodeSlowest = 398.2;
        speed.decodeFastest = 420.9;
        QCOMPARE(sweepRowSummary(speed), std::string("dense at ρ = 0: decode 412 tokens/s (median of 5 runs, 398–421), "
                                                     "prefill 2000 tokens/s, weights 1.23 MiB, KV cache 0.063 MiB"));
        // One run says so: no range, no "± 0".
        speed.speedRuns = 1;
        speed.decodeSlowest = speed.decodeFastest = 412.4;
        QCOMPARE(sweepRowSummary(speed), std::string("dense at ρ = 0: decode 412 tokens/s (1 run), prefill 2000 tokens/s, "
                                                     "weights 1.23 MiB, KV cache 0.063 MiB"));
        // A speed row's runs and load survive the workspace's JSON.
        speed.loadAverage = 2.5;
        const SweepRow back = sweepRowFromJson(sweepRowJson(speed));
        QCOMPARE(back.speedRuns, 1);
        QCOMPARE(back.decodeFastest, 412.4);
        QCOMPARE(back.loadAverage, 2.5);
    }

private:
    LanguageModel lm_;
    QTemporaryDir dir_;
    std::string calib_, eval_, ids_, lines_;
};

QTEST_MAIN(TestSweepRequest)
#include "tst_sweep_request.moc"
