#pragma once
// A diagnostic of the GUI thread's responsiveness: a timer that should fire every few
// milliseconds records how late it was; the longest gap is the longest event-loop stall
// (time in which the window could not repaint or react). A measurement, not a test.
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

class StallMeter : public QObject {
    Q_OBJECT
public:
    explicit StallMeter(QObject* parent = nullptr, int intervalMs = 5);
    void start();
    void stop();
    // The longest time between two ticks, less the interval (ms); 0 before two ticks.
    double longestStallMs() const { return longest_; }
    double longestStallAtMs() const { return longestAt_; }  // when it ended, since start()
    qint64 ticks() const { return ticks_; }

private:
    void tick();
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 lastNs_ = -1;
    qint64 ticks_ = 0;
    int intervalMs_;
    double longest_ = 0;
    double longestAt_ = 0;
};
