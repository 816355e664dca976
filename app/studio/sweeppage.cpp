#include "app/studio/sweeppage.h"

#include "app/studio/methodlists.h"

#include "core/eval/sweep_curves.h"
#include "widgets/sweepplotwidget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpressionValidator>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>
#include <map>

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

// "0.1, 0.2,0.3" → {0.1, 0.2, 0.3}; entries that are not numbers are skipped.
std::vector<double> parseNumbers(const QString& text) {
    std::vector<double> out;
    for (const QString& item : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const double value = item.trimmed().toDouble(&ok);
        if (ok) out.push_back(value);
    }
    return out;
}

// What grouping into curves needs of a summary row: which plot, and the row's settings.
npw::SweepPointKey curveKey(const npw::SweepSummaryRow& s) {
    npw::SweepPointKey k;
    k.plot = s.first.isSpeedRow()           ? npw::SweepPlot::Speed
             : std::isfinite(s.accMean)     ? npw::SweepPlot::ZeroShot  // a zero-shot task's row
                                            : npw::SweepPlot::Perplexity;
    k.method = s.first.method;
    k.evalSet = s.first.evalSet;
    k.calibSamples = s.first.calibSamples;
    k.calibSeqlen = s.first.calibSeqlen;
    k.lambda = s.first.lambda;
    return k;
}

} // namespace

