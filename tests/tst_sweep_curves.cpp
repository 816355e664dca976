// core/eval/sweep_curves.h: which sweep points form one curve (per method, per value of an
// ablation axis that varies, per held-out text for perplexity), where the dense model goes (the
// baseline, or the start of every curve of its text), and the names the plots' legends show.
#include "core/eval/sweep_curves.h"

#include <QtTest>
#include <cmath>
#include <limits>

using namespace npw;

namespace {

const double kNoLambda = std::numeric_limits<double>::quiet_NaN();

SweepPointKey key(SweepPlot plot, const std::string& method, const std::string& evalSet, int64_t samples = 128,
                  int64_t seqlen = 128, double lambda = kNoLambda) {
    SweepPointKey k;
    k.plot = plot;
    k.method = method;
    k.evalSet = evalSet;
    k.calibSamples = samples;
    k.calibSeqlen = seqlen;
    k.lambda = lambda;
    return k;
}

// The dense model's points as the sweep writes them: no calibration, no λ.
SweepPointKey dense(SweepPlot plot, const std::string& evalSet) { return key(plot, "dense", evalSet, 0, 0); }

// "P 3 numerical", "Z 0 <baseline>", "P 0 numerical · jargon <start>": plot, point, curve.
QStringList describe(const std::vector<SweepCurvePoint>& curves) {
    QStringList out;
    for (const SweepCurvePoint& c : curves) {
        const char* plot = c.plot == SweepPlot::Perplexity ? "P" : c.plot == SweepPlot::ZeroShot ? "Z" : "S";
        QString line = QStringLiteral("%1 %2 ").arg(QLatin1String(plot)).arg(c.point);
        line += c.curve.empty() ? QStringLiteral("<baseline>") : QString::fromStdString(c.curve);
        if (c.denseStart) line += QStringLiteral(" <start>");
        out << line;
    }
    return out;
}

} // namespace

class TestSweepCurves : public QObject {
    Q_OBJECT
private slots:
    void nothingToGroup();
    void oneCurvePerMethodOnOneText();
    void everyPlotHasItsDenseBaseline();
    void anAblationAxisThatVariesNamesTheCurves();
    void lambdaNamesOnlyTheMethodsThatHaveIt();
    void severalTextsStartEachCurveAtItsDenseModel();
};

void TestSweepCurves::nothingToGroup() { QVERIFY(sweepCurves({}).empty()); }

void TestSweepCurves::oneCurvePerMethodOnOneText() {
    // Two ratios per method: two points of one curve; the dense model is the dashed line.
    const std::vector<SweepPointKey> points = {
        dense(SweepPlot::Perplexity, "kjv-nt"),
        key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 1e-4),
        key(SweepPlot::Perplexity, "flap", "kjv-nt"),
        key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 1e-4),
        key(SweepPlot::Perplexity, "flap", "kjv-nt"),
    };
    QCOMPARE(describe(sweepCurves(points)), (QStringList{"P 0 <baseline>", "P 1 numerical", "P 2 flap",
                                                          "P 3 numerical", "P 4 flap"}));
}

void TestSweepCurves::everyPlotHasItsDenseBaseline() {
    // As the sweep streams them per model: speed, perplexity, zero-shot. Zero-shot and speed
    // curves never name a text, and their dense points stay baselines even with several texts.
    const std::vector<SweepPointKey> points = {
        dense(SweepPlot::Speed, "speed"),
        dense(SweepPlot::Perplexity, "kjv-nt"),
        dense(SweepPlot::Perplexity, "jargon"),
        dense(SweepPlot::ZeroShot, "nt-endings"),
        key(SweepPlot::Speed, "wanda-sp", "speed"),
        key(SweepPlot::Perplexity, "wanda-sp", "kjv-nt"),
        key(SweepPlot::Perplexity, "wanda-sp", "jargon"),
        key(SweepPlot::ZeroShot, "wanda-sp", "nt-endings"),
    };
    QCOMPARE(describe(sweepCurves(points)),
             (QStringList{"S 0 <baseline>", "Z 3 <baseline>", "S 4 wanda-sp", "P 5 wanda-sp · kjv-nt",
                          "P 6 wanda-sp · jargon", "Z 7 wanda-sp", "P 2 wanda-sp · jargon <start>",
                          "P 1 wanda-sp · kjv-nt <start>"}));
}

