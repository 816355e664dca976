#pragma once
// The Qt adapter of core's progress/cancel callbacks (core/util/progress.h): runs one long job
// at a time on a pool thread, turns its ProgressFn calls into queued signals, and asks it to
// stop through the callback's return value (core then throws npw::Cancelled at a consistent
// point, so what the job had not finished is simply never delivered). The job's result comes
// back by value to a continuation on the GUI thread; nothing mutable is shared. Results a job
// has before it ends (a sweep's rows, an image sweep's rows, a continuation's tokens) travel one
// typed channel: the job's PartialResults<P> sink, whose values arrive in order, queued, on the
// GUI thread (as KDAB Hotspot's xxxAvailable signals), before the job's end is announced.
#include "core/util/progress.h"

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>

// Time left at the rate seen since the current stretch of progress began: (1 − f)·Δt / Δf.
// A stretch begins when the fraction falls (core's stages each count from 0: calibrate, then
// score); a sweep's fraction grows across its sub-stages, so its estimate runs on. Says nothing
// (NaN) until the stretch has run long enough to tell (2% of the work and half a second).
class EtaEstimator {
public:
    void restart();
    // The fraction done (0…1) at `elapsedSeconds`.
    void update(double fraction, double elapsedSeconds);
    double secondsLeft() const { return secondsLeft_; }  // NaN when unknown
    // "about 2 min left", "12 s left", "" when unknown.
    static QString describe(double secondsLeft);

private:
    double startFraction_ = 0, startSeconds_ = 0, lastFraction_ = -1;
    double secondsLeft_ = 0;
};

// Lowers the calling (worker) thread's scheduling priority (Linux: nice +10 for this thread
// only), so that the GUI thread wins the cores when both want them: on a small machine a
// redraw then waits less behind LibTorch. Threads the worker starts inherit it. No-op elsewhere.
void yieldToTheGuiThread();

// The worker's end of a job's typed channel: emitPartial(value) from the job's thread; the value
// reaches the GUI thread by value (copied, never shared). A default-constructed sink drops what
// it is given (a job run outside a JobRunner: tests, the CLI).
template <class P>
class PartialResults {
public:
    PartialResults() = default;
    explicit PartialResults(std::function<void(P)> post) : post_(std::move(post)) {}
    void emitPartial(P value) const {
        if (post_) post_(std::move(value));
    }
    // As core's callbacks take it (runSweep's onRow, runImageSweep's onRow, a token callback).
    std::function<void(const P&)> callback() const {
        return [post = post_](const P& value) {
            if (post) post(value);
        };
    }

private:
    std::function<void(P)> post_;
};

class JobRunner : public QObject {
    Q_OBJECT
public:
    explicit JobRunner(QObject* parent = nullptr);
    ~JobRunner() override;  // asks a running job to stop and waits for it

    bool isRunning() const { return running_; }
    QString currentJob() const { return title_; }

    // Starts `work` (on a pool thread) unless a job runs already (returns false). `work` gets
    // the ProgressFn to pass to core; its result goes to `done` on this object's thread. A
    // job that throws npw::Cancelled ends with `cancelled`, any other exception with `failed`.
    template <class T>
    bool start(const QString& title, std::function<T(const npw::ProgressFn&)> work, std::function<void(T)> done) {
        if (running_) return false;
        auto watcher = new QFutureWatcher<std::optional<T>>(this);
        const auto state = begin(title);
        connect(watcher, &QFutureWatcher<std::optional<T>>::finished, this, [this, watcher, state, done] {
            std::optional<T> result = watcher->result();
            watcher->deleteLater();
            release(state);  // first: `done` may start the next job
            if (result && state->error.isEmpty() && !state->cancelled) {
                try {
                    done(std::move(*result));
                } catch (const std::exception& e) {  // applying the result failed: say so, once
                    state->error = QString::fromUtf8(e.what());
                }
            }
            announceEnd(state);
        });
        watcher->setFuture(QtConcurrent::run([work, state, progress = progressFn(state)]() -> std::optional<T> {
            yieldToTheGuiThread();
            try {
                return work(progress);
            } catch (...) {
                catchInto(*state);
                return std::nullopt;
            }
        }));
        return true;
    }

    // The same with a typed channel for partial results: `work` also gets a PartialResults<P>;
    // each value it emits reaches `partial` on this object's thread, queued, in the order
    // emitted, before `done` (or `cancelled`/`failed`). Values emitted before a cancel or a
    // failure are still delivered: they were complete when emitted (a sweep's finished rows).
    // `partial` may emit the caller's typed signal (e.g. sweepRowAvailable) and keep the value.
    template <class T, class P>
    bool startWithPartials(const QString& title,
                           std::function<T(const npw::ProgressFn&, const PartialResults<P>&)> work,
                           std::function<void(P)> partial, std::function<void(T)> done) {
        if (running_) return false;
        // The sink posts to this object: a runner destroyed meanwhile drops the events with it
        // (and its destructor waits for the worker first).
        PartialResults<P> sink([this, partial](P value) {
            QMetaObject::invokeMethod(
                this, [partial, value = std::move(value)]() mutable { partial(std::move(value)); },
                Qt::QueuedConnection);
        });
        return start<T>(
            title, [work = std::move(work), sink](const npw::ProgressFn& progress) { return work(progress, sink); },
            std::move(done));
    }

public slots:
    // Asks the running job to stop at its next progress report (prompt: core reports per
    // batch, per layer or per window). No effect when idle.
    void cancel();

signals:
    void started(const QString& title);
    // Stage as core names it, the fraction done (0…1, NaN when unknown) and the estimated
    // seconds left (NaN when unknown). Sent at most every 50 ms.
    void progressed(const QString& stage, double fraction, double secondsLeft);
    void finished(const QString& title, double seconds);  // the result was delivered
    void cancelled(const QString& title);
    void failed(const QString& title, const QString& message);
    void runningChanged(bool running);

private:
    struct State {
        std::atomic<bool> stop{false};
        std::atomic<qint64> lastReportMs{-1000};
        QElapsedTimer clock;
        QString title, error;  // error: written by the worker before it returns, read after
        bool cancelled = false;
    };
    std::shared_ptr<State> begin(const QString& title);
    void release(const std::shared_ptr<State>& state);
    void announceEnd(const std::shared_ptr<State>& state);
    npw::ProgressFn progressFn(const std::shared_ptr<State>& state);
    static void catchInto(State& state);  // records the exception in flight
    void onProgress(const QString& stage, double done, double total);

    bool running_ = false;
    QString title_;
    std::shared_ptr<State> state_;
    EtaEstimator eta_;
};
