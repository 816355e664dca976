#include "app/studio/studiowindow.h"

#include "app/studio/architecturepanel.h"
#include "app/studio/imagespage.h"
#include "app/studio/layerreporttable.h"
#include "app/studio/runsettingspanel.h"
#include "app/studio/studiopalette.h"
#include "core/models/devices.h"
#include "core/models/llamagen.h"
#include "core/util/error.h"
#include "widgets/headmapwidget.h"
#include "widgets/layeroverviewwidget.h"
#include "widgets/layerselection.h"
#include "widgets/scorehistogramwidget.h"
#include "widgets/sparsitycontrols.h"
#include "widgets/sweepplotwidget.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QPdfWriter>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QToolBar>
#include <QVBoxLayout>
#include <cmath>
#include <map>
#include <set>

namespace {

// What the speed plot (the paper's Figure 5) offers for a sweep's "speed" rows: name, axis
// label, value (means over seeds from core's summariseOverSeeds).
struct SpeedQuantity {
    const char* name;
    const char* axis;
    double (*value)(const npw::SweepSummaryRow&);
    double (*spread)(const npw::SweepSummaryRow&);
};
const SpeedQuantity kSpeedQuantities[] = {
    {"Decode speed", "greedy decode, tokens per second", [](const npw::SweepSummaryRow& s) { return s.decodeMean; },
     [](const npw::SweepSummaryRow& s) { return s.decodeStd; }},
    {"Prefill speed", "prompt prefill, tokens per second", [](const npw::SweepSummaryRow& s) { return s.prefillMean; },
     nullptr},
    {"Weight memory", "weights (MiB)", [](const npw::SweepSummaryRow& s) { return s.weightsMiBMean; }, nullptr},
    {"KV cache", "key/value cache of prompt + decode (MiB)",
     [](const npw::SweepSummaryRow& s) { return s.kvCacheMiBMean; }, nullptr},
};

constexpr int kMaxRecent = 8;
const char* kDemoModels[] = {"demo:lm", "demo:lm-gqa", "demo:c2i"};

// "0.1, 0.2,0.3" → {0.1, 0.2, 0.3}; entries that are not numbers are skipped.
std::vector<double> parseRatios(const QString& text) {
    std::vector<double> out;
    for (const QString& item : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const double value = item.trimmed().toDouble(&ok);
        if (ok) out.push_back(value);
    }
    return out;
}

bool isWorkspaceFile(const QString& path) { return path.endsWith(QStringLiteral(".npw.json")); }

} // namespace

StudioWindow::StudioWindow(bool persistSettings, QWidget* parent) : QMainWindow(parent), persist_(persistSettings) {
    setWindowTitle(tr("npw-studio"));
    setObjectName(QStringLiteral("StudioWindow"));
    setAcceptDrops(true);
    setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);
    layerSelection_ = new LayerSelection(this);
    buildCentral();
    buildDocks();
    buildActions();
    connectSession();
    showKnobs(session_.knobs());
    resize(1560, 960);
    if (persist_) restoreSettings();
    updateRunState();
}

StudioWindow::~StudioWindow() = default;

