#pragma once
// What the studio session suites share (tests/tst_studio_session.cpp, tst_studio_hostile.cpp):
// a small calibration, waiting for the job runner, and demo:lm opened and scored.
#include "app/studio/jobrunner.h"
#include "app/studio/studiosession.h"

#include <QElapsedTimer>
#include <QtTest>

namespace studio_test {

constexpr int kJobTimeoutMs = 180000;

// A calibration small enough for a test (seconds), large enough for a non-singular G.
inline studio::RunSettings smallSettings(npw::PruneMethod method = npw::PruneMethod::Numerical) {
    studio::RunSettings s;
    s.calibration.samples = 16;
    s.calibration.seqlen = 64;
    s.prune.method = method;
    return s;
}

inline bool waitIdle(StudioSession& session) {
    QElapsedTimer clock;
    clock.start();
    while (session.jobs()->isRunning() && clock.elapsed() < kJobTimeoutMs) QTest::qWait(20);
    return !session.jobs()->isRunning();
}

// A session with demo:lm open and scored (numerical) on the small calibration.
inline void openAndScore(StudioSession& session, npw::PruneMethod method = npw::PruneMethod::Numerical) {
    if (!session.hasModel()) {
        QVERIFY(session.openModel(QStringLiteral("demo:lm")));
        QVERIFY(waitIdle(session));
        QVERIFY(session.hasModel());
    }
    studio::RunSettings s = session.settings();
    s.calibration = smallSettings().calibration;
    // A copy of a demo model is a model of one's own: it has no calibration text of its own.
    if (!session.modelDefaults().demo) s.calibration.source = studio::defaultCalibrationSource();
    s.prune.method = method;
    session.setSettings(s);
    QVERIFY(session.runScoring());
    QVERIFY(waitIdle(session));
}

} // namespace studio_test