SweepPage::SweepPage(StudioSession* session, QWidget* parent) : QWidget(parent), session_(session) {
    // What to sweep, and the plot that grows as rows arrive.
    methods_ = new QLineEdit(QStringLiteral("numerical,flap,wanda-sp"));
    methodsTip_ = tr("Methods, comma-separated:\n%1;\nthe baselines in their own structure: %2 (no per-unit scores: curves only)")
                      .arg(studio::methodList(studio::languageSweepMethods()), studio::baselineMethods().join(QStringLiteral(", ")));
    methods_->setToolTip(methodsTip_);
    ratios_ = new QLineEdit(QStringLiteral("0.1,0.2,0.3"));
    ratios_->setToolTip(tr("Pruning ratios ρ in [0, 1), comma-separated: each only re-selects"));
    seeds_ = new QSpinBox;
    seeds_->setRange(1, 10);
    seeds_->setToolTip(tr("Seeds 0…K−1 of the calibration windows: the curves show mean ± std over them"));
    windows_ = new QSpinBox;
    windows_->setRange(0, 100000);
    windows_->setValue(int(SweepRequest{}.evaluation.maxWindows));  // the protocol's: every window
    windows_->setSpecialValueText(tr("all"));
    windows_->setToolTip(tr("A cap on the evaluation windows (2048 tokens, capped at the model's context, as npw eval)\n"
                            "of each held-out text; \"all\" is the papers' protocol. Fewer is faster; every row records the cap."));
    // Numbers and commas only: a file name typed into the wrong field is refused as it is typed,
    // not skipped silently when the sweep runs.
    auto* numbers = new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9eE.,+\\- ]*")), this);
    ratios_->setValidator(numbers);
    auto axis = [numbers](const QString& tip) {
        auto* edit = new QLineEdit;
        edit->setPlaceholderText(tr("as set"));
        edit->setToolTip(tip);
        edit->setMaximumWidth(110);
        edit->setValidator(numbers);
        return edit;
    };
    ratios_->setObjectName(QStringLiteral("sweepRatios"));
    samples_ = axis(tr("Ablation: calibration samples, comma-separated (e.g. 16,64,128).\n"
                       "Empty: the Run settings' value. One curve per value."));
    samples_->setObjectName(QStringLiteral("ablationSamples"));
    seqlens_ = axis(tr("Ablation: calibration sequence lengths, comma-separated (e.g. 64,128).\n"
                       "Empty: the Run settings' value. One curve per value."));
    lambdas_ = axis(tr("Ablation: λ of the numerical score, comma-separated (e.g. 1e-4,1,100).\n"
                       "Empty: the Selection's λ. One curve per value (other methods ignore λ: the field is\n"
                       "inactive unless Methods holds one that takes it)."));
    evalTexts_ = new QLineEdit;
    evalTexts_->setObjectName(QStringLiteral("sweepEvalTexts"));
    evalTexts_->setPlaceholderText(tr("open a model first"));
    evalTexts_->setToolTip(tr("Held-out texts to measure perplexity on, comma-separated paths (e.g. the demo's\n"
                              "kjv-nt.txt and jargon.txt): one curve per method and text. Empty: the demo models' New Testament\n(required for any other model).\n"
                              "The papers' sets as GPTQ prepares them: wikitext2:FILE, ptb:FILE, ptb-flap:FILE, c4:FILE."));
    run_ = new QPushButton(tr("Run sweep"));
    run_->setToolTip(tr("Perplexity against sparsity with the calibration settings and λ, α of the\n"
                        "Selection; calibration once, scores once per method (Ctrl+Shift+R)"));
    // Two rows: what to sweep and run; the ablation axes and what to measure besides perplexity.
    auto* row1 = new QHBoxLayout;
    row1->addWidget(new QLabel(tr("Methods")));
    row1->addWidget(methods_, 2);
    row1->addWidget(new QLabel(tr("Ratios")));
    row1->addWidget(ratios_, 1);
    row1->addWidget(new QLabel(tr("Seeds")));
    row1->addWidget(seeds_);
    row1->addWidget(new QLabel(tr("Eval texts")));
    row1->addWidget(evalTexts_, 1);
    row1->addWidget(new QLabel(tr("Eval windows")));
    row1->addWidget(windows_);
    row1->addWidget(run_);
    auto* row2 = new QHBoxLayout;
    row2->addWidget(new QLabel(tr("Ablation: samples")));
    row2->addWidget(samples_);
    row2->addWidget(new QLabel(tr("Seq len")));
    row2->addWidget(seqlens_);
    row2->addWidget(new QLabel(tr("λ")));
    row2->addWidget(lambdas_);
    zeroShot_ = new QCheckBox(tr("Demo zero-shot task"));
    zeroShot_->setChecked(true);
    zeroShot_->setToolTip(tr("Also score the demo's zero-shot task (choose a New Testament verse's true ending\n"
                             "among four; 200 items, lm-evaluation-harness scoring) and plot accuracy beside perplexity"));
    speed_ = new QCheckBox(tr("Speed and memory"));
    speed_->setObjectName(QStringLiteral("sweepSpeed"));
    speedTip_ = tr("Also time every model (dense and each pruned one): a prefill of 64 tokens and a greedy\n"
                   "decode of 64 (the best of 5 after a warm-up), and its weight and KV-cache memory:\n"
                   "the paper's Figure 5, plotted below the accuracy");
    speed_->setToolTip(speedTip_);
    row2->addSpacing(12);
    row2->addWidget(zeroShot_);
    row2->addWidget(speed_);
    row2->addStretch(1);
    auto* form = new QVBoxLayout;
    form->addLayout(row1);
    form->addLayout(row2);
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
    auto* sidePlots = new QSplitter(Qt::Vertical);
    sidePlots->addWidget(accuracyPlot_);
    sidePlots->addWidget(speedPanel_);
    splitter_ = new QSplitter(Qt::Horizontal);
    splitter_->addWidget(sweepPlot_);
    splitter_->addWidget(sidePlots);
    pplShow_ = new QComboBox;
    pplShow_->setObjectName(QStringLiteral("perplexityShow"));
    pplShow_->addItem(tr("relative to dense"));
    pplShow_->addItem(tr("absolute (log scale)"));
    pplShow_->setToolTip(tr("Perplexity divided by the dense model's on the same text (a linear axis: 1.05 is 5 % worse;\n"
                            "points far above the rest are drawn at the top edge with their value), or as measured on a log axis"));
    connect(pplShow_, &QComboBox::currentIndexChanged, this, &SweepPage::redraw);
    row2->insertWidget(row2->count() - 1, new QLabel(tr("Perplexity")));
    row2->insertWidget(row2->count() - 1, pplShow_);
    auto* note = new QLabel(tr("Sparsity is the achieved fraction of attention + MLP weights removed (uniform "
                               "methods fall below ρ). Each point is one pruned model evaluated on the "
                               "held-out text; calibration as in the Run settings, λ and α as in the Selection."));
    note->setWordWrap(true);
    road_ = new QLabel;
    road_->setObjectName(QStringLiteral("sweepRoad"));
    road_->setWordWrap(true);
    road_->setVisible(false);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(road_);
    layout->addWidget(splitter_, 1);

    // λ only for the methods that take it (the registry's options).
    const auto lambdaActive = [this] { lambdas_->setEnabled(studio::anyUsesLambda(methods_->text().split(QLatin1Char(',')))); };
    connect(methods_, &QLineEdit::textChanged, this, lambdaActive);
    lambdaActive();
    connect(speedShow_, &QComboBox::currentIndexChanged, this, &SweepPage::redraw);
    connect(run_, &QPushButton::clicked, this, &SweepPage::runSweep);
    connect(session_, &StudioSession::sweepCleared, this, &SweepPage::redraw);
    connect(session_, &StudioSession::sweepRowAvailable, this, &SweepPage::redraw);
    connect(session_, &StudioSession::modelChanged, this, &SweepPage::updateRoad);
}