void StudioWindow::buildCentral() {
    // The Selection bar: which score set, and the knobs that only re-select.
    methodSelector_ = new QComboBox;
    methodSelector_->setObjectName(QStringLiteral("scoreSetSelector"));
    methodSelector_->setToolTip(tr("Score sets computed so far, one per method: switch to compare them.\n"
                                   "Run with another method in the Run settings to add one."));
    methodSelector_->setMinimumContentsLength(12);
    controls_ = new SparsityControls;
    summary_ = new QLabel(tr("Open a model and Run to see its scores."));
    summary_->setObjectName(QStringLiteral("selectionSummary"));
    summary_->setWordWrap(true);
    summary_->setMinimumWidth(260);
    // Room for the longest texts from the start: a label that grows when a result arrives
    // re-lays out the page, and every plot below would redraw at its new size in that turn.
    summary_->setMinimumHeight(summary_->fontMetrics().lineSpacing() * 3);
    auto* methodBox = new QVBoxLayout;
    methodLabel_ = new QLabel(tr("Score set"));
    methodLabel_->setMinimumWidth(methodLabel_->fontMetrics().horizontalAdvance(tr("Score set (99 computed)")));
    methodBox->addWidget(methodLabel_);
    methodBox->addWidget(methodSelector_);
    methodBox->addStretch(1);
    auto* selectionBox = new QGroupBox(tr("Selection"));
    auto* selectionLayout = new QHBoxLayout(selectionBox);
    selectionLayout->setContentsMargins(8, 4, 8, 4);
    selectionLayout->addLayout(methodBox);
    selectionLayout->addWidget(controls_, 3);
    selectionLayout->addWidget(summary_, 2);
    // Says when the views no longer show what was asked (new calibration settings, or a
    // box-constrained z whose ρ/λ moved): the knobs only re-select, this needs new solves. The
    // row is always there (a neutral line otherwise), so that its news never re-lays out the
    // page: every plot below would redraw at a new size in that turn.
    recomputeNotice_ = new QFrame;
    recomputeNotice_->setObjectName(QStringLiteral("recomputeNotice"));
    recomputeNotice_->setFrameShape(QFrame::StyledPanel);
    recomputeNotice_->setBackgroundRole(QPalette::ToolTipBase);
    recomputeReason_ = new QLabel;
    recomputeReason_->setWordWrap(true);
    recomputeReason_->setMinimumHeight(recomputeReason_->fontMetrics().lineSpacing() * 2);
    recompute_ = new QPushButton(tr("Recompute"));
    recompute_->setObjectName(QStringLiteral("recomputeButton"));
    recompute_->setToolTip(tr("Calibrate again if the calibration changed, and solve every score set shown again\n"
                              "(box-constrained ones at the current ρ and λ) (Ctrl+Shift+E)"));
    recomputeIcon_ = new QLabel;
    recomputeIcon_->setFixedSize(18, 18);
    auto* noticeLayout = new QHBoxLayout(recomputeNotice_);
    noticeLayout->setContentsMargins(8, 2, 8, 2);
    noticeLayout->addWidget(recomputeIcon_);
    noticeLayout->addWidget(recomputeReason_, 1);
    noticeLayout->addWidget(recompute_);

    headMap_ = new HeadMapWidget(layerSelection_);
    histogram_ = new ScoreHistogramWidget(layerSelection_);
    overview_ = new LayerOverviewWidget(layerSelection_);
    layerTable_ = new LayerReportTable;
    auto* top = new QSplitter(Qt::Horizontal);
    top->addWidget(headMap_);
    top->addWidget(histogram_);
    top->setStretchFactor(0, 3);
    top->setStretchFactor(1, 2);
    auto* bottom = new QSplitter(Qt::Horizontal);
    bottom->addWidget(overview_);
    bottom->addWidget(layerTable_);
    bottom->setStretchFactor(0, 3);
    bottom->setStretchFactor(1, 2);
    auto* views = new QSplitter(Qt::Vertical);
    views->addWidget(top);
    views->addWidget(bottom);
    auto* scoresPage = new QWidget;
    auto* scoresLayout = new QVBoxLayout(scoresPage);
    scoresLayout->setContentsMargins(4, 4, 4, 4);
    scoresLayout->addWidget(selectionBox);
    scoresLayout->addWidget(recomputeNotice_);
    scoresLayout->addWidget(views, 1);

    // The Sweep tab: what to sweep, and the plot that grows as rows arrive.
    sweepMethods_ = new QLineEdit(QStringLiteral("numerical,flap,wanda-sp"));
    sweepMethods_->setToolTip(tr("Methods, comma-separated: numerical, numerical-nocomp, numerical-box (z in [0, 1],\n"
                                 "one solve per ratio), flap, wanda-sp, magnitude, random"));
    sweepRatios_ = new QLineEdit(QStringLiteral("0.1,0.2,0.3"));
    sweepRatios_->setToolTip(tr("Pruning ratios ρ in [0, 1), comma-separated: each only re-selects"));
    sweepSeeds_ = new QSpinBox;
    sweepSeeds_->setRange(1, 10);
    sweepSeeds_->setToolTip(tr("Seeds 0…K−1 of the calibration windows: the curves show mean ± std over them"));
    sweepWindows_ = new QSpinBox;
    sweepWindows_->setRange(0, 100000);
    sweepWindows_->setValue(8);
    sweepWindows_->setSpecialValueText(tr("all"));
    sweepWindows_->setToolTip(tr("Evaluation windows of 128 tokens of the held-out text (0 = all): fewer is faster"));
    auto axis = [](const QString& tip) {
        auto* edit = new QLineEdit;
        edit->setPlaceholderText(tr("as set"));
        edit->setToolTip(tip);
        edit->setMaximumWidth(110);
        return edit;
    };
    sweepSamples_ = axis(tr("Ablation: calibration samples, comma-separated (e.g. 16,64,128).\n"
                            "Empty: the Run settings' value. One curve per value."));
    sweepSeqlens_ = axis(tr("Ablation: calibration sequence lengths, comma-separated (e.g. 64,128).\n"
                            "Empty: the Run settings' value. One curve per value."));
    sweepLambdas_ = axis(tr("Ablation: λ of the numerical score, comma-separated (e.g. 1e-4,1,100).\n"
                            "Empty: the Selection's λ. One curve per value (other methods ignore λ)."));
    sweepEval_ = new QLineEdit;
    sweepEval_->setObjectName(QStringLiteral("sweepEvalTexts"));
    sweepEval_->setPlaceholderText(tr("demo: kjv-nt.txt"));
    sweepEval_->setToolTip(tr("Held-out texts to measure perplexity on, comma-separated paths (e.g. the demo's\n"
                              "kjv-nt.txt and jargon.txt): one curve per method and text. Empty: the New Testament."));
    sweepRun_ = new QPushButton(tr("Run sweep"));
    sweepRun_->setToolTip(tr("Perplexity against sparsity with the calibration settings and λ, α of the\n"
                             "Selection; calibration once, scores once per method (Ctrl+Shift+R)"));
    // Two rows: what to sweep and run; the ablation axes and what to measure besides perplexity.
    auto* sweepRow1 = new QHBoxLayout;
    sweepRow1->addWidget(new QLabel(tr("Methods")));
    sweepRow1->addWidget(sweepMethods_, 2);
    sweepRow1->addWidget(new QLabel(tr("Ratios")));
    sweepRow1->addWidget(sweepRatios_, 1);
    sweepRow1->addWidget(new QLabel(tr("Seeds")));
    sweepRow1->addWidget(sweepSeeds_);
    sweepRow1->addWidget(new QLabel(tr("Eval texts")));
    sweepRow1->addWidget(sweepEval_, 1);
    sweepRow1->addWidget(new QLabel(tr("Eval windows")));
    sweepRow1->addWidget(sweepWindows_);
    sweepRow1->addWidget(sweepRun_);
    auto* sweepRow2 = new QHBoxLayout;
    sweepRow2->addWidget(new QLabel(tr("Ablation: samples")));
    sweepRow2->addWidget(sweepSamples_);
    sweepRow2->addWidget(new QLabel(tr("Seq len")));
    sweepRow2->addWidget(sweepSeqlens_);
    sweepRow2->addWidget(new QLabel(tr("λ")));
    sweepRow2->addWidget(sweepLambdas_);
    sweepZeroShot_ = new QCheckBox(tr("Zero-shot task"));
    sweepZeroShot_->setChecked(true);
    sweepZeroShot_->setToolTip(tr("Also score the demo's zero-shot task (choose a New Testament verse's true ending\n"
                                  "among four; 200 items, lm-evaluation-harness scoring) and plot accuracy beside perplexity"));
    sweepSpeed_ = new QCheckBox(tr("Speed and memory"));
    sweepSpeed_->setObjectName(QStringLiteral("sweepSpeed"));
    sweepSpeed_->setToolTip(tr("Also time every model (dense and each pruned one): a prefill of 64 tokens and a greedy\n"
                               "decode of 64 (the best of 5 after a warm-up), and its weight and KV-cache memory:\n"
                               "the paper's Figure 5, plotted below the accuracy"));
    sweepRow2->addSpacing(12);
    sweepRow2->addWidget(sweepZeroShot_);
    sweepRow2->addWidget(sweepSpeed_);
    sweepRow2->addStretch(1);
    auto* sweepForm = new QVBoxLayout;
    sweepForm->addLayout(sweepRow1);
    sweepForm->addLayout(sweepRow2);
    sweepPlot_ = new SweepPlotWidget;
    accuracyPlot_ = new SweepPlotWidget;
    accuracyPlot_->setQuantity(tr("Zero-shot accuracy against sparsity"), tr("accuracy (chance: 0.25)"), false);
    accuracyPlot_->setVisible(false);
    speedPlot_ = new SweepPlotWidget;
    speedShow_ = new QComboBox;
    speedShow_->setObjectName(QStringLiteral("speedShow"));
    for (const SpeedQuantity& q : kSpeedQuantities) speedShow_->addItem(tr(q.name));
    speedShow_->setToolTip(tr("What the speed plot shows for every model of the sweep"));
    speedPanel_ = new QWidget;
    auto* speedLayout = new QVBoxLayout(speedPanel_);
    speedLayout->setContentsMargins(0, 0, 0, 0);
    auto* speedRow = new QHBoxLayout;
    speedRow->addWidget(new QLabel(tr("Show")));
    speedRow->addWidget(speedShow_);
    speedRow->addStretch(1);
    speedLayout->addLayout(speedRow);
    speedLayout->addWidget(speedPlot_, 1);
    speedPanel_->setVisible(false);
    connect(speedShow_, &QComboBox::currentIndexChanged, this, &StudioWindow::redrawSweep);
    auto* sidePlots = new QSplitter(Qt::Vertical);
    sidePlots->addWidget(accuracyPlot_);
    sidePlots->addWidget(speedPanel_);
    auto* sweepPlots = new QSplitter(Qt::Horizontal);
    sweepPlots->addWidget(sweepPlot_);
    sweepPlots->addWidget(sidePlots);
    sweepSplitter_ = sweepPlots;
    auto* sweepNote = new QLabel(tr("Sparsity is the achieved fraction of attention + MLP weights removed (uniform "
                                    "methods fall below ρ). Each point is one pruned model evaluated on the "
                                    "held-out text; calibration as in the Run settings, λ and α as in the Selection."));
    sweepNote->setWordWrap(true);
    auto* sweepPage = new QWidget;
    auto* sweepLayout = new QVBoxLayout(sweepPage);
    sweepLayout->setContentsMargins(4, 4, 4, 4);
    sweepLayout->addLayout(sweepForm);
    sweepLayout->addWidget(sweepNote);
    sweepLayout->addWidget(sweepPlots, 1);

    // The Images tab: class-conditional image models (dense vs pruned samples, image metrics).
    imageSession_ = new ImageSession(session_.jobs(), this);
    imagesPage_ = new ImagesPage(imageSession_);

    tabs_ = new QTabWidget;
    tabs_->addTab(scoresPage, tr("Scores and mask"));
    tabs_->addTab(sweepPage, tr("Perplexity sweep"));
    tabs_->addTab(imagesPage_, tr("Images"));
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
    QAction* sweepAction = run->addAction(tr("Run &sweep"), this, [this] { session_.runSweep(sweepRequest()); });
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
    view->addSeparator();
    darkAction_ = view->addAction(tr("&Dark palette"));
    darkAction_->setCheckable(true);
    darkAction_->setShortcut(QKeySequence(QStringLiteral("Ctrl+D")));
    connect(darkAction_, &QAction::toggled, this, &StudioWindow::setDark);
    view->addSeparator();
    for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());

    QToolBar* bar = addToolBar(tr("Main"));
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
    connect(sweepRun_, &QPushButton::clicked, sweepAction, &QAction::trigger);
    rebuildRecentMenu();
}

