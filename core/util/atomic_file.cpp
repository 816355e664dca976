#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
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

void ensureNotOverwritingSource(const std::string& source, const std::string& out) {
    std::error_code ec;
    fs::path src = fs::weakly_canonical(fs::absolute(source), ec);
    fs::path dst = fs::weakly_canonical(fs::absolute(out), ec);
    if (src.empty() || dst.empty()) return;
    fs::path srcDir = fs::is_directory(src) ? src : src.parent_path();
    if (dst == src || dst == srcDir)
        throw Error("refusing to write '" + out + "': it is the source model '" + source +
                    "' (a source checkpoint is never overwritten; choose another output)");
}

std::string readTextFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace npw
