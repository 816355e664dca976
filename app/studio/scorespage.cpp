#include "app/studio/scorespage.h"

#include "app/studio/layerreporttable.h"
#include "core/prune/method_registry.h"
#include "core/util/error.h"
#include "widgets/headmapwidget.h"
#include "widgets/layeroverviewwidget.h"
#include "widgets/layerselection.h"
#include "widgets/scorehistogramwidget.h"
#include "widgets/sparsitycontrols.h"

#include <QComboBox>
#include <QFileInfo>
#include <QFrame>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QPdfWriter>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QStyle>
#include <QSvgGenerator>
#include <QVBoxLayout>
#include <cmath>

ScoresPage::ScoresPage(StudioSession* session, QWidget* parent) : QWidget(parent), session_(session) {
    layerSelection_ = new LayerSelection(this);
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
    summary_->setMinimumWidth(200);
    // Room for the longest texts from the start: a label that grows when a result arrives
    // re-lays out the page, and every plot below would redraw at its new size in that turn.
    summary_->setMinimumHeight(summary_->fontMetrics().lineSpacing() * 3);
    auto* methodBox = new QVBoxLayout;
    methodLabel_ = new QLabel(tr("Score set"));
    methodLabel_->setMinimumWidth(methodLabel_->fontMetrics().horizontalAdvance(tr("Score set (99 computed)")));
    methodBox->addWidget(methodLabel_);
    methodBox->addWidget(methodSelector_);
    methodBox->addStretch(1);
    selectionBox_ = new QGroupBox(tr("Selection"));
    auto* selectionLayout = new QHBoxLayout(selectionBox_);
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
    // Two lines: the longest reason wraps once at a laptop's width.
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
    top->setStretchFactor(0, 1);  // the head map has few cells; the histogram needs the width
    top->setStretchFactor(1, 1);
    auto* bottom = new QSplitter(Qt::Horizontal);
    bottom->addWidget(overview_);
    bottom->addWidget(layerTable_);
    bottom->setStretchFactor(0, 3);
    bottom->setStretchFactor(1, 2);
    auto* views = new QSplitter(Qt::Vertical);
    views->addWidget(top);
    views->addWidget(bottom);
    // A method without per-unit scores (SliceGPT) says so in place of the views.
    noScores_ = new QLabel;
    noScores_->setObjectName(QStringLiteral("noPerUnitScores"));
    noScores_->setWordWrap(true);
    noScores_->setAlignment(Qt::AlignCenter);
    noScores_->setMargin(40);
    viewStack_ = new QStackedWidget;
    viewStack_->addWidget(views);
    viewStack_->addWidget(noScores_);
    viewStack_->addWidget(buildEmptyState());
    viewStack_->setCurrentIndex(kEmptyState);
    selectionBox_->hide();  // until a model is open
    recomputeNotice_->hide();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(selectionBox_);
    layout->addWidget(recomputeNotice_);
    layout->addWidget(viewStack_, 1);

    connect(session_, &StudioSession::modelChanged, this, &ScoresPage::onModelChanged);
    connect(session_, &StudioSession::scoresChanged, this, &ScoresPage::onScoresChanged);
    connect(session_, &StudioSession::selectionChanged, this, &ScoresPage::showSelection);
    connect(session_, &StudioSession::layerReportsAvailable, layerTable_, &LayerReportTable::setReports);
    connect(session_, &StudioSession::settingsChanged, this, [this] { showKnobs(session_->knobs()); });
    connect(recompute_, &QPushButton::clicked, session_, &StudioSession::recompute);
    connect(controls_, &SparsityControls::settingsChanged, this, &ScoresPage::onControlsChanged);
    connect(methodSelector_, &QComboBox::currentTextChanged, session_, &StudioSession::setCurrentMethod);
    connect(layerTable_, &LayerReportTable::layerClicked, layerSelection_, &LayerSelection::setCurrentLayer);
    connect(layerSelection_, &LayerSelection::currentLayerChanged, layerTable_, &LayerReportTable::selectLayer);
    showKnobs(session_->knobs());
}

void ScoresPage::onControlsChanged(double rho, double alpha, npw::AlphaMode mode, double lambda) {
    studio::SelectionKnobs k;
    k.rho = rho;
    // At the model's default α the knob stays "default" (NaN), so that it follows the unit
    // kind and reads as such in the workspace.
    k.alpha = std::abs(alpha - controls_->defaultAlpha()) <= 1e-3 * controls_->defaultAlpha() ? std::nan("") : alpha;
    k.mode = mode;
    k.lambda = lambda;
    session_->setKnobs(k);
}

void ScoresPage::showKnobs(const studio::SelectionKnobs& k) {
    controls_->setRho(k.rho);
    controls_->setAlphaMode(k.mode);
    controls_->setLambda(k.lambda);
    if (std::isnan(k.alpha)) controls_->resetAlpha();
    else controls_->setAlpha(k.alpha);
}

