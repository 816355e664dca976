#include "app/studio/studiowindow.h"

#include "app/studio/architecturepanel.h"
#include "app/studio/textpage.h"
#include "app/studio/imagespage.h"
#include "app/studio/manualwindow.h"
#include "app/studio/runsettingspanel.h"
#include "app/studio/scorespage.h"
#include "app/studio/studiopalette.h"
#include "app/studio/sweeppage.h"
#include "core/models/devices.h"
#include "core/models/llamagen.h"
#include "core/util/error.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QAbstractSpinBox>
#include <QKeyEvent>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QTime>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>
#include <cmath>

namespace {

constexpr int kMaxRecent = 8;
const char* kDemoModels[] = {"demo:lm", "demo:lm-gqa", "demo:c2i"};

bool isWorkspaceFile(const QString& path) { return path.endsWith(QStringLiteral(".npw.json")); }

} // namespace

StudioWindow::StudioWindow(bool persistSettings, QWidget* parent) : QMainWindow(parent), persist_(persistSettings) {
    setWindowTitle(tr("npw-studio"));
    setObjectName(QStringLiteral("StudioWindow"));
    setAcceptDrops(true);
    setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);
    buildCentral();
    buildDocks();
    buildActions();
    connectSession();
    qApp->installEventFilter(this);
    const QScreen* screen = this->screen() ? this->screen() : QGuiApplication::primaryScreen();
    const QRect available = screen ? screen->availableGeometry() : QRect(0, 0, 1600, 1000);
    resize(initialSize(available));
    // On a laptop's screen (768 px or less) the plots need the toolbar's height more than the
    // menus need a second place: View ▸ Toolbar shows it again.
    if (available.height() < 860) mainToolBar_->hide();
    // The Run settings whole (no scroll bar over the Run button) where the height allows; the
    // Model and Log docks share the rest.
    // Once laid out (the docks have no heights before the window is shown); a layout the user
    // saved stays as it was.
    if (!(persist_ && QSettings().contains(QStringLiteral("window/state")))) QTimer::singleShot(0, this, [this] {
        auto* modelDock = findChild<QDockWidget*>(QStringLiteral("modelDock"));
        auto* runDock = findChild<QDockWidget*>(QStringLiteral("runDock"));
        auto* logDock = findChild<QDockWidget*>(QStringLiteral("logDock"));
        if (!modelDock || !runDock || !logDock) return;
        const int total = modelDock->height() + runDock->height() + logDock->height();
        const int run = std::min(runSettings_->sizeHint().height() + 24, total * 3 / 5);
        resizeDocks({modelDock, runDock, logDock}, {(total - run) / 2, run, (total - run) / 2}, Qt::Vertical);
    });
    if (persist_) restoreSettings();
    updateRunState();
}

StudioWindow::~StudioWindow() = default;

void StudioWindow::buildCentral() {
    // One page per tab, as Hotspot's ResultsPage: each builds and wires its own views.
    scoresPage_ = new ScoresPage(&session_);
    sweepPage_ = new SweepPage(&session_);
    // The Images tab: class-conditional image models (dense vs pruned samples, image metrics).
    imageSession_ = new ImageSession(session_.jobs(), this);
    imagesPage_ = new ImagesPage(imageSession_);
    // The Text tab: dense and pruned continuations of the language model side by side.
    textSession_ = new TextSession(&session_, this);
    textPage_ = new TextPage(textSession_);

    tabs_ = new QTabWidget;
    tabs_->addTab(scoresPage_, tr("Scores and mask"));
    tabs_->addTab(sweepPage_, tr("Perplexity sweep"));
    tabs_->addTab(imagesPage_, tr("Images"));
    tabs_->addTab(textPage_, tr("Text"));
    setCentralWidget(tabs_);
}

