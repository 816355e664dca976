#include "app/studio/manualwindow.h"

#include "core/util/paths.h"

#include <QAction>
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QKeySequence>
#include <QScrollBar>
#include <QTextBlock>
#include <QToolBar>

namespace {

// Screenshots are 1366 px wide; shown whole they would need a horizontal scroll bar in a window
// that fits a laptop's screen, so an image wider than this is scaled down to it.
constexpr int kMaxImageWidth = 880;

bool isMarkdownPage(const QUrl& url) {
    const QString path = url.path();
    return path.endsWith(QStringLiteral(".md")) || path.endsWith(QStringLiteral(".markdown"));
}

} // namespace

ManualBrowser::ManualBrowser(QWidget* parent) : QTextBrowser(parent) {
    setObjectName(QStringLiteral("manualBrowser"));
    setOpenExternalLinks(true);  // http(s) links go to the desktop's browser
    // Text off the window's edge, as a page has it (Qt's default margin is 4 px).
    document()->setDocumentMargin(16);
}

void ManualBrowser::doSetSource(const QUrl& name, QTextDocument::ResourceType type) {
    if (type == QTextDocument::UnknownResource && isMarkdownPage(name)) type = QTextDocument::MarkdownResource;
    QTextBrowser::doSetSource(name, type);
    if (!name.fragment().isEmpty()) scrollToHeading(name.fragment());
}

QVariant ManualBrowser::loadResource(int type, const QUrl& name) {
    QVariant resource = QTextBrowser::loadResource(type, name);
    if (type == QTextDocument::ImageResource) {
        QImage image;
        if (resource.userType() == QMetaType::QByteArray) image.loadFromData(resource.toByteArray());
        else if (resource.canConvert<QImage>()) image = resource.value<QImage>();
        if (!image.isNull() && image.width() > kMaxImageWidth)
            return image.scaledToWidth(kMaxImageWidth, Qt::SmoothTransformation);
    }
    return resource;
}

QString ManualBrowser::pageTitle() const {
    for (QTextBlock block = document()->begin(); block.isValid(); block = block.next())
        if (block.blockFormat().headingLevel() == 1) return block.text();
    return {};
}

bool ManualBrowser::scrollToHeading(const QString& fragment) {
    for (QTextBlock block = document()->begin(); block.isValid(); block = block.next()) {
        if (block.blockFormat().headingLevel() == 0 || ManualWindow::headingAnchor(block.text()) != fragment) continue;
        QTextCursor cursor(block);
        setTextCursor(cursor);
        // The heading at the top of the view, not merely somewhere in it.
        verticalScrollBar()->setValue(verticalScrollBar()->maximum());
        ensureCursorVisible();
        return true;
    }
    return false;
}

ManualWindow::ManualWindow(QWidget* parent) : QMainWindow(parent, Qt::Window), browser_(new ManualBrowser(this)) {
    setObjectName(QStringLiteral("manualWindow"));
    setWindowTitle(tr("npw manual"));
    setCentralWidget(browser_);
    browser_->setSearchPaths({manualDirectory()});

    QToolBar* bar = addToolBar(tr("Navigation"));
    bar->setObjectName(QStringLiteral("manualToolBar"));
    bar->setMovable(false);
    bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
    QAction* back = bar->addAction(tr("Back"), browser_, &QTextBrowser::backward);
    back->setShortcut(QKeySequence::Back);
    QAction* forward = bar->addAction(tr("Forward"), browser_, &QTextBrowser::forward);
    forward->setShortcut(QKeySequence::Forward);
    bar->addAction(tr("Contents"), this, [this] { showPage(); });
    back->setEnabled(false);
    forward->setEnabled(false);
    connect(browser_, &QTextBrowser::backwardAvailable, back, &QAction::setEnabled);
    connect(browser_, &QTextBrowser::forwardAvailable, forward, &QAction::setEnabled);
    connect(browser_, &QTextBrowser::sourceChanged, this, [this] {
        const QString title = browser_->pageTitle();
        setWindowTitle(title.isEmpty() ? tr("npw manual") : tr("%1 — npw manual").arg(title));
    });
    resize(1000, 700);
    showPage();
}

QString ManualWindow::manualDirectory() {
    return QDir(QString::fromStdString(npw::resourcesDir())).filePath(QStringLiteral("manual"));
}

QString ManualWindow::headingAnchor(const QString& heading) {
    QString anchor;
    for (const QChar c : heading.trimmed().toLower()) {
        if (c.isLetterOrNumber() || c == QLatin1Char('-') || c == QLatin1Char('_')) anchor += c;
        else if (c == QLatin1Char(' ')) anchor += QLatin1Char('-');
    }
    return anchor;
}

void ManualWindow::showPage(const QString& page) {
    const QString target = page.isEmpty() ? QStringLiteral("README.md") : page;
    const QString file = target.section(QLatin1Char('#'), 0, 0);
    QUrl url = QUrl::fromLocalFile(QDir(manualDirectory()).filePath(file));
    if (target.contains(QLatin1Char('#'))) url.setFragment(target.section(QLatin1Char('#'), 1));
    if (!QFileInfo::exists(url.toLocalFile())) {
        browser_->setMarkdown(tr("# The manual is not here\n\nnpw-studio looked for its pages in `%1` and found no `%2`. "
                                 "They are installed with npw (`share/npw/manual`), or in a build tree read from the "
                                 "source tree's `resources/manual`; `NPW_RESOURCES` points at another resources folder.")
                                  .arg(manualDirectory(), file));
        return;
    }
    browser_->setSource(url, QTextDocument::MarkdownResource);
}
