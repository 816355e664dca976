// npwwidgets under QT_QPA_PLATFORM=offscreen: each view shows what core computed for its data
// (counts), clicks reach the shared LayerSelection, the controls stay in step and send once
// per event-loop turn, the sweep plot grows and exports readable files, and every plot takes
// its background from the palette (light and dark).
#include "core/prune/select.h"
#include "core/util/error.h"
#include "widgets/headmapwidget.h"
#include "widgets/layeroverviewwidget.h"
#include "widgets/layerselection.h"
#include "widgets/logaxisticker.h"
#include "widgets/scorehistogramwidget.h"
#include "widgets/sparsitycontrols.h"
#include "widgets/sweepplotwidget.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QImage>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

using namespace npw;

namespace {

constexpr int kLayers = 4, kUnits = 6, kChannels = 40;

// Unit u of layer l scores l + u/10; channel c scores c/100 + l. Pruned: units (l, u) with
// u < l (0 + 1 + 2 + 3 = 6 cells) and channels c < 10·l.
std::vector<LayerScores> fixtureScores() {
    std::vector<LayerScores> scores(kLayers);
    for (int l = 0; l < kLayers; ++l) {
        for (int u = 0; u < kUnits; ++u) scores[l].heads.push_back(l + u / 10.0);
        for (int c = 0; c < kChannels; ++c) scores[l].channels.push_back(c / 100.0 + l);
    }
    return scores;
}

Mask fixtureMask() {
    Mask mask;
    for (int l = 0; l < kLayers; ++l) {
        std::vector<bool> heads, channels;
        for (int u = 0; u < kUnits; ++u) heads.push_back(u >= l);
        for (int c = 0; c < kChannels; ++c) channels.push_back(c >= 10 * l);
        mask.keepHeads.push_back(heads);
        mask.keepChannels.push_back(channels);
    }
    return mask;
}

QPalette darkPalette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x2B, 0x2D, 0x31));
    p.setColor(QPalette::Base, QColor(0x1E, 0x1F, 0x22));
    p.setColor(QPalette::Text, QColor(0xE6, 0xE6, 0xE6));
    p.setColor(QPalette::WindowText, QColor(0xE6, 0xE6, 0xE6));
    return p;
}

void showAndWait(QWidget& w, QSize size = QSize(640, 420)) {
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
}

// Clicks `where` (in w's coordinates) on the plot under it.
void clickAt(QWidget& w, QPoint where) {
    auto* plot = w.findChild<QCustomPlot*>();
    QVERIFY(plot);
    QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, plot->mapFrom(&w, where));
}

} // namespace

class TestWidgets : public QObject {
    Q_OBJECT
private slots:
    void layerSelectionSignalsOnlyRealChanges() {
        LayerSelection selection;
        QSignalSpy current(&selection, &LayerSelection::currentLayerChanged);
        QSignalSpy hovered(&selection, &LayerSelection::hoveredUnitChanged);
        selection.setCurrentLayer(2);
        selection.setCurrentLayer(2);
        selection.setCurrentLayer(-5);
        QCOMPARE(current.count(), 2);
        QCOMPARE(selection.currentLayer(), -1);
        selection.setHoveredUnit(1, 3);
        selection.setHoveredUnit(1, 3);
        selection.clearHover();
        QCOMPARE(hovered.count(), 2);
        QCOMPARE(hovered.last().at(0).toInt(), -1);
    }

