#include "app/studio/imagespage.h"

#include "app/studio/methodlists.h"

#include "widgets/imagepairwidget.h"
#include "widgets/scientificspinbox.h"
#include "widgets/sweepplotwidget.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>
#include <limits>

namespace {

// The quantities an image sweep row offers the plot: name, axis label, log scale, value.
struct Quantity {
    const char* name;
    const char* axis;
    bool log;
    double (*value)(const npw::ImageSweepRow&);
};
const Quantity kQuantities[] = {
    {"FID", "FID (lower is better)", false, [](const npw::ImageSweepRow& r) { return r.eval.metrics.fid; }},
    {"sFID", "sFID (lower is better)", false, [](const npw::ImageSweepRow& r) { return r.eval.metrics.sfid; }},
    {"Inception Score", "IS (higher is better)", false, [](const npw::ImageSweepRow& r) { return r.eval.metrics.is.mean; }},
    {"Precision", "precision (k = 3)", false, [](const npw::ImageSweepRow& r) { return r.eval.metrics.precision; }},
    {"Recall", "recall (k = 3)", false, [](const npw::ImageSweepRow& r) { return r.eval.metrics.recall; }},
    {"Class accuracy", "samples classified as the requested class", false,
     [](const npw::ImageSweepRow& r) { return r.eval.classAccuracy; }},
    {"Generation speed", "image tokens per second", false, [](const npw::ImageSweepRow& r) { return r.eval.tokensPerSecond; }},
    {"Weight memory", "GPT weights (MiB)", false,
     [](const npw::ImageSweepRow& r) { return double(r.eval.weightBytes) / 1048576.0; }},
};

QStringList splitComma(const QString& text) {
    QStringList out;
    for (const QString& part : text.split(',', Qt::SkipEmptyParts)) out << part.trimmed();
    return out;
}

} // namespace

