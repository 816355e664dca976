// Help ▸ Manual: the action sits in the studio's Help menu and opens the manual's window on its
// index, rendered as Markdown; a click on a link opens that page, Back returns, a #fragment lands on
// its heading. And the manual's pages hold together: every relative link and image of every page
// resolves — to a file that ships with the manual (resources/manual, or resources/screenshots
// beside it: what `cmake --install` puts in share/npw) and, for a #fragment, to a heading of that
// page — and the index links every page. The link check is shown to fail on a page with broken
// links, so a passing run means something.
#include "app/studio/manualwindow.h"
#include "app/studio/studiowindow.h"
#include "studio_window_helpers.h"

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>
#include <QScrollBar>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextFragment>
#include <memory>

namespace {

QString readText(const QString& file) {
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QString::fromUtf8(f.readAll());
}

// The links and images of a Markdown page as Qt reads it: the parser that renders it in the
// studio, so a link written in a way that parser does not take is no link here either.
QStringList linksOf(const QString& file) {
    QTextDocument doc;
    doc.setMarkdown(readText(file));
    QStringList links;
    for (QTextBlock block = doc.begin(); block.isValid(); block = block.next())
        for (auto it = block.begin(); !it.atEnd(); ++it) {
            const QTextCharFormat format = it.fragment().charFormat();
            if (format.isAnchor()) links << format.anchorHref();
            if (format.isImageFormat()) links << format.toImageFormat().name();
        }
    links.removeDuplicates();
    return links;
}

QSet<QString> headingAnchorsOf(const QString& file) {
    QTextDocument doc;
    doc.setMarkdown(readText(file));
    QSet<QString> anchors;
    for (QTextBlock block = doc.begin(); block.isValid(); block = block.next())
        if (block.blockFormat().headingLevel() > 0) anchors.insert(ManualWindow::headingAnchor(block.text()));
    return anchors;
}

bool isInside(const QString& file, const QString& dir) {
    const QString root = QFileInfo(dir).canonicalFilePath();
    return !root.isEmpty() && file.startsWith(root + QLatin1Char('/'));
}

// Every problem with the links of the manual in `dir`, as "page: link: why"; empty when every
// relative link resolves. Links with a scheme (https:) are left to their sites.
QStringList brokenLinks(const QString& dir) {
    QStringList problems;
    const QString screenshots = QDir(dir).filePath(QStringLiteral("../screenshots"));
    for (const QFileInfo& page : QDir(dir).entryInfoList({QStringLiteral("*.md")}, QDir::Files)) {
        for (const QString& link : linksOf(page.filePath())) {
            const QUrl url(link);
            if (!url.scheme().isEmpty()) continue;
            const QString why = [&]() -> QString {
                const QString target =
                    url.path().isEmpty() ? page.canonicalFilePath()
                                         : QFileInfo(page.dir().filePath(url.path())).canonicalFilePath();
                if (target.isEmpty()) return QStringLiteral("no such file");
                if (!isInside(target, dir) && !isInside(target, screenshots))
                    return QStringLiteral("outside the manual and its screenshots (not installed with it)");
                if (!url.fragment().isEmpty() && target.endsWith(QStringLiteral(".md")) &&
                    !headingAnchorsOf(target).contains(url.fragment()))
                    return QStringLiteral("no heading with this anchor in ") + QFileInfo(target).fileName();
                return {};
            }();
            if (!why.isEmpty()) problems << page.fileName() + QStringLiteral(": ") + link + QStringLiteral(": ") + why;
        }
    }
    return problems;
}

// Where the link to `href` starts in the browser's page, in viewport coordinates (null when none).
QPoint linkPosition(QTextBrowser* browser, const QString& href) {
    QTextDocument* doc = browser->document();
    for (QTextBlock block = doc->begin(); block.isValid(); block = block.next())
        for (auto it = block.begin(); !it.atEnd(); ++it) {
            const QTextFragment fragment = it.fragment();
            if (!fragment.charFormat().isAnchor() || fragment.charFormat().anchorHref() != href) continue;
            QTextCursor cursor(doc);
            cursor.setPosition(fragment.position() + 1);
            browser->setTextCursor(cursor);
            browser->ensureCursorVisible();
            return browser->cursorRect(cursor).center();
        }
    return {};
}

} // namespace

