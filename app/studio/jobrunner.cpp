#include "app/studio/jobrunner.h"

#include <algorithm>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/util/error.h"

#include <QThreadPool>
#include <cmath>
#include <limits>

void EtaEstimator::restart() {
    lastFraction_ = -1;
    secondsLeft_ = std::numeric_limits<double>::quiet_NaN();
}

void EtaEstimator::update(double fraction, double elapsedSeconds) {
    secondsLeft_ = std::numeric_limits<double>::quiet_NaN();
    if (!std::isfinite(fraction)) return;
    if (fraction < lastFraction_ || lastFraction_ < 0) {
        startFraction_ = fraction;
        startSeconds_ = elapsedSeconds;
    }
    lastFraction_ = fraction;
    const double progressed = fraction - startFraction_, spent = elapsedSeconds - startSeconds_;
    if (progressed >= 0.02 && spent >= 0.5) secondsLeft_ = std::max(0.0, 1 - fraction) * spent / progressed;
}

QString EtaEstimator::describe(double secondsLeft) {
    if (!std::isfinite(secondsLeft)) return {};
    if (secondsLeft < 60) return QObject::tr("%1 s left").arg(std::max(1, int(std::lround(secondsLeft))));
    return QObject::tr("about %1 min left").arg(int(std::lround(secondsLeft / 60)));
}

JobRunner::JobRunner(QObject* parent) : QObject(parent) {}

JobRunner::~JobRunner() {
    cancel();
    // The job's continuation would touch this object: wait for the worker while it still exists.
    QThreadPool::globalInstance()->waitForDone();
}

void yieldToTheGuiThread() {
#ifdef __linux__
    // Per thread: on Linux nice applies to the task (thread) named by its id. Only lowered, once
    // per pool thread (an unprivileged thread cannot raise it back, and need not).
    thread_local bool lowered = false;
    if (lowered) return;
    lowered = true;
    const auto tid = static_cast<id_t>(syscall(SYS_gettid));
    const int current = getpriority(PRIO_PROCESS, tid);
    setpriority(PRIO_PROCESS, tid, std::min(current + 10, 19));
#endif
}

std::shared_ptr<JobRunner::State> JobRunner::begin(const QString& title) {
    state_ = std::make_shared<State>();
    state_->title = title;
    state_->clock.start();
    title_ = title;
    running_ = true;
    eta_.restart();
    emit started(title);
    emit runningChanged(true);
    return state_;
}

void JobRunner::release(const std::shared_ptr<State>& state) {
    if (state_ != state) return;
    running_ = false;
    title_.clear();
    state_.reset();
}

void JobRunner::announceEnd(const std::shared_ptr<State>& state) {
    const double seconds = static_cast<double>(state->clock.elapsed()) / 1000.0;
    if (state->cancelled) emit cancelled(state->title);
    else if (!state->error.isEmpty()) emit failed(state->title, state->error);
    else emit finished(state->title, seconds);
    if (!running_) emit runningChanged(false);
}

void JobRunner::cancel() {
    if (state_) state_->stop = true;
}

npw::ProgressFn JobRunner::progressFn(const std::shared_ptr<State>& state) {
    return [this, state](const npw::Progress& p) {
        // Throttled: core may report thousands of times a second; the GUI needs ~20.
        const qint64 now = state->clock.elapsed();
        if (now - state->lastReportMs.load() >= 50 || (p.total > 0 && p.done >= p.total)) {
            state->lastReportMs = now;
            QMetaObject::invokeMethod(
                this, [this, state, stage = QString::fromStdString(p.stage), done = p.done, total = p.total] {
                    if (state == state_) onProgress(stage, done, total);
                },
                Qt::QueuedConnection);
        }
        return !state->stop.load();
    };
}

void JobRunner::catchInto(State& state) {
    try {
        throw;
    } catch (const npw::Cancelled&) {
        state.cancelled = true;
    } catch (const std::exception& e) {
        state.error = QString::fromStdString(e.what());
        if (state.stop) state.cancelled = true;  // asked to stop, and it stopped by failing
    } catch (...) {
        state.error = QStringLiteral("unknown error");
    }
}

void JobRunner::onProgress(const QString& stage, double done, double total) {
    const double fraction = total > 0 ? done / total : std::numeric_limits<double>::quiet_NaN();
    eta_.update(fraction, static_cast<double>(state_->clock.elapsed()) / 1000.0);
    emit progressed(stage, fraction, eta_.secondsLeft());
}
