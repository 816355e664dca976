#pragma once
// Atomic writes: write to a temporary file beside the target, fsync, then rename.
// A reader never sees a half-written file, and a failed write leaves the old one intact.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace npw {

// Calls write(stream) on a temp file in the target's directory, then renames it over path.
// Throws npw::Error naming the path when anything fails; the temp file is removed.
void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void writeTextAtomically(const std::string& path, const std::string& text);

// The one "is this a file of a source model?" check, for every path npw writes. Refuses
// (npw::Error naming the output and the source) when `output` is one of `sources` (also
// through a symlink or a hard link), the directory of a source file, or lies inside a source
// directory: a source checkpoint is never overwritten or modified. `what` names the output
// in the message ("--save-scores", "the export"). Empty sources are skipped.
void checkOutputPath(const std::vector<std::string>& sources, const std::string& output,
                     const std::string& what = "the output");
// checkOutputPath({source}, out).
void ensureNotOverwritingSource(const std::string& source, const std::string& out);

std::string readTextFile(const std::string& path);

} // namespace npw
