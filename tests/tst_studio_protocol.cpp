// One number for one question: the same model and held-out text give the same perplexity from
// every path, because every path takes the one protocol (core/eval/evaluation_protocol.h) —
// `npw eval`, the dense row of `npw sweep`, and the studio's sweep (core's SweepRequest through
// StudioSession) agree to 1e-9 relative; `npw prune --out X` then `npw eval X` gives the sweep's
// row for the same method and ratio (the same calibration by default: 128 windows of the model's
// context, here 8). Every row says what it measured (windows, their length, the cap, the text's
// hash, the calibration's). Also the protocol's arithmetic, the calibration's coverage and the
// overlap warning against hand counts, and the refusals that replaced silent fallbacks (a prompt
// without a tokenizer, a tokenizer far smaller than the vocabulary). Runs the npw binary of this
// build tree on demo:lm (context 512).
#include "app/studio/studiosession.h"
#include "core/eval/evaluation_protocol.h"
#include "core/experiments/language_workbench.h"
#include "core/experiments/sweep.h"
#include "core/prune/calibration.h"
#include "core/util/content_hash.h"
#include "core/util/paths.h"
#include "studio_session_helpers.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <nlohmann/json.hpp>

using namespace studio_test;
using Json = nlohmann::json;

namespace {

constexpr int kWindows = 3;      // a cap, so the suite stays quick: the first 3 windows of 512
constexpr int kSamples = 8;      // calibration windows (of the model's context, the default)
const char* kRatio = "0.2";

bool closeTo(double a, double b) { return std::abs(a - b) <= 1e-9 * std::abs(b); }

} // namespace

class TestStudioProtocol : public QObject {
    Q_OBJECT

    QString npw_;
    QString calib_, eval_;

    // Runs npw; stdout parsed as JSON when `json`. exit code and stderr returned through the pointers.
    Json run(const QStringList& args, int* exitCode = nullptr, QString* err = nullptr) {
        QProcess p;
        p.start(npw_, args);
        p.waitForFinished(600000);
        if (exitCode) *exitCode = p.exitCode();
        const QString stderrText = QString::fromUtf8(p.readAllStandardError());
        if (err) *err = stderrText;
        if (p.exitCode() != 0) {
            if (!exitCode) qWarning("npw %s failed: %s", qPrintable(args.join(' ')), qPrintable(stderrText));
            return nullptr;
        }
        const std::string out = p.readAllStandardOutput().toStdString();
        return args.contains("--json") ? Json::parse(out) : Json(out);
    }

    static const Json* rowOf(const Json& sweep, const std::string& method) {
        for (const Json& r : sweep["rows"])
            if (r["method"] == method && r["eval"] == "kjv-nt") return &r;
        return nullptr;
    }

private slots:
    void initTestCase() {
        npw_ = QCoreApplication::applicationDirPath() + "/../app/npw";
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        calib_ = QString::fromStdString(studio::defaultCalibrationSource());
        eval_ = QString::fromStdString(studio::defaultEvaluationSource());
    }

    void protocolResolvesAsThePapers() {
        const npw::EvaluationProtocol all;  // 2048, every window
        npw::EvaluationProtocol::Resolved r = all.resolve(512, 10000);
        QCOMPARE(r.seqlen, int64_t(512));  // capped at the context
        QCOMPARE(r.availableWindows, int64_t(19));  // floor(10000 / 512)
        QCOMPARE(r.windows, int64_t(19));
        QCOMPARE(r.tokens, int64_t(19 * 511));
        QVERIFY(!r.capped());
        r = all.resolve(4096, 10000);
        QCOMPARE(r.seqlen, int64_t(2048));
        QCOMPARE(r.windows, int64_t(4));
        const npw::EvaluationProtocol capped{0, 3};  // 0: the protocol's 2048
        r = capped.resolve(512, 10000);
        QCOMPARE(r.seqlen, int64_t(512));
        QCOMPARE(r.windows, int64_t(3));
        QVERIFY(r.capped());
        // The defaults every path shares: sweep, the studio's request, the Run settings.
        QCOMPARE(npw::SweepSpec{}.evaluation, npw::EvaluationProtocol{});
        QCOMPARE(npw::SweepRequest{}.evaluation, npw::EvaluationProtocol{});
        QCOMPARE(studio::RunSettings{}.calibration.samples, npw::CalibrationRequest{}.samples);
        QCOMPARE(studio::RunSettings{}.calibration.seqlen, npw::CalibrationRequest{}.seqlen);
        QCOMPARE(npw::SweepSpec{}.calibSeqlens.at(0), npw::CalibrationRequest{}.seqlen);
    }

