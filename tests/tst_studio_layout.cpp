// npw-studio on a laptop's screen (QT_QPA_PLATFORM=offscreen): the main window with demo:lm
// scored (FLAP and numerical, a small calibration), a short sweep, a text comparison and an image
// model's dense/pruned samples (the Images tab), laid out at 1280×720, 1366×768 and 1600×1000 (the
// window as a window manager would give it on those screens; tst_studio_layout_hidpi: the same at
// scale 2). At each size and on each tab: the window's minimum size fits the screen, no visible
// widget reaches outside the window, no label is cut (narrower than its text, or a wrapped one
// shorter than its lines), no button or label is cut by a parent beyond what scrolling reveals,
// the Run button is in view without scrolling, and every plot keeps its title, legend and axis
// labels inside and its tick labels apart. The empty state (no model) says what to do instead of
// showing empty plots.
//
// NPW_STUDIO_SHOTS=DIR saves each state as DIR/<tab>-<size>.png, for a person to look at.
#include "core/models/llamagen.h"  // core first: Qt's macros must not meet ATen's headers
#include "core/models/vq_model.h"
#include "llamagen_fixture.h"
#include "app/studio/imagesession.h"
#include "app/studio/imagespage.h"
#include "app/studio/runsettings.h"
#include "app/studio/runsettingspanel.h"
#include "app/studio/scorespage.h"
#include "app/studio/studiowindow.h"
#include "studio_window_helpers.h"
#include "app/studio/sweeppage.h"
#include "app/studio/textpage.h"
#include "app/studio/textsession.h"
#include "studio_session_helpers.h"

#include "core/util/paths.h"
#include "widgets/headmapwidget.h"
#include "widgets/imagepairwidget.h"
#include "widgets/sparsitycontrols.h"
#include "widgets/sweepplotwidget.h"

#include <QAbstractButton>
#include <QAbstractScrollArea>
#include <QScrollArea>
#include <QScrollBar>
#include <QCheckBox>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QKeyEvent>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QMenuBar>
#include <QScreen>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QtTest>
#include <qcustomplot.h>

