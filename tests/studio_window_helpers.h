#pragma once
// What the suites that drive the whole studio window share (tst_studio_layout, tst_studio_manual):
// the folder their screenshots go to, and a shown window that reads and writes no user's settings.
#include "app/studio/studiowindow.h"

#include <QDir>
#include <QtTest>

namespace studio_test {

// $NPW_STUDIO_SHOTS, made if missing: the suites save what they looked at there (empty: no shots).
inline QString screenshotFolder() {
    QString folder = qEnvironmentVariable("NPW_STUDIO_SHOTS");
    if (!folder.isEmpty()) QDir().mkpath(folder);
    return folder;
}

// A StudioWindow shown and exposed; null when the platform never exposed it.
inline StudioWindow* shownStudioWindow() {
    auto* window = new StudioWindow(/*persistSettings=*/false);
    window->show();
    if (QTest::qWaitForWindowExposed(window)) return window;
    delete window;
    return nullptr;
}

} // namespace studio_test