void TestSweepCurves::anAblationAxisThatVariesNamesTheCurves() {
    // Samples vary, the sequence length does not: " n=…" only. The dense model's 0 samples do
    // not count as a value of the axis.
    std::vector<SweepPointKey> points = {
        dense(SweepPlot::Perplexity, "kjv-nt"),
        key(SweepPlot::Perplexity, "flap", "kjv-nt", 16, 64),
        key(SweepPlot::Perplexity, "flap", "kjv-nt", 128, 64),
        key(SweepPlot::ZeroShot, "flap", "task", 16, 64),
    };
    QCOMPARE(describe(sweepCurves(points)),
             (QStringList{"P 0 <baseline>", "P 1 flap n=16", "P 2 flap n=128", "Z 3 flap n=16"}));
    // Both vary: both name the curve, samples first.
    points.push_back(key(SweepPlot::Perplexity, "flap", "kjv-nt", 16, 128));
    QCOMPARE(describe(sweepCurves(points)),
             (QStringList{"P 0 <baseline>", "P 1 flap n=16 L=64", "P 2 flap n=128 L=64", "Z 3 flap n=16 L=64",
                          "P 4 flap n=16 L=128"}));
    // One value each (the dense model's zeros aside): the method alone.
    const std::vector<SweepPointKey> one = {dense(SweepPlot::Perplexity, "kjv-nt"),
                                            key(SweepPlot::Perplexity, "flap", "kjv-nt", 16, 64)};
    QCOMPARE(describe(sweepCurves(one)), (QStringList{"P 0 <baseline>", "P 1 flap"}));
}

void TestSweepCurves::lambdaNamesOnlyTheMethodsThatHaveIt() {
    // λ as the legend has always written it (three significant digits); FLAP has no λ.
    const std::vector<SweepPointKey> points = {
        key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 1e-4),
        key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 100),
        key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 1e-8),
        key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 0.012345),
        key(SweepPlot::Perplexity, "flap", "kjv-nt"),
        dense(SweepPlot::Perplexity, "kjv-nt"),
    };
    QCOMPARE(describe(sweepCurves(points)),
             (QStringList{QStringLiteral("P 0 numerical λ=0.0001"), QStringLiteral("P 1 numerical λ=100"),
                          QStringLiteral("P 2 numerical λ=1e-08"), QStringLiteral("P 3 numerical λ=0.0123"),
                          QStringLiteral("P 4 flap"), QStringLiteral("P 5 <baseline>")}));
    // The same names as the plots' legends: Qt's 'g' with 3 digits.
    QCOMPARE(QStringLiteral("λ=%1").arg(1e-8, 0, 'g', 3), QStringLiteral("λ=1e-08"));
    QCOMPARE(QStringLiteral("λ=%1").arg(0.012345, 0, 'g', 3), QStringLiteral("λ=0.0123"));
    // One λ: no suffix.
    const std::vector<SweepPointKey> one = {key(SweepPlot::Perplexity, "numerical", "kjv-nt", 128, 128, 1e-4),
                                            key(SweepPlot::Perplexity, "flap", "kjv-nt")};
    QCOMPARE(describe(sweepCurves(one)), (QStringList{"P 0 numerical", "P 1 flap"}));
}

void TestSweepCurves::severalTextsStartEachCurveAtItsDenseModel() {
    // Two texts, two methods, two ratios: four curves, each starting at its text's dense point
    // (listed after the others in the order of the curves' names). A text no curve is on (a
    // dense-only row) has nothing to start.
    const std::vector<SweepPointKey> points = {
        dense(SweepPlot::Perplexity, "kjv-nt"),
        dense(SweepPlot::Perplexity, "jargon"),
        dense(SweepPlot::Perplexity, "unused"),
        key(SweepPlot::Perplexity, "magnitude", "kjv-nt"),
        key(SweepPlot::Perplexity, "magnitude", "jargon"),
        key(SweepPlot::Perplexity, "flap", "kjv-nt"),
        key(SweepPlot::Perplexity, "flap", "jargon"),
        key(SweepPlot::Perplexity, "magnitude", "kjv-nt"),
        key(SweepPlot::Perplexity, "magnitude", "jargon"),
    };
    const auto curves = sweepCurves(points);
    QCOMPARE(describe(curves),
             (QStringList{"P 3 magnitude · kjv-nt", "P 4 magnitude · jargon", "P 5 flap · kjv-nt",
                          "P 6 flap · jargon", "P 7 magnitude · kjv-nt", "P 8 magnitude · jargon",
                          "P 1 flap · jargon <start>", "P 0 flap · kjv-nt <start>",
                          "P 1 magnitude · jargon <start>", "P 0 magnitude · kjv-nt <start>"}));
    // No dense line: every dense point is the start of a curve.
    for (const SweepCurvePoint& c : curves) QVERIFY(!c.curve.empty());
}

QTEST_APPLESS_MAIN(TestSweepCurves)
#include "tst_sweep_curves.moc"
