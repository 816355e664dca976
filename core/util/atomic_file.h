#pragma once
// Atomic writes: write to a temporary file beside the target, fsync, then rename.
// A reader never sees a half-written file, and a failed write leaves the old one intact.
//
// Temporaries are named ".TARGET.npw-KIND-PID-RANDOM" (KIND: tmp, staging, previous, stats) by
// the process PID that writes them. One killed mid-write (kill -9, power loss) cannot remove its
// own; the next write of the same target does (removeStaleTemporaries): only entries with exactly
// that form, for that target, whose PID is no longer alive.
#include "core/util/output_guard.h"

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace npw {

// Calls write(stream) on a temp file in the target's directory, then renames it over path.
// Throws npw::Error naming the path when anything fails; the temp file is removed. Checks the
// path against the run's inputs first (runOutputGuard, output_guard.h) and removes what an
// interrupted write of the same path left (removeStaleTemporaries).
void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void writeTextAtomically(const std::string& path, const std::string& text);

std::string readTextFile(const std::string& path);

// A fresh temporary path beside `target`: ".NAME.npw-KIND-PID-RANDOM" in its directory.
std::string temporaryPathBeside(const std::string& target, const std::string& kind);
// Removes, in `target`'s directory, the temporaries of `target` (and the temporaries of those)
// left by npw processes that are no longer running: files of kind tmp and stats, staging
// folders, and previous folders (a folder moved aside while an export replaced it: when the
// target itself is missing, the write was interrupted between its two renames, and the previous
// folder, a whole earlier export, is moved back instead). Anything not named exactly so, or
// of a live process, is left alone. Best effort: never throws.
void removeStaleTemporaries(const std::string& target);

// Removes the entries of `dir` named PREFIX + PID (decimal digits) + REST, where REST is empty or
// starts with '-' and ends with `suffix`, whose process PID no longer runs: the working files a
// benchmark killed with -9 could not remove (its own are removed when it ends). Anything else, or
// of a live process, is left alone. Best effort: never throws.
void removeWorkOfDeadProcesses(const std::string& dir, const std::string& prefix, const std::string& suffix = "");

// Test hook: when the environment variable NPW_TEST_STALL equals `point`, says so on stderr
// ("npw: stalled at POINT") and sleeps, so that a test can kill the process at exactly this
// moment of a write. A no-op otherwise.
void testStallPoint(const char* point);

} // namespace npw