class TestStudioManual : public QObject {
    Q_OBJECT

    std::unique_ptr<StudioWindow> window_;
    QString shots_;

    ManualWindow* openManual() {
        QAction* action = nullptr;
        for (QAction* menuAction : window_->menuBar()->actions())
            if (menuAction->menu() && menuAction->text() == tr("&Help"))
                for (QAction* item : menuAction->menu()->actions())
                    if (item->objectName() == QStringLiteral("manualAction")) action = item;
        if (!action) return nullptr;
        action->trigger();
        return window_->manualWindow();
    }

    void shoot(ManualWindow* manual, const QString& name) {
        if (shots_.isEmpty()) return;
        QTest::qWait(200);  // the images drawn
        QVERIFY(manual->grab().save(QDir(shots_).filePath(name + QStringLiteral(".png"))));
    }

private slots:
    void initTestCase() {
        window_.reset(studio_test::shownStudioWindow());
        QVERIFY(window_);
        shots_ = studio_test::screenshotFolder();
    }

    void helpManualOpensTheIndex() {
        ManualWindow* manual = openManual();
        QVERIFY2(manual, "no Help ▸ Manual action, or it made no window");
        QVERIFY(QTest::qWaitForWindowExposed(manual));
        QVERIFY(manual->isWindow());
        QCOMPARE(manual->browser()->source().toLocalFile(),
                 QDir(ManualWindow::manualDirectory()).filePath(QStringLiteral("README.md")));
        // Rendered: the title is a heading, not a line that starts with '#'.
        QCOMPARE(manual->browser()->pageTitle(), QStringLiteral("The npw manual"));
        QVERIFY(!manual->browser()->toPlainText().startsWith(QLatin1Char('#')));
        QVERIFY(manual->windowTitle().startsWith(QStringLiteral("The npw manual")));
        shoot(manual, QStringLiteral("manual-index"));
        // A second Help ▸ Manual raises the same window.
        QCOMPARE(openManual(), manual);
    }

    void aClickOnALinkOpensThePageAndBackReturns() {
        ManualWindow* manual = window_->manualWindow();
        QVERIFY(manual);
        manual->showPage();
        const QPoint at = linkPosition(manual->browser(), QStringLiteral("studio.md"));
        QVERIFY2(!at.isNull(), "the index has no link to studio.md");
        QTest::mouseClick(manual->browser()->viewport(), Qt::LeftButton, {}, at);
        QTRY_COMPARE(manual->browser()->pageTitle(), QStringLiteral("npw-studio"));
        QVERIFY(manual->browser()->source().toLocalFile().endsWith(QStringLiteral("/studio.md")));
        QVERIFY(manual->windowTitle().startsWith(QStringLiteral("npw-studio")));
        shoot(manual, QStringLiteral("manual-studio"));
        manual->browser()->backward();
        QCOMPARE(manual->browser()->pageTitle(), QStringLiteral("The npw manual"));
    }

    void aFragmentLandsOnItsHeading() {
        ManualWindow* manual = window_->manualWindow();
        QVERIFY(manual);
        manual->showPage(QStringLiteral("prune.md#export"));
        QCOMPARE(manual->browser()->pageTitle(), QStringLiteral("Pruning: npw prune"));
        QTextBrowser* browser = manual->browser();
        QVERIFY2(browser->verticalScrollBar()->value() > 0, "the page did not scroll to the heading");
        QCOMPARE(browser->textCursor().block().text(), QStringLiteral("Export"));
        QVERIFY(browser->viewport()->rect().contains(browser->cursorRect()));
        shoot(manual, QStringLiteral("manual-prune-export"));
        // A page of wide tables, at a heading far down.
        manual->showPage(QStringLiteral("benchmarks.md#runtime-speed-at-real-sizes"));
        QCOMPARE(browser->textCursor().block().text(), QStringLiteral("Runtime speed at real sizes"));
        shoot(manual, QStringLiteral("manual-benchmarks"));
        manual->showPage(QStringLiteral("prune.md"));
        // The same from a link inside the manual: a bare #fragment scrolls within the page.
        browser->setSource(browser->source().resolved(QUrl(QStringLiteral("#calibration"))));
        QCOMPARE(browser->textCursor().block().text(), QStringLiteral("Calibration"));
    }

