#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <random>
#include <sstream>
#include <fcntl.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace npw {

void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
    fs::path target(path);
    fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::random_device rd;
    fs::path tmp = dir / ("." + target.filename().string() + ".tmp" + std::to_string(rd() % 1000000));
    try {
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out) throw Error("cannot write '" + tmp.string() + "': " + std::strerror(errno));
            write(out);
            out.flush();
            if (!out) throw Error("writing '" + path + "' failed (disk full?)");
        }
        int fd = ::open(tmp.c_str(), O_RDONLY);
        if (fd >= 0) { ::fsync(fd); ::close(fd); }
        std::error_code ec;
        fs::rename(tmp, target, ec);
        if (ec) throw Error("cannot move '" + tmp.string() + "' to '" + path + "': " + ec.message());
    } catch (...) {
        std::error_code ec;
        fs::remove(tmp, ec);
        throw;
    }
}

void writeTextAtomically(const std::string& path, const std::string& text) {
    writeFileAtomically(path, [&](std::ostream& out) { out << text; });
}

namespace {

// Whether `inner` is `outer` or lies below it (both absolute and normalised).
bool isWithin(const fs::path& inner, const fs::path& outer) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end(); ++o, ++i) {
        if (o->empty() && std::next(o) == outer.end()) break;  // "dir/" ends in an empty element
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

// The names npw's loaders read from a model directory (and its vq/ part): writing one of
// them, even where it is absent, changes what the model is.
bool isModelFileName(const std::string& name) {
    for (const char* reserved : {"config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json",
                                 "tokenizer.model", "tokenizer.bin", "npw-manifest.json"})
        if (name == reserved) return true;
    return false;
}

fs::path normalisedPath(const std::string& path) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
    if (ec) p = fs::absolute(path).lexically_normal();
    // "dir/" and "dir" are one place.
    return p.has_filename() ? p : p.parent_path();
}

} // namespace

void checkOutputPath(const std::vector<std::string>& sources, const std::string& output, const std::string& what) {
    if (output.empty()) return;
    const fs::path out = normalisedPath(output);
    std::error_code ec;
    for (const std::string& source : sources) {
        if (source.empty()) continue;
        const fs::path src = normalisedPath(source);
        const bool sourceIsDirectory = fs::is_directory(src, ec);
        const auto refuse = [&](const std::string& relation) {
            throw Error("refusing to write " + what + " '" + output + "': it " + relation + " the source model '" + source +
                        "' (a source checkpoint is never overwritten or modified; choose another path)");
        };
        if (out == src || (fs::exists(out, ec) && fs::equivalent(out, src, ec))) refuse("is");
        // Inside a source directory, a new file is fine (a .gguf beside the weights), but not
        // one that exists there (it is the model's) or that a model directory is read from.
        if (sourceIsDirectory && isWithin(out, src) && (fs::exists(out, ec) || isModelFileName(out.filename().string())))
            refuse("is a file of");
        if (!sourceIsDirectory && out == src.parent_path()) refuse("is the directory of");
        // A hard link elsewhere to one of the model's files is that file too.
        if (sourceIsDirectory && fs::is_regular_file(out, ec)) {
            size_t seen = 0;
            for (auto it = fs::recursive_directory_iterator(src, ec); !ec && it != fs::recursive_directory_iterator() &&
                                                                      ++seen < 100000;
                 it.increment(ec))
                if (it->is_regular_file(ec) && fs::equivalent(it->path(), out, ec)) refuse("is a link to a file of");
        }
    }
}

void ensureNotOverwritingSource(const std::string& source, const std::string& out) {
    checkOutputPath({source}, out);
}

std::string readTextFile(const std::string& path) {
    return readRegularFile(path);  // a FIFO or a directory is refused, never waited on
}

} // namespace npw