namespace {

// What a desktop leaves a maximised window of each screen (a panel of ~40 px, a title bar of ~30).
struct ScreenCase {
    const char* name;
    QSize screen;
};
const ScreenCase kScreens[] = {{"1280x720", {1280, 720}}, {"1366x768", {1366, 768}}, {"1600x1000", {1600, 1000}}};
constexpr int kDesktopChrome = 70;  // panel + title bar

QSize windowSizeOn(QSize screen) { return {screen.width(), screen.height() - kDesktopChrome}; }

// A widget inside a scroll area's viewport may reach past the viewport: it scrolls.
bool insideScrollArea(const QWidget* w, const QWidget* top) {
    for (const QWidget* p = w->parentWidget(); p && p != top; p = p->parentWidget())
        if (qobject_cast<const QAbstractScrollArea*>(p)) return true;
    return false;
}

// A widget inside a pane that a splitter collapsed (or any ancestor of no size) is hidden, not cut.
bool insideCollapsedPane(const QWidget* w, const QWidget* top) {
    for (const QWidget* p = w->parentWidget(); p && p != top; p = p->parentWidget())
        if (p->width() == 0 || p->height() == 0) return true;
    return false;
}

// What the user sees of w: its rectangle (in window coordinates) cut by every ancestor's. A scroll
// area's viewport may cut it only in a direction the area scrolls (its scroll bar shown): scrolling
// brings the rest into view. `scrolls` off: a scroll area cuts like any other parent (for a
// control that must be in view without scrolling, the Run button).
QString cutBy(const QWidget* w, const QWidget* window, bool scrolls = true) {
    const QRect full(w->mapTo(window, QPoint(0, 0)), w->size());
    QRect seen = full;
    for (const QWidget* p = w->parentWidget(); p && p != window; p = p->parentWidget()) {
        const QRect parent(p->mapTo(window, QPoint(0, 0)), p->size());
        const QRect within = seen & parent;
        if (within == seen) continue;
        const auto* area = p->parentWidget() ? qobject_cast<const QAbstractScrollArea*>(p->parentWidget()) : nullptr;
        if (scrolls && area && area->viewport() == p) {
            // (Wholly scrolled out of view, `within` is empty: which way it lies tells the direction.)
            const bool cutAcross = seen.left() < parent.left() || seen.right() > parent.right();
            const bool cutDown = seen.top() < parent.top() || seen.bottom() > parent.bottom();
            const bool reachable = (!cutAcross || area->horizontalScrollBar()->isVisibleTo(window)) &&
                                   (!cutDown || area->verticalScrollBar()->isVisibleTo(window));
            if (reachable) {
                seen = within;
                continue;
            }
        }
        return QStringLiteral("%1 '%2' (%3×%4 shown of %5×%6)")
            .arg(QString::fromLatin1(p->metaObject()->className()), p->objectName())
            .arg(within.width()).arg(within.height()).arg(full.width()).arg(full.height());
    }
    return {};
}

QString describe(const QWidget* w) {
    QString text;
    if (auto* button = qobject_cast<const QAbstractButton*>(w)) text = button->text();
    else if (auto* label = qobject_cast<const QLabel*>(w)) text = label->text();
    return QStringLiteral("%1 '%2'").arg(QString::fromLatin1(w->metaObject()->className()),
                                         text.isEmpty() ? w->objectName() : text.left(60));
}

// Every button and label the user can see: not cut by a parent (beyond what scrolling reveals),
// and a button as wide as its text needs.
QStringList clippingProblems(QWidget* window) {
    QStringList problems;
    for (QWidget* w : window->findChildren<QWidget*>()) {
        auto* button = qobject_cast<QAbstractButton*>(w);
        auto* label = qobject_cast<QLabel*>(w);
        if (!button && !label) continue;
        if (w->window() != window || !w->isVisibleTo(window) || w->width() == 0 || w->height() == 0) continue;
        if (insideCollapsedPane(w, window)) continue;
        if (label && label->text().isEmpty() && label->pixmap().isNull()) continue;
        const QString cut = cutBy(w, window);
        if (!cut.isEmpty()) problems << QStringLiteral("%1 is cut by %2").arg(describe(w), cut);
        if (button && !button->text().isEmpty() && button->width() < button->minimumSizeHint().width() - 2)
            problems << QStringLiteral("%1 needs %2 px of width, has %3")
                            .arg(describe(w)).arg(button->minimumSizeHint().width()).arg(button->width());
    }
    return problems;
}

// Every visible widget: inside the window, and a label as large as its text.
QStringList layoutProblems(QWidget* window) {
    QStringList problems;
    const QRect bounds = window->rect();
    for (QWidget* w : window->findChildren<QWidget*>()) {
        if (w->window() != window || !w->isVisibleTo(window) || w->width() == 0 || w->height() == 0) continue;
        if (insideScrollArea(w, window)) continue;
        // A splitter may collapse a pane to nothing: what it hides is not cut.
        const QRect at(w->mapTo(window, QPoint(0, 0)), w->size());
        if (!bounds.contains(at))
            problems << QStringLiteral("%1 '%2' at %3,%4 %5×%6 reaches outside the window (%7×%8)")
                            .arg(QString::fromLatin1(w->metaObject()->className()), w->objectName())
                            .arg(at.x()).arg(at.y()).arg(at.width()).arg(at.height())
                            .arg(bounds.width()).arg(bounds.height());
        auto* label = qobject_cast<QLabel*>(w);
        if (!label || label->text().isEmpty() || label->pixmap().isNull() == false) continue;
        if (label->wordWrap()) {
            const int needed = label->heightForWidth(label->width());
            if (needed > label->height() + 2)
                problems << QStringLiteral("label '%1' needs %2 px of height, has %3")
                                .arg(label->text().left(60)).arg(needed).arg(label->height());
        } else if (label->sizeHint().width() > label->width() + 2) {
            problems << QStringLiteral("label '%1' needs %2 px of width, has %3")
                            .arg(label->text().left(60)).arg(label->sizeHint().width()).arg(label->width());
        }
    }
    return problems;
}

// A plot's text inside the plot, and its tick labels apart.
QStringList plotProblems(QCustomPlot* plot) {
    QStringList problems;
    const QRect view = plot->viewport();
    const QString name = plot->parentWidget() ? QString::fromLatin1(plot->parentWidget()->metaObject()->className())
                                              : QStringLiteral("plot");
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
        if (!e || !e->visible()) continue;
        if (auto* text = qobject_cast<QCPTextElement*>(e)) {
            if (text->text().isEmpty()) continue;
            const QFontMetrics fm(text->font());
            int width = 0;
            for (const QString& line : text->text().split(QLatin1Char('\n'))) width = std::max(width, fm.horizontalAdvance(line));
            if (width > view.width() - 4)
                problems << QStringLiteral("%1: title '%2' needs %3 px, the plot is %4 wide")
                                .arg(name, text->text()).arg(width).arg(view.width());
        }
        if (auto* legend = qobject_cast<QCPLegend*>(e)) {
            if (legend->itemCount() == 0) continue;
            const QRect r = legend->outerRect();
            if (!view.contains(r) || r.width() < legend->minimumOuterSizeHint().width() - 1)
                problems << QStringLiteral("%1: legend %2×%3 needs %4 px of width, or reaches outside the plot")
                                .arg(name).arg(r.width()).arg(r.height())
                                .arg(legend->minimumOuterSizeHint().width());
        }
    }
    for (QCPAxisRect* rect : plot->axisRects()) {
        for (QCPAxis* axis : rect->axes()) {
            if (!axis->visible() || !axis->tickLabels()) continue;
            // Tick labels along the axis: their extents must not overlap.
            const QFontMetrics fm(axis->tickLabelFont());
            const QVector<double> ticks = axis->tickVector();
            const QVector<QString> labels = axis->tickVectorLabels();
            double lastEnd = -1e9;
            const bool horizontal = axis->orientation() == Qt::Horizontal;
            QVector<QPair<double, double>> spans;
            for (int i = 0; i < ticks.size() && i < labels.size(); ++i) {
                if (!axis->range().contains(ticks[i]) || labels[i].isEmpty()) continue;
                const QRect box = fm.boundingRect(QRect(), Qt::TextDontClip, labels[i]);
                const double half = (horizontal ? box.width() : box.height()) / 2.0;
                const double at = axis->coordToPixel(ticks[i]);
                spans.push_back({at - half, at + half});
            }
            std::sort(spans.begin(), spans.end());
            for (const auto& s : spans) {
                if (s.first < lastEnd - 1)
                    problems << QStringLiteral("%1: tick labels of the %2 axis overlap").arg(name, axis->label());
                lastEnd = s.second;
            }
            // The axis label within the plot.
            if (!axis->label().isEmpty()) {
                const QFontMetrics lfm(axis->labelFont());
                int length = 0;
                for (const QString& line : axis->label().split(QLatin1Char('\n'))) length = std::max(length, lfm.horizontalAdvance(line));
                // It may overhang its axis rect, not the plot.
                const int room = horizontal ? view.width() : view.height();
                if (length > room - 4)
                    problems << QStringLiteral("%1: axis label '%2' needs %3 px, has %4").arg(name, axis->label()).arg(length).arg(room);
            }
        }
    }
    // A colour scale's label (the head map's): within the plot.
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
        auto* scale = qobject_cast<QCPColorScale*>(e);
        if (!scale || !scale->visible() || scale->label().isEmpty()) continue;
        const QFontMetrics fm(scale->axis()->labelFont());
        int length = 0;
        for (const QString& line : scale->label().split(QLatin1Char('\n'))) length = std::max(length, fm.horizontalAdvance(line));
        if (length > scale->rect().height() + 4)
            problems << QStringLiteral("%1: colour-scale label '%2' needs %3 px, the scale is %4 high")
                            .arg(name, scale->label()).arg(length).arg(scale->rect().height());
        if (!view.contains(scale->outerRect()))
            problems << QStringLiteral("%1: the colour scale reaches outside the plot").arg(name);
    }
    return problems;
}

