#pragma once
// What a run may write: never one of its inputs. An OutputGuard holds every path a run reads
// (the model, calibration and evaluation text, tokenizer, statistics, task files, ...) and
// refuses an output that would overwrite or replace one of them, or that collides with another
// output of the same run. The command line builds one per command from its table of flags
// (app/npw/flag_table.h declares which flags read and which write) and installs it as the
// process's guard (runOutputGuard), which every atomic writer of core consults before it writes
// (writeFileAtomically, the safetensors stream writer, writeExportDirectory): a writer cannot
// forget an input. The studio builds one per session from what the session has loaded.
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace npw {

class OutputGuard {
public:
    OutputGuard() = default;
    OutputGuard(const OutputGuard& other);
    OutputGuard& operator=(const OutputGuard& other);

    // A file or folder the run reads; `what` names it in messages ("--calib", "--eval").
    // Empty paths are ignored. The outputs claimed already are checked against it at once (a
    // model known only once loaded), so adding may throw as claim does.
    void addInput(const std::string& path, const std::string& what);
    // A model (file or folder): as checkOutputPath guards a source model, its folder's files
    // and the names a model folder is read from are off limits too.
    void addModel(const std::string& path, const std::string& what = "the source model");
    // A flag's value that names files inside a spec: "FILE", "NAME:FILE", "text:A,ids:B",
    // "task:FILE,…". Every candidate (the whole value, each comma-separated item, each item's part
    // after its first ':') that exists on disk is an input.
    void addInputSpec(const std::string& value, const std::string& what);

    // Refuses (npw::Error naming `what`, the output and the input) an output that is an input
    // (also through a symlink or a hard link: same device and inode), that holds one (a folder
    // an input lies in: replacing it would delete the input), that is an existing file inside an
    // input folder, or anything checkOutputPath refuses for a model.
    void check(const std::string& output, const std::string& what) const;
    // check, then also refuses an output that is, holds or lies in an output claimed before,
    // and remembers this one. The CLI claims every output flag before a command runs.
    void claim(const std::string& output, const std::string& what);

    bool empty() const;
    // The inputs as "what 'path'" lines, for tests and messages.
    std::vector<std::string> describeInputs() const;

private:
    struct Entry {
        std::string path, what;
        bool model = false;
    };
    void add(const Entry& input);
    static void checkAgainst(const Entry& input, const std::string& output, const std::string& what);
    std::vector<Entry> inputs_, outputs_;
    mutable std::mutex mutex_;
};

// The guard of this process's run: empty until the command line fills it (the studio keeps
// one per session instead). Every atomic writer checks its path against it.
OutputGuard& runOutputGuard();

// The one "is this a file of a source model?" check, for every path npw writes. Refuses
// (npw::Error naming the output and the source) when `output` is one of `sources` (also
// through a symlink or a hard link), the directory of a source file, or lies inside a source
// directory: a source checkpoint is never overwritten or modified. `what` names the output
// in the message ("--save-scores", "the export"). Empty sources are skipped.
void checkOutputPath(const std::vector<std::string>& sources, const std::string& output,
                     const std::string& what = "the output");
// checkOutputPath({source}, out).
void ensureNotOverwritingSource(const std::string& source, const std::string& out);

// The two halves of every path comparison above and of the export's (checkExportTarget): one
// rule, so that no check can be fooled where another is not.
// A path as the checks compare it: absolute; the symlinks of the part that exists resolved (a
// link to a source folder is that folder); "." and ".." folded, also in the part that does not
// exist yet ("new/../model/x" is "model/x"); no trailing separator ("dir/" is "dir").
std::filesystem::path normalisedPath(const std::string& path);
// Whether `inner` is `outer` or lies below it, element by element ("/a/bc" is not below "/a/b");
// both as normalisedPath gives them.
bool isWithin(const std::filesystem::path& inner, const std::filesystem::path& outer);

} // namespace npw