void SweepPage::updateRoad() {
    const bool model = session_->hasModel();
    const bool layerwise = model && session_->pruneRoad().layerwise;
    if (layerwise) {
        // Nothing in the form that the road refuses: the Run would only be refused.
        zeroShot_->setChecked(false);
        zeroShot_->setEnabled(false);
        speed_->setChecked(false);
    }
    speed_->setEnabled(!layerwise);
    speed_->setToolTip(layerwise ? tr("Not on this model's road: timing generation needs the whole model in memory,\n"
                                      "which the layer-by-layer road does not hold (measure a pruned export with npw bench)")
                                 : speedTip_);
    // In RAM (every model that fits) the page stays as it was; the road is the Model dock's line.
    road_->setVisible(layerwise);
    if (!layerwise) {
        methods_->setToolTip(methodsTip_);
        road_->clear();
        return;
    }
    // The methods the road cannot run (core's rule, as `npw sweep` refuses them) leave the field.
    std::vector<std::string> asked;
    for (const QString& m : methods_->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) asked.push_back(m.trimmed().toStdString());
    const QStringList refused = session_->sweepMethodsRefused(asked);
    if (!refused.isEmpty()) {
        QStringList kept;
        for (const std::string& m : asked)
            if (!refused.contains(QString::fromStdString(m))) kept << QString::fromStdString(m);
        methods_->setText(kept.join(QLatin1Char(',')));
    }
    const QString baselines = studio::baselineMethods().join(QStringLiteral(", "));
    const QString wholeModel = studio::wholeModelVariants().join(QStringLiteral(", "));
    methods_->setToolTip(tr("Methods, comma-separated, on this model's layer-by-layer road:\n%1.\n"
                            "Not offered: %2 (they prune from the whole model in memory)\n"
                            "and %3 (2L + 1 whole-model forward passes).")
                             .arg(studio::methodList(studio::layerwiseSweepMethods()), baselines, wholeModel));
    road_->setText(tr("This model sweeps %1, as npw sweep --layerwise: the statistics go to a scratch file, each pruned "
                      "model is written to a work folder and evaluated one block at a time. Not on this road, as they "
                      "need the whole model in memory: the baselines (%2), %3, the zero-shot task and speed rows.%4")
                       .arg(session_->pruneRoadText(), baselines, wholeModel,
                            refused.isEmpty() ? QString() : tr(" Taken out of Methods: %1.").arg(refused.join(QStringLiteral(", ")))));
}

