#include "app/studio/runsettingspanel.h"

#include "app/studio/methodlists.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QStyle>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

namespace {

// The method list's item data: a PruneMethod, or a baseline (manual, "Sweeps and baselines") offset past them.
constexpr int kBaselineItem = 100;
constexpr int kLlmPrunerGlobalItem = 200;

int itemOf(const studio::RunSettings& s) {
    if (!s.baseline) return int(s.prune.method);
    if (*s.baseline == npw::BaselineMethod::LlmPruner && s.llmPrunerGlobal) return kLlmPrunerGlobalItem;
    return kBaselineItem + int(*s.baseline);
}

bool isBaselineItem(int item) { return item >= kBaselineItem; }

// The registry's row of an item (llm-pruner-global: llm-pruner's).
const npw::MethodInfo& rowOf(int item) {
    if (item == kLlmPrunerGlobalItem) return npw::methodInfo(npw::BaselineMethod::LlmPruner);
    return isBaselineItem(item) ? npw::methodInfo(static_cast<npw::BaselineMethod>(item - kBaselineItem))
                                : npw::methodInfo(static_cast<npw::PruneMethod>(item));
}

// "name: what it does" per row, one a line.
QString describedRows(const std::vector<const npw::MethodInfo*>& rows) {
    QStringList lines;
    for (const npw::MethodInfo* m : rows) lines << QStringLiteral("%1: %2").arg(QString::fromUtf8(m->name), QString::fromUtf8(m->description));
    return lines.join(QLatin1Char('\n'));
}

} // namespace