// What a line edit does on X11 (its keyboard scheme binds Ctrl+E to "end of line"): it claims
// Ctrl+E in the shortcut override, so the window's Ctrl+E would never fire. The offscreen platform
// has another scheme; this filter on the field brings X11's behaviour into the test.
class ClaimsCtrlE : public QObject {
public:
    using QObject::QObject;
    bool eventFilter(QObject*, QEvent* event) override {
        if (event->type() != QEvent::ShortcutOverride) return false;
        auto* key = static_cast<QKeyEvent*>(event);
        if (key->key() != Qt::Key_E || !(key->modifiers() & Qt::ControlModifier)) return false;
        event->accept();
        return true;
    }
};

} // namespace

class TestStudioLayout : public QObject {
    Q_OBJECT

    StudioWindow* window_ = nullptr;
    QString shots_;

    void settle() {
        for (int i = 0; i < 5; ++i) {
            QApplication::processEvents();
            QTest::qWait(30);
        }
        for (QCustomPlot* plot : window_->findChildren<QCustomPlot*>())
            if (plot->isVisible()) plot->replot(QCustomPlot::rpImmediateRefresh);
    }

    void shoot(const QString& name) {
        if (shots_.isEmpty()) return;
        window_->grab().save(QDir(shots_).filePath(name + QStringLiteral(".png")));
    }