void SweepPage::redraw() {
    // Means and spreads over seeds are core's (summariseOverSeeds), and so is which rows form
    // one curve (sweepCurves); the plots only draw them.
    sweepPlot_->clear();
    accuracyPlot_->clear();
    speedPlot_->clear();
    const SpeedQuantity& speed = kSpeedQuantities[std::max(0, speedShow_->currentIndex())];
    speedPlot_->setQuantity(tr("%1 against sparsity").arg(tr(speed.name)), tr(speed.axis), false);
    const auto summary = npw::summariseOverSeeds(session_->sweepRows());
    std::vector<npw::SweepPointKey> keys;
    keys.reserve(summary.size());
    for (const npw::SweepSummaryRow& s : summary) keys.push_back(curveKey(s));
    bool accuracy = false, speedRows = false;
    const std::vector<npw::SweepCurvePoint> curves = npw::sweepCurves(keys);
    // Relative to dense: each text's dense perplexity divides its curve (1 = the dense model).
    const bool relative = pplShow_->currentIndex() == 0;
    std::map<std::string, double> densePpl;
    for (const npw::SweepCurvePoint& c : curves)
        if (c.plot == npw::SweepPlot::Perplexity && (c.curve.empty() || c.denseStart))
            densePpl[summary[c.point].first.evalSet] = summary[c.point].pplMean;
    QStringList texts;
    for (const auto& [text, ppl] : densePpl) texts << QFileInfo(QString::fromStdString(text)).fileName();
    const QString model = session_->hasModel() ? session_->modelReference() : QString();
    const QString what = texts.isEmpty() ? model : tr("%1 on %2").arg(model, texts.join(QStringLiteral(", ")));
    if (relative)
        sweepPlot_->setQuantity(what.isEmpty() ? tr("Perplexity relative to the dense model")
                                               : tr("Perplexity relative to the dense model: %1").arg(what),
                                tr("perplexity ÷ dense perplexity (1 = dense)"), false);
    else
        sweepPlot_->setQuantity(what.isEmpty() ? tr("Perplexity against sparsity")
                                               : tr("Perplexity against sparsity: %1").arg(what),
                                tr("perplexity (log scale)"), true);
    for (const npw::SweepCurvePoint& c : curves) {
        const npw::SweepSummaryRow& s = summary[c.point];
        const QString curve = QString::fromStdString(c.curve);
        double value = 0, spread = 0;
        SweepPlotWidget* plot = sweepPlot_;
        switch (c.plot) {
        case npw::SweepPlot::Speed:
            speedRows = true;
            plot = speedPlot_;
            value = speed.value(s);
            spread = speed.spread ? speed.spread(s) : 0.0;
            break;
        case npw::SweepPlot::ZeroShot:
            accuracy = true;
            plot = accuracyPlot_;
            value = s.accMean;
            spread = s.accStd;
            accuracyPlot_->setQuantity(tr("Zero-shot accuracy against sparsity"),
                                       tr("accuracy on %1").arg(QString::fromStdString(s.first.evalSet)), false);
            break;
        case npw::SweepPlot::Perplexity:
            value = s.pplMean;
            spread = s.pplStd;
            if (relative) {
                const auto dense = densePpl.find(s.first.evalSet);
                if (dense == densePpl.end() || !(dense->second > 0)) continue;
                value /= dense->second;
                spread /= dense->second;
            }
            break;
        }
        // The dense model: its plot's dashed line, or (several texts) the start of a curve at sparsity 0.
        if (curve.isEmpty() && plot == sweepPlot_ && relative)
            plot->setDenseBaseline(value, tr("dense model (perplexity %1)").arg(s.pplMean, 0, 'g', 4));
        else if (curve.isEmpty()) plot->setDenseBaseline(value);
        else if (c.denseStart) plot->addPoint(curve, 0.0, value);
        else plot->addPoint(curve, s.achievedRatioMean, value, spread);
    }
    accuracyPlot_->setVisible(accuracy);
    speedPanel_->setVisible(speedRows);
    // When the side column appears, give it room for its plots' legends (5 : 4).
    const bool side = accuracy || speedRows;
    if (side && !sideColumnShown_) {
        const int width = splitter_->width();
        splitter_->setSizes({width * 5 / 9, width * 4 / 9});
    }
    sideColumnShown_ = side;
}

void SweepPage::setModelDefaults(const npw::ModelDefaults& d) {
    evalTexts_->setPlaceholderText(d.demo ? tr("demo: %1").arg(QFileInfo(QString::fromStdString(d.evaluationSource)).fileName())
                                          : tr("required: held-out text files, comma-separated"));
    // The demo's held-out files in the field belong to the demo models.
    const QString demoDir = QFileInfo(QString::fromStdString(studio::defaultEvaluationSource())).absolutePath();
    if (!d.demo && evalTexts_->text().contains(demoDir)) evalTexts_->clear();
    zeroShot_->setEnabled(d.demo);
    zeroShot_->setChecked(d.demo);
    updateRoad();  // after the model's defaults: the road may take the zero-shot task off again
}