RunSettingsPanel::RunSettingsPanel(QWidget* parent) : QWidget(parent) {
    source_ = new QLineEdit;
    source_->setObjectName(QStringLiteral("calibrationSource"));
    source_->setPlaceholderText(tr("open a model first"));
    source_->setToolTip(tr("The calibration text (or a file of token ids): the layers' input statistics\n"
                           "are gathered from windows of it. Empty: the demo models' training corpus (only the demo\nmodels have one; any other model needs a text in its language and domain).\n"
                           "A paper's train split as GPTQ prepares it: wikitext2:FILE, ptb:FILE or c4:FILE."));
    auto* browse = new QToolButton;
    browse->setText(QStringLiteral("…"));
    browse->setToolTip(tr("Choose the calibration file"));
    sourceIsIds_ = new QCheckBox(tr("ids"));
    sourceIsIds_->setToolTip(tr("The file holds whitespace-separated token ids, used as given (no BOS added)."));
    auto* sourceRow = new QHBoxLayout;
    sourceRow->setContentsMargins(0, 0, 0, 0);
    sourceRow->addWidget(source_, 1);
    sourceRow->addWidget(browse);
    sourceRow->addWidget(sourceIsIds_);

    samples_ = new QSpinBox;
    samples_->setRange(1, 4096);
    samples_->setToolTip(tr("Calibration windows (the paper uses 128), drawn at seeded random offsets.\n"
                            "More windows: steadier statistics, longer calibration."));
    seqlen_ = new QSpinBox;
    // 0 is the protocol's default (core/eval/evaluation_protocol.h): the model's context, at most 2048.
    seqlen_->setRange(0, 8192);
    seqlen_->setSpecialValueText(tr("context (≤ 2048)"));
    seqlen_->setToolTip(tr("Tokens per calibration window (capped at the model's context);\n"
                           "the lowest value: the model's context, at most 2048 (as npw prune)."));
    seed_ = new QSpinBox;
    seed_->setRange(0, 1 << 30);
    seed_->setToolTip(tr("Seed of the window offsets and of the random method's scores:\n"
                         "the same seed gives the same statistics and scores."));
    method_ = new QComboBox;
    method_->setObjectName(QStringLiteral("methodCombo"));
    // Every per-unit method and baseline the language workbench runs: the registry's rows
    // (core/prune/method_registry.h), each with its one line as the item's tip.
    const auto languageRows = [](npw::MethodKind kind) {
        return npw::methodsWhere([kind](const npw::MethodInfo& m) { return m.kind == kind && m.language; });
    };
    const auto addRow = [this](const npw::MethodInfo& m, int item) {
        method_->addItem(QString::fromUtf8(m.name), item);
        method_->setItemData(method_->count() - 1, QString::fromUtf8(m.description), Qt::ToolTipRole);
    };
    for (const npw::MethodInfo* m : languageRows(npw::MethodKind::PerUnit)) addRow(*m, int(m->method));
    method_->insertSeparator(method_->count());
    // The baselines in their own structure, scored from the calibration windows; LLM-Pruner also
    // with its global ranking (its option --llm-pruner-global), right after it.
    for (const npw::MethodInfo* m : languageRows(npw::MethodKind::Baseline)) {
        addRow(*m, kBaselineItem + int(m->baseline));
        if (m->baseline != npw::BaselineMethod::LlmPruner) continue;
        method_->addItem(QStringLiteral("llm-pruner-global"), kLlmPrunerGlobalItem);
        method_->setItemData(method_->count() - 1,
                             tr("LLM-Pruner with --global_pruning: the same Taylor importances, every unit of the range ranked\n"
                                "across layers and kinds, the lowest removed until ρ is reached."),
                             Qt::ToolTipRole);
    }
    method_->setToolTip(describedRows(languageRows(npw::MethodKind::PerUnit)) + QLatin1Char('\n') +
                        tr("%1: the paper's other baselines and depth pruning,\n"
                           "each in its own structure (hover an item for what it does).\n"
                           "Each method's scores are kept: switch between them in the Selection bar.")
                            .arg(studio::baselineMethods().join(QStringLiteral(", "))));
    iters_ = new QSpinBox;
    iters_->setRange(0, 100);
    iters_->setSpecialValueText(tr("0 (closed form)"));
    iters_->setToolTip(tr("T, Newton steps of Algorithm 1 for the numerical score. 0 uses the closed form\n"
                          "(the same z, one Cholesky solve per layer); T > 0 is the paper's iteration,\n"
                          "for checking it agrees."));
    box_ = new QCheckBox(tr("Box-constrain z to [0, 1]"));
    box_->setObjectName(QStringLiteral("boxConstrained"));
    box_->setToolTip(tr("Numerical only: solve eq. 5 with z ∈ [0, 1]^D (the paper's domain for z; Algorithm 1\n"
                        "itself never clamps), by an active-set method per layer. The bound makes z depend on\n"
                        "ρ and λ, so moving them asks for Recompute instead of re-selecting live.\n"
                        "Kept as its own score set, numerical-box, beside the closed form."));
    ranking_ = new QComboBox;
    ranking_->setObjectName(QStringLiteral("rankingCombo"));
    ranking_->addItem(tr("L*, relative (default)"), int(npw::CrossLayerRanking::RelativeCompensatedError));
    ranking_->addItem(tr("L*, absolute"), int(npw::CrossLayerRanking::CompensatedError));
    ranking_->addItem(tr("z (eq. 7)"), int(npw::CrossLayerRanking::Relaxed));
    ranking_->setToolTip(tr("Numerical only: how units of different layers compete. Inside a layer both use the\n"
                            "paper's z-order. L*: across layers by the error Theorem 3 leaves after compensating each\n"
                            "layer's removals, relative to the residual stream or absolute (Help ▸ Manual, \"Choosing λ\");\n"
                            "λ then changes only the z shown.\n"
                            "z: the paper's exact form, where λ·c decides the cross-layer order (scores: numerical-z)."));
    damp_ = new QDoubleSpinBox;
    damp_->setRange(0, 1);
    damp_->setDecimals(4);
    damp_->setSingleStep(0.005);
    damp_->setToolTip(tr("γ, the dampening of Theorem 3's compensation, relative to mean(diag 2G) as in GPTQ.\n"
                         "0 is the exact refit (needs a non-singular G); 0.01 is robust."));
    compensate_ = new QCheckBox(tr("Compensate the kept weights"));
    compensate_->setToolTip(tr("On: the method's compensation (Theorem 3 for numerical, FLAP's bias for flap)\n"
                               "updates o_proj/down_proj so that the layer output moves least.\n"
                               "Off: pruned channels are only removed (the paper's ablation)."));
    status_ = new QLabel;
    status_->setWordWrap(true);
    run_ = new QPushButton(tr("Run"));
    run_->setObjectName(QStringLiteral("runButton"));
    run_->setToolTip(tr("Calibrate (when the calibration changed) and score the method (Ctrl+R)."));
    run_->setDefault(true);

    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->addRow(tr("Calibration"), sourceRow);
    form->addRow(tr("Samples"), samples_);
    form->addRow(tr("Sequence length"), seqlen_);
    form->addRow(tr("Seed"), seed_);
    form->addRow(tr("Method"), method_);
    form->addRow(tr("Newton steps T"), iters_);
    form->addRow(QString(), box_);
    form->addRow(tr("Across layers"), ranking_);
    form->addRow(tr("Dampening γ"), damp_);
    form->addRow(QString(), compensate_);
    // The settings scroll when the dock is short (a 1280×720 screen shares its height with the
    // Model and Log docks); the status and the Run button stay below them, always in view.
    auto* fields = new QWidget;
    auto* fieldsLayout = new QVBoxLayout(fields);
    fieldsLayout->setContentsMargins(0, 0, 0, 0);
    fieldsLayout->addLayout(form);
    fieldsLayout->addStretch(1);
    auto* scroll = new QScrollArea;
    scroll->setObjectName(QStringLiteral("runSettingsScroll"));
    scroll->setWidget(fields);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Never narrower than the fields with a vertical scroll bar beside them: nothing is cut at the right.
    scroll->setMinimumWidth(fields->minimumSizeHint().width() +
                            scroll->style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, scroll) + 2);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(scroll, 1);
    layout->addWidget(status_);
    layout->addWidget(run_);

    setSettings(studio::RunSettings{});
    connect(browse, &QToolButton::clicked, this, &RunSettingsPanel::browseSource);
    connect(run_, &QPushButton::clicked, this, &RunSettingsPanel::runRequested);
    connect(source_, &QLineEdit::editingFinished, this, &RunSettingsPanel::emitEdited);
    connect(sourceIsIds_, &QCheckBox::toggled, this, &RunSettingsPanel::emitEdited);
    for (QSpinBox* box : {samples_, seqlen_, seed_, iters_})
        connect(box, &QSpinBox::valueChanged, this, &RunSettingsPanel::emitEdited);
    connect(damp_, &QDoubleSpinBox::valueChanged, this, &RunSettingsPanel::emitEdited);
    connect(method_, &QComboBox::currentIndexChanged, this, &RunSettingsPanel::emitEdited);
    connect(ranking_, &QComboBox::currentIndexChanged, this, &RunSettingsPanel::emitEdited);
    connect(compensate_, &QCheckBox::toggled, this, &RunSettingsPanel::emitEdited);
    connect(box_, &QCheckBox::toggled, this, &RunSettingsPanel::emitEdited);
    connect(method_, &QComboBox::currentIndexChanged, this, &RunSettingsPanel::updateEnabled);
    connect(box_, &QCheckBox::toggled, this, &RunSettingsPanel::updateEnabled);
    updateEnabled();
}