    void headMapCountsCellsAndSelectsLayerOnClick() {
        LayerSelection selection;
        HeadMapWidget map(&selection);
        map.setData(fixtureScores(), fixtureMask());
        QCOMPARE(map.layerCount(), kLayers);
        QCOMPARE(map.unitCount(), kUnits);
        QCOMPARE(map.prunedCellCount(), int64_t(6));
        QCOMPARE(map.keptCellCount(), int64_t(kLayers * kUnits - 6));
        showAndWait(map);

        QSignalSpy spy(&selection, &LayerSelection::currentLayerChanged);
        clickAt(map, map.cellCenter(2, 4));
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.first().at(0).toInt(), 2);
        clickAt(map, map.cellCenter(3, 0));
        QCOMPARE(selection.currentLayer(), 3);
    }

    void headMapToolTipNamesCellScoreAndState() {
        LayerSelection selection;
        HeadMapWidget map(&selection);
        map.setUnitName(QStringLiteral("KV group"));
        map.setData(fixtureScores(), fixtureMask());
        const QString pruned = map.cellToolTip(2, 1);
        QVERIFY2(pruned.contains(QLatin1String("Layer 2")) && pruned.contains(QLatin1String("KV group 1")) &&
                     pruned.contains(QLatin1String("2.1")) && pruned.contains(QLatin1String("pruned")),
                 qPrintable(pruned));
        QVERIFY(map.cellToolTip(0, 0).contains(QLatin1String("kept")));
        QVERIFY(map.cellToolTip(kLayers, 0).isEmpty());
    }

    // Layers with fewer units (a pruned checkpoint) leave absent cells, which are neither.
    void headMapHandlesRaggedLayers() {
        LayerSelection selection;
        HeadMapWidget map(&selection);
        std::vector<LayerScores> scores = fixtureScores();
        Mask mask = fixtureMask();
        scores[3].heads.resize(2);  // layer 3 keeps units 0 and 1, both pruned
        mask.keepHeads[3].resize(2);
        map.setData(scores, mask);
        QCOMPARE(map.unitCount(), kUnits);
        QCOMPARE(map.prunedCellCount(), int64_t(5));
        QCOMPARE(map.keptCellCount(), int64_t(3 * kUnits - 3));
        QVERIFY(map.cellToolTip(3, 4).isEmpty());
    }

    void viewsRefuseAMaskOfAnotherModel() {
        LayerSelection selection;
        HeadMapWidget map(&selection);
        ScoreHistogramWidget histogram(&selection);
        LayerOverviewWidget overview(&selection);
        Mask wrong = fixtureMask();
        wrong.keepChannels[2].pop_back();
        QVERIFY_THROWS_EXCEPTION(Error, histogram.setData(fixtureScores(), wrong, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, overview.setData(fixtureScores(), wrong, 1.0));
        wrong = fixtureMask();
        wrong.keepHeads.pop_back();
        QVERIFY_THROWS_EXCEPTION(Error, map.setData(fixtureScores(), wrong));
    }

    void histogramShowsTheCurrentLayer() {
        LayerSelection selection;
        ScoreHistogramWidget histogram(&selection);
        histogram.setData(fixtureScores(), fixtureMask(), 2.1);
        QCOMPARE(histogram.shownLayer(), -1);  // nothing selected: all layers
        QCOMPARE(histogram.shownKeptCount() + histogram.shownPrunedCount(), int64_t(kLayers * kChannels));
        QCOMPARE(histogram.shownPrunedCount(), int64_t(0 + 10 + 20 + 30));
        selection.setCurrentLayer(2);
        QCOMPARE(histogram.shownLayer(), 2);
        QCOMPARE(histogram.shownKeptCount(), int64_t(20));
        QCOMPARE(histogram.shownPrunedCount(), int64_t(20));
        QCOMPARE(histogram.binCount(), 8);  // ⌈√40⌉ = 7, at least 8
        QVERIFY(histogram.thresholdShown());
        histogram.setData(fixtureScores(), fixtureMask(), -std::numeric_limits<double>::infinity());
        QVERIFY(!histogram.thresholdShown());
        QCOMPARE(histogram.shownLayer(), 2);
    }

    void overviewCountsKeptChannelsAndSelectsLayerOnClick() {
        LayerSelection selection;
        LayerOverviewWidget overview(&selection);
        overview.setData(fixtureScores(), fixtureMask(), 2.1);
        QCOMPARE(overview.layerCount(), kLayers);
        for (int l = 0; l < kLayers; ++l) QCOMPARE(overview.keptChannels(l), int64_t(kChannels - 10 * l));
        QCOMPARE(overview.keptChannels(kLayers), int64_t(-1));
        QVERIFY(overview.layerToolTip(3).contains(QLatin1String("10 of 40")));
        showAndWait(overview);
        QSignalSpy spy(&selection, &LayerSelection::currentLayerChanged);
        clickAt(overview, overview.layerCenter(1));
        QCOMPARE(spy.count(), 1);
        QCOMPARE(selection.currentLayer(), 1);
    }

    void sparsitySliderMovesSpinBoxAndSendsOnce() {
        SparsityControls controls;
        auto* slider = controls.findChild<QSlider*>(QStringLiteral("rhoSlider"));
        auto* spin = controls.findChild<QDoubleSpinBox*>(QStringLiteral("rhoSpinBox"));
        QVERIFY(slider && spin);
        QSignalSpy spy(&controls, &SparsityControls::settingsChanged);
        slider->setValue(300);
        slider->setValue(350);  // a drag: several positions within one turn
        QCOMPARE(spin->value(), 0.35);
        QCOMPARE(spy.count(), 0);  // not before the event loop turns
        QTRY_COMPARE(spy.count(), 1);
        QCoreApplication::processEvents();
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.first().at(0).toDouble(), 0.35);
        QCOMPARE(controls.rho(), 0.35);

        spin->setValue(0.5);
        QCOMPARE(slider->value(), 500);
        QTRY_COMPARE(spy.count(), 2);
        spin->setValue(0.5);  // no change, nothing sent
        QCoreApplication::processEvents();
        QCOMPARE(spy.count(), 2);
    }

    void sparsityControlsLogSlidersAndDefaultAlpha() {
        SparsityControls controls;
        controls.setDefaultAlpha(128.0 * 4 / 3);
        auto* alphaSlider = controls.findChild<QSlider*>(QStringLiteral("alphaSlider"));
        auto* reset = controls.findChild<QPushButton*>(QStringLiteral("alphaDefaultButton"));
        auto* lambdaSlider = controls.findChild<QSlider*>(QStringLiteral("lambdaSlider"));
        auto* mode = controls.findChild<QComboBox*>(QStringLiteral("alphaModeComboBox"));
        QVERIFY(alphaSlider && reset && lambdaSlider && mode);
        QSignalSpy spy(&controls, &SparsityControls::settingsChanged);

        reset->click();
        QCOMPARE(controls.alpha(), 128.0 * 4 / 3);
        QVERIFY(!reset->isEnabled());
        alphaSlider->setValue(alphaSlider->value() - 100);
        QVERIFY(controls.alpha() < 128.0 * 4 / 3);
        QVERIFY(reset->isEnabled());
        // λ's slider spans 1e-4 … 1e4 in equal ratios: the middle is 1, a quarter 0.01.
        lambdaSlider->setValue(250);
        QCOMPARE(controls.lambda(), 0.01);
        lambdaSlider->setValue(500);
        QCOMPARE(controls.lambda(), 1.0);
        mode->setCurrentIndex(mode->findData(QVariant::fromValue(AlphaMode::Budget)));
        QCOMPARE(controls.alphaMode(), AlphaMode::Budget);
        QTRY_COMPARE(spy.count(), 1);  // everything above in one turn: sent once
        QCOMPARE(spy.first().at(2).value<AlphaMode>(), AlphaMode::Budget);
        QCOMPARE(spy.first().at(3).toDouble(), 1.0);
    }

    // The tooltips say what each knob does (the terms a user looks for).
    void sparsityControlsExplainThemselves() {
        SparsityControls controls;
        QVERIFY(controls.findChild<QSlider*>(QStringLiteral("rhoSlider"))
                    ->toolTip()
                    .contains(QLatin1String("fraction of attention + MLP parameters")));
        QVERIFY(
            controls.findChild<QSlider*>(QStringLiteral("alphaSlider"))->toolTip().contains(QLatin1String("eq. 7")));
        QVERIFY(controls.findChild<QSlider*>(QStringLiteral("lambdaSlider"))
                    ->toolTip()
                    .contains(QLatin1String("no re-solve")));
    }

    void sweepPlotGrowsAsPointsArrive() {
        SweepPlotWidget sweep;
        sweep.addPoint(QStringLiteral("FLAP"), 0.2, 25.0, 1.0);
        sweep.addPoint(QStringLiteral("numerical"), 0.2, 22.0, 0.5);
        sweep.addPoint(QStringLiteral("FLAP"), 0.4, 40.0, 2.0);
        sweep.addPoint(QStringLiteral("FLAP"), 0.3, std::nan(""), 0);  // ignored
        QCOMPARE(sweep.methods(), (QStringList{QStringLiteral("FLAP"), QStringLiteral("numerical")}));
        QCOMPARE(sweep.pointCount(QStringLiteral("FLAP")), 2);
        QCOMPARE(sweep.pointCount(QStringLiteral("numerical")), 1);
        QCOMPARE(sweep.pointCount(QStringLiteral("other")), 0);
        QVERIFY(!sweep.denseBaselineShown());
        sweep.setDenseBaseline(18.0);
        QVERIFY(sweep.denseBaselineShown());
        sweep.clear();
        QVERIFY(sweep.methods().isEmpty());
        QVERIFY(!sweep.denseBaselineShown());
    }

    void sweepPlotExportsPngPdfSvg() {
        SweepPlotWidget sweep;
        sweep.setDenseBaseline(18.0);
        for (double s : {0.1, 0.3, 0.5}) sweep.addPoint(QStringLiteral("FLAP"), s, 18.0 * std::exp(3 * s), s);
        showAndWait(sweep);
        QTemporaryDir dir;
        const QString png = dir.filePath(QStringLiteral("sweep.png"));
        const QString pdf = dir.filePath(QStringLiteral("sweep.pdf"));
        const QString svg = dir.filePath(QStringLiteral("sweep.svg"));
        QVERIFY(sweep.savePng(png, 800, 500));
        QVERIFY(sweep.savePdf(pdf, 800, 500));
        QVERIFY(sweep.saveSvg(svg, 800, 500));
        const QImage image(png);
        QCOMPARE(image.size(), QSize(800, 500));
        QFile pdfFile(pdf);
        QVERIFY(pdfFile.open(QIODevice::ReadOnly));
        QVERIFY(pdfFile.read(5) == "%PDF-");
        QVERIFY(pdfFile.size() > 1000);
        QSvgRenderer renderer(svg);
        QVERIFY(renderer.isValid());
        QCOMPARE(renderer.viewBox(), QRect(0, 0, 800, 500));
    }

    void logTickerLabelsSpansWithinAndAcrossDecades_data() {
        QTest::addColumn<double>("lower");
        QTest::addColumn<double>("upper");
        QTest::addColumn<QVector<double>>("expected");
        QTest::newRow("within a decade and a half") << 16.0 << 350.0 << QVector<double>{20, 50, 100, 200};
        QTest::newRow("many decades") << 3.0 << 2e5 << QVector<double>{10, 100, 1000, 10000, 100000};
        QTest::newRow("narrow") << 16.0 << 60.0 << QVector<double>{20, 30, 50};
    }
    void logTickerLabelsSpansWithinAndAcrossDecades() {
        QFETCH(double, lower);
        QFETCH(double, upper);
        QFETCH(QVector<double>, expected);
        LogAxisTicker ticker;
        QVector<double> ticks;
        QVector<QString> labels;
        ticker.generate(QCPRange(lower, upper), QLocale::c(), QLatin1Char('g'), 6, ticks, nullptr, &labels);
        QCOMPARE(ticks, expected);
        QCOMPARE(labels.size(), expected.size());
    }

    // An empty plot (an image sweep's FID before any row) says so: no legend frame (it drew as a
    // stray dash), no tick labels; the first point or the dense line ends the empty state.
    void sweepPlotShowsAnEmptyState() {
        SweepPlotWidget sweep;
        auto* plot = sweep.findChild<QCustomPlot*>();
        QVERIFY(sweep.showsEmptyState());
        QVERIFY(!plot->legend->visible());
        QVERIFY(!plot->yAxis->tickLabels());
        sweep.setQuantity(QStringLiteral("FID against sparsity"), QStringLiteral("FID"), false);
        QVERIFY(sweep.showsEmptyState());
        sweep.setDenseBaseline(110.8);
        QVERIFY(!sweep.showsEmptyState());
        QVERIFY(plot->legend->visible() && plot->yAxis->tickLabels());
        sweep.clear();
        QVERIFY(sweep.showsEmptyState());
        sweep.addPoint(QStringLiteral("numerical"), 0.2, 103.7);
        QVERIFY(!sweep.showsEmptyState());
        QVERIFY(plot->legend->visible());
    }

    // LLM-Pruner's scores have far outliers, which the edge bars hold: the note saying so sits in
    // a row under the axis, never over the bars, and leaves with the outliers.
    void histogramOutlierNoteStaysOffTheBars() {
        LayerSelection selection;
        ScoreHistogramWidget histogram(&selection);
        std::vector<LayerScores> scores = fixtureScores();
        scores[0].channels[0] = 1e6;  // far above the bulk: counted in the last bar
        histogram.setData(scores, fixtureMask(), 2.1);
        histogram.resize(420, 300);
        histogram.show();
        QVERIFY(histogram.outlierNote().contains(QStringLiteral("higher")));
        auto* plot = histogram.findChild<QCustomPlot*>();
        plot->replot();
        QCPTextElement* note = nullptr;
        for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
            if (auto* t = qobject_cast<QCPTextElement*>(e); t && t->text().contains(QStringLiteral("includes"))) note = t;
        QVERIFY(note);
        QVERIFY2(!note->outerRect().intersects(plot->axisRect()->outerRect()), "the note is drawn over the bars");
        const int rowsWithNote = plot->plotLayout()->rowCount();
        histogram.setData(fixtureScores(), fixtureMask(), 2.1);  // no outlier: no note, no row
        QVERIFY(histogram.outlierNote().isEmpty());
        QCOMPARE(plot->plotLayout()->rowCount(), rowsWithNote - 1);
    }

    // Every plot's background follows the palette, before and after a change of palette.
    void plotsFollowThePalette() {
        LayerSelection selection;
        HeadMapWidget map(&selection);
        ScoreHistogramWidget histogram(&selection);
        LayerOverviewWidget overview(&selection);
        SweepPlotWidget sweep;
        map.setData(fixtureScores(), fixtureMask());
        histogram.setData(fixtureScores(), fixtureMask(), 2.1);
        overview.setData(fixtureScores(), fixtureMask(), 2.1);
        sweep.addPoint(QStringLiteral("FLAP"), 0.2, 25.0, 1.0);
        for (QWidget* w : {static_cast<QWidget*>(&map), static_cast<QWidget*>(&histogram),
                           static_cast<QWidget*>(&overview), static_cast<QWidget*>(&sweep)}) {
            w->resize(500, 350);
            const QColor lightBase = w->palette().color(QPalette::Base);
            QCOMPARE(w->grab().toImage().pixelColor(2, 2), lightBase);
            w->setPalette(darkPalette());
            QCOMPARE(w->grab().toImage().pixelColor(2, 2), darkPalette().color(QPalette::Base));
        }
    }
};

QTEST_MAIN(TestWidgets)
#include "tst_widgets.moc"