void SweepPage::setBusy(bool busy) { run_->setEnabled(!busy && session_->hasModel()); }

bool SweepPage::exportPlot(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("pdf")) return sweepPlot_->savePdf(path);
    if (suffix == QLatin1String("svg")) return sweepPlot_->saveSvg(path);
    return sweepPlot_->savePng(path);
}

SweepRequest SweepPage::sweepRequest() const {
    SweepRequest r;
    r.methods.clear();
    for (const QString& m : methods_->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        r.methods.push_back(m.trimmed().toStdString());
    r.ratios = parseNumbers(ratios_->text());
    r.seeds = seeds_->value();
    r.evaluation.maxWindows = windows_->value();
    for (double x : parseNumbers(samples_->text())) r.calibSamples.push_back(static_cast<int64_t>(x));
    for (double x : parseNumbers(seqlens_->text())) r.calibSeqlens.push_back(static_cast<int64_t>(x));
    r.lambdas = parseNumbers(lambdas_->text());
    if (zeroShot_->isChecked() && zeroShot_->isEnabled()) r.zeroShotTask = studio::defaultZeroShotTask();
    r.measureSpeed = speed_->isChecked();
    // The field lists texts by path (and data sets, ids:FILE as the CLI takes them).
    for (const QString& item : evalTexts_->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        r.evalSources.push_back(npw::evalSourceOfPath(item.trimmed().toStdString()));
    return r;
}

void SweepPage::setSweepRequest(const SweepRequest& r) {
    QStringList methods;
    for (const std::string& m : r.methods) methods << QString::fromStdString(m);
    methods_->setText(methods.join(QLatin1Char(',')));
    QStringList ratios;
    for (double x : r.ratios) ratios << QString::number(x);
    ratios_->setText(ratios.join(QLatin1Char(',')));
    seeds_->setValue(r.seeds);
    windows_->setValue(int(r.evaluation.maxWindows));
    auto joined = [](auto values) {
        QStringList out;
        for (auto x : values) out << QString::number(x);
        return out.join(QLatin1Char(','));
    };
    samples_->setText(joined(r.calibSamples));
    seqlens_->setText(joined(r.calibSeqlens));
    lambdas_->setText(joined(r.lambdas));
    zeroShot_->setChecked(!r.zeroShotTask.empty());
    speed_->setChecked(r.measureSpeed);
    QStringList texts;
    for (const std::string& source : r.evalSources)
        texts << QString::fromStdString(source.rfind("text:", 0) == 0 ? source.substr(5) : source);
    evalTexts_->setText(texts.join(QLatin1Char(',')));
}

void SweepPage::restoreSettings(const QSettings& s) {
    SweepRequest sweep = sweepRequest();
    QStringList methods;
    for (const std::string& m : sweep.methods) methods << QString::fromStdString(m);
    sweep.methods.clear();
    for (const QString& m : s.value(QStringLiteral("sweep/methods"), methods).toStringList()) sweep.methods.push_back(m.toStdString());
    const QString ratios = s.value(QStringLiteral("sweep/ratios")).toString();
    if (!ratios.isEmpty()) sweep.ratios = parseNumbers(ratios);
    sweep.seeds = s.value(QStringLiteral("sweep/seeds"), sweep.seeds).toInt();
    sweep.evaluation.maxWindows = s.value(QStringLiteral("sweep/windows"), qlonglong(sweep.evaluation.maxWindows)).toLongLong();
    setSweepRequest(sweep);
}

void SweepPage::saveSettings(QSettings& s) const {
    const SweepRequest sweep = sweepRequest();
    QStringList methods;
    for (const std::string& m : sweep.methods) methods << QString::fromStdString(m);
    s.setValue(QStringLiteral("sweep/methods"), methods);
    s.setValue(QStringLiteral("sweep/ratios"), ratios_->text());
    s.setValue(QStringLiteral("sweep/seeds"), sweep.seeds);
    s.setValue(QStringLiteral("sweep/windows"), qlonglong(sweep.evaluation.maxWindows));
}