studio::RunSettings RunSettingsPanel::settings() const {
    studio::RunSettings s;
    s.calibration.source = source_->text().trimmed().toStdString();
    s.calibration.sourceIsIds = sourceIsIds_->isChecked();
    s.calibration.samples = samples_->value();
    s.calibration.seqlen = seqlen_->value();
    s.calibration.seed = static_cast<uint64_t>(seed_->value());
    const int item = method_->currentData().toInt();
    if (isBaselineItem(item)) {
        s.baseline = item == kLlmPrunerGlobalItem ? npw::BaselineMethod::LlmPruner
                                                  : static_cast<npw::BaselineMethod>(item - kBaselineItem);
        s.llmPrunerGlobal = item == kLlmPrunerGlobalItem;
    } else {
        s.prune.method = static_cast<npw::PruneMethod>(item);
    }
    const bool numerical = npw::methodInfo(s.prune.method).options.box;  // a baseline leaves the method's default
    s.prune.boxConstrained = numerical && box_->isChecked();
    s.prune.iters = s.prune.boxConstrained ? 0 : iters_->value();  // alternatives
    s.prune.crossLayer = static_cast<npw::CrossLayerRanking>(ranking_->currentData().toInt());
    s.prune.damp = damp_->value();
    s.prune.compensation = compensate_->isChecked() ? npw::CompensationKind::MethodDefault : npw::CompensationKind::None;
    s.prune.seed = s.calibration.seed;
    return s;
}