ImagesPage::ImagesPage(ImageSession* session, QWidget* parent) : QWidget(parent), session_(session) {
    model_ = new QLineEdit(QStringLiteral("demo:c2i"));
    model_->setToolTip(tr("A class-conditional LlamaGen model folder with its VQ tokenizer in vq/ (demo:c2i, or a "
                          "pruned export)"));
    open_ = new QPushButton(tr("Open"));
    about_ = new QLabel(tr("No image model open"));
    about_->setWordWrap(true);
    method_ = new QComboBox;
    method_->setObjectName(QStringLiteral("imageMethodCombo"));
    method_->addItems(studio::imageMethods());  // core's table of methods (method_registry.h)
    method_->setToolTip(tr("How the pruned model was pruned; scores are computed once per method\n"
                           "(numerical-box: z constrained to [0, 1], solved again for every ρ)"));
    ratio_ = new QDoubleSpinBox;
    ratio_->setRange(0.01, 0.9);
    ratio_->setSingleStep(0.05);
    ratio_->setValue(0.3);
    ratio_->setToolTip(tr("ρ: the fraction of attention + MLP parameters removed"));
    lambda_ = new ScientificSpinBox;
    lambda_->setObjectName(QStringLiteral("imageLambda"));
    lambda_->setRange(0, 1e8);  // 0: the relative default, as for every model
    lambda_->setSpecialValueText(tr("relative (default)"));
    lambda_->setValue(0);
    lambda_->setToolTip(tr("An absolute λ of the numerical score, or the default: λ = λ_rel / median c, the same\n"
                           "for every model (Help ▸ Manual, \"Choosing λ\"). With the default ranking (numerical: L* across\n"
                           "layers) λ does not change the mask; numerical-z ranks z itself, where λ·c decides.\n"
                           "Inactive when neither the method nor any of the sweep's methods takes λ."));
    classes_ = new QComboBox;
    classes_->setToolTip(tr("Which classes to generate (a row each)"));
    perClass_ = new QSpinBox;
    perClass_->setRange(1, 16);
    perClass_->setValue(2);
    perClass_->setToolTip(tr("Samples per class (columns)"));
    seed_ = new QSpinBox;
    seed_->setRange(0, 1000000);
    seed_->setToolTip(tr("Sample i uses seed + i in both models: the same random draws"));
    cfg_ = new QDoubleSpinBox;
    cfg_->setRange(1.0, 8.0);
    cfg_->setSingleStep(0.25);
    cfg_->setValue(2.0);
    cfg_->setToolTip(tr("Classifier-free guidance scale (1 = none)"));
    calibPerClass_ = new QSpinBox;
    calibPerClass_->setRange(1, 512);
    calibPerClass_->setValue(16);
    calibPerClass_->setToolTip(tr("Calibration: samples the dense model generates per class (the paper: 128).\n"
                                  "Changing it (or the CFG) recalibrates on the next Generate."));
    zoom_ = new QSpinBox;
    zoom_->setRange(1, 8);
    zoom_->setValue(3);
    zoom_->setSuffix(QStringLiteral("×"));
    zoom_->setToolTip(tr("Enlarge both grids (nearest neighbour: pixels stay crisp)"));
    generate_ = new QPushButton(tr("Generate"));
    generate_->setToolTip(tr("Prune with the method at ρ and generate the same samples with both models"));
    save_ = new QPushButton(tr("Save…"));
    exportModel_ = new QPushButton(tr("Export model…"));
    exportModel_->setToolTip(tr("Write the pruned model of this comparison (method, ρ, λ) as a folder that npw and\n"
                                "the studio open again: config, weights in LlamaGen's names, vq/, manifest"));
    exportCsv_ = new QPushButton(tr("Export CSV…"));
    exportCsv_->setToolTip(tr("The image sweep's rows as CSV (every metric, speed and memory)"));
    save_->setToolTip(tr("Save both grids side by side as one PNG"));

    // Three rows of settings and a model row: the tab shares a laptop's width with the plot.
    auto* row1 = new QHBoxLayout;
    auto* row2 = new QHBoxLayout;
    auto* row3 = new QHBoxLayout;
    auto add = [](QHBoxLayout* row, const QString& label, QWidget* w) {
        row->addWidget(new QLabel(label));
        row->addWidget(w);
    };
    add(row1, tr("Method"), method_);
    add(row1, tr("ρ"), ratio_);
    add(row1, tr("λ"), lambda_);
    row1->addStretch(1);
    add(row2, tr("Classes"), classes_);
    add(row2, tr("Per class"), perClass_);
    add(row2, tr("Seed"), seed_);
    add(row2, tr("CFG"), cfg_);
    row2->addStretch(1);
    add(row3, tr("Calibration/class"), calibPerClass_);
    add(row3, tr("Zoom"), zoom_);
    row3->addStretch(1);
    row3->addWidget(generate_);
    row3->addWidget(save_);
    row3->addWidget(exportModel_);
    auto* form = new QVBoxLayout;
    form->addLayout(row1);
    form->addLayout(row2);
    form->addLayout(row3);
    auto* modelRow = new QHBoxLayout;
    modelRow->addWidget(new QLabel(tr("Image model")));
    modelRow->addWidget(model_, 1);
    modelRow->addWidget(open_);
    about_->setMinimumWidth(0);

    pair_ = new ImagePairWidget;
    pair_->setZoom(zoom_->value());
    comparisonSummary_ = new QLabel;
    comparisonSummary_->setWordWrap(true);
    auto* compareBox = new QWidget;
    auto* compareLayout = new QVBoxLayout(compareBox);
    compareLayout->setContentsMargins(0, 0, 0, 0);
    compareLayout->addLayout(modelRow);
    compareLayout->addWidget(about_);
    compareLayout->addLayout(form);
    compareLayout->addWidget(comparisonSummary_);
    compareLayout->addWidget(pair_, 1);

    sweepMethods_ = new QLineEdit(QStringLiteral("numerical,flap"));
    sweepMethods_->setObjectName(QStringLiteral("imageSweepMethods"));
    sweepMethods_->setToolTip(tr("Methods, comma-separated:\n%1").arg(studio::methodList(studio::imageMethods())));
    sweepRatios_ = new QLineEdit(QStringLiteral("0.1,0.2,0.3"));
    sweepRatios_->setToolTip(tr("Pruning ratios ρ, comma-separated"));
    samples_ = new QSpinBox;
    samples_->setRange(10, 50000);
    samples_->setValue(200);
    samples_->setToolTip(tr("Images generated per model for the metrics (classes in turn); more is slower and steadier"));
    metric_ = new QComboBox;
    for (const Quantity& q : kQuantities) metric_->addItem(tr(q.name));
    metric_->setToolTip(tr("What the plot shows against sparsity (the dashed line: the dense model)"));
    sweepRun_ = new QPushButton(tr("Run sweep"));
    sweepRun_->setToolTip(tr("FID, sFID, IS, precision, recall (demo classifier features, Fashion-MNIST test set as\n"
                             "reference), class accuracy, generation speed and weight memory for each method and ρ"));
    auto* sweepForm = new QVBoxLayout;  // two rows: the plot column is narrow
    auto* sweepRow1 = new QHBoxLayout;
    sweepRow1->addWidget(new QLabel(tr("Methods")));
    sweepRow1->addWidget(sweepMethods_, 2);
    sweepRow1->addWidget(new QLabel(tr("Ratios")));
    sweepRow1->addWidget(sweepRatios_, 1);
    auto* sweepRow2 = new QHBoxLayout;
    sweepRow2->addWidget(new QLabel(tr("Images")));
    sweepRow2->addWidget(samples_);
    sweepRow2->addWidget(new QLabel(tr("Show")));
    sweepRow2->addWidget(metric_, 1);
    auto* sweepRow3 = new QHBoxLayout;
    sweepRow3->addStretch(1);
    sweepRow3->addWidget(sweepRun_);
    sweepRow3->addWidget(exportCsv_);
    sweepForm->addLayout(sweepRow1);
    sweepForm->addLayout(sweepRow2);
    sweepForm->addLayout(sweepRow3);
    plot_ = new SweepPlotWidget;
    auto* plotBox = new QWidget;
    auto* plotLayout = new QVBoxLayout(plotBox);
    plotLayout->setContentsMargins(0, 0, 0, 0);
    plotLayout->addLayout(sweepForm);
    plotLayout->addWidget(plot_, 1);

    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(compareBox);
    split->addWidget(plotBox);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(split);

    connect(open_, &QPushButton::clicked, this, [this] { openModel(model_->text()); });
    connect(generate_, &QPushButton::clicked, this, [this] { generate(); });
    connect(sweepRun_, &QPushButton::clicked, this, [this] { runSweep(); });
    connect(save_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save the comparison"), QStringLiteral("comparison.png"),
                                                          tr("PNG images (*.png)"));
        if (!path.isEmpty() && !saveComparison(path))
            emit errorOccurred(tr("Save the comparison"), tr("Could not write %1.").arg(path));
    });
    connect(exportModel_, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getSaveFileName(this, tr("Export the pruned image model (a new folder)"));
        if (!dir.isEmpty()) session_->exportPrunedModel(dir);
    });
    connect(exportCsv_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export the image sweep"), QStringLiteral("image-sweep.csv"),
                                                          tr("CSV files (*.csv)"));
        if (path.isEmpty()) return;
        try {
            session_->exportSweepCsv(path);
        } catch (const std::exception& e) {
            emit errorOccurred(tr("Export the image sweep CSV"), QString::fromUtf8(e.what()));
        }
    });
    connect(zoom_, &QSpinBox::valueChanged, pair_, &ImagePairWidget::setZoom);
    connect(metric_, &QComboBox::currentIndexChanged, this, &ImagesPage::redrawPlot);
    // λ only when the comparison's method or one of the sweep's takes it (the registry's options).
    const auto lambdaActive = [this] {
        lambda_->setEnabled(studio::usesLambda(method_->currentText()) || studio::anyUsesLambda(splitComma(sweepMethods_->text())));
    };
    connect(method_, &QComboBox::currentTextChanged, this, lambdaActive);
    connect(sweepMethods_, &QLineEdit::textChanged, this, lambdaActive);
    lambdaActive();
    connect(session_, &ImageSession::modelChanged, this, &ImagesPage::onModelChanged);
    connect(session_, &ImageSession::comparisonReady, this, &ImagesPage::onComparison);
    connect(session_, &ImageSession::sweepCleared, this, &ImagesPage::redrawPlot);
    connect(session_, &ImageSession::sweepRowAvailable, this, &ImagesPage::redrawPlot);
    connect(session_, &ImageSession::requestsRestored, this, [this] {
        if (session_->lastCompareRequest()) setCompareRequest(*session_->lastCompareRequest());
        if (session_->lastSweepRequest()) setSweepRequest(*session_->lastSweepRequest());
    });
    onModelChanged();
    redrawPlot();
}