    // Every tab at every screen size: the checks above, and a picture when asked.
    void checkAllTabs(const QString& state) {
        auto* tabs = window_->findChild<QTabWidget*>();
        QVERIFY(tabs);
        for (const ScreenCase& sc : kScreens) {
            window_->resize(windowSizeOn(sc.screen));
            for (int t = 0; t < tabs->count(); ++t) {
                tabs->setCurrentIndex(t);
                settle();
                QCOMPARE(window_->size(), windowSizeOn(sc.screen));
                QStringList problems = layoutProblems(window_) + clippingProblems(window_);
                // Run is in view on every tab without scrolling the settings.
                auto* run = window_->findChild<QPushButton*>(QStringLiteral("runButton"));
                if (!run || !run->isVisibleTo(window_)) problems << QStringLiteral("the Run button is not shown");
                else if (const QString cut = cutBy(run, window_, /*scrolls=*/false); !cut.isEmpty())
                    problems << QStringLiteral("the Run button is cut by %1").arg(cut);
                for (QCustomPlot* plot : window_->findChildren<QCustomPlot*>())
                    if (plot->isVisibleTo(window_) && plot->width() > 0) problems += plotProblems(plot);
                shoot(QStringLiteral("%1-tab%2-%3").arg(state).arg(t).arg(QString::fromLatin1(sc.name)));
                if (!problems.isEmpty())
                    QFAIL(qPrintable(QStringLiteral("%1, tab %2 at %3:\n  %4")
                                         .arg(state, tabs->tabText(t), QString::fromLatin1(sc.name),
                                              problems.join(QStringLiteral("\n  ")))));
            }
        }
    }

private slots:
    void initTestCase() {
        shots_ = studio_test::screenshotFolder();
        window_ = studio_test::shownStudioWindow();
        QVERIFY(window_);
    }

    void cleanupTestCase() { delete window_; }

