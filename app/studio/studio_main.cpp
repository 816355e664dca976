// npw-studio: the interactive workbench (studiowindow.h).
//
//   npw-studio [MODEL | WORKSPACE.npw.json]
//   npw-studio --demo scores|sweep|images|box [--screenshot FILE] [--measure-stalls] [--dark]
#include "app/studio/demoscript.h"
#include "app/studio/studiowindow.h"
#include "core/util/openmp_wait.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QStyleFactory>
#include <QTimer>
#include <algorithm>
#include <thread>

int main(int argc, char** argv) {
    // The GUI thread and the worker share the cores with LibTorch's pool: idle pool threads
    // must sleep, not spin (core/util/openmp_wait.h). Before Qt starts anything.
    npw::restartWithPassiveOpenMpWaits(argv);
    // One core stays with the window: LibTorch's pool gets the others (core's chooseRuntime
    // reads NPW_NUM_THREADS). Measured on 2 cores, the images demo: longest stall 73 ms with one
    // compute thread against 119 ms with two, and it finished sooner (31 s against 37 s).
    if (qEnvironmentVariableIsEmpty("NPW_NUM_THREADS")) {
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        qputenv("NPW_NUM_THREADS", QByteArray::number(std::max(1u, cores - 1)));
    }
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("npw"));
    QApplication::setApplicationName(QStringLiteral("npw-studio"));
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("npw-studio: explore structured pruning of transformers"));
    parser.addHelpOption();
    parser.addPositionalArgument(QStringLiteral("model"),
                                 QStringLiteral("A checkpoint, demo:lm, demo:lm-gqa, demo:c2i, or a workspace (.npw.json)."),
                                 QStringLiteral("[MODEL]"));
    const QCommandLineOption demo(QStringLiteral("demo"),
                                  QStringLiteral("Drive a bundled demo to STATE (scores, sweep, images, box), computed live."),
                                  QStringLiteral("STATE"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                        QStringLiteral("With --demo: save the window to FILE (PNG) and quit."),
                                        QStringLiteral("FILE"));
    const QCommandLineOption stalls(QStringLiteral("measure-stalls"),
                                    QStringLiteral("With --demo: print the longest event-loop stall of the run."));
    const QCommandLineOption dark(QStringLiteral("dark"), QStringLiteral("Use the dark palette."));
    parser.addOptions({demo, screenshot, stalls, dark});
    parser.process(app);

    const bool scripted = parser.isSet(demo);
    if (scripted && !DemoScript::isKnownState(parser.value(demo))) {
        std::fprintf(stderr, "npw-studio: --demo must be scores, sweep, images or box, got '%s'\n", qPrintable(parser.value(demo)));
        return 2;
    }
    StudioWindow window(/*persistSettings=*/!scripted);
    if (parser.isSet(dark)) window.setDark(true);
    window.show();

    if (scripted) {
        auto* script = new DemoScript(&window, parser.value(demo), parser.value(screenshot), parser.isSet(stalls));
        QObject::connect(script, &DemoScript::done, &app, [](int code) { QApplication::exit(code); });
        QTimer::singleShot(0, script, &DemoScript::start);
    } else if (!parser.positionalArguments().isEmpty()) {
        const QString target = parser.positionalArguments().first();
        if (target.endsWith(QStringLiteral(".npw.json"))) window.session()->openWorkspace(target);
        else window.openModel(target);
    }
    return QApplication::exec();
}