bool ImagesPage::openModel(const QString& reference) {
    model_->setText(reference);
    return session_->openModel(reference);
}

void ImagesPage::setBusy(bool busy) {
    for (QWidget* w : std::initializer_list<QWidget*>{open_, generate_, sweepRun_})
        w->setEnabled(!busy && (w == open_ || session_->hasModel()));
    save_->setEnabled(!busy && pair_->hasImages());
    exportModel_->setEnabled(!busy && session_->comparison().has_value());
    exportCsv_->setEnabled(!busy && !session_->sweepRows().empty());
}

void ImagesPage::onModelChanged() {
    if (session_->hasModel()) model_->setText(session_->modelReference());
    about_->setText(session_->describeModel());
    classes_->clear();
    classes_->addItem(tr("all"));
    classes_->addItems(session_->classNames());
    pair_->clear();
    comparisonSummary_->clear();
    setBusy(false);
}

void ImagesPage::onComparison() {
    const auto& c = session_->comparison();
    if (!c) return;
    pair_->setImages(session_->denseGrid(), tr("Dense (%1 parameters)").arg(c->denseParameters),
                     session_->prunedGrid(),
                     tr("%1, ρ = %2 (%3 parameters)").arg(QString::fromStdString(c->method)).arg(c->ratio).arg(c->prunedParameters));
    QString kept;
    for (size_t l = 0; l < c->layers.size(); ++l)
        kept += QStringLiteral("%1%2: %3/%4 heads, %5/%6 channels")
                    .arg(l ? QStringLiteral("; ") : QString())
                    .arg(l)
                    .arg(c->layers[l].headsAfter)
                    .arg(c->layers[l].headsBefore)
                    .arg(c->layers[l].channelsAfter)
                    .arg(c->layers[l].channelsBefore);
    comparisonSummary_->setText(tr("Same classes and seeds in both. %1% of attention + MLP removed; generation "
                                   "%2 → %3 tokens/s. Layers %4.")
                                    .arg(100 * c->achievedRatio, 0, 'f', 1)
                                    .arg(c->denseTokensPerSecond, 0, 'f', 0)
                                    .arg(c->prunedTokensPerSecond, 0, 'f', 0)
                                    .arg(kept));
    setBusy(false);
}