void StudioWindow::buildDocks() {
    architecture_ = new ArchitecturePanel;
    device_ = new QComboBox;
    device_->setObjectName(QStringLiteral("deviceSelector"));
    for (const std::string& d : npw::availableDevices()) device_->addItem(QString::fromStdString(d));
    device_->setToolTip(tr("Where the model runs: the CPU, or a CUDA device when this LibTorch and a GPU have one.\n"
                           "Applies to the next model opened."));
    auto* modelPage = new QWidget;
    auto* modelLayout = new QVBoxLayout(modelPage);
    modelLayout->setContentsMargins(0, 0, 0, 0);
    auto* deviceRow = new QHBoxLayout;
    deviceRow->setContentsMargins(4, 4, 4, 0);
    deviceRow->addWidget(new QLabel(tr("Device")));
    deviceRow->addWidget(device_, 1);
    modelLayout->addLayout(deviceRow);
    modelLayout->addWidget(architecture_, 1);
    auto* modelDock = new QDockWidget(tr("Model"));
    modelDock->setObjectName(QStringLiteral("modelDock"));
    modelDock->setWidget(modelPage);
    addDockWidget(Qt::LeftDockWidgetArea, modelDock);

    runSettings_ = new RunSettingsPanel;
    auto* runDock = new QDockWidget(tr("Run settings"));
    runDock->setObjectName(QStringLiteral("runDock"));
    // Its fields scroll rather than pushing the window past a laptop's screen (1280×720); the
    // Run button stays in view below them.
    runDock->setWidget(runSettings_);
    addDockWidget(Qt::LeftDockWidgetArea, runDock);

    log_ = new QPlainTextEdit;
    log_->setObjectName(QStringLiteral("log"));
    log_->setReadOnly(true);
    log_->setMaximumBlockCount(2000);
    auto* logDock = new QDockWidget(tr("Log"));
    logDock->setObjectName(QStringLiteral("logDock"));
    logDock->setWidget(log_);
    addDockWidget(Qt::LeftDockWidgetArea, logDock);
    resizeDocks({modelDock, runDock, logDock}, {300, 330, 200}, Qt::Vertical);
    resizeDocks({modelDock}, {380}, Qt::Horizontal);

    stage_ = new QLabel(tr("Ready"));
    progress_ = new QProgressBar;
    progress_->setObjectName(QStringLiteral("jobProgress"));
    progress_->setMaximumWidth(320);
    progress_->setRange(0, 1000);
    progress_->setTextVisible(false);
    eta_ = new QLabel;
    cancel_ = new QPushButton(tr("Cancel"));
    cancel_->setObjectName(QStringLiteral("cancelButton"));
    cancel_->setToolTip(tr("Stop the running job at its next step (Esc); the workspace stays as before it"));
    statusBar()->addWidget(stage_, 1);
    statusBar()->addPermanentWidget(eta_);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(cancel_);
}

