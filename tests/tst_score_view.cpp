// The numbers behind the GUI's score views (core/prune/score_view.h): histogram bins, box-plot
// quantiles (against numpy's default linear interpolation), kept counts and the head grid.
#include "core/prune/score_view.h"
#include "core/util/error.h"

#include <QtTest>
#include <cmath>
#include <limits>
#include <numeric>

using namespace npw;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Two layers: 3 and 2 attention units, 4 and 5 channels.
std::vector<LayerScores> twoLayerScores() {
    return {{{0.3, 0.1, 0.2}, {1.0, 2.0, 3.0, 4.0}}, {{0.5, 0.4}, {5.0, 6.0, 7.0, 8.0, 9.0}}};
}

Mask twoLayerMask() {
    Mask mask;
    mask.keepHeads = {{true, false, true}, {false, false}};
    mask.keepChannels = {{false, true, true, true}, {true, true, false, true, true}};
    return mask;
}

} // namespace

class TestScoreView : public QObject {
    Q_OBJECT
private slots:
    void histogramCountsEveryValueOnce() {
        const HistogramBins h = histogramBins({0.0, 0.1, 0.5, 0.99, 1.0, -0.5, 1.5, kNaN, kInf}, 4, 0.0, 1.0);
        QCOMPARE(h.counts, (std::vector<int64_t>{2, 0, 1, 2}));  // 1.0 = hi lands in the last bin
        QCOMPARE(h.below, int64_t(1));
        QCOMPARE(h.above, int64_t(1));
        QCOMPARE(h.nonFinite, int64_t(2));
        QCOMPARE(h.width, 0.25);
        QCOMPARE(h.center(0), 0.125);
        QCOMPARE(h.hi(), 1.0);
    }

    void histogramBinEdgesAreHalfOpen() {
        const HistogramBins h = histogramBins({0.25, 0.5, 0.75}, 4, 0.0, 1.0);
        QCOMPARE(h.counts, (std::vector<int64_t>{0, 1, 1, 1}));
    }

