#pragma once
// Atomic writes: write to a temporary file beside the target, fsync, then rename.
// A reader never sees a half-written file, and a failed write leaves the old one intact.
#include <functional>
#include <iosfwd>
#include <string>

namespace npw {

// Calls write(stream) on a temp file in the target's directory, then renames it over path.
// Throws npw::Error naming the path when anything fails; the temp file is removed.
void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void writeTextAtomically(const std::string& path, const std::string& text);

// Refuses (npw::Error) when `out` is the same file or directory as `source`, or inside it:
// a source checkpoint is never overwritten.
void ensureNotOverwritingSource(const std::string& source, const std::string& out);

std::string readTextFile(const std::string& path);

} // namespace npw