void StudioWindow::buildActions() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* open = file->addAction(tr("&Open model file…"), this, &StudioWindow::chooseModelFile);
    open->setShortcut(QKeySequence::Open);
    file->addAction(tr("Open model &directory…"), this, &StudioWindow::chooseModelDirectory);
    QMenu* demos = file->addMenu(tr("Open &demo"));
    for (const char* demo : kDemoModels) {
        const QString name = QString::fromLatin1(demo);
        demos->addAction(name, this, [this, name] { openModel(name); });
    }
    recentMenu_ = file->addMenu(tr("Open &recent"));
    file->addSeparator();
    QAction* openWs = file->addAction(tr("Open &workspace…"), this, &StudioWindow::chooseWorkspaceToOpen);
    openWs->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+O")));
    QAction* saveWs = file->addAction(tr("&Save workspace…"), this, &StudioWindow::chooseWorkspaceToSave);
    saveWs->setShortcut(QKeySequence::Save);
    file->addSeparator();
    QAction* exportModel = file->addAction(tr("&Export pruned model…"), this, &StudioWindow::chooseExportDir);
    exportModel->setShortcut(QKeySequence(QStringLiteral("Ctrl+E")));
    QAction* exportPlotAction = file->addAction(tr("Export &plot…"), this, &StudioWindow::choosePlotFile);
    exportPlotAction->setShortcut(QKeySequence(QStringLiteral("Ctrl+P")));
    file->addAction(tr("Export sweep &CSV…"), this, &StudioWindow::chooseCsvFile);
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    QAction* runAction = run->addAction(tr("&Run (calibrate and score)"), this, [this] { session_.runScoring(); });
    runAction->setShortcut(QKeySequence(QStringLiteral("Ctrl+R")));
    QAction* sweepAction = run->addAction(tr("Run &sweep"), sweepPage_, &SweepPage::runSweep);
    sweepAction->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+R")));
    QAction* recomputeAction = run->addAction(tr("R&ecompute every score set"), &session_, &StudioSession::recompute);
    recomputeAction->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+E")));
    QAction* cancelAction = run->addAction(tr("&Cancel"), &session_, &StudioSession::cancel);
    cancelAction->setShortcut(QKeySequence(Qt::Key_Escape));

    QMenu* view = menuBar()->addMenu(tr("&View"));
    QAction* scoresTab = view->addAction(tr("&Scores and mask"), this, [this] { showTab(0); });
    scoresTab->setShortcut(QKeySequence(QStringLiteral("Ctrl+1")));
    QAction* sweepTab = view->addAction(tr("&Perplexity sweep"), this, [this] { showTab(1); });
    sweepTab->setShortcut(QKeySequence(QStringLiteral("Ctrl+2")));
    QAction* imagesTab = view->addAction(tr("&Images"), this, [this] { showTab(2); });
    imagesTab->setShortcut(QKeySequence(QStringLiteral("Ctrl+3")));
    view->addAction(tr("&Text"), this, [this] { showTab(3); })->setShortcut(QKeySequence(QStringLiteral("Ctrl+4")));
    view->addSeparator();
    darkAction_ = view->addAction(tr("&Dark palette"));
    darkAction_->setCheckable(true);
    darkAction_->setShortcut(QKeySequence(QStringLiteral("Ctrl+D")));
    connect(darkAction_, &QAction::toggled, this, &StudioWindow::setDark);
    view->addSeparator();
    for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* manual = help->addAction(tr("&Manual"), this, &StudioWindow::showManual);
    manual->setObjectName(QStringLiteral("manualAction"));
    manual->setShortcut(QKeySequence::HelpContents);

    QToolBar* bar = addToolBar(tr("Toolbar"));
    mainToolBar_ = bar;
    view->addAction(bar->toggleViewAction());
    bar->setObjectName(QStringLiteral("mainToolBar"));
    bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
    bar->addAction(open);
    for (QAction* demo : demos->actions()) bar->addAction(demo);
    bar->addSeparator();
    bar->addAction(runAction);
    bar->addAction(sweepAction);
    bar->addAction(cancelAction);
    bar->addSeparator();
    bar->addAction(saveWs);
    bar->addAction(exportModel);

    connect(cancel_, &QPushButton::clicked, &session_, &StudioSession::cancel);
    rebuildRecentMenu();
}

void StudioWindow::showManual() {
    // One window, made when first asked for: a second Help ▸ Manual raises it where the reader left it.
    if (!manual_) manual_ = new ManualWindow(this);
    manual_->show();
    manual_->raise();
    manual_->activateWindow();
}