void StudioWindow::connectSession() {
    JobRunner* jobs = session_.jobs();
    connect(jobs, &JobRunner::started, this, [this](const QString& title) {
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
    connect(&session_, &StudioSession::logMessage, this, &StudioWindow::appendLog);
    connect(imageSession_, &ImageSession::logMessage, this, &StudioWindow::appendLog);
    connect(imageSession_, &ImageSession::modelChanged, this, &StudioWindow::showArchitecture);
    imageSession_->setDevice(device_->currentText());
    connect(device_, &QComboBox::currentTextChanged, imageSession_, &ImageSession::setDevice);
    connect(tabs_, &QTabWidget::currentChanged, this, &StudioWindow::showArchitecture);
    connect(&session_, &StudioSession::imageWorkspaceRestored, this, [this](const QByteArray& state) {
        try {
            imageSession_->restoreWorkspaceState(nlohmann::json::parse(state.toStdString()));
        } catch (const std::exception& e) {
            appendLog(tr("The workspace's Images part was not restored: %1").arg(QString::fromUtf8(e.what())));
        }
    });
    connect(&session_, &StudioSession::modelChanged, this, &StudioWindow::onModelChanged);
    connect(&session_, &StudioSession::scoresChanged, this, &StudioWindow::onScoresChanged);
    connect(&session_, &StudioSession::selectionChanged, this, &StudioWindow::showSelection);
    connect(&session_, &StudioSession::layerReportsAvailable, layerTable_, &LayerReportTable::setReports);
    connect(&session_, &StudioSession::sweepCleared, this, &StudioWindow::redrawSweep);
    connect(&session_, &StudioSession::sweepRowAvailable, this, &StudioWindow::onSweepRow);
    connect(&session_, &StudioSession::settingsChanged, this, [this] {
        runSettings_->setSettings(session_.settings());
        showKnobs(session_.knobs());
        updateRunState();
    });
    connect(runSettings_, &RunSettingsPanel::settingsEdited, this, [this](const studio::RunSettings& s) {
        session_.setSettings(s);
    });
    connect(runSettings_, &RunSettingsPanel::runRequested, this, [this] { session_.runScoring(); });
    connect(recompute_, &QPushButton::clicked, &session_, &StudioSession::recompute);
    connect(controls_, &SparsityControls::settingsChanged, this,
            [this](double rho, double alpha, npw::AlphaMode mode, double lambda) {
                studio::SelectionKnobs k;
                k.rho = rho;
                // At the model's default α the knob stays "default" (NaN), so that it follows
                // the unit kind and reads as such in the workspace.
                k.alpha = std::abs(alpha - controls_->defaultAlpha()) <= 1e-3 * controls_->defaultAlpha() ? std::nan("")
                                                                                                         : alpha;
                k.mode = mode;
                k.lambda = lambda;
                session_.setKnobs(k);
            });
    connect(methodSelector_, &QComboBox::currentTextChanged, &session_, &StudioSession::setCurrentMethod);
    connect(layerTable_, &LayerReportTable::layerClicked, layerSelection_, &LayerSelection::setCurrentLayer);
    connect(layerSelection_, &LayerSelection::currentLayerChanged, layerTable_, &LayerReportTable::selectLayer);
}

void StudioWindow::showKnobs(const studio::SelectionKnobs& k) {
    controls_->setRho(k.rho);
    controls_->setAlphaMode(k.mode);
    controls_->setLambda(k.lambda);
    if (std::isnan(k.alpha)) controls_->resetAlpha();
    else controls_->setAlpha(k.alpha);
}

void StudioWindow::showSelection(const SelectionView& v) {
    updateRecomputeNotice();
    headMap_->setUnitName(v.unitName);
    headMap_->setData(v.scores, v.selection.mask);
    histogram_->setData(v.scores, v.selection.mask, v.selection.threshold);
    overview_->setData(v.scores, v.selection.mask, v.selection.threshold);
    layerTable_->setKept(v.kept, v.unitName);
    const studio::SelectionKnobs k = session_.knobs();
    summary_->setText(tr("<b>%1</b> at ρ = %2: removes %3 %4s and %5 MLP channels, <b>%6%</b> of the attention + "
                         "MLP parameters (%7% of the model).")
                          .arg(v.method)
                          .arg(k.rho, 0, 'f', 3)
                          .arg(v.selection.removedHeads)
                          .arg(v.unitName)
                          .arg(QLocale().toString(qlonglong(v.selection.removedChannels)))
                          .arg(100 * v.achievedRatio, 0, 'f', 1)
                          .arg(100 * v.achievedRatioModel, 0, 'f', 1));
    if (methodSelector_->currentText() != v.method) methodSelector_->setCurrentText(v.method);
}

void StudioWindow::showArchitecture() {
    // The Model dock follows the tab: the image model on the Images tab, the language model elsewhere.
    const bool images = tabs_->currentWidget() == imagesPage_ && imageSession_->hasModel();
    if (images)
        architecture_->showImageModel(imageSession_->modelReference(), imageSession_->workbench()->dense(),
                                      imageSession_->workbench()->vq());
    else if (session_.hasModel())
        architecture_->showModel(session_.modelReference(), session_.model());
    else
        architecture_->clear();
}

void StudioWindow::onModelChanged() {
    const npw::LanguageModel& lm = session_.model();
    showArchitecture();
    setWindowTitle(tr("%1 — npw-studio").arg(session_.modelReference()));
    try {
        controls_->setDefaultAlpha(npw::defaultAlphaFor(lm.model->config(), session_.settings().prune.attentionUnit));
        if (std::isnan(session_.knobs().alpha)) controls_->resetAlpha();
    } catch (const npw::Error& e) {  // layers with different group sizes have no one default α
        appendLog(tr("α: %1; set it by hand.").arg(e.what()));
    }
    summary_->setText(tr("Run to calibrate and score %1.").arg(session_.modelReference()));
    // The views showed the previous model's scores: empty them until this one is scored.
    headMap_->setData({}, npw::Mask{});
    histogram_->setData({}, npw::Mask{}, std::nan(""));
    overview_->setData({}, npw::Mask{}, std::nan(""));
    layerTable_->setKept({}, QStringLiteral("head"));
    addRecent(session_.modelReference());
    updateRunState();
}

void StudioWindow::onScoresChanged() {
    const QSignalBlocker block(methodSelector_);
    methodSelector_->clear();
    methodSelector_->addItems(session_.scoreMethods());
    const int sets = int(session_.scoreMethods().size());
    methodLabel_->setText(sets > 1 ? tr("Score set (%1 computed)").arg(sets) : tr("Score set"));
    methodSelector_->setCurrentText(session_.currentMethod());
    updateRunState();
}

void StudioWindow::onSweepRow(const npw::SweepRow&) { redrawSweep(); }

void StudioWindow::redrawSweep() {
    // Means and spreads over seeds are core's (summariseOverSeeds); the plot only draws them.
    sweepPlot_->clear();
    accuracyPlot_->clear();
    speedPlot_->clear();
    const SpeedQuantity& speed = kSpeedQuantities[std::max(0, speedShow_->currentIndex())];
    speedPlot_->setQuantity(tr("%1 against sparsity").arg(tr(speed.name)), tr(speed.axis), false);
    bool accuracy = false, speedRows = false;
    const auto summary = npw::summariseOverSeeds(session_.sweepRows());
    // An ablation axis that takes more than one value names the curves (e.g. "numerical n=16").
    std::set<int64_t> samples, seqlens;
    std::set<double> lambdas;
    std::set<std::string> evalTexts;  // perplexity sets (not zero-shot tasks, not speed)
    for (const auto& s : summary)
        if (!s.first.isSpeedRow() && !std::isfinite(s.accMean)) evalTexts.insert(s.first.evalSet);
    for (const auto& s : summary)
        if (s.first.method != "dense") {
            samples.insert(s.first.calibSamples);
            seqlens.insert(s.first.calibSeqlen);
            if (std::isfinite(s.first.lambda)) lambdas.insert(s.first.lambda);
        }
    auto curveName = [&](const npw::SweepRow& r) {
        QString name = QString::fromStdString(r.method);
        if (samples.size() > 1) name += QStringLiteral(" n=%1").arg(r.calibSamples);
        if (seqlens.size() > 1) name += QStringLiteral(" L=%1").arg(r.calibSeqlen);
        if (lambdas.size() > 1 && std::isfinite(r.lambda)) name += QStringLiteral(" λ=%1").arg(r.lambda, 0, 'g', 3);
        return name;
    };
    std::map<QString, std::string> curveText;       // perplexity curve → its text
    std::map<std::string, double> densePerplexity;  // text → the dense model's, when several texts
    // Perplexity curves also name their text when there are several ("numerical · jargon").
    auto perplexityCurveName = [&](const npw::SweepRow& r) {
        QString name = curveName(r);
        if (evalTexts.size() > 1) name += QStringLiteral(" · %1").arg(QString::fromStdString(r.evalSet));
        return name;
    };
    for (const npw::SweepSummaryRow& s : summary) {
        if (s.first.isSpeedRow()) {
            speedRows = true;
            const double value = speed.value(s), spread = speed.spread ? speed.spread(s) : 0.0;
            if (s.first.method == "dense")
                speedPlot_->setDenseBaseline(value);
            else
                speedPlot_->addPoint(curveName(s.first), s.achievedRatioMean, value, spread);
            continue;
        }
        const bool zeroShot = std::isfinite(s.accMean);  // a zero-shot task's row, else perplexity
        accuracy = accuracy || zeroShot;
        SweepPlotWidget* plot = zeroShot ? accuracyPlot_ : sweepPlot_;
        const double mean = zeroShot ? s.accMean : s.pplMean, spread = zeroShot ? s.accStd : s.pplStd;
        if (zeroShot)
            accuracyPlot_->setQuantity(tr("Zero-shot accuracy against sparsity"),
                                       tr("accuracy on %1").arg(QString::fromStdString(s.first.evalSet)), false);
        if (s.first.method == "dense") {
            // One dashed dense line; with several texts each curve starts at its text's dense
            // perplexity instead (at sparsity 0), as one line cannot stand for all of them.
            if (zeroShot || evalTexts.size() == 1) plot->setDenseBaseline(mean);
            else densePerplexity[s.first.evalSet] = mean;
        } else {
            const QString name = zeroShot ? curveName(s.first) : perplexityCurveName(s.first);
            if (!zeroShot) curveText[name] = s.first.evalSet;
            plot->addPoint(name, s.achievedRatioMean, mean, spread);
        }
    }
    for (const auto& [name, text] : curveText)
        if (densePerplexity.count(text)) sweepPlot_->addPoint(name, 0.0, densePerplexity[text]);
    accuracyPlot_->setVisible(accuracy);
    speedPanel_->setVisible(speedRows);
    // When the side column appears, give it room for its plots' legends (5 : 4).
    const bool side = accuracy || speedRows;
    if (side && !sideColumnShown_) {
        const int width = sweepSplitter_->width();
        sweepSplitter_->setSizes({width * 5 / 9, width * 4 / 9});
    }
    sideColumnShown_ = side;
}

void StudioWindow::updateRecomputeNotice() {
    const QString reason = session_.recomputeReason();
    const bool offered = !reason.isEmpty();
    recompute_->setEnabled(offered && !session_.jobs()->isRunning());
    const QString text = offered ? reason
                                 : tr("The views show the stored solves: moving ρ, α or λ re-selects at once. "
                                      "New calibration settings or a moved box-constrained set are said here.");
    // Called on every selection (a slider move): the line changes only when its text does.
    if (text == recomputeReason_->text()) return;
    recomputeReason_->setText(text);
    recomputeIcon_->setPixmap(
        style()->standardIcon(offered ? QStyle::SP_MessageBoxWarning : QStyle::SP_MessageBoxInformation).pixmap(18, 18));
    recomputeNotice_->setAutoFillBackground(offered);  // highlighted only when it asks for something
    recomputeReason_->setForegroundRole(offered ? QPalette::ToolTipText : QPalette::PlaceholderText);
}

bool StudioWindow::recomputeOffered() const { return recompute_->isEnabled(); }

void StudioWindow::updateRunState() {
    updateRecomputeNotice();
    const bool busy = session_.jobs()->isRunning();
    runSettings_->setBusy(busy);
    runSettings_->setCalibrationStale(session_.calibrationStale(), session_.hasModel());
    cancel_->setEnabled(busy);
    sweepRun_->setEnabled(!busy && session_.hasModel());
    imagesPage_->setBusy(busy);
}

SweepRequest StudioWindow::sweepRequest() const {
    SweepRequest r;
    r.methods.clear();
    for (const QString& m : sweepMethods_->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) r.methods << m.trimmed();
    r.ratios = parseRatios(sweepRatios_->text());
    r.seeds = sweepSeeds_->value();
    r.evalMaxWindows = sweepWindows_->value();
    for (double x : parseRatios(sweepSamples_->text())) r.calibSamples.push_back(static_cast<int64_t>(x));
    for (double x : parseRatios(sweepSeqlens_->text())) r.calibSeqlens.push_back(static_cast<int64_t>(x));
    r.lambdas = parseRatios(sweepLambdas_->text());
    if (sweepZeroShot_->isChecked()) r.zeroShotTask = studio::defaultZeroShotTask();
    r.measureSpeed = sweepSpeed_->isChecked();
    for (const QString& path : sweepEval_->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        r.evalSources.push_back(path.trimmed().toStdString());
    return r;
}

void StudioWindow::setSweepRequest(const SweepRequest& r) {
    sweepMethods_->setText(r.methods.join(QLatin1Char(',')));
    QStringList ratios;
    for (double x : r.ratios) ratios << QString::number(x);
    sweepRatios_->setText(ratios.join(QLatin1Char(',')));
    sweepSeeds_->setValue(r.seeds);
    sweepWindows_->setValue(int(r.evalMaxWindows));
    auto joined = [](auto values) {
        QStringList out;
        for (auto x : values) out << QString::number(x);
        return out.join(QLatin1Char(','));
    };
    sweepSamples_->setText(joined(r.calibSamples));
    sweepSeqlens_->setText(joined(r.calibSeqlens));
    sweepLambdas_->setText(joined(r.lambdas));
    sweepZeroShot_->setChecked(!r.zeroShotTask.empty());
    sweepSpeed_->setChecked(r.measureSpeed);
    QStringList texts;
    for (const std::string& path : r.evalSources) texts << QString::fromStdString(path);
    sweepEval_->setText(texts.join(QLatin1Char(',')));
}

void StudioWindow::showTab(int index) { tabs_->setCurrentIndex(index); }

void StudioWindow::setDark(bool dark) {
    QApplication::setPalette(dark ? studio::darkPalette() : QApplication::style()->standardPalette());
    if (darkAction_->isChecked() != dark) darkAction_->setChecked(dark);
}

bool StudioWindow::exportPlot(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (tabs_->currentWidget() == imagesPage_) return imagesPage_->exportPlot(path);
    if (tabs_->currentIndex() == 1) {
        if (suffix == QLatin1String("pdf")) return sweepPlot_->savePdf(path);
        if (suffix == QLatin1String("svg")) return sweepPlot_->saveSvg(path);
        return sweepPlot_->savePng(path);
    }
    // The score views together, as they are laid out on screen.
    QWidget* page = tabs_->currentWidget();
    if (suffix == QLatin1String("pdf")) {
        QPdfWriter writer(path);
        writer.setPageSize(QPageSize(page->size(), QPageSize::Point));
        writer.setPageMargins({});
        writer.setResolution(72);
        QPainter painter;
        if (!painter.begin(&writer)) return false;
        page->render(&painter);
        return painter.end();
    }
    if (suffix == QLatin1String("svg")) {
        QSvgGenerator generator;
        generator.setFileName(path);
        generator.setSize(page->size());
        generator.setViewBox(QRect(QPoint(0, 0), page->size()));
        QPainter painter;
        if (!painter.begin(&generator)) return false;
        page->render(&painter);
        return painter.end();
    }
    return page->grab().save(path);
}

void StudioWindow::openModel(const QString& reference) {
    if (npw::isLlamaGenModel(reference.toStdString())) {  // an image model: the Images tab
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

void StudioWindow::closeEvent(QCloseEvent* event) {
    session_.cancel();
    if (persist_) saveSettings();
    event->accept();
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
        if (!runJson.empty()) {
            const auto j = nlohmann::json::parse(runJson);
            studio::RunSettings run;
            run.calibration = studio::calibrationFromJson(j.at("calibration"));
            run.prune = studio::pruneSettingsFromJson(j.at("prune"));
            session_.setSettings(run);
        }
    } catch (const std::exception& e) {
        appendLog(tr("Stored run settings ignored: %1").arg(e.what()));
    }
    SweepRequest sweep = sweepRequest();
    sweep.methods = s.value(QStringLiteral("sweep/methods"), sweep.methods).toStringList();
    const QString ratios = s.value(QStringLiteral("sweep/ratios")).toString();
    if (!ratios.isEmpty()) sweep.ratios = parseRatios(ratios);
    sweep.seeds = s.value(QStringLiteral("sweep/seeds"), sweep.seeds).toInt();
    sweep.evalMaxWindows = s.value(QStringLiteral("sweep/windows"), qlonglong(sweep.evalMaxWindows)).toLongLong();
    setSweepRequest(sweep);
}

void StudioWindow::saveSettings() const {
    QSettings s;
    s.setValue(QStringLiteral("recentFiles"), recent_);
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState());
    s.setValue(QStringLiteral("view/dark"), darkAction_->isChecked());
    s.setValue(QStringLiteral("device"), device_->currentText());
    const studio::RunSettings run = session_.settings();
    const nlohmann::json j = {{"calibration", studio::toJson(run.calibration)}, {"prune", studio::toJson(run.prune)}};
    s.setValue(QStringLiteral("run/settings"), QString::fromStdString(j.dump()));
    const SweepRequest sweep = sweepRequest();
    s.setValue(QStringLiteral("sweep/methods"), sweep.methods);
    s.setValue(QStringLiteral("sweep/ratios"), sweepRatios_->text());
    s.setValue(QStringLiteral("sweep/seeds"), sweep.seeds);
    s.setValue(QStringLiteral("sweep/windows"), qlonglong(sweep.evalMaxWindows));
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
        QMessageBox::warning(this, tr("Save workspace"), QString::fromStdString(e.what()));
    }
}

void StudioWindow::saveWorkspace(const QString& path) { session_.saveWorkspace(path, imageSession_->workspaceState()); }

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
        QMessageBox::warning(this, tr("Export sweep CSV"), QString::fromStdString(e.what()));
    }
}
