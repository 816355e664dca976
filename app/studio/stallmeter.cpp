#include "app/studio/stallmeter.h"

#include <algorithm>

StallMeter::StallMeter(QObject* parent, int intervalMs) : QObject(parent), intervalMs_(intervalMs) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(intervalMs);
    connect(&timer_, &QTimer::timeout, this, &StallMeter::tick);
}

void StallMeter::start() {
    longest_ = 0;
    ticks_ = 0;
    lastNs_ = -1;
    clock_.start();
    timer_.start();
}

void StallMeter::stop() { timer_.stop(); }

void StallMeter::tick() {
    const qint64 now = clock_.nsecsElapsed();
    const double stall = lastNs_ >= 0 ? static_cast<double>(now - lastNs_) / 1e6 - intervalMs_ : 0;
    if (stall > longest_) {
        longest_ = stall;
        longestAt_ = static_cast<double>(now) / 1e6;
    }
    lastNs_ = now;
    ++ticks_;
}