void StudioWindow::connectSession() {
    JobRunner* jobs = session_.jobs();
    connect(jobs, &JobRunner::started, this, [this](const QString& title) {
        // An error box of an earlier action does not stay open over further work (it is in the log).
        if (errorDialog_) errorDialog_->hide();
        stage_->setText(title);
        progress_->setRange(0, 0);  // busy until the first report says how far
        eta_->clear();
        appendLog(tr("%1…").arg(title));
    });
    connect(jobs, &JobRunner::progressed, this, [this](const QString& stage, double fraction, double secondsLeft) {
        stage_->setText(tr("%1: %2").arg(session_.jobs()->currentJob(), stage));
        if (std::isfinite(fraction)) {
            progress_->setRange(0, 1000);
            progress_->setValue(int(std::lround(1000 * std::clamp(fraction, 0.0, 1.0))));
        }
        eta_->setText(EtaEstimator::describe(secondsLeft));
    });
    connect(jobs, &JobRunner::runningChanged, this, [this](bool running) {
        if (!running) {
            progress_->setRange(0, 1000);
            progress_->setValue(0);
            eta_->clear();
            stage_->setText(tr("Ready"));
        }
        updateRunState();
    });
    // The session logs a failed job ("Open X failed: …"); the dialog shows it too.
    connect(jobs, &JobRunner::failed, this, [this](const QString& title, const QString& message) {
        showErrorDialog(title, message);
    });
    connect(&session_, &StudioSession::logMessage, this, &StudioWindow::appendLog);
    connect(&session_, &StudioSession::refused, this, &StudioWindow::showError);
    connect(scoresPage_, &ScoresPage::logMessage, this, &StudioWindow::appendLog);
    connect(scoresPage_, &ScoresPage::openModelRequested, this, &StudioWindow::chooseModelFile);
    connect(scoresPage_, &ScoresPage::openDemoRequested, this, &StudioWindow::openModel);
    connect(imageSession_, &ImageSession::logMessage, this, &StudioWindow::appendLog);
    connect(imagesPage_, &ImagesPage::errorOccurred, this, &StudioWindow::showError);
    connect(textPage_, &TextPage::errorOccurred, this, &StudioWindow::showError);
    connect(imageSession_, &ImageSession::modelChanged, this, &StudioWindow::showArchitecture);
    imageSession_->setDevice(device_->currentText());
    connect(device_, &QComboBox::currentTextChanged, imageSession_, &ImageSession::setDevice);
    connect(tabs_, &QTabWidget::currentChanged, this, &StudioWindow::showArchitecture);
    // The tabs restore their own parts of a reopened workspace.
    connect(&session_, &StudioSession::imageWorkspaceRestored, imageSession_, &ImageSession::restoreWorkspaceText);
    connect(textSession_, &TextSession::logMessage, this, &StudioWindow::appendLog);
    connect(&session_, &StudioSession::modelChanged, this, &StudioWindow::onModelChanged);
    // A model being opened: its architecture from the headers while its weights are checked.
    connect(&session_, &StudioSession::headersRead, this, [this] {
        const auto headers = session_.openingHeaders();
        if (!headers || (tabs_->currentWidget() == imagesPage_ && imageSession_->hasModel())) return;
        const QString runtime = session_.device() == QStringLiteral("cpu") ? tr("the CPU") : session_.device();
        architecture_->showCheckpoint(session_.openingReference(), *headers, runtime,
                                      tr("Reading and checking the weights (mapped in the file's dtype)…"));
    });
    connect(&session_, &StudioSession::scoresChanged, this, &StudioWindow::updateRunState);
    connect(&session_, &StudioSession::settingsChanged, this, [this] {
        runSettings_->setSettings(session_.settings());
        updateRunState();
    });
    connect(runSettings_, &RunSettingsPanel::settingsEdited, this, [this](const studio::RunSettings& s) {
        session_.setSettings(s);
    });
    connect(runSettings_, &RunSettingsPanel::runRequested, this, [this] { session_.runScoring(); });
}

void StudioWindow::showArchitecture() {
    // The Model dock follows the tab: the image model on the Images tab, the language model elsewhere.
    const bool images = tabs_->currentWidget() == imagesPage_ && imageSession_->hasModel();
    if (images)
        architecture_->showImageModel(imageSession_->modelReference(), imageSession_->workbench()->dense(),
                                      imageSession_->workbench()->vq());
    else if (session_.hasModel())
        architecture_->showModel(session_.modelReference(), session_.model(), session_.pruneRoadText());
    else
        architecture_->clear();
}

void StudioWindow::onModelChanged() {
    showArchitecture();
    // The demo models' texts and prompt for them, empty fields with a hint for any other model.
    const npw::ModelDefaults defaults = session_.modelDefaults();
    runSettings_->setModelDefaults(defaults);
    sweepPage_->setModelDefaults(defaults);
    textPage_->setModelDefaults(defaults);
    setWindowTitle(tr("%1 — npw-studio").arg(session_.modelReference()));
    addRecent(session_.modelReference());
    updateRunState();
}

