#include "core/eval/metrics_run.h"
#include "core/data/fashion_mnist.h"
#include "core/io/image_files.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace npw {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string hashText(const std::string& text) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

// What identifies an image set's content: a hash of the IDX file, or of the folder's file
// names, sizes and modification times (hashing every image would cost as much as reading it).
std::string imagesIdentity(const std::string& spec) {
    if (spec == "fashion-mnist-test" || spec == "fashion-mnist-train") {
        const std::string path = fashionMnistImagesPath(spec == "fashion-mnist-test" ? "test" : "train");
        return spec + "@" + fileFingerprint(path);
    }
    if (fs::is_directory(spec)) {
        std::string listing;
        for (const std::string& f : listImageFiles(spec))
            listing += f + ":" + std::to_string(fs::file_size(f)) + ":" +
                       std::to_string(fs::last_write_time(f).time_since_epoch().count()) + "\n";
        return "folder:" + fs::absolute(spec).lexically_normal().string() + "@" + hashText(listing);
    }
    return "idx@" + fileFingerprint(spec);
}

at::Tensor gaussianKernel(double sigma) {
    const int64_t radius = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(3 * sigma)));
    at::Tensor x = at::arange(-radius, radius + 1, at::kFloat);
    at::Tensor k = (-(x * x) / (2 * sigma * sigma)).exp();
    return k / k.sum();
}

} // namespace

ImageSource imageSourceFromSpec(const std::string& spec) {
    if (spec == "fashion-mnist-test" || spec == "fashion-mnist-train") {
        LabelledImages set = loadFashionMnist(spec == "fashion-mnist-test" ? "test" : "train");
        return imageSourceFromTensor(set.images, "Fashion-MNIST " + std::string(spec == "fashion-mnist-test" ? "test" : "train") +
                                                     " (" + std::to_string(set.images.size(0)) + " images)");
    }
    if (fs::is_directory(spec)) return imageSourceFromFolder(spec);
    if (!fs::exists(spec))
        throw Error("image set '" + spec +
                    "' is neither fashion-mnist-test/fashion-mnist-train, nor a folder of images, nor an IDX file");
    LabelledImages set = loadIdxImages(spec);
    return imageSourceFromTensor(set.images, "IDX file " + spec + " (" + std::to_string(set.images.size(0)) + " images)");
}

ImageSource limitImages(ImageSource source, int64_t n) {
    if (n <= 0 || n >= source.count) return source;
    source.description = "first " + std::to_string(n) + " of " + source.description;
    source.count = n;
    return source;
}

ImageSource degradeImages(ImageSource source, const std::string& how, uint64_t seed) {
    if (how.empty() || how == "none") return source;
    const auto colon = how.find(':');
    const std::string kind = how.substr(0, colon);
    double amount = 0;
    try {
        amount = colon == std::string::npos ? -1 : std::stod(how.substr(colon + 1));
    } catch (const std::exception&) {
        amount = -1;
    }
    if ((kind != "noise" && kind != "blur") || !(amount > 0))
        throw Error("unknown degradation '" + how + "' (expected noise:SIGMA or blur:SIGMA with SIGMA > 0)");
    auto read = source.read;
    source.description = kind + " " + how.substr(colon + 1) + " on " + source.description;
    if (kind == "noise") {
        source.read = [read, amount, seed](int64_t begin, int64_t n) {
            at::Tensor x = read(begin, n).to(at::kFloat).clone();
            for (int64_t i = 0; i < n; ++i) {
                at::Generator gen = at::detail::createCPUGenerator(seed * 1000003ULL + uint64_t(begin + i));
                x[i].add_(at::randn(x[i].sizes(), gen) * amount);
            }
            return x.clamp_(0.0, 1.0);
        };
    } else {
        const at::Tensor k = gaussianKernel(amount);
        source.read = [read, k](int64_t begin, int64_t n) {
            at::Tensor x = read(begin, n).to(at::kFloat);
            const int64_t c = x.size(1), r = (k.size(0) - 1) / 2;
            at::Tensor kh = k.view({1, 1, 1, -1}).expand({c, 1, 1, k.size(0)}).contiguous();
            at::Tensor kv = k.view({1, 1, -1, 1}).expand({c, 1, k.size(0), 1}).contiguous();
            x = at::replication_pad2d(x, {r, r, r, r});
            const std::vector<int64_t> one{1, 1}, zero{0, 0};
            x = at::conv2d(x, kh, at::Tensor(), one, at::IntArrayRef(zero), one, c);
            x = at::conv2d(x, kv, at::Tensor(), one, at::IntArrayRef(zero), one, c);
            return x;
        };
    }
    return source;
}

std::string defaultCacheDir() {
    if (const char* env = std::getenv("NPW_CACHE_DIR"); env && *env) return env;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "npw").string();
    if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "npw").string();
    return (fs::temp_directory_path() / "npw-cache").string();
}

ResolvedReference resolveReference(const std::string& spec, FeatureNetwork& network, const std::string& cacheDir,
                                   int64_t batch, const ProgressFn& progress) {
    ResolvedReference r;
    if (endsWith(spec, ".safetensors")) {
        r.stats = loadReferenceStats(spec);
        const std::string made = r.stats.metadata.count("feature_network") ? r.stats.metadata["feature_network"] : "";
        if (made != network.identity())
            throw Error("reference statistics '" + spec + "' were made with feature network '" + made +
                        "', but this run uses '" + network.identity() +
                        "'; give the reference images instead (a folder or an IDX file) or the matching feature network");
        r.description = r.stats.metadata.count("images") ? r.stats.metadata["images"] : spec;
        r.cachePath = spec;
        r.fromCache = true;
        return r;
    }
    const std::string imagesId = imagesIdentity(spec);
    fs::path cacheFile;
    if (!cacheDir.empty()) {
        cacheFile = fs::path(cacheDir) / ("reference-" + hashText(network.identity() + "|" + imagesId) + ".safetensors");
        if (fs::exists(cacheFile)) {
            try {
                r.stats = loadReferenceStats(cacheFile.string());
                if (r.stats.metadata["feature_network"] == network.identity() &&
                    r.stats.metadata["images_id"] == imagesId) {
                    r.description = r.stats.metadata["images"];
                    r.cachePath = cacheFile.string();
                    r.fromCache = true;
                    return r;
                }
            } catch (const Error&) {
                // A damaged cache entry is recomputed and overwritten, never fatal.
            }
        }
    }
    ImageSource images = imageSourceFromSpec(spec);
    FeatureSet features = extractFeatures(network, images, batch, progress);
    r.stats = makeReferenceStats(features, {{"feature_network", network.identity()},
                                            {"images", images.description},
                                            {"images_id", imagesId},
                                            {"created_by", "npw metrics"}},
                                 3, progress);
    r.description = images.description;
    if (!cacheFile.empty()) {
        fs::create_directories(cacheFile.parent_path());
        saveReferenceStats(r.stats, cacheFile.string());
        r.cachePath = cacheFile.string();
    }
    return r;
}

} // namespace npw
