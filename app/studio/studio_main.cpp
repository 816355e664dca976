// npw-studio: the interactive workbench (studiowindow.h).
//
//   npw-studio [MODEL | WORKSPACE.npw.json] [--screenshot FILE]
//   npw-studio --demo scores|sweep|images|box|text|baselines|blocks|sliced [--screenshot FILE] [--measure-stalls] [--dark]
//              [--calib-samples N] [--calib-seqlen L] [MODEL]
#include "app/studio/demoscript.h"
#include "app/studio/studiowindow.h"
#include "core/util/library_environment.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QImage>
#include <QStyleFactory>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

namespace {

// The last line of defence of "the studio never crashes": an exception that escapes a slot or
// an event handler (Qt does not support exceptions through its event loop; uncaught, it ends
// the process) is reported in the window's log and error dialog instead. Every known path
// catches its own errors first and names the file; this only catches what slipped through.
class StudioApplication : public QApplication {
public:
    using QApplication::QApplication;
    std::function<void(const QString&)> onError;

    bool notify(QObject* receiver, QEvent* event) override {
        try {
            return QApplication::notify(receiver, event);
        } catch (const std::exception& e) {
            report(QString::fromUtf8(e.what()));
        } catch (...) {
            report(QStringLiteral("unknown error"));
        }
        return false;
    }

private:
    void report(const QString& message) {
        std::fprintf(stderr, "npw-studio: error: %s\n", qPrintable(message));
        if (onError) onError(message);
    }
};

} // namespace

