#pragma once
// Help ▸ Manual: npw's manual (the Markdown pages of resources/manual) rendered in a window of its
// own, links between pages followed, with Back, Forward and Contents. The pages are those installed
// beside the program (share/npw/manual) or, in a build tree, the source tree's — wherever core's
// resourcesDir() finds the demo models, so the manual and the models come from the same place.
#include <QMainWindow>
#include <QTextBrowser>

// The browser: QTextBrowser reading every *.md as Markdown (a link's type is not always told by
// Qt), images scaled to fit the page, and a #fragment taken to the heading whose GitHub anchor it
// is (Qt's Markdown reader gives headings no anchor names, GitHub's renderer makes them).
class ManualBrowser : public QTextBrowser {
    Q_OBJECT
public:
    explicit ManualBrowser(QWidget* parent = nullptr);
    QVariant loadResource(int type, const QUrl& name) override;
    // The page's first top-level heading (a Markdown page has no <title>).
    QString pageTitle() const;
    // Scrolls to the heading whose anchor is `fragment`; false when the page has none.
    bool scrollToHeading(const QString& fragment);

protected:
    void doSetSource(const QUrl& name, QTextDocument::ResourceType type) override;
};

class ManualWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit ManualWindow(QWidget* parent = nullptr);

    // The folder of the manual's pages (its index is README.md there).
    static QString manualDirectory();
    // GitHub's anchor of a heading: lower case, punctuation dropped (letters of every script,
    // digits, '-' and '_' stay), each space a '-' — "Choosing λ, and (α)" → "choosing-λ-and-α".
    static QString headingAnchor(const QString& heading);

    ManualBrowser* browser() const { return browser_; }
    // Opens a page of the manual ("prune.md", "prune.md#export"); the index when empty.
    void showPage(const QString& page = QString());

private:
    ManualBrowser* browser_;
};