    // The smallest the window lays out in fits the smallest screen.
    void minimumSizeFitsSmallScreens() {
        const QSize minimum = window_->minimumSizeHint().expandedTo(window_->minimumSize());
        const QSize small = windowSizeOn(kScreens[0].screen);
        // What asks for the room, for the message.
        QStringList parts;
        for (QWidget* w : window_->findChildren<QWidget*>()) {
            const QSize m = w->minimumSizeHint().expandedTo(w->minimumSize());
            if ((m.width() > small.width() / 3 || m.height() > small.height() / 3) && w->isVisibleTo(window_))
                parts << QStringLiteral("%1 '%2' %3×%4").arg(QString::fromLatin1(w->metaObject()->className()), w->objectName())
                             .arg(m.width()).arg(m.height());
        }
        if (minimum.width() > small.width() || minimum.height() > small.height()) qWarning().noquote() << parts.join('\n');
        QVERIFY2(minimum.width() <= small.width() && minimum.height() <= small.height(),
                 qPrintable(QStringLiteral("minimum size %1×%2 does not fit %3×%4")
                                .arg(minimum.width()).arg(minimum.height()).arg(small.width()).arg(small.height())));
    }

    // The first window a user sees fits their screen.
    void initialSizeFitsTheScreen() {
        for (const ScreenCase& sc : kScreens) {
            const QSize size = StudioWindow::initialSize(QRect(QPoint(0, 0), windowSizeOn(sc.screen)));
            QVERIFY(size.width() <= sc.screen.width() && size.height() <= windowSizeOn(sc.screen).height());
            QVERIFY(size.width() >= 1000 && size.height() >= 600);  // and uses it
        }
        const QSize big = StudioWindow::initialSize(QRect(0, 0, 3840, 2100));
        QVERIFY(big.width() <= 1700 && big.height() <= 1050);  // not a wall of empty plots on a large screen
    }

    void emptyStateLaysOut() { checkAllTabs(QStringLiteral("empty")); }

    // No model open: the Scores tab says what to do (open a model, or the demo), not empty plots.
    void emptyStateSaysWhatToDo() {
        QVERIFY(!window_->session()->hasModel());
        QVERIFY(window_->scoresPage()->showsEmptyState());
        auto* page = window_->findChild<QWidget*>(QStringLiteral("emptyState"));
        QVERIFY(page && page->isVisibleTo(window_->scoresPage()));
        QVERIFY(!window_->scoresPage()->headMap()->isVisibleTo(window_->scoresPage()));
        QVERIFY(window_->findChild<QPushButton*>(QStringLiteral("emptyOpenModel")));
        auto* demo = window_->findChild<QPushButton*>(QStringLiteral("emptyOpenDemo"));
        QVERIFY(demo);
        QVERIFY(page->findChild<QLabel*>()->text().contains(QStringLiteral("demo:lm")));
    }