    void everyLinkOfEveryPageResolves() {
        const QString dir = ManualWindow::manualDirectory();
        QVERIFY2(QDir(dir).entryList({QStringLiteral("*.md")}).size() >= 10, qPrintable(dir));
        const QStringList problems = brokenLinks(dir);
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
    }

    void theIndexLinksEveryPage() {
        const QString dir = ManualWindow::manualDirectory();
        QSet<QString> linked;
        for (const QString& link : linksOf(QDir(dir).filePath(QStringLiteral("README.md"))))
            linked.insert(QUrl(link).path());
        for (const QString& page : QDir(dir).entryList({QStringLiteral("*.md")}, QDir::Files))
            if (page != QStringLiteral("README.md"))
                QVERIFY2(linked.contains(page), qPrintable(page + QStringLiteral(" is not linked from the index")));
    }

    // The check above is a check: it names each kind of broken link.
    void theLinkCheckFindsBrokenLinks() {
        QTemporaryDir root;
        QVERIFY(root.isValid());
        QDir(root.path()).mkpath(QStringLiteral("manual"));
        QDir(root.path()).mkpath(QStringLiteral("screenshots"));
        QDir(root.path()).mkpath(QStringLiteral("elsewhere"));
        auto write = [&](const QString& name, const QByteArray& text) {
            QFile f(QDir(root.path()).filePath(name));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(text);
        };
        write(QStringLiteral("screenshots/shot.png"), "png");
        write(QStringLiteral("elsewhere/notes.md"), "# Notes\n");
        write(QStringLiteral("manual/b.md"), "# Page B\n\n## A section\n");
        write(QStringLiteral("manual/a.md"),
              "# Page A\n\n[fine](b.md#a-section) [self](#page-a) ![shot](../screenshots/shot.png)\n\n"
              "[gone](missing.md) [no anchor](b.md#nowhere) [outside](../elsewhere/notes.md) "
              "![no image](../screenshots/none.png) [web](https://example.org/x.md)\n");
        const QStringList problems = brokenLinks(QDir(root.path()).filePath(QStringLiteral("manual")));
        QCOMPARE(problems.size(), 4);
        QVERIFY(problems.filter(QStringLiteral("missing.md: no such file")).size() == 1);
        QVERIFY(problems.filter(QStringLiteral("b.md#nowhere: no heading")).size() == 1);
        QVERIFY(problems.filter(QStringLiteral("notes.md: outside the manual")).size() == 1);
        QVERIFY(problems.filter(QStringLiteral("none.png: no such file")).size() == 1);
    }

    void headingAnchorsAreGitHubs() {
        QCOMPARE(ManualWindow::headingAnchor(QStringLiteral("Pruning: npw prune")), QStringLiteral("pruning-npw-prune"));
        QCOMPARE(ManualWindow::headingAnchor(QStringLiteral("Choosing λ and the cross-layer ranking")),
                 QStringLiteral("choosing-λ-and-the-cross-layer-ranking"));
        QCOMPARE(ManualWindow::headingAnchor(QStringLiteral("The papers' evaluation texts: WikiText-2, PTB, C4")),
                 QStringLiteral("the-papers-evaluation-texts-wikitext-2-ptb-c4"));
        QCOMPARE(ManualWindow::headingAnchor(QStringLiteral("Opening a 7B–8B checkpoint")),
                 QStringLiteral("opening-a-7b8b-checkpoint"));
    }

    // Without its pages (a resources folder that has none) the window says where it looked.
    void aMissingManualIsSaid() {
        QTemporaryDir resources;
        QVERIFY(resources.isValid());
        qputenv("NPW_RESOURCES", resources.path().toUtf8());
        ManualWindow manual;
        qunsetenv("NPW_RESOURCES");
        QCOMPARE(manual.browser()->pageTitle(), QStringLiteral("The manual is not here"));
        QVERIFY(manual.browser()->toPlainText().contains(resources.path()));
    }
};

QTEST_MAIN(TestStudioManual)
#include "tst_studio_manual.moc"