    void evalSweepAndStudioAgree() {
        // npw eval: the protocol with a window cap.
        const Json eval = run({"eval", "demo:lm", "--text", eval_, "--max-windows", QString::number(kWindows), "--json"});
        QVERIFY(!eval.is_null());
        QCOMPARE(eval["seqlen"].get<int64_t>(), int64_t(512));
        QCOMPARE(eval["windows"].get<int64_t>(), int64_t(kWindows));
        QCOMPARE(eval["max_windows"].get<int64_t>(), int64_t(kWindows));
        const std::string hash = npw::fileContentHash(eval_.toStdString());
        QCOMPARE(eval["text_hash"].get<std::string>(), hash);
        QCOMPARE(eval["text_name"].get<std::string>(), std::string("kjv-nt"));
        const double ppl = eval["ppl"].get<double>();

        // npw sweep: its dense row, and a pruned row.
        QTemporaryDir dir;
        const QString csv = dir.filePath("sweep.csv");
        const Json sweep = run({"sweep", "demo:lm", "--methods", "numerical", "--ratios", kRatio, "--calib", calib_,
                                "--nsamples", QString::number(kSamples), "--seeds", "1", "--eval", "text:" + eval_, "--max-windows",
                                QString::number(kWindows), "--csv", csv, "--json"});
        QVERIFY(!sweep.is_null());
        const Json* dense = rowOf(sweep, "dense");
        const Json* pruned = rowOf(sweep, "numerical");
        QVERIFY(dense && pruned);
        QVERIFY2(closeTo((*dense)["ppl"].get<double>(), ppl),
                 qPrintable(QStringLiteral("sweep %1, eval %2").arg((*dense)["ppl"].get<double>(), 0, 'g', 17).arg(ppl, 0, 'g', 17)));
        for (const Json* row : {dense, pruned}) {
            QCOMPARE((*row)["eval_seqlen"].get<int64_t>(), int64_t(512));
            QCOMPARE((*row)["eval_windows"].get<int64_t>(), int64_t(kWindows));
            QCOMPARE((*row)["eval_max_windows"].get<int64_t>(), int64_t(kWindows));
            QCOMPARE((*row)["eval_tokens"].get<int64_t>(), eval["tokens"].get<int64_t>());
            QCOMPARE((*row)["eval_hash"].get<std::string>(), hash);
        }
        // The pruned row's calibration: the protocol's length (the context), the file's hash.
        QCOMPARE((*pruned)["calib_seqlen"].get<int64_t>(), int64_t(512));
        QCOMPARE((*pruned)["calib_samples"].get<int64_t>(), int64_t(kSamples));
        QCOMPARE((*pruned)["calib_hash"].get<std::string>(), npw::fileContentHash(calib_.toStdString()));
        QVERIFY((*pruned)["calib_distinct_tokens"].get<int64_t>() > 0);
        QFile csvFile(csv);
        QVERIFY(csvFile.open(QIODevice::ReadOnly));
        const QString header = QString::fromUtf8(csvFile.readLine());
        for (const char* column : {"eval_seqlen", "eval_windows", "eval_max_windows", "eval_hash", "calib_source", "calib_hash"})
            QVERIFY2(header.contains(QLatin1String(column)), column);

        // npw prune --out X, then npw eval X: the sweep's row for the same method and ratio.
        const QString out = dir.filePath("pruned");
        const Json prune = run({"prune", "demo:lm", "--method", "numerical", "--ratio", kRatio, "--calib", calib_,
                                "--nsamples", QString::number(kSamples), "--out", out, "--json"});
        QVERIFY(!prune.is_null());
        QCOMPARE(prune["calibration"]["seqlen"].get<int64_t>(), int64_t(512));
        QCOMPARE(prune["calibration"]["source_hash"].get<std::string>(), (*pruned)["calib_hash"].get<std::string>());
        QCOMPARE(prune["calibration"]["distinct_tokens"].get<int64_t>(), (*pruned)["calib_distinct_tokens"].get<int64_t>());
        const Json prunedEval = run({"eval", out, "--text", eval_, "--max-windows", QString::number(kWindows), "--json"});
        QVERIFY(!prunedEval.is_null());
        QVERIFY2(closeTo(prunedEval["ppl"].get<double>(), (*pruned)["ppl"].get<double>()),
                 qPrintable(QStringLiteral("prune+eval %1, sweep %2")
                                .arg(prunedEval["ppl"].get<double>(), 0, 'g', 17)
                                .arg((*pruned)["ppl"].get<double>(), 0, 'g', 17)));

        // The studio's sweep: the Run settings' calibration (8 windows, the default length) and
        // the Sweep form's cap, through StudioSession as the window runs it.
        StudioSession session;
        QVERIFY(session.openModel(QStringLiteral("demo:lm")));
        QVERIFY(waitIdle(session));
        studio::RunSettings settings = session.settings();
        settings.calibration.samples = kSamples;  // seqlen: the default (the model's context)
        settings.calibration.source = calib_.toStdString();
        session.setSettings(settings);
        SweepRequest request;
        request.methods = {"numerical"};
        request.ratios = {0.2};
        request.evaluation.maxWindows = kWindows;
        request.evalSources = {"text:" + eval_.toStdString()};
        QVERIFY(session.runSweep(request));
        QVERIFY(waitIdle(session));
        const npw::SweepRow* studioDense = nullptr;
        const npw::SweepRow* studioPruned = nullptr;
        for (const npw::SweepRow& r : session.sweepRows()) {
            if (r.method == "dense") studioDense = &r;
            if (r.method == "numerical") studioPruned = &r;
        }
        QVERIFY(studioDense && studioPruned);
        QVERIFY2(closeTo(studioDense->ppl, ppl), qPrintable(QString::number(studioDense->ppl, 'g', 17)));
        QVERIFY2(closeTo(studioPruned->ppl, (*pruned)["ppl"].get<double>()),
                 qPrintable(QString::number(studioPruned->ppl, 'g', 17)));
        QCOMPARE(studioPruned->evalWindows, int64_t(kWindows));
        QCOMPARE(studioPruned->evalMaxWindows, int64_t(kWindows));
        QCOMPARE(studioPruned->calibSeqlen, int64_t(512));
        QCOMPARE(studioPruned->evalHash, hash);

        // A workspace row survives its JSON; one written before these fields reads them as unknown.
        const npw::SweepRow back = npw::sweepRowFromJson(npw::sweepRowJson(*studioPruned));
        QCOMPARE(back.evalWindows, studioPruned->evalWindows);
        QCOMPARE(back.calibHash, studioPruned->calibHash);
        Json old = npw::sweepRowJson(*studioPruned);
        for (const char* key : {"eval_seqlen", "eval_windows", "eval_max_windows", "eval_hash", "calib_source", "calib_hash",
                                "calib_distinct_tokens"})
            old.erase(key);
        const npw::SweepRow older = npw::sweepRowFromJson(old);
        QCOMPARE(older.evalWindows, int64_t(0));
        QVERIFY(older.evalHash.empty());
        QCOMPARE(older.ppl, studioPruned->ppl);
    }