    // The demo's texts, task and prompt belong to the demo models; a model of one's own opens with
    // empty fields and hints, and Run without a calibration text is refused with a message.
    void defaultsBelongToTheDemoModels() {
        QCOMPARE(npw::isDemoModel("demo:lm"), true);
        QCOMPARE(npw::isDemoModel(npw::resolveModelPath("demo:lm")), true);
        const std::string baby = std::string(NPW_TEST_DATA) + "/babyllama/model5000.bin";
        QCOMPARE(npw::isDemoModel(baby), false);
        QVERIFY(npw::modelDefaults(baby).calibrationSource.empty());
        QVERIFY(npw::modelDefaults(baby).prompt.empty());

        StudioWindow window(/*persistSettings=*/false);
        StudioSession* session = window.session();
        auto* source = window.findChild<QLineEdit*>(QStringLiteral("calibrationSource"));
        auto* prompts = window.findChild<QPlainTextEdit*>(QStringLiteral("textPrompts"));
        QVERIFY(source && prompts);
        window.openModel(QStringLiteral("demo:lm"));
        QVERIFY(studio_test::waitIdle(*session));
        QVERIFY(!window.scoresPage()->showsEmptyState());
        QVERIFY(source->placeholderText().contains(QStringLiteral("kjv-ot.txt")));
        QCOMPARE(prompts->toPlainText(), QStringLiteral("And Jesus said unto them"));
        QVERIFY(window.sweepPage()->zeroShotBox()->isChecked());
        // A calibration file chosen for the demo is not carried to the next model.
        studio::RunSettings s = session->settings();
        s.calibration.source = studio::defaultCalibrationSource();
        session->setSettings(s);
        QCOMPARE(source->text(), QString::fromStdString(studio::defaultCalibrationSource()));

        window.openModel(QString::fromStdString(baby));
        QVERIFY(studio_test::waitIdle(*session));
        QVERIFY(session->hasModel());
        QCOMPARE(source->text(), QString());
        QVERIFY(session->settings().calibration.source.empty());
        QVERIFY(source->placeholderText().contains(QStringLiteral("required")));
        QCOMPARE(prompts->toPlainText(), QString());
        QVERIFY(!prompts->placeholderText().isEmpty());
        QVERIFY(!window.sweepPage()->zeroShotBox()->isChecked());
        QVERIFY(!window.sweepPage()->zeroShotBox()->isEnabled());
        QVERIFY(window.sweepPage()->sweepRequest().zeroShotTask.empty());
        QVERIFY(window.sweepPage()->evalTextsField()->placeholderText().contains(QStringLiteral("required")));
        // Run refuses, says why, and starts nothing.
        QSignalSpy refused(session, &StudioSession::refused);
        QVERIFY(!session->runScoring());
        QCOMPARE(refused.count(), 1);
        QVERIFY(refused.at(0).at(1).toString().contains(QStringLiteral("No calibration text")));
        QVERIFY(window.errorDialog() && window.errorDialog()->isVisible());
        QVERIFY(!session->jobs()->isRunning());
        SweepRequest sweep;
        sweep.methods = {"numerical"};
        sweep.ratios = {0.2};
        QVERIFY(!session->runSweep(sweep));
        QCOMPARE(refused.count(), 2);
        // A user-written prompt survives the next model; the error box of the refusal closes when
        // the next job starts.
        QVERIFY(window.errorDialog()->isVisible());
        prompts->setPlainText(QStringLiteral("Once upon a time"));
        window.openModel(QStringLiteral("demo:lm"));
        QVERIFY(!window.errorDialog()->isVisible());
        QVERIFY(studio_test::waitIdle(*session));
        QCOMPARE(prompts->toPlainText(), QStringLiteral("Once upon a time"));

        // Ctrl+E while a number field has the focus still exports (here: nothing to export yet).
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.activateWindow();
        auto* samples = window.findChild<QLineEdit*>(QStringLiteral("ablationSamples"));
        QVERIFY(samples);
        window.showTab(1);
        samples->setFocus();
        QTRY_VERIFY(samples->hasFocus());
        ClaimsCtrlE claims;
        samples->installEventFilter(&claims);
        QTest::keyClick(samples, Qt::Key_E, Qt::ControlModifier);
        QTRY_VERIFY(window.log()->toPlainText().contains(QStringLiteral("Nothing to export")));
        // A file name typed into an ablation field does not land there: only numbers and commas.
        samples->clear();
        QTest::keyClicks(samples, QStringLiteral("/tmp/plot.png"));
        QVERIFY(!samples->text().contains(QLatin1Char('p')));
        samples->clear();
        QTest::keyClicks(samples, QStringLiteral("16,64"));
        QCOMPARE(samples->text(), QStringLiteral("16,64"));
    }