bool ScoresPage::showsPerUnitViews() const { return viewStack_->currentIndex() == 0; }

bool ScoresPage::showsEmptyState() const { return viewStack_->currentIndex() == kEmptyState; }

QWidget* ScoresPage::buildEmptyState() {
    // What a first start shows instead of empty plots: what to open, and what happens then.
    auto* page = new QWidget;
    page->setObjectName(QStringLiteral("emptyState"));
    auto* text = new QLabel(
        tr("<p style='font-size:large'><b>No model open</b></p>"
           "<p>Open a language model to see which attention heads and MLP channels each method would prune:<br>"
           "a Hugging Face folder (config.json and safetensors), or a llama2.c checkpoint (.bin) with its tokenizer."
           "<br>File ▸ Open (Ctrl+O), or drop it on this window.</p>"
           "<p>Or try the bundled demo, <b>demo:lm</b>: a 2.8 M-parameter LLaMA trained on the King James Bible, "
           "with its calibration and held-out texts.</p>"
           "<p>Then <b>Run</b> (Ctrl+R) calibrates and scores it; the scores, the mask at ρ and each layer's "
           "losses appear here.</p>"));
    text->setWordWrap(true);
    text->setAlignment(Qt::AlignCenter);
    text->setTextFormat(Qt::RichText);
    auto* openFile = new QPushButton(tr("Open a model…"));
    openFile->setObjectName(QStringLiteral("emptyOpenModel"));
    auto* openDemo = new QPushButton(tr("Open demo:lm"));
    openDemo->setObjectName(QStringLiteral("emptyOpenDemo"));
    connect(openFile, &QPushButton::clicked, this, &ScoresPage::openModelRequested);
    connect(openDemo, &QPushButton::clicked, this, [this] { emit openDemoRequested(QStringLiteral("demo:lm")); });
    auto* buttons = new QHBoxLayout;
    buttons->addStretch(1);
    buttons->addWidget(openFile);
    buttons->addWidget(openDemo);
    buttons->addStretch(1);
    auto* layout = new QVBoxLayout(page);
    layout->addStretch(1);
    layout->addWidget(text);
    layout->addLayout(buttons);
    layout->addStretch(2);
    return page;
}

void ScoresPage::showSelection(const SelectionView& v) {
    const QString method = QString::fromStdString(v.method), description = QString::fromStdString(v.description),
                  scoreLabel = QString::fromStdString(v.scoreLabel);
    // The sentence goes in the notice line, or (no per-unit scores) in place of the views with a
    // short pointer in the line.
    methodNote_ = v.perUnitScores() || description.isEmpty()
                      ? description
                      : tr("%1 has no per-unit scores: what it removes at ρ is said below; moving ρ solves its width "
                           "again at once.")
                            .arg(method);
    updateRecomputeNotice();
    controls_->setAlphaAndLambdaEnabled(!v.baseline);  // the baselines select by ρ alone
    // λ_rel only for a method that takes it (the registry's options: the numerical score).
    const auto scores = session_->currentScores();
    controls_->setLambdaEnabled(!v.baseline && scores && npw::methodInfo(scores->settings.method).options.lambda);
    const studio::SelectionKnobs k = session_->knobs();
    if (!v.perUnitScores()) {
        // SliceGPT: nothing per head or channel to draw; the sentence says what it does at ρ.
        noScores_->setText(tr("<p style='font-size:large'><b>%1</b></p><p>%2</p>")
                               .arg(method, description.toHtmlEscaped()));
        viewStack_->setCurrentIndex(1);
        summary_->setText(tr("<b>%1</b> at ρ = %2: no per-unit scores; removes <b>%3%</b> of the attention + MLP "
                             "parameters (%4% of the model). α and λ do not apply.")
                              .arg(method)
                              .arg(k.rho, 0, 'f', 3)
                              .arg(100 * v.achievedRatio, 0, 'f', 1)
                              .arg(100 * v.achievedRatioModel, 0, 'f', 1));
        if (methodSelector_->currentText() != method) methodSelector_->setCurrentText(method);
        return;
    }
    viewStack_->setCurrentIndex(0);
    // One score per block: a layer's histogram would be one bar; the head map and the layer
    // overview show the blocks.
    histogram_->setVisible(!v.perBlockScores());
    overview_->setScoreLabel(v.baseline ? scoreLabel : QString());
    headMap_->setUnitName(v.unitName);
    headMap_->setScoreLabel(scoreLabel);
    headMap_->setData(v.unitScores, v.selection.mask);
    histogram_->setData(v.unitScores, v.selection.mask, v.selection.threshold);
    overview_->setData(v.unitScores, v.selection.mask, v.selection.threshold);
    layerTable_->setKept(v.kept, v.unitName);
    if (v.baseline)
        layerTable_->setNoLosses(tr("%1 removes units as they are (no compensation): no reconstruction loss "
                                    "is computed").arg(method));
    else if (session_->pruneRoad().layerwise)
        layerTable_->setNoLosses(tr("Layer by layer, each layer's loss is computed as it is compensated: File ▸ Export "
                                    "pruned model writes them into the export's report and fills this table"));
    int blocksGone = 0;
    for (const npw::LayerKeptCounts& c : v.kept) blocksGone += c.keptHeads == 0 && c.keptChannels == 0 ? 1 : 0;
    const QString removes = v.perBlockScores()
                                ? tr("removes %1 of %2 blocks whole").arg(blocksGone).arg(v.kept.size())
                                : tr("removes %1 %2s and %3 MLP channels")
                                      .arg(v.selection.removedHeads)
                                      .arg(v.unitName)
                                      .arg(QLocale().toString(qlonglong(v.selection.removedChannels)));
    summary_->setText(tr("<b>%1</b> at ρ = %2: %3, <b>%4%</b> of the attention + MLP parameters (%5% of the model).")
                          .arg(method)
                          .arg(k.rho, 0, 'f', 3)
                          .arg(removes)
                          .arg(100 * v.achievedRatio, 0, 'f', 1)
                          .arg(100 * v.achievedRatioModel, 0, 'f', 1) +
                      (v.baseline ? tr(" α and λ do not apply.") : QString()));
    if (methodSelector_->currentText() != method) methodSelector_->setCurrentText(method);
}