void StudioWindow::updateRunState() {
    scoresPage_->updateRecomputeNotice();
    const bool busy = session_.jobs()->isRunning();
    runSettings_->setBusy(busy);
    runSettings_->setCalibrationStale(session_.calibrationStale(), session_.hasModel());
    cancel_->setEnabled(busy);
    sweepPage_->setBusy(busy);
    imagesPage_->setBusy(busy);
    textPage_->setBusy(busy);
}

void StudioWindow::showTab(int index) { tabs_->setCurrentIndex(index); }

QSize StudioWindow::initialSize(const QRect& available) {
    // The window manager adds a title bar and a frame: leave room for them.
    constexpr int kFrameWidth = 8, kFrameHeight = 36;
    const QSize room(std::max(640, available.width() - kFrameWidth), std::max(480, available.height() - kFrameHeight));
    return room.boundedTo(QSize(1600, 1000));
}

void StudioWindow::setDark(bool dark) {
    QApplication::setPalette(dark ? studio::darkPalette() : QApplication::style()->standardPalette());
    if (darkAction_->isChecked() != dark) darkAction_->setChecked(dark);
}

bool StudioWindow::exportPlot(const QString& path) {
    if (tabs_->currentWidget() == imagesPage_) return imagesPage_->exportPlot(path);
    if (tabs_->currentWidget() == sweepPage_) return sweepPage_->exportPlot(path);
    return scoresPage_->exportPlot(path);  // the score views together, as laid out on screen
}

void StudioWindow::openModel(const QString& reference) {
    bool imageModel = false;
    try {  // a quick look at the file on this thread; reading it properly is the job's
        imageModel = npw::isLlamaGenModel(reference.toStdString());
    } catch (const std::exception&) {
    }
    if (imageModel) {  // an image model: the Images tab
        showTab(2);
        imageSession_->setDevice(device_->currentText());
        if (!imagesPage_->openModel(reference))
            appendLog(tr("Busy: cancel the running job before opening %1.").arg(reference));
        return;
    }
    if (!session_.openModel(reference, device_->currentText()))
        appendLog(tr("Busy: cancel the running job before opening %1.").arg(reference));
}

void StudioWindow::appendLog(const QString& text) {
    log_->appendPlainText(QStringLiteral("%1  %2").arg(QTime::currentTime().toString(QStringLiteral("HH:mm:ss")), text));
}

void StudioWindow::showError(const QString& what, const QString& message) {
    appendLog(tr("%1 failed: %2").arg(what, message));
    showErrorDialog(what, message);
}

void StudioWindow::showErrorDialog(const QString& what, const QString& message) {
    if (!errorDialog_) {
        errorDialog_ = new QMessageBox(QMessageBox::Warning, tr("npw-studio"), QString(), QMessageBox::Ok, this);
        errorDialog_->setObjectName(QStringLiteral("errorDialog"));
        errorDialog_->setWindowModality(Qt::NonModal);
        // Paths and JSON field names in npw's messages are long words: let them wrap, and let
        // the user copy the message into a bug report.
        errorDialog_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    }
    errorDialog_->setText(tr("%1 failed.").arg(what));
    errorDialog_->setInformativeText(message);
    errorDialog_->show();
    errorDialog_->raise();
}

QMessageBox* StudioWindow::errorDialog() const { return errorDialog_; }

QImage StudioWindow::grabWithDialogs() {
    QImage image = grab().toImage();
    if (errorDialog_ && errorDialog_->isVisible()) {
        QPainter painter(&image);
        const QImage dialog = errorDialog_->grab().toImage();
        // Where the dialog stands over the window; centred when the platform places it elsewhere.
        QPoint at = errorDialog_->geometry().topLeft() - geometry().topLeft();
        if (!QRect(QPoint(0, 0), image.size()).contains(QRect(at, dialog.size())))
            at = QPoint((image.width() - dialog.width()) / 2, (image.height() - dialog.height()) / 2);
        painter.drawImage(at, dialog);
        painter.setPen(palette().color(QPalette::Shadow));
        painter.drawRect(QRect(at, dialog.size()).adjusted(0, 0, -1, -1));
    }
    return image;
}