    void scoredStateLaysOut() {
        StudioSession* session = window_->session();
        studio_test::openAndScore(*session, npw::PruneMethod::Flap);
        // FLAP has no λ: the knob is off while its scores are shown.
        QVERIFY(!window_->scoresPage()->sparsityControls()->lambdaEnabled());
        studio_test::openAndScore(*session, npw::PruneMethod::Numerical);
        QVERIFY(window_->scoresPage()->sparsityControls()->lambdaEnabled());
        session->setCurrentMethod(QStringLiteral("flap"));
        QVERIFY(!window_->scoresPage()->sparsityControls()->lambdaEnabled());
        session->setCurrentMethod(QStringLiteral("numerical"));
        QVERIFY(session->selection());
        // A short sweep (two windows of the held-out text) and a text comparison.
        SweepRequest sweep;
        sweep.methods = {"numerical", "flap"};
        sweep.ratios = {0.2, 0.4};
        sweep.seeds = 1;
        sweep.evaluation.maxWindows = 2;
        sweep.evalSources = {"text:" + studio::defaultEvaluationSource()};
        QVERIFY(session->runSweep(sweep));
        QVERIFY(studio_test::waitIdle(*session));
        QVERIFY(!session->sweepRows().empty());
        // Perplexity relative to dense by default: the dense line at 1, the model and text in the title.
        SweepPlotWidget* plot = window_->sweepPage()->sweepPlot();
        QVERIFY(plot->denseBaselineShown());
        QVERIFY(!plot->isLogScale());
        QCOMPARE(plot->methods(), QStringList({QStringLiteral("numerical"), QStringLiteral("flap")}));
        TextRequest text;
        text.prompts = {QStringLiteral("And Jesus said unto them"), QStringLiteral("In the beginning")};
        text.tokens = 24;
        window_->textPage()->setRequest(text);
        QVERIFY(window_->textPage()->generate());
        QVERIFY(studio_test::waitIdle(*session));
        // The Images tab with an image model (the LlamaGen fixture: 10 classes) and a comparison at
        // two samples per class: the class labels over the grids, the captions, the buttons.
        QTemporaryDir imageDir;
        const std::string imageModel = imageDir.path().toStdString() + "/c2i";
        npw::LlamaGenLoadOptions options;
        options.config = npw::test::llamagenFixtureConfig(/*downsample=*/2);
        npw::saveLlamaGenDirectory(npw::loadLlamaGenCheckpoint(npw::test::llamagenDataFile("gpt_fsdp.pt"), options), imageModel);
        npw::VqModel::load(npw::test::llamagenDataFile("vq_ddp.pt"))->save(imageModel + "/vq");
        window_->openModel(QString::fromStdString(imageModel));
        QVERIFY(studio_test::waitIdle(*session));
        QVERIFY(window_->imageSession()->hasModel());
        ImageCompareRequest compare;
        compare.method = QStringLiteral("numerical");
        compare.ratio = 0.3;
        compare.perClass = 2;
        compare.calibPerClass = 2;
        window_->imagesPage()->setCompareRequest(compare);
        QVERIFY(window_->imagesPage()->generate());
        QVERIFY(studio_test::waitIdle(*session));
        QVERIFY(window_->imagesPage()->pair()->hasImages());
        // The dense and pruned panes show the same samples: scrolling one scrolls the other.
        window_->resize(windowSizeOn(kScreens[0].screen));
        window_->showTab(2);
        settle();
        const QList<QScrollArea*> panes = window_->imagesPage()->pair()->findChildren<QScrollArea*>();
        QCOMPARE(panes.size(), 2);
        for (QScrollBar* (QScrollArea::*bar)() const : {&QScrollArea::verticalScrollBar, &QScrollArea::horizontalScrollBar}) {
            QScrollBar* left = (panes[0]->*bar)();
            QScrollBar* right = (panes[1]->*bar)();
            if (bar == &QScrollArea::verticalScrollBar) QVERIFY(left->maximum() > 0);  // ten classes do not fit
            left->setValue(left->maximum() / 2);
            QCOMPARE(right->value(), left->value());
            right->setValue(right->maximum());
            QCOMPARE(left->value(), right->value());
        }
        checkAllTabs(QStringLiteral("scored"));
        // Results not in a workspace (the window asks before quitting) until saved.
        QVERIFY(session->hasUnsavedResults());
        QTemporaryDir dir;
        window_->saveWorkspace(dir.filePath(QStringLiteral("w.npw.json")));
        QVERIFY(!session->hasUnsavedResults());
    }
};

QTEST_MAIN(TestStudioLayout)
#include "tst_studio_layout.moc"