void ScoresPage::onModelChanged() {
    try {
        controls_->setDefaultAlpha(
            npw::defaultAlphaFor(session_->model().model->config(), session_->settings().prune.attentionUnit));
        if (std::isnan(session_->knobs().alpha)) controls_->resetAlpha();
    } catch (const npw::Error& e) {  // layers with different group sizes have no one default α
        emit logMessage(tr("α: %1; set it by hand.").arg(e.what()));
    }
    summary_->setText(tr("Run to calibrate and score %1.").arg(session_->modelReference()));
    methodNote_.clear();
    viewStack_->setCurrentIndex(0);
    selectionBox_->show();
    recomputeNotice_->show();
    histogram_->setVisible(true);
    // The views showed the previous model's scores: empty them until this one is scored.
    headMap_->setData({}, npw::Mask{});
    histogram_->setData({}, npw::Mask{}, std::nan(""));
    overview_->setData({}, npw::Mask{}, std::nan(""));
    layerTable_->setKept({}, QStringLiteral("head"));
    updateRecomputeNotice();
}

void ScoresPage::onScoresChanged() {
    const QSignalBlocker block(methodSelector_);
    methodSelector_->clear();
    methodSelector_->addItems(session_->scoreMethods());
    const int sets = int(session_->scoreMethods().size());
    methodLabel_->setText(sets > 1 ? tr("Score set (%1 computed)").arg(sets) : tr("Score set"));
    methodSelector_->setCurrentText(session_->currentMethod());
}

void ScoresPage::updateRecomputeNotice() {
    const QString reason = session_->recomputeReason();
    const bool offered = !reason.isEmpty();
    recompute_->setEnabled(offered && !session_->jobs()->isRunning());
    // A baseline's sentence (what its scores are, what goes at ρ) when nothing is asked.
    const bool baseline = !methodNote_.isEmpty() && session_->workbenchSelection() &&
                          session_->workbenchSelection()->baseline;
    const QString text = offered ? reason
                         : baseline ? methodNote_
                                    : tr("Moving ρ, α or λ re-selects at once; what needs a new solve is said here.");
    // Called on every selection (a slider move): the line changes only when its text does.
    if (text == recomputeReason_->text()) return;
    recomputeReason_->setText(text);
    recomputeIcon_->setPixmap(
        style()->standardIcon(offered ? QStyle::SP_MessageBoxWarning : QStyle::SP_MessageBoxInformation).pixmap(18, 18));
    recomputeNotice_->setAutoFillBackground(offered);  // highlighted only when it asks for something
    recomputeReason_->setForegroundRole(offered ? QPalette::ToolTipText : QPalette::PlaceholderText);
}

bool ScoresPage::recomputeOffered() const { return recompute_->isEnabled(); }

bool ScoresPage::exportPlot(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("pdf")) {
        QPdfWriter writer(path);
        writer.setPageSize(QPageSize(size(), QPageSize::Point));
        writer.setPageMargins({});
        writer.setResolution(72);
        QPainter painter;
        if (!painter.begin(&writer)) return false;
        render(&painter);
        return painter.end();
    }
    if (suffix == QLatin1String("svg")) {
        QSvgGenerator generator;
        generator.setFileName(path);
        generator.setSize(size());
        generator.setViewBox(QRect(QPoint(0, 0), size()));
        QPainter painter;
        if (!painter.begin(&generator)) return false;
        render(&painter);
        return painter.end();
    }
    return grab().save(path);
}