void StudioWindow::closeEvent(QCloseEvent* event) {
    // Quitting (Ctrl+Q, the window's close button) with scores or sweep rows not saved in a
    // workspace: offer to save them. Not in the scripted demo and the tests (persist_ off).
    if (persist_ && session_.hasUnsavedResults()) {
        const auto answer = QMessageBox::question(
            this, tr("npw-studio"),
            tr("The scores and sweep results of %1 are not saved in a workspace. Save them before quitting?")
                .arg(session_.modelReference()),
            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
        if (answer == QMessageBox::Cancel) {
            event->ignore();
            return;
        }
        if (answer == QMessageBox::Save) {
            chooseWorkspaceToSave();
            if (session_.hasUnsavedResults()) {  // the save dialog was cancelled, or the save failed
                event->ignore();
                return;
            }
        }
    }
    session_.cancel();
    if (persist_) saveSettings();
    event->accept();
}

bool StudioWindow::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() != QEvent::ShortcutOverride) return QMainWindow::eventFilter(watched, event);
    auto* key = static_cast<QKeyEvent*>(event);
    auto* widget = qobject_cast<QWidget*>(watched);
    // Only fields of this window, and only keys with Ctrl that are one of its actions' shortcuts
    // and no editing key (copy, paste, undo, select all stay the field's).
    if (!widget || widget->window() != this || !(key->modifiers() & Qt::ControlModifier)) return false;
    if (!qobject_cast<QLineEdit*>(widget) && !qobject_cast<QAbstractSpinBox*>(widget->parentWidget()) &&
        !qobject_cast<QAbstractSpinBox*>(widget))
        return false;
    for (QKeySequence::StandardKey edit : {QKeySequence::Copy, QKeySequence::Paste, QKeySequence::Cut, QKeySequence::Undo,
                                           QKeySequence::Redo, QKeySequence::SelectAll})
        if (key->matches(edit)) return false;
    const QKeySequence pressed(key->keyCombination());
    for (QAction* action : findChildren<QAction*>())
        if (action->isEnabled() && action->shortcut() == pressed) return true;  // not accepted: the shortcut fires
    return false;
}

void StudioWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void StudioWindow::dropEvent(QDropEvent* event) {
    const QList<QUrl> urls = event->mimeData()->urls();
    if (urls.isEmpty() || !urls.first().isLocalFile()) return;
    const QString path = urls.first().toLocalFile();
    if (isWorkspaceFile(path)) session_.openWorkspace(path);
    // A dropped file inside a Hugging Face directory (config.json, model.safetensors) means the directory.
    else if (QFileInfo(path).isFile() && !path.endsWith(QStringLiteral(".bin"))) openModel(QFileInfo(path).absolutePath());
    else openModel(path);
    event->acceptProposedAction();
}

void StudioWindow::addRecent(const QString& path) {
    recent_.removeAll(path);
    recent_.prepend(path);
    while (recent_.size() > kMaxRecent) recent_.removeLast();
    rebuildRecentMenu();
}

void StudioWindow::rebuildRecentMenu() {
    recentMenu_->clear();
    for (const QString& path : recent_)
        recentMenu_->addAction(path, this, [this, path] {
            if (isWorkspaceFile(path)) session_.openWorkspace(path);
            else openModel(path);
        });
    recentMenu_->setEnabled(!recent_.isEmpty());
}