    void calibrationCoverageIsCountedAndReuseWarned() {
        // Windows at hand-checkable offsets: a stream of 300 tokens, 64 windows of 100 cover at
        // most 300 distinct positions; the count is the union of the intervals.
        std::vector<int32_t> stream(300);
        for (size_t i = 0; i < stream.size(); ++i) stream[i] = int32_t(i % 50);
        const npw::CalibrationSet set = npw::drawCalibrationSet(stream, 64, 100, 0, "short.txt");
        QVERIFY(set.distinctTokens <= 300);
        QVERIFY(set.distinctTokens >= 100);
        npw::CalibrationSummary summary = npw::CalibrationSummary::of(set);
        QCOMPARE(summary.distinctTokens, set.distinctTokens);
        const std::string warning = npw::calibrationReuseWarning(summary);
        QVERIFY2(QString::fromStdString(warning).contains(QStringLiteral("6400 positions cover only")), warning.c_str());
        QVERIFY(warning.find("short.txt") != std::string::npos);
        // A long text drawn a little: no warning.
        std::vector<int32_t> longStream(100000, 1);
        QVERIFY(npw::calibrationReuseWarning(npw::CalibrationSummary::of(npw::drawCalibrationSet(longStream, 8, 100, 0)))
                    .empty());
        // Non-overlapping windows at known offsets: the union is exact.
        const npw::CalibrationSet two = npw::drawCalibrationSet(std::vector<int32_t>(100, 3), 4, 100, 0);
        QCOMPARE(two.distinctTokens, int64_t(100));  // every window is the whole stream
    }

