// npw-studio-gallery: every widget of npwwidgets on a synthetic model, wired the way the main
// window will wire them (one LayerSelection; the controls re-score and re-select through core),
// for looking at layout and palettes.
//
//   npw-studio-gallery [--dark] [--layer N] [--shape LAYERSxHEADSxCHANNELS] [--screenshot FILE]
//
// --screenshot saves the window (QWidget::grab) once it is laid out, then quits.
#include "app/studio/studiopalette.h"
#include "app/studio/synthetic_model.h"
#include "core/prune/select.h"
#include "widgets/headmapwidget.h"
#include "widgets/layeroverviewwidget.h"
#include "widgets/layerselection.h"
#include "widgets/scorehistogramwidget.h"
#include "widgets/sparsitycontrols.h"
#include "widgets/sweepplotwidget.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QGridLayout>
#include <QGroupBox>
#include <QLabel>
#include <QStyleFactory>
#include <QTimer>
#include <QVBoxLayout>
#include <cstdio>

namespace {

QWidget* framed(const QString& title, QWidget* content) {
    auto* box = new QGroupBox(title);
    auto* layout = new QVBoxLayout(box);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addWidget(content);
    return box;
}

} // namespace

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("npw widget gallery on synthetic scores"));
    parser.addHelpOption();
    const QCommandLineOption dark(QStringLiteral("dark"), QStringLiteral("Use a dark palette."));
    const QCommandLineOption layer(QStringLiteral("layer"), QStringLiteral("Select layer N at start."),
                                   QStringLiteral("N"), QStringLiteral("5"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                        QStringLiteral("Save the window to FILE and quit."), QStringLiteral("FILE"));
    const QCommandLineOption shapeOption(QStringLiteral("shape"),
                                         QStringLiteral("Model shape LAYERSxHEADSxCHANNELS (7B: 32x32x11008)."),
                                         QStringLiteral("SHAPE"), QStringLiteral("16x8x688"));
    parser.addOptions({dark, layer, screenshot, shapeOption});
    parser.process(app);
    if (parser.isSet(dark)) QApplication::setPalette(studio::darkPalette());

    SyntheticShape shape;
    const QStringList dims = parser.value(shapeOption).split(QLatin1Char('x'));
    if (dims.size() == 3) {
        shape.layers = dims[0].toLongLong();
        shape.heads = dims[1].toLongLong();
        shape.intermediate = dims[2].toLongLong();
    }
    if (shape.layers < 1 || shape.heads < 1 || shape.intermediate < 1) parser.showHelp(1);
    const SyntheticModel model = makeSyntheticModel(7, shape);
    const std::vector<npw::LayerUnitCost> costs = npw::unitCostsFromConfig(model.config);

    QWidget window;
    window.setWindowTitle(QStringLiteral("npw widget gallery"));
    auto* selection = new LayerSelection(&window);
    auto* controls = new SparsityControls;
    auto* headMap = new HeadMapWidget(selection);
    auto* histogram = new ScoreHistogramWidget(selection);
    auto* overview = new LayerOverviewWidget(selection);
    auto* sweep = new SweepPlotWidget;
    auto* summary = new QLabel;
    summary->setWordWrap(true);

    auto* left = new QVBoxLayout;
    auto* controlsBox = new QWidget;
    auto* controlsLayout = new QVBoxLayout(controlsBox);
    controlsLayout->setContentsMargins(0, 0, 0, 0);
    controlsLayout->addWidget(controls);
    controlsLayout->addWidget(summary);
    // The plots carry their own titles; only the controls get a frame.
    left->addWidget(framed(QStringLiteral("Selection"), controlsBox), 0);
    left->addWidget(histogram, 1);
    left->addWidget(sweep, 1);
    auto* right = new QVBoxLayout;
    right->addWidget(headMap, 1);
    right->addWidget(overview, 1);
    auto* columns = new QHBoxLayout(&window);
    columns->addLayout(left, 2);
    columns->addLayout(right, 3);

    // What the main window's worker will do, here on the GUI thread (the model is tiny).
    auto reselect = [&, summary, headMap, histogram, overview](double rho, double alpha, npw::AlphaMode mode,
                                                               double lambda) {
        const std::vector<npw::LayerScores> scores = syntheticScores(model, rho, lambda);
        const npw::SelectionResult result = npw::selectGlobal(scores, costs, rho, alpha, mode);
        headMap->setData(scores, result.mask);
        histogram->setData(scores, result.mask, result.threshold);
        overview->setData(scores, result.mask, result.threshold);
        summary->setText(
            QStringLiteral("Removes %1 attention units and %2 MLP channels: %3% of the attention and "
                           "MLP parameters (%4% of the model).")
                .arg(QLocale().toString(qlonglong(result.removedHeads)))
                .arg(QLocale().toString(qlonglong(result.removedChannels)))
                .arg(100 * npw::achievedRatio(result.mask, costs), 0, 'f', 1)
                .arg(100 * npw::achievedRatioModel(result.mask, costs, model.config.parameterCount()), 0, 'f', 1));
    };
    QObject::connect(controls, &SparsityControls::settingsChanged, &window, reselect);
    controls->setDefaultAlpha(npw::defaultAlpha(model.config));
    controls->resetAlpha();
    controls->setAlphaMode(npw::AlphaMode::Budget);
    controls->setRho(0.3);
    reselect(controls->rho(), controls->alpha(), controls->alphaMode(), controls->lambda());
    selection->setCurrentLayer(parser.value(layer).toInt());

    sweep->setDenseBaseline(kSyntheticDensePerplexity);
    for (const SyntheticSweepPoint& p : syntheticSweep())
        sweep->addPoint(QString::fromStdString(p.method), p.sparsity, p.meanPerplexity, p.stdPerplexity);

    window.resize(1560, 960);
    window.show();
    if (parser.isSet(screenshot)) {
        const QString file = parser.value(screenshot);
        // After the pending layout, settings and replot events have run.
        QTimer::singleShot(500, &window, [&window, file] {
            const bool saved = window.grab().save(file);
            std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(file));
            QApplication::exit(saved ? 0 : 1);
        });
    }
    return QApplication::exec();
}