void RunSettingsPanel::setSettings(const studio::RunSettings& s) {
    const QSignalBlocker b1(source_), b2(sourceIsIds_), b3(samples_), b4(seqlen_), b5(seed_), b6(method_), b7(iters_),
        b8(damp_), b9(compensate_), b10(box_), b11(ranking_);
    source_->setText(QString::fromStdString(s.calibration.source));
    sourceIsIds_->setChecked(s.calibration.sourceIsIds);
    samples_->setValue(int(s.calibration.samples));
    seqlen_->setValue(int(s.calibration.seqlen));
    seed_->setValue(int(s.calibration.seed));
    method_->setCurrentIndex(std::max(0, method_->findData(itemOf(s))));
    iters_->setValue(s.prune.iters);
    damp_->setValue(s.prune.damp);
    compensate_->setChecked(s.prune.compensation != npw::CompensationKind::None);
    box_->setChecked(s.prune.boxConstrained);
    ranking_->setCurrentIndex(std::max(0, ranking_->findData(int(s.prune.crossLayer))));
    updateEnabled();
}

void RunSettingsPanel::updateEnabled() {
    // T and the box belong to the numerical score; the box has its own solver instead of T.
    // The baselines compensate nothing and take none of these.
    const npw::MethodOptions options = rowOf(method_->currentData().toInt()).options;  // the registry's
    damp_->setEnabled(options.compensation);
    compensate_->setEnabled(options.compensation);
    box_->setEnabled(options.box);
    ranking_->setEnabled(options.ranking);
    iters_->setEnabled(options.iterations && !box_->isChecked());
}

void RunSettingsPanel::setCalibrationStale(bool stale, bool haveModel) {
    haveModel_ = haveModel;
    if (!haveModel) status_->setText(tr("Open a model to run."));
    else if (stale) status_->setText(tr("Run calibrates first (new calibration settings), then scores."));
    else status_->setText(tr("Statistics are current: Run only scores the method (seconds)."));
    run_->setEnabled(haveModel_ && !busy_);
}

void RunSettingsPanel::setBusy(bool busy) {
    busy_ = busy;
    run_->setEnabled(haveModel_ && !busy_);
}

void RunSettingsPanel::browseSource() {
    const QString file = QFileDialog::getOpenFileName(this, tr("Calibration text or token ids"), source_->text());
    if (file.isEmpty()) return;
    source_->setText(file);
    emitEdited();
}

void RunSettingsPanel::emitEdited() { emit settingsEdited(settings()); }

void RunSettingsPanel::setModelDefaults(const npw::ModelDefaults& d) {
    source_->setPlaceholderText(d.demo ? tr("demo corpus (%1)").arg(QFileInfo(QString::fromStdString(d.calibrationSource)).fileName())
                                       : tr("required: a calibration text"));
}