void StudioWindow::restoreSettings() {
    QSettings s;
    recent_ = s.value(QStringLiteral("recentFiles")).toStringList();
    rebuildRecentMenu();
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(s.value(QStringLiteral("window/state")).toByteArray());
    setDark(s.value(QStringLiteral("view/dark"), false).toBool());
    const QString device = s.value(QStringLiteral("device")).toString();
    if (device_->findText(device) >= 0) device_->setCurrentText(device);
    try {
        const std::string runJson = s.value(QStringLiteral("run/settings")).toString().toStdString();
        if (!runJson.empty())
            session_.setSettings(studio::runSettingsFromJson(npw::json_fields::parseJsonLimited(runJson, "the saved run settings")));
    } catch (const std::exception& e) {
        appendLog(tr("Stored run settings ignored: %1").arg(e.what()));
    }
    sweepPage_->restoreSettings(s);
}

void StudioWindow::saveSettings() const {
    QSettings s;
    s.setValue(QStringLiteral("recentFiles"), recent_);
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState());
    s.setValue(QStringLiteral("view/dark"), darkAction_->isChecked());
    s.setValue(QStringLiteral("device"), device_->currentText());
    s.setValue(QStringLiteral("run/settings"), QString::fromStdString(npw::json_fields::dumpJson(studio::toJson(session_.settings()))));
    sweepPage_->saveSettings(s);
}

void StudioWindow::chooseModelFile() {
    const QString file = QFileDialog::getOpenFileName(this, tr("Open a model"), QString(),
                                                      tr("Models (config.json *.safetensors *.bin);;All files (*)"));
    if (file.isEmpty()) return;
    // config.json / model.safetensors stand for their Hugging Face directory.
    openModel(file.endsWith(QStringLiteral(".bin")) ? file : QFileInfo(file).absolutePath());
}

void StudioWindow::chooseModelDirectory() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a Hugging Face model directory"));
    if (!dir.isEmpty()) openModel(dir);
}

void StudioWindow::chooseWorkspaceToOpen() {
    const QString file =
        QFileDialog::getOpenFileName(this, tr("Open a workspace"), QString(), tr("npw workspaces (*.npw.json)"));
    if (file.isEmpty()) return;
    if (session_.openWorkspace(file)) addRecent(file);
}

void StudioWindow::chooseWorkspaceToSave() {
    QString file = QFileDialog::getSaveFileName(this, tr("Save the workspace"), QString(), tr("npw workspaces (*.npw.json)"));
    if (file.isEmpty()) return;
    if (!isWorkspaceFile(file)) file += QStringLiteral(".npw.json");
    try {
        saveWorkspace(file);
        appendLog(tr("Saved the workspace to %1.").arg(file));
        addRecent(file);
    } catch (const std::exception& e) {
        showError(tr("Save workspace"), QString::fromUtf8(e.what()));
    }
}

void StudioWindow::saveWorkspace(const QString& path) {
    session_.saveWorkspace(path, imageSession_->workspaceState(),
                           imageSession_->hasModel() ? imageSession_->workbench()->dense().checkpoint().source : std::string(),
                           textPage_->workspaceState());
}

void StudioWindow::chooseExportDir() {
    if (!session_.selection()) {
        appendLog(tr("Nothing to export: run a method first."));
        return;
    }
    const QString dir = QFileDialog::getSaveFileName(this, tr("Export the pruned model to a new directory"));
    if (!dir.isEmpty()) session_.exportPrunedModel(dir);
}

void StudioWindow::choosePlotFile() {
    const QString file = QFileDialog::getSaveFileName(this, tr("Export the plot"), QString(),
                                                      tr("PNG (*.png);;PDF (*.pdf);;SVG (*.svg)"));
    if (file.isEmpty()) return;
    appendLog(exportPlot(file) ? tr("Wrote %1.").arg(file) : tr("Could not write %1.").arg(file));
}

void StudioWindow::chooseCsvFile() {
    const QString file = QFileDialog::getSaveFileName(this, tr("Export the sweep table"), QString(), tr("CSV (*.csv)"));
    if (file.isEmpty()) return;
    try {
        session_.exportSweepCsv(file);
        appendLog(tr("Wrote %1 sweep rows to %2.").arg(session_.sweepRows().size()).arg(file));
    } catch (const std::exception& e) {
        showError(tr("Export sweep CSV"), QString::fromUtf8(e.what()));
    }
}
