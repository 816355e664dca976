#pragma once
// npw-studio's main window: one page per tab (ScoresPage, SweepPage, ImagesPage, TextPage), the docks
// (model, run settings, log), the menus and the toolbar, wired to one StudioSession, and the
// session's JobRunner to the progress bar and Cancel. Holds no pruning logic; every number it
// shows comes from core via the sessions.
#include "app/studio/studiosession.h"

#include <QMainWindow>

class ArchitecturePanel;
class ImageSession;
class ImagesPage;
class ManualWindow;
class TextPage;
class TextSession;
class QAction;
class QComboBox;
class QLabel;
class QMenu;
class QMessageBox;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTabWidget;
class RunSettingsPanel;
class ScoresPage;
class SweepPage;

class StudioWindow : public QMainWindow {
    Q_OBJECT
public:
    // persistSettings: read and write QSettings (settings, layout, recent files); off for the
    // scripted demo and the tests, which must not depend on or change a user's settings.
    explicit StudioWindow(bool persistSettings = true, QWidget* parent = nullptr);
    ~StudioWindow() override;

    StudioSession* session() { return &session_; }
    ScoresPage* scoresPage() const { return scoresPage_; }
    SweepPage* sweepPage() const { return sweepPage_; }
    ImagesPage* imagesPage() const { return imagesPage_; }
    ImageSession* imageSession() const { return imageSession_; }
    TextPage* textPage() const { return textPage_; }
    ArchitecturePanel* architecturePanel() const { return architecture_; }
    RunSettingsPanel* runSettings() const { return runSettings_; }
    QProgressBar* progressBar() const { return progress_; }
    QPlainTextEdit* log() const { return log_; }

    void showTab(int index);  // 0 scores, 1 sweep, 2 images
    // The size the window opens at on a screen whose free area is `available`: all of it on a
    // laptop (1280×720, 1366×768), at most 1600×1000 on a larger one.
    static QSize initialSize(const QRect& available);
    void setDark(bool dark);
    // Both tabs' state (npw::Error naming the file, or when no model is open in either).
    void saveWorkspace(const QString& path);
    // Writes the current tab's plots: .png, .pdf or .svg by suffix. False when it could not.
    bool exportPlot(const QString& path);
    // The window as shown, with an open error dialog painted over it where it stands (a
    // screenshot of what a user sees; grab() alone leaves out the dialog's own window).
    QImage grabWithDialogs();
    // The dialog of the last error (null when none was shown): not modal, so that the log,
    // the tests and a running job go on; a new error replaces its text.
    QMessageBox* errorDialog() const;
    // Help ▸ Manual: the manual's window (made on first use), shown and raised.
    void showManual();
    ManualWindow* manualWindow() const { return manual_; }

public slots:
    void openModel(const QString& reference);
    void appendLog(const QString& text);
    // An error the user must see: in the log and in the error dialog, the message as core (and
    // the CLI) words it. Failed jobs, refused saves and exports come here.
    void showError(const QString& what, const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;
    // Lets the window's shortcuts (Ctrl+E, Ctrl+D, …) through while a text or number field has
    // the focus: a line edit claims Ctrl+E (end of line) and Ctrl+D (delete) for itself.
    bool eventFilter(QObject* watched, QEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildCentral();
    void buildDocks();
    void buildActions();
    void connectSession();
    void onModelChanged();
    void showArchitecture();  // of the current tab's model
    void updateRunState();
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void restoreSettings();
    void saveSettings() const;
    // File dialogs behind the actions.
    void chooseModelFile();
    void chooseModelDirectory();
    void chooseWorkspaceToOpen();
    void chooseWorkspaceToSave();
    void chooseExportDir();
    void choosePlotFile();
    void chooseCsvFile();
    void showErrorDialog(const QString& what, const QString& message);  // the dialog half of showError

    StudioSession session_;
    bool persist_;
    QTabWidget* tabs_;
    ScoresPage* scoresPage_;
    SweepPage* sweepPage_;
    ImageSession* imageSession_;
    ImagesPage* imagesPage_;
    TextSession* textSession_;
    TextPage* textPage_;
    ArchitecturePanel* architecture_;
    QComboBox* device_;
    RunSettingsPanel* runSettings_;
    QPlainTextEdit* log_;
    QLabel* stage_;
    QProgressBar* progress_;
    QLabel* eta_;
    QPushButton* cancel_;
    QMenu* recentMenu_;
    class QToolBar* mainToolBar_ = nullptr;
    QAction* darkAction_;
    QStringList recent_;
    QMessageBox* errorDialog_ = nullptr;
    ManualWindow* manual_ = nullptr;
};
