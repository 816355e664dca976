#pragma once
// Reading an export's npw-manifest.json (written by core/prune/export.cpp, baselines.cpp,
// slicegpt.cpp and image_workbench.cpp): the fields other commands show of a pruned model, e.g.
// `npw compare`'s label "pruned (flap ρ=0.30)". The manifest is a file in a folder the user
// can edit: it is parsed with the bounded parser (depth, numbers) and its fields checked.
#include <string>
#include <string_view>

namespace npw {

struct ExportManifestSummary {
    std::string method;  // "numerical", "flap", "slicegpt", ...
    double ratio = 0;    // the requested pruning ratio, in [0, 1]
};

// Throws npw::Error naming `source` and the field for text that is not JSON (or nests past the
// parser's bound), not an object, or whose "method" is not a string or "ratio" not a number in
// [0, 1].
ExportManifestSummary parseExportManifestSummary(std::string_view text, const std::string& source);
// The same for the file at `path` (a regular file, read with readTextFile's bounds).
ExportManifestSummary readExportManifestSummary(const std::string& path);

} // namespace npw