int main(int argc, char** argv) {
    // The GUI thread and the worker share the cores with LibTorch's pool: idle pool threads
    // must sleep, not spin; and OpenBLAS must run the kernels this CPU has
    // (core/util/library_environment.h). Before Qt starts anything.
    npw::restartWithLibraryEnvironment(argv);
    // LibTorch's pool has as many threads as the CLI's (core's chooseRuntime: every core, or
    // NPW_NUM_THREADS), so that the studio and `npw` time and compute alike. The GUI stays
    // responsive because the job runner's threads, and the pool threads they start, run at a lower
    // priority (jobrunner.h); measured on 2 cores, the images demo's longest stall was 119 ms with
    // two compute threads against 73 ms with one.
    StudioApplication app(argc, argv);
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
                                  QStringLiteral("Drive a bundled demo to STATE (scores, sweep, images, box, text, baselines, blocks, sliced), computed live; with MODEL, the language states run on it instead of demo:lm."),
                                  QStringLiteral("STATE"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                        QStringLiteral("Save the window (with an error dialog, if one is open) to FILE "
                                                       "(PNG) and quit: after --demo, or once MODEL or WORKSPACE has "
                                                       "opened or failed to (exit 1 then)."),
                                        QStringLiteral("FILE"));
    const QCommandLineOption stalls(QStringLiteral("measure-stalls"),
                                    QStringLiteral("With --demo: print the longest event-loop stall of the run."));
    const QCommandLineOption dark(QStringLiteral("dark"), QStringLiteral("Use the dark palette."));
    const QCommandLineOption calibSamples(QStringLiteral("calib-samples"),
                                          QStringLiteral("With --demo: calibrate on N windows (default: the Run settings')."),
                                          QStringLiteral("N"));
    const QCommandLineOption calibSeqlen(QStringLiteral("calib-seqlen"),
                                         QStringLiteral("With --demo: calibration windows of L tokens (default: the Run settings')."),
                                         QStringLiteral("L"));
    parser.addOptions({demo, screenshot, stalls, dark, calibSamples, calibSeqlen});
    parser.process(app);

    for (const QCommandLineOption* size : {&calibSamples, &calibSeqlen}) {
        bool ok = false;
        if (parser.isSet(*size) && (parser.value(*size).toLongLong(&ok) <= 0 || !ok)) {
            std::fprintf(stderr, "npw-studio: --%s must be a positive whole number, got '%s'\n",
                         qPrintable(size->names().first()), qPrintable(parser.value(*size)));
            return 2;
        }
    }
    const bool scripted = parser.isSet(demo);
    if (scripted && !DemoScript::isKnownState(parser.value(demo))) {
        std::fprintf(stderr, "npw-studio: --demo must be scores, sweep, images, box, text, baselines, blocks or sliced, got '%s'\n", qPrintable(parser.value(demo)));
        return 2;
    }
    const bool shot = parser.isSet(screenshot);
    StudioWindow window(/*persistSettings=*/!scripted && !shot);
    app.onError = [&window](const QString& message) { window.showError(QObject::tr("An action"), message); };
    if (parser.isSet(dark)) window.setDark(true);
    if (shot || scripted) {
        // A scripted or screenshot run has no one at the window: its log goes to stderr too, with
        // the seconds since start (how long opening a large model took to show its architecture).
        auto clock = std::make_shared<QElapsedTimer>();
        clock->start();
        QObject::connect(window.session(), &StudioSession::logMessage, &window, [clock](const QString& line) {
            std::fprintf(stderr, "[%7.1f s] %s\n", static_cast<double>(clock->elapsed()) / 1000.0, qPrintable(line));
        });
        // The progress bar's stage, fraction and estimate: when the stage changes, else every 30 s.
        auto last = std::make_shared<std::pair<QString, qint64>>();
        QObject::connect(window.session()->jobs(), &JobRunner::progressed, &window,
                         [clock, last](const QString& stage, double fraction, double secondsLeft) {
                             const qint64 now = clock->elapsed();
                             if (stage == last->first && now - last->second < 30000) return;
                             *last = {stage, now};
                             const QString left = fraction >= 1.0 ? QStringLiteral("done")
                                                  : std::isfinite(secondsLeft)
                                                      ? QStringLiteral("about %1 s left").arg(secondsLeft, 0, 'f', 0)
                                                      : QStringLiteral("estimating the time left");
                             std::fprintf(stderr, "[%7.1f s] progress: %s %.1f %%, %s\n",
                                          static_cast<double>(now) / 1000.0, qPrintable(stage), 100.0 * fraction,
                                          qPrintable(left));
                         });
    }
    window.show();

    if (scripted) {
        // A MODEL beside --demo: the language states run on it instead of demo:lm.
        const QString model = parser.positionalArguments().isEmpty() ? QString() : parser.positionalArguments().first();
        auto* script =
            new DemoScript(&window, parser.value(demo), parser.value(screenshot), parser.isSet(stalls), model);
        script->setCalibrationSize(parser.value(calibSamples).toLongLong(), parser.value(calibSeqlen).toLongLong());
        QObject::connect(script, &DemoScript::done, &app, [](int code) { QApplication::exit(code); });
        QTimer::singleShot(0, script, &DemoScript::start);
    } else if (!parser.positionalArguments().isEmpty()) {
        const QString target = parser.positionalArguments().first();
        if (shot) {
            // Once the opening job has ended (a moment for the views, and an error dialog, to draw).
            auto failed = std::make_shared<bool>(false);
            JobRunner* jobs = window.session()->jobs();
            QObject::connect(jobs, &JobRunner::failed, &window, [failed] { *failed = true; });
            QObject::connect(jobs, &JobRunner::runningChanged, &window, [&window, failed, jobs, file = parser.value(screenshot)](bool running) {
                if (running) return;
                QTimer::singleShot(1000, &window, [&window, failed, jobs, file] {
                    if (jobs->isRunning()) return;  // a workspace's next job: its own end comes
                    const bool saved = window.grabWithDialogs().save(file);
                    std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(file));
                    QApplication::exit(!saved || *failed ? 1 : 0);
                });
            });
        }
        if (shot) {
            // A large model shows its architecture long before its weights are checked: that
            // moment too, as FILE with "-architecture" before the extension.
            QObject::connect(window.session(), &StudioSession::headersRead, &window, [&window, file = parser.value(screenshot)] {
                QTimer::singleShot(300, &window, [&window, file] {
                    QFileInfo info(file);
                    const QString early = info.dir().filePath(info.completeBaseName() + QStringLiteral("-architecture.") +
                                                              (info.suffix().isEmpty() ? QStringLiteral("png") : info.suffix()));
                    const bool saved = window.grabWithDialogs().save(early);
                    std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(early));
                });
            });
        }
        if (target.endsWith(QStringLiteral(".npw.json"))) window.session()->openWorkspace(target);
        else window.openModel(target);
    }
    return QApplication::exec();
}