void ImagesPage::redrawPlot() {
    const Quantity& q = kQuantities[std::max(0, metric_->currentIndex())];
    plot_->clear();
    plot_->setQuantity(tr("%1 against sparsity").arg(tr(q.name)), tr(q.axis), q.log);
    for (const npw::ImageSweepRow& r : session_->sweepRows()) {
        const double v = q.value(r);
        if (!std::isfinite(v)) continue;
        if (r.method == "dense")
            plot_->setDenseBaseline(v);
        else
            plot_->addPoint(QString::fromStdString(r.method), r.achievedRatio, v);
    }
}

ImageCompareRequest ImagesPage::compareRequest() const {
    ImageCompareRequest r;
    r.method = method_->currentText();
    r.ratio = ratio_->value();
    if (classes_->currentIndex() > 0) r.classes = {classes_->currentIndex() - 1};
    r.perClass = perClass_->value();
    r.seed = seed_->value();
    r.cfg = cfg_->value();
    r.calibPerClass = calibPerClass_->value();
    r.lambda = lambda_->value() > 0 ? lambda_->value() : std::numeric_limits<double>::quiet_NaN();
    return r;
}

void ImagesPage::setCompareRequest(const ImageCompareRequest& r) {
    method_->setCurrentText(r.method);
    ratio_->setValue(r.ratio);
    classes_->setCurrentIndex(r.classes.size() == 1 ? int(r.classes[0]) + 1 : 0);
    perClass_->setValue(r.perClass);
    seed_->setValue(r.seed);
    cfg_->setValue(r.cfg);
    calibPerClass_->setValue(r.calibPerClass);
    lambda_->setValue(std::isnan(r.lambda) ? 0.0 : r.lambda);
}

ImageSweepRequest ImagesPage::sweepRequest() const {
    ImageSweepRequest r;
    r.methods = splitComma(sweepMethods_->text());
    r.ratios.clear();
    for (const QString& item : splitComma(sweepRatios_->text())) {
        bool ok = false;
        const double x = item.toDouble(&ok);
        if (ok) r.ratios.push_back(x);
    }
    r.samples = samples_->value();
    r.cfg = cfg_->value();
    r.calibPerClass = calibPerClass_->value();
    r.lambda = lambda_->value() > 0 ? lambda_->value() : std::numeric_limits<double>::quiet_NaN();
    return r;
}

void ImagesPage::setSweepRequest(const ImageSweepRequest& r) {
    sweepMethods_->setText(r.methods.join(','));
    QStringList ratios;
    for (double x : r.ratios) ratios << QString::number(x);
    sweepRatios_->setText(ratios.join(','));
    samples_->setValue(r.samples);
    cfg_->setValue(r.cfg);
    calibPerClass_->setValue(r.calibPerClass);
}

bool ImagesPage::saveComparison(const QString& path) const { return pair_->saveComparison(path); }

bool ImagesPage::exportPlot(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("pdf")) return plot_->savePdf(path);
    if (suffix == QLatin1String("svg")) return plot_->saveSvg(path);
    return plot_->savePng(path);
}