    void histogramRejectsBadArguments() {
        QVERIFY_THROWS_EXCEPTION(Error, histogramBins({1.0}, 0, 0.0, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, histogramBins({1.0}, 4, 1.0, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, histogramBins({1.0}, 4, 0.0, kInf));
    }

    void keptPrunedHistogramSplitsByMask() {
        const auto h = keptPrunedHistogram({0.1, 0.2, 0.6, 0.9}, {false, true, true, true}, 2, 0.0, 1.0);
        QCOMPARE(h.kept.counts, (std::vector<int64_t>{1, 2}));
        QCOMPARE(h.pruned.counts, (std::vector<int64_t>{1, 0}));
        QVERIFY_THROWS_EXCEPTION(Error, keptPrunedHistogram({0.1}, {true, false}, 2, 0.0, 1.0));
    }

    void binCountGrowsWithSqrtAndIsClamped() {
        QCOMPARE(histogramBinCount(0), 8);
        QCOMPARE(histogramBinCount(400), 20);
        QCOMPARE(histogramBinCount(11008), 60);
    }

    void nonDegenerateWidensSingleValues() {
        const ValueRange one = nonDegenerate(valueRange({2.0, 2.0}));
        QVERIFY(one.lo < 2.0 && one.hi > 2.0);
        const HistogramBins h = histogramBins({2.0, 2.0}, 8, one.lo, one.hi);
        QCOMPARE(std::accumulate(h.counts.begin(), h.counts.end(), int64_t(0)), int64_t(2));
        const ValueRange none = nonDegenerate(valueRange({kNaN}));
        QCOMPARE(none.lo, 0.0);
        QCOMPARE(none.hi, 1.0);
        const ValueRange wide = nonDegenerate(valueRange({-1.0, 3.0}));
        QCOMPARE(wide.lo, -1.0);
        QCOMPARE(wide.hi, 3.0);
    }

    void valueRangeIgnoresNonFinite() {
        ValueRange r = valueRange({kNaN, 3.0, -kInf, -2.0});
        QVERIFY(!r.empty);
        QCOMPARE(r.lo, -2.0);
        QCOMPARE(r.hi, 3.0);
        QVERIFY(valueRange({}).empty);
    }

    // Expected values from numpy.quantile(values, [0, .25, .5, .75, 1]) (linear interpolation).
    void quantilesMatchNumpy_data() {
        QTest::addColumn<std::vector<double>>("values");
        QTest::addColumn<std::vector<double>>("expected");
        QTest::newRow("four") << std::vector<double>{4, 1, 3, 2} << std::vector<double>{1, 1.75, 2.5, 3.25, 4};
        QTest::newRow("three") << std::vector<double>{3, 1, 2} << std::vector<double>{1, 1.5, 2, 2.5, 3};
        QTest::newRow("one") << std::vector<double>{5} << std::vector<double>{5, 5, 5, 5, 5};
        QTest::newRow("ten") << std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
                             << std::vector<double>{0, 2.25, 4.5, 6.75, 9};
        QTest::newRow("NaN ignored") << std::vector<double>{kNaN, 2, 1} << std::vector<double>{1, 1.25, 1.5, 1.75, 2};
    }
    void quantilesMatchNumpy() {
        QFETCH(std::vector<double>, values);
        QFETCH(std::vector<double>, expected);
        const BoxQuantiles q = layerQuantiles(values);
        QCOMPARE(q.min, expected[0]);
        QCOMPARE(q.q1, expected[1]);
        QCOMPARE(q.median, expected[2]);
        QCOMPARE(q.q3, expected[3]);
        QCOMPARE(q.max, expected[4]);
    }

    void whiskersStopAtTukeyFences() {
        const BoxQuantiles q = layerQuantiles({1, 2, 3, 4, 5, 6, 7, 8, 9, 100});
        QCOMPARE(q.q1, 3.25);  // numpy: 3.25, 7.75
        QCOMPARE(q.q3, 7.75);
        QCOMPARE(q.lowWhisker, 1.0);
        QCOMPARE(q.highWhisker, 9.0);  // fence 7.75 + 1.5·4.5 = 14.5
        QCOMPARE(q.outliers, (std::vector<double>{100}));
        QCOMPARE(q.max, 100.0);
        const BoxQuantiles two = layerQuantiles({0, 10});
        QCOMPARE(two.lowWhisker, 0.0);
        QCOMPARE(two.highWhisker, 10.0);
        QVERIFY(two.outliers.empty());
        const BoxQuantiles one = layerQuantiles({4});
        QCOMPARE(one.lowWhisker, 4.0);
        QCOMPARE(one.highWhisker, 4.0);
    }

    void robustRangeDropsOnlyFarOutliers() {
        const ValueRange r = robustRange({1, 2, 3, 4, 5, 6, 7, 8, 9, 100});
        QCOMPARE(r.lo, 1.0);
        QCOMPARE(r.hi, 7.75 + 3 * 4.5);
        const ValueRange plain = robustRange({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
        QCOMPARE(plain.lo, 1.0);
        QCOMPARE(plain.hi, 10.0);
        QVERIFY(robustRange({kNaN}).empty);
    }

    void outliersCanGoToEdgeBins() {
        const HistogramBins h = histogramBins({-5.0, 0.1, 0.9, 7.0, 8.0}, 2, 0.0, 1.0, HistogramOutliers::InEdgeBins);
        QCOMPARE(h.counts, (std::vector<int64_t>{2, 3}));
        QCOMPARE(h.below, int64_t(1));
        QCOMPARE(h.above, int64_t(2));
    }

    void quantilesOfNothingAreNaN() {
        const BoxQuantiles q = layerQuantiles({});
        QCOMPARE(q.count, int64_t(0));
        QVERIFY(std::isnan(q.median));
        const auto perLayer = channelQuantilesPerLayer(twoLayerScores());
        QCOMPARE(perLayer.size(), size_t(2));
        QCOMPARE(perLayer[1].median, 7.0);
        QCOMPARE(perLayer[1].count, int64_t(5));
    }

    void keptPerLayerCounts() {
        const auto counts = keptPerLayer(twoLayerMask());
        QCOMPARE(counts.size(), size_t(2));
        QCOMPARE(counts[0].keptHeads, int64_t(2));
        QCOMPARE(counts[0].heads, int64_t(3));
        QCOMPARE(counts[0].keptChannels, int64_t(3));
        QCOMPARE(counts[0].channels, int64_t(4));
        QCOMPARE(counts[1].keptHeads, int64_t(0));
        QCOMPARE(counts[1].keptChannels, int64_t(4));
        Mask bad = twoLayerMask();
        bad.keepChannels.pop_back();
        QVERIFY_THROWS_EXCEPTION(Error, keptPerLayer(bad));
    }

    void channelScoresOfOneLayerOrAll() {
        const auto one = channelScoresOf(twoLayerScores(), twoLayerMask(), 1);
        QCOMPARE(one.scores, (std::vector<double>{5, 6, 7, 8, 9}));
        QCOMPARE(one.keep, (std::vector<bool>{true, true, false, true, true}));
        const auto all = channelScoresOf(twoLayerScores(), twoLayerMask(), -1);
        QCOMPARE(all.scores.size(), size_t(9));
        QCOMPARE(all.keep.front(), false);
        QVERIFY_THROWS_EXCEPTION(Error, channelScoresOf(twoLayerScores(), twoLayerMask(), 2));
    }

    void headGridHasAbsentCellsForNarrowLayers() {
        const HeadGrid grid = headGrid(twoLayerScores(), twoLayerMask());
        QCOMPARE(grid.layers, int64_t(2));
        QCOMPARE(grid.maxUnits, int64_t(3));
        QCOMPARE(grid.prunedCells, int64_t(3));
        QCOMPARE(grid.keptCells, int64_t(2));
        QCOMPARE(grid.state[grid.index(0, 1)], HeadGrid::Cell::Pruned);
        QCOMPARE(grid.state[grid.index(0, 2)], HeadGrid::Cell::Kept);
        QCOMPARE(grid.state[grid.index(1, 2)], HeadGrid::Cell::Absent);
        QVERIFY(std::isnan(grid.score[grid.index(1, 2)]));
        QCOMPARE(grid.score[grid.index(1, 0)], 0.5);
        QCOMPARE(grid.scoreRange.lo, 0.1);
        QCOMPARE(grid.scoreRange.hi, 0.5);
    }

    // A mask from another model must be refused, not read out of bounds.
    void headGridRejectsMismatchedMask() {
        Mask bad = twoLayerMask();
        bad.keepHeads[1].push_back(true);
        try {
            headGrid(twoLayerScores(), bad);
            QFAIL("no error");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("layer 1"), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestScoreView)
#include "tst_score_view.moc"