    void evaluatingOnTheCalibrationTextIsWarned() {
        npw::CalibrationPool pool;
        pool.source = "cal.txt";
        pool.sourceHash = "fnv1a64:0000000000000001";
        for (int i = 0; i < 5000; ++i) pool.stream.push_back(int32_t((i * 7919) % 1000));
        // The same bytes.
        QVERIFY(npw::calibrationOverlapWarning(pool, "ev", pool.sourceHash, {}).find("the same bytes") != std::string::npos);
        // A tenth of the calibration stream inside another text: 15 of its 32-token spans.
        std::vector<int32_t> eval(pool.stream.begin() + 1000, pool.stream.begin() + 1480);
        for (int i = 0; i < 4320; ++i) eval.push_back(int32_t(2000 + i));
        const std::string w = npw::calibrationOverlapWarning(pool, "ev", "fnv1a64:0000000000000002", eval);
        QVERIFY2(w.find("15 of the 150 32-token spans") != std::string::npos, w.c_str());
        // Disjoint: none.
        std::vector<int32_t> other(4800);
        for (size_t i = 0; i < other.size(); ++i) other[i] = int32_t(5000 + i);
        QVERIFY(npw::calibrationOverlapWarning(pool, "ev", "fnv1a64:0000000000000003", other).empty());
    }

    void silentFallbacksAreRefused() {
        QTemporaryDir dir;
        // A model without a tokenizer: demo:lm's weights in a folder of their own.
        const QString bare = dir.filePath("bare");
        const QString demo = QString::fromStdString(npw::resourcesDir()) + "/demo/lm";
        QVERIFY(QDir().mkpath(bare));
        for (const QString& f : QDir(demo).entryList(QDir::Files))
            if (!f.startsWith(QLatin1String("tokenizer"))) QVERIFY(QFile::copy(demo + "/" + f, bare + "/" + f));
        int code = 0;
        QString err;
        run({"generate", bare, "--prompt", "And Jesus said", "--tokens", "4"}, &code, &err);
        QCOMPARE(code, 1);
        QVERIFY2(err.contains(bare) && err.contains("--tokenizer") && err.contains("--prompt-ids"), qPrintable(err));
        run({"generate", bare, "--prompt-ids", "1 5", "--tokens", "2"}, &code, &err);
        QCOMPARE(code, 0);

        // A tokenizer of far fewer pieces than the vocabulary (babyllama's 105 on demo:lm's 2,048):
        // refused, naming both sizes and the override; used when asked for.
        const QString smallTok = QStringLiteral(NPW_TEST_DATA "/sentencepiece/tok105.model");
        run({"eval", "demo:lm", "--tokenizer", smallTok, "--text", eval_, "--max-windows", "1"}, &code, &err);
        QCOMPARE(code, 1);
        QVERIFY2(err.contains(smallTok) && err.contains("has 105 tokens") && err.contains("2048") &&
                     err.contains("--allow-small-vocab"),
                 qPrintable(err));
        run({"eval", "demo:lm", "--tokenizer", smallTok, "--allow-small-vocab", "--text", eval_, "--max-windows", "1"},
            &code, &err);
        QCOMPARE(code, 0);
    }
};

QTEST_MAIN(TestStudioProtocol)
#include "tst_studio_protocol.moc"
