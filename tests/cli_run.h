#pragma once
// Running the npw command from a CLI test suite: one process with its exit code and both
// streams, and a process killed with SIGKILL where it stalls on purpose (NPW_TEST_STALL, as a
// crash or kill -9 would end it). QVERIFY/QFAIL inside killCliAt report into the calling test.
#include <nlohmann/json.hpp>

#include <QElapsedTimer>
#include <QProcess>
#include <QtTest>

namespace npw::test {

struct CliRun {
    int rc = -1;  // -1: the process did not exit normally (crashed, killed, or still running after 10 minutes)
    QString out, err;
    nlohmann::json json() const { return nlohmann::json::parse(out.toStdString()); }
};

inline CliRun runCli(const QString& npw, const QStringList& args,
                     const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(npw, args);
    p.waitForFinished(600000);
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

// The test's environment with the machine size npw sees pretended (NPW_PHYSICAL_MEMORY_BYTES),
// or with any pretence removed when `physicalBytes` is empty.
inline QProcessEnvironment withPhysicalMemory(const QString& physicalBytes) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("NPW_PHYSICAL_MEMORY_BYTES");
    if (!physicalBytes.isEmpty()) env.insert("NPW_PHYSICAL_MEMORY_BYTES", physicalBytes);
    return env;
}

// Starts npw with NPW_TEST_STALL=point, waits until it says it stopped there, then kills it.
inline void killCliAt(const QString& npw, const QStringList& args, const QString& point,
                      QProcessEnvironment env = QProcessEnvironment::systemEnvironment()) {
    env.insert("NPW_TEST_STALL", point);
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(npw, args);
    QVERIFY(p.waitForStarted());
    QByteArray err;
    QElapsedTimer clock;
    clock.start();
    while (!err.contains("npw: stalled at " + point.toUtf8()) && clock.elapsed() < 300000) {
        if (p.state() == QProcess::NotRunning) QFAIL(qPrintable("npw ended before " + point + ": " + err));
        p.waitForReadyRead(200);
        err += p.readAllStandardError();
    }
    QVERIFY2(err.contains("npw: stalled at " + point.toUtf8()), err.constData());
    p.kill();
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitStatus(), QProcess::CrashExit);
}

} // namespace npw::test
