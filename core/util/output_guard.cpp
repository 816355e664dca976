#include "core/util/output_guard.h"
#include "core/util/error.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

namespace fs = std::filesystem;

namespace npw {

namespace {

// The names npw's loaders read from a model directory (and its vq/ part): writing one of
// them, even where it is absent, changes what the model is.
bool isModelFileName(const std::string& name) {
    for (const char* reserved : {"config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json",
                                 "tokenizer.model", "tokenizer.bin", "npw-manifest.json"})
        if (name == reserved) return true;
    return false;
}

// Whether two existing paths are one file (st_dev and st_ino: a symlink or a hard link).
bool sameFile(const fs::path& a, const fs::path& b) {
    std::error_code ec;
    return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
}

} // namespace

fs::path normalisedPath(const std::string& path) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
    if (ec) p = fs::absolute(path).lexically_normal();
    // "dir/" and "dir" are one place.
    return p.has_filename() ? p : p.parent_path();
}

bool isWithin(const fs::path& inner, const fs::path& outer) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end(); ++o, ++i) {
        if (o->empty() && std::next(o) == outer.end()) break;  // "dir/" ends in an empty element
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

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

OutputGuard::OutputGuard(const OutputGuard& other) {
    std::lock_guard<std::mutex> lock(other.mutex_);
    inputs_ = other.inputs_;
    outputs_ = other.outputs_;
}

OutputGuard& OutputGuard::operator=(const OutputGuard& other) {
    if (this == &other) return *this;
    std::scoped_lock lock(mutex_, other.mutex_);
    inputs_ = other.inputs_;
    outputs_ = other.outputs_;
    return *this;
}

void OutputGuard::addInput(const std::string& path, const std::string& what) { add({path, what, false}); }

void OutputGuard::addModel(const std::string& path, const std::string& what) { add({path, what, true}); }

void OutputGuard::add(const Entry& input) {
    if (input.path.empty()) return;
    std::vector<Entry> outputs;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        inputs_.push_back(input);
        outputs = outputs_;
    }
    // An input known only now (a model resolved after loading) against the outputs claimed.
    for (const Entry& output : outputs) checkAgainst(input, output.path, output.what);
}

void OutputGuard::addInputSpec(const std::string& value, const std::string& what) {
    if (value.empty()) return;
    std::vector<std::string> candidates = {value};
    size_t start = 0;
    while (start <= value.size()) {
        const size_t comma = std::min(value.find(',', start), value.size());
        const std::string item = value.substr(start, comma - start);
        if (!item.empty()) {
            candidates.push_back(item);
            if (const size_t colon = item.find(':'); colon != std::string::npos) candidates.push_back(item.substr(colon + 1));
        }
        start = comma + 1;
    }
    std::error_code ec;
    for (const std::string& c : candidates)
        if (!c.empty() && fs::exists(fs::symlink_status(c, ec))) addInput(c, what);
}

bool OutputGuard::empty() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return inputs_.empty() && outputs_.empty();
}

std::vector<std::string> OutputGuard::describeInputs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const Entry& e : inputs_) out.push_back(e.what + " '" + e.path + "'");
    return out;
}

void OutputGuard::check(const std::string& output, const std::string& what) const {
    if (output.empty()) return;
    std::vector<Entry> inputs;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        inputs = inputs_;
    }
    for (const Entry& input : inputs) checkAgainst(input, output, what);
}

void OutputGuard::checkAgainst(const Entry& input, const std::string& output, const std::string& what) {
    const fs::path out = normalisedPath(output);
    const fs::path in = normalisedPath(input.path);
    std::error_code ec;
    const auto refuse = [&](const std::string& relation) {
        throw Error("refusing to write " + what + " '" + output + "': it " + relation + " " + input.what + " '" + input.path +
                    "', an input of this run (an input is never overwritten or replaced; choose another path)");
    };
    if (input.model) checkOutputPath({input.path}, output, what);
    if (out == in || sameFile(out, in)) refuse("is");
    // A folder that holds an input: replacing it (an export) or writing into it would lose it.
    if (isWithin(in, out)) refuse("holds");
    if (fs::is_directory(in, ec) && isWithin(out, in) && fs::exists(fs::symlink_status(out, ec))) refuse("is a file of");
}

void OutputGuard::claim(const std::string& output, const std::string& what) {
    if (output.empty()) return;
    check(output, what);
    std::lock_guard<std::mutex> lock(mutex_);
    const fs::path out = normalisedPath(output);
    for (const Entry& earlier : outputs_) {
        const fs::path other = normalisedPath(earlier.path);
        if (out == other || sameFile(out, other) || isWithin(out, other) || isWithin(other, out))
            throw Error("refusing to write " + what + " '" + output + "': " + earlier.what + " '" + earlier.path +
                        "' is written by this run too, and one would " +
                        (out == other || sameFile(out, other) ? std::string("overwrite") : std::string("hold or replace")) +
                        " the other; choose another path");
    }
    outputs_.push_back({output, what, false});
}

OutputGuard& runOutputGuard() {
    static OutputGuard guard;
    return guard;
}

} // namespace npw
