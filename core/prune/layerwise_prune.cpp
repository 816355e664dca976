// The bounded road of `npw prune` (layerwise_prune.h).
#include "core/prune/layerwise_prune.h"

#include "core/models/hf_streamed_resume.h"
#include "core/models/model_loader.h"
#include "core/models/parameter_count.h"
#include "core/prune/apply.h"
#include "core/prune/export.h"
#include "core/prune/score_journal.h"
#include "core/prune/units.h"
#include "core/util/error.h"
#include "core/io/safetensors.h"
#include "core/text/json_fields.h"
#include "core/util/atomic_file.h"
#include "core/util/content_hash.h"
#include "core/util/version.h"
#include "core/models/llama_config.h"
#include "core/util/number_text.h"
#include "core/util/system_memory.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <c10/core/InferenceMode.h>
#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace npw {

namespace fs = std::filesystem;

namespace {

int64_t siteWidth(const LlamaConfig& config, size_t l, bool attention) {
    return attention ? config.num_heads[l] * config.head_dim : config.intermediate_size[l];
}

int64_t packedCount(int64_t d) { return d * (d + 1) / 2; }

// Offset (in elements) of row i's diagonal entry in the row-major packed upper triangle.
int64_t packedRowStart(int64_t i, int64_t d) { return i * d - i * (i - 1) / 2; }

std::string sizeText(int64_t bytes) { return byteSizeText(bytes); }

// Bytes of the checkpoint's weights as stored (the scratch file's bound is measured against it).
int64_t storedWeightBytes(const LlamaCheckpoint& checkpoint) {
    LlamaWeights weights = checkpoint.weights;  // handles only
    int64_t bytes = 0;
    for (const auto& [name, tensor] : namedTensors(weights))
        if (tensor->defined()) bytes += tensor->numel() * static_cast<int64_t>(tensor->element_size());
    return bytes;
}

LlamaLayerWeights layerInFloat32(const LlamaLayerWeights& w) {
    auto f = [](const at::Tensor& t) { return t.defined() ? t.to(at::kFloat) : t; };
    LlamaLayerWeights out;
    out.attn_norm = f(w.attn_norm);
    out.wq = f(w.wq);
    out.wk = f(w.wk);
    out.wv = f(w.wv);
    out.wq_bias = f(w.wq_bias);
    out.wk_bias = f(w.wk_bias);
    out.wv_bias = f(w.wv_bias);
    out.q_norm = f(w.q_norm);
    out.k_norm = f(w.k_norm);
    out.wo = f(w.wo);
    out.wo_bias = f(w.wo_bias);
    out.ffn_norm = f(w.ffn_norm);
    out.w_gate = f(w.w_gate);
    out.w_up = f(w.w_up);
    out.w_down = f(w.w_down);
    out.w_down_bias = f(w.w_down_bias);
    return out;
}

// The shapes of a written layer, without its values (what the report counts).
LlamaLayerWeights shapesOnly(const LlamaLayerWeights& w) {
    auto f = [](const at::Tensor& t) {
        return t.defined() ? at::empty(t.sizes(), at::TensorOptions().device(at::kMeta).dtype(t.scalar_type())) : t;
    };
    LlamaLayerWeights out;
    for (auto [dst, src] : {std::pair{&out.attn_norm, &w.attn_norm}, {&out.wq, &w.wq}, {&out.wk, &w.wk}, {&out.wv, &w.wv},
                            {&out.wq_bias, &w.wq_bias}, {&out.wk_bias, &w.wk_bias}, {&out.wv_bias, &w.wv_bias},
                            {&out.q_norm, &w.q_norm}, {&out.k_norm, &w.k_norm}, {&out.wo, &w.wo},
                            {&out.wo_bias, &w.wo_bias}, {&out.ffn_norm, &w.ffn_norm}, {&out.w_gate, &w.w_gate},
                            {&out.w_up, &w.w_up}, {&out.w_down, &w.w_down}, {&out.w_down_bias, &w.w_down_bias}})
        *dst = f(*src);
    return out;
}

void preadAll(int fd, void* data, int64_t bytes, int64_t offset, const std::string& path) {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pread(fd, p, static_cast<size_t>(bytes), offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error("cannot read the statistics scratch file '" + path + "': " + (n < 0 ? std::strerror(errno) : "truncated"));
        p += n;
        bytes -= n;
        offset += n;
    }
}

void pwriteAll(int fd, const void* data, int64_t bytes, int64_t offset, const std::string& path) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pwrite(fd, p, static_cast<size_t>(bytes), offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error("cannot write the statistics scratch file '" + path + "': " + std::strerror(errno));
        p += n;
        bytes -= n;
        offset += n;
    }
}

// What the work folder's contents depend on (LayerwisePruneOptions): a folder written for
// anything else is not resumed from.
std::string workFingerprint(const LlamaModel& model, const CalibrationSet& set, at::ScalarType statsDtype,
                            const CalibrationOptions& options) {
    nlohmann::json j = checkpointFingerprint(model.checkpoint(), "npw-prune-work");
    uint64_t ids = kFnv64Offset;
    for (const std::vector<int32_t>& window : set.windows) ids = fnv1a64(window.data(), window.size() * sizeof(int32_t), ids);
    j["windows"] = {{"count", set.windows.size()}, {"seqlen", set.seqlen}, {"ids", contentHashText(ids)}};
    j["statistics_precision"] = statsDtype == at::kDouble ? "float64" : "float32";
    j["batch_tokens"] = options.batchTokens;
    j["batch_attention_bytes"] = options.batchAttentionBytes;
    const Runtime compute = options.blockRuntime.value_or(model.runtime());  // where the blocks run
    j["runtime"] = compute.device.str() + " " + c10::toString(compute.dtype);
    return j.dump(2) + "\n";
}

std::string sumsFile(const fs::path& work, size_t l) { return (work / ("layer-" + std::to_string(l) + ".sums.safetensors")).string(); }

void saveSums(const std::string& path, const LayerStats& attn, const LayerStats& mlp) {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const auto& [site, s] : {std::pair<const char*, const LayerStats*>{"attn", &attn}, {"mlp", &mlp}}) {
        if (s->channels() == 0) continue;
        tensors.emplace_back(std::string(site) + ".sum", s->sum.cpu());
        tensors.emplace_back(std::string(site) + ".sum_sq", s->sumSq.cpu());
        tensors.emplace_back(std::string(site) + ".tokens", at::full({1}, s->tokens, at::kLong));
    }
    writeSafeTensors(path, tensors, {{"format", "npw-prune-work-sums"}});
}

LayerStats loadSums(const SafeTensorsFile& file, const std::string& site) {
    LayerStats s;
    if (!file.has(site + ".sum")) return s;
    s.sum = file.load(site + ".sum").to(at::kDouble);
    s.sumSq = file.load(site + ".sum_sq").to(at::kDouble);
    s.tokens = file.load(site + ".tokens").to(at::kLong).reshape({-1})[0].item<int64_t>();
    return s;
}

// What the scores, the selection and the export depend on beyond the calibration: every setting
// (doubles in hexadecimal, exact) and the shard size. Score steps and shards recorded under other
// settings are not resumed from.
std::string settingsFingerprint(const PruneSettings& s, int64_t shardBytes) {
    const auto x = exactNumberText;
    nlohmann::json j = {{"method", static_cast<int>(s.method)}, {"ratio", x(s.ratio)}, {"alpha", x(s.alpha)},
                        {"alpha_mode", static_cast<int>(s.alphaMode)}, {"lambda", x(s.lambda)},
                        {"lambda_rel", x(s.lambdaRel)}, {"ranking", static_cast<int>(s.crossLayer)}, {"iters", s.iters},
                        {"box", s.boxConstrained}, {"z0", x(s.z0)}, {"damp", x(s.damp)},
                        {"compensation", static_cast<int>(s.compensation)}, {"scope", static_cast<int>(s.scope)},
                        {"protected", s.protectedLayers}, {"seed", s.seed}, {"unit", static_cast<int>(s.attentionUnit)},
                        {"standardised_global", s.standardisedGlobal}, {"shard_bytes", shardBytes}};
    return j.dump();
}

// fsync of a directory: the renames into it are on disk before state.json names their files.
void syncDirectory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open the work folder '" + dir.string() + "': " + std::strerror(errno));
    const int rc = ::fsync(fd);
    const int saved = errno;
    ::close(fd);
    if (rc != 0) throw Error("cannot write the work folder '" + dir.string() + "': " + std::strerror(saved));
}

int64_t mtimeNanoseconds(const fs::path& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return -1;
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The fields of a layer's weights, by name (the apply records keep their shapes).
std::vector<std::pair<const char*, at::Tensor LlamaLayerWeights::*>> layerFields() {
    return {{"attn_norm", &LlamaLayerWeights::attn_norm}, {"wq", &LlamaLayerWeights::wq}, {"wk", &LlamaLayerWeights::wk},
            {"wv", &LlamaLayerWeights::wv}, {"wq_bias", &LlamaLayerWeights::wq_bias},
            {"wk_bias", &LlamaLayerWeights::wk_bias}, {"wv_bias", &LlamaLayerWeights::wv_bias},
            {"q_norm", &LlamaLayerWeights::q_norm}, {"k_norm", &LlamaLayerWeights::k_norm}, {"wo", &LlamaLayerWeights::wo},
            {"wo_bias", &LlamaLayerWeights::wo_bias}, {"ffn_norm", &LlamaLayerWeights::ffn_norm},
            {"w_gate", &LlamaLayerWeights::w_gate}, {"w_up", &LlamaLayerWeights::w_up},
            {"w_down", &LlamaLayerWeights::w_down}, {"w_down_bias", &LlamaLayerWeights::w_down_bias}};
}

// A written layer's report and shapes (what the run's report needs of a layer that a resumed
// export does not compute again), doubles in hexadecimal.
std::string applyRecordText(const LayerPruneReport& r, const LlamaLayerWeights& shapes) {
    auto x = [](double v) {
        char text[64];
        std::snprintf(text, sizeof text, "%a", v);
        return std::string(text);
    };
    nlohmann::json j;
    j["counts"] = {r.headsBefore, r.headsAfter, r.kvHeadsBefore, r.kvHeadsAfter, r.channelsBefore, r.channelsAfter};
    j["losses"] = {x(r.attentionLoss), x(r.attentionLossUncompensated), x(r.mlpLoss), x(r.mlpLossUncompensated)};
    j["shapes"] = nlohmann::json::object();
    for (const auto& [name, field] : layerFields()) {
        const at::Tensor& t = shapes.*field;
        if (t.defined()) j["shapes"][name] = {{"sizes", t.sizes().vec()}, {"dtype", static_cast<int>(t.scalar_type())}};
    }
    return j.dump() + "\n";
}

void readApplyRecord(const std::string& path, LayerPruneReport& r, LlamaLayerWeights& shapes) {
    const nlohmann::json j = json_fields::parseJsonLimited(readTextFile(path), path);
    const auto counts = j.at("counts").get<std::vector<int64_t>>();
    const auto losses = j.at("losses").get<std::vector<std::string>>();
    if (counts.size() != 6 || losses.size() != 4) throw Error("the apply record '" + path + "' is damaged");
    r.headsBefore = counts[0], r.headsAfter = counts[1], r.kvHeadsBefore = counts[2], r.kvHeadsAfter = counts[3];
    r.channelsBefore = counts[4], r.channelsAfter = counts[5];
    double* out[] = {&r.attentionLoss, &r.attentionLossUncompensated, &r.mlpLoss, &r.mlpLossUncompensated};
    for (size_t i = 0; i < 4; ++i) *out[i] = std::strtod(losses[i].c_str(), nullptr);
    shapes = LlamaLayerWeights{};
    for (const auto& [name, field] : layerFields())
        if (j.at("shapes").contains(name)) {
            const nlohmann::json& e = j["shapes"][name];
            shapes.*field = at::empty(e.at("sizes").get<std::vector<int64_t>>(),
                                      at::TensorOptions().device(at::kMeta).dtype(static_cast<at::ScalarType>(e.at("dtype").get<int>())));
        }
}

} // namespace

std::string exactNumberText(double x) {
    char text[64];
    std::snprintf(text, sizeof text, "%a", x);
    return text;
}

std::string workFolderBeside(const std::string& output) {
    fs::path target = fs::absolute(output);
    if (!target.has_filename()) target = target.parent_path();  // "pruned/"
    return (target.parent_path() / ("." + target.filename().string() + ".npw-work")).string();
}

nlohmann::json checkpointFingerprint(const LlamaCheckpoint& checkpoint, const std::string& format) {
    nlohmann::json j;
    j["format"] = format;
    j["npw_version"] = npwVersion();
    j["model"] = checkpoint.source;
    std::set<std::string> files;
    for (const auto& [name, origin] : checkpoint.origins) files.insert(origin.file);
    j["files"] = nlohmann::json::array();
    for (const std::string& file : files) {
        struct stat st {};
        if (::stat(file.c_str(), &st) != 0) throw Error("cannot read '" + file + "': " + std::strerror(errno));
        j["files"].push_back({file, static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                              static_cast<int64_t>(st.st_mtim.tv_nsec)});
    }
    j["config"] = hfLlamaConfigJson(checkpoint.config, HfBiasFlags{});
    return j;
}

bool keepMatchingWorkFolder(const std::string& dir, const std::string& fingerprint, const std::function<bool()>& usable,
                            const std::string& otherRun, const std::function<void(const std::string&)>& note) {
    const fs::path work(dir), fingerprintFile = work / "fingerprint.json";
    std::error_code ec;
    if (!fs::exists(work, ec)) return false;
    bool same = false;
    try {
        same = fs::exists(fingerprintFile) && readTextFile(fingerprintFile.string()) == fingerprint && (!usable || usable());
    } catch (const std::exception&) {
        same = false;  // a damaged folder: not resumed from
    }
    if (same) return true;
    fs::remove_all(work, ec);
    if (ec) throw Error("cannot remove the work folder '" + dir + "' of an interrupted run: " + ec.message());
    if (note) note("removed the work folder " + dir + " of an interrupted run with " + otherRun);
    return false;
}

void createWorkFolder(const std::string& dir, const std::string& fingerprint) {
    const fs::path work(dir), fingerprintFile = work / "fingerprint.json";
    fs::create_directories(work);
    if (!fs::exists(fingerprintFile)) writeTextAtomically(fingerprintFile.string(), fingerprint);
}

int64_t inRamPruneBytes(const LlamaConfig& config) { return 4 * config.parameterCount() + modelStatsBytes(config); }

int64_t inGpuPruneBytes(const LlamaConfig& config, int64_t runtimeElementBytes) {
    return runtimeElementBytes * config.parameterCount() + modelStatsBytes(config);
}

PruneRoad choosePruneRoad(const LlamaConfig& config, int64_t physicalBytes, bool forceLayerwise, int64_t deviceBytes,
                          int64_t runtimeElementBytes) {
    PruneRoad road;
    road.forced = forceLayerwise;
    road.inRamBytes = inRamPruneBytes(config);
    road.physicalBytes = physicalBytes;
    road.deviceBytes = deviceBytes;
    road.inGpuBytes = deviceBytes > 0 ? inGpuPruneBytes(config, runtimeElementBytes) : 0;
    const bool tooBig = physicalBytes > 0 && static_cast<double>(road.inRamBytes) > kPruneRamFraction * static_cast<double>(physicalBytes);
    const bool tooBigForGpu =
        deviceBytes > 0 && static_cast<double>(road.inGpuBytes) > kPruneGpuFraction * static_cast<double>(deviceBytes);
    road.layerwise = forceLayerwise || tooBig || tooBigForGpu;
    const std::string need = "the model in float32 and its statistics in float64 need " + sizeText(road.inRamBytes);
    const std::string ram = sizeText(physicalBytes) + " of RAM";
    if (forceLayerwise)
        road.reason = "pruning layer by layer (--layerwise; " + need + ")";
    else if (!tooBig && tooBigForGpu)
        road.reason = "pruning layer by layer: the model on the GPU and its statistics in float64 there need " +
                      sizeText(road.inGpuBytes) + ", more than 3/4 of the GPU's " + sizeText(deviceBytes) +
                      (std::getenv("NPW_DEVICE_MEMORY_BYTES") ? " (NPW_DEVICE_MEMORY_BYTES)" : "") +
                      "; one block at a time goes to the GPU, statistics go to a scratch file beside --out";
    else if (tooBig)
        road.reason = "pruning layer by layer: " + need + ", more than half of this machine's " + ram +
                      (std::getenv("NPW_PHYSICAL_MEMORY_BYTES") ? " (NPW_PHYSICAL_MEMORY_BYTES)" : "") +
                      "; weights stay memory-mapped, statistics go to a scratch file beside --out";
    else
        road.reason = "pruning in RAM: " + need + (physicalBytes > 0 ? ", at most half of this machine's " + ram : "") +
                      (deviceBytes > 0 ? "; on the GPU " + sizeText(road.inGpuBytes) + " of its " + sizeText(deviceBytes) : "") +
                      " (--layerwise prunes layer by layer instead)";
    return road;
}

int64_t packedGramBytes(const LlamaConfig& config, int64_t elementBytes) {
    int64_t count = 0;
    for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l)
        for (bool attention : {true, false}) count += packedCount(std::max<int64_t>(0, siteWidth(config, l, attention)));
    return count * elementBytes;
}

GramScratch::GramScratch(const std::string& path, const LlamaConfig& config, at::ScalarType dtype, bool reopen)
    : path_(path), dtype_(dtype) {
    if (dtype != at::kDouble && dtype != at::kFloat) throw Error("internal: the Gram scratch file holds float64 or float32");
    const auto layers = static_cast<size_t>(config.num_layers);
    attnOffset_.assign(layers, -1);
    mlpOffset_.assign(layers, -1);
    attn_.resize(layers);
    mlp_.resize(layers);
    const int64_t element = dtype == at::kDouble ? 8 : 4;
    for (size_t l = 0; l < layers; ++l)
        for (bool attention : {true, false}) {
            const int64_t d = siteWidth(config, l, attention);
            if (d <= 0) continue;
            (attention ? attnOffset_ : mlpOffset_)[l] = bytes_;
            bytes_ += packedCount(d) * element;
        }
    if (reopen) {
        fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        struct stat st {};
        if (fd_ < 0 || ::fstat(fd_, &st) != 0 || st.st_size != std::max<int64_t>(bytes_, 1)) {
            if (fd_ >= 0) ::close(fd_);
            fd_ = -1;
            throw Error("the statistics scratch file '" + path + "' of the interrupted run is missing or not " +
                        std::to_string(bytes_) + " bytes; remove its work folder");
        }
        return;
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) throw Error("cannot create the statistics scratch file '" + path + "': " + std::strerror(errno));
    // Sized up front: a full disk fails here, before hours of calibration, not in the middle.
    const int rc = ::posix_fallocate(fd_, 0, std::max<int64_t>(bytes_, 1));
    if (rc != 0) {
        ::close(fd_);
        ::unlink(path.c_str());
        fd_ = -1;
        throw Error("cannot reserve " + sizeText(bytes_) + " for the statistics scratch file '" + path + "': " +
                    std::strerror(rc));
    }
}

GramScratch::~GramScratch() {
    if (fd_ >= 0) ::close(fd_);
}

void GramScratch::sync() const {
    if (::fdatasync(fd_) != 0) throw Error("cannot write the statistics scratch file '" + path_ + "': " + std::strerror(errno));
}

void GramScratch::restoreSums(size_t l, const LayerStats& attn, const LayerStats& mlp) {
    attn_.at(l) = attn;
    mlp_.at(l) = mlp;
}

void GramScratch::write(size_t l, const LayerStats& attn, const LayerStats& mlp) {
    for (bool attention : {true, false}) {
        const LayerStats& s = attention ? attn : mlp;
        const int64_t offset = (attention ? attnOffset_ : mlpOffset_).at(l);
        if (s.channels() == 0 || offset < 0) continue;
        const int64_t d = s.channels();
        const at::Tensor g = s.gram.to(at::kCPU, at::kDouble).contiguous();
        const double* gp = g.data_ptr<double>();
        std::vector<float> row32(dtype_ == at::kFloat ? static_cast<size_t>(d) : 0);
        const int64_t element = dtype_ == at::kDouble ? 8 : 4;
        for (int64_t i = 0; i < d; ++i) {
            const double* src = gp + i * d + i;
            const int64_t n = d - i;
            const int64_t at = offset + packedRowStart(i, d) * element;
            if (dtype_ == at::kDouble) {
                pwriteAll(fd_, src, n * 8, at, path_);
            } else {
                for (int64_t j = 0; j < n; ++j) row32[static_cast<size_t>(j)] = static_cast<float>(src[j]);
                pwriteAll(fd_, row32.data(), n * 4, at, path_);
            }
        }
        LayerStats kept;  // the sums stay in RAM
        kept.sum = s.sum.to(at::kCPU, at::kDouble);
        kept.sumSq = s.sumSq.to(at::kCPU, at::kDouble);
        kept.tokens = s.tokens;
        (attention ? attn_ : mlp_)[l] = kept;
    }
}

LayerStats GramScratch::read(size_t l, bool attention, bool withGram) const {
    LayerStats s = (attention ? attn_ : mlp_).at(l);
    const int64_t offset = (attention ? attnOffset_ : mlpOffset_).at(l);
    if (!withGram || s.channels() == 0 || offset < 0) return s;
    const auto start = std::chrono::steady_clock::now();
    const int64_t d = s.channels();
    at::Tensor g = at::empty({d, d}, at::kDouble);
    double* gp = g.data_ptr<double>();
    const int64_t element = dtype_ == at::kDouble ? 8 : 4;
    std::vector<float> row32(dtype_ == at::kFloat ? static_cast<size_t>(d) : 0);
    for (int64_t i = 0; i < d; ++i) {
        double* dst = gp + i * d + i;
        const int64_t n = d - i;
        const int64_t at = offset + packedRowStart(i, d) * element;
        if (dtype_ == at::kDouble) {
            preadAll(fd_, dst, n * 8, at, path_);
        } else {
            preadAll(fd_, row32.data(), n * 4, at, path_);
            for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<double>(row32[static_cast<size_t>(j)]);
        }
    }
    // The lower triangle mirrored in tiles (a column walk per row would miss the cache each step).
    constexpr int64_t tile = 64;
    for (int64_t i0 = 0; i0 < d; i0 += tile)
        for (int64_t j0 = 0; j0 <= i0; j0 += tile)
            for (int64_t i = i0; i < std::min(d, i0 + tile); ++i)
                for (int64_t j = j0; j < std::min(i, j0 + tile); ++j) gp[i * d + j] = gp[j * d + i];
    s.gram = g;
    readSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    readBytes_ += static_cast<double>(packedCount(d) * element);
    return s;
}

int64_t calibrationHiddenBytes(const LlamaConfig& config, int64_t tokens) { return tokens * config.hidden_size * 4; }

int64_t scratchBoundBytes(const LlamaCheckpoint& checkpoint, int64_t hiddenBytes) {
    return storedWeightBytes(checkpoint) + hiddenBytes;
}

at::ScalarType scratchDtype(const LlamaConfig& config, int64_t boundBytes, StatsScratchPrecision precision) {
    if (precision == StatsScratchPrecision::Float32) return at::kFloat;
    if (precision == StatsScratchPrecision::Float64) return at::kDouble;
    return packedGramBytes(config, 8) > boundBytes ? at::kFloat : at::kDouble;
}

void refuseMeasuredDamageLayerByLayer(const PruneSettings& settings, const std::string& instead) {
    if (settings.method == PruneMethod::Numerical && settings.crossLayer == CrossLayerRanking::MeasuredDamage)
        throw Error("ranking lstar-kl measures each site's damage with 2L + 1 whole-model forward passes over the "
                    "calibration windows, which the layer-by-layer road does not make; " + instead);
}

ScoredLayerSource scoredLayersFrom(const LlamaCheckpoint& checkpoint, const GramScratch& scratch) {
    return [&checkpoint, &scratch](size_t l, bool withGram) {
        const LlamaLayerWeights& w = checkpoint.weights.layers.at(l);
        return ScoredLayer{w.wo.to(at::kFloat), w.w_down.to(at::kFloat), scratch.read(l, true, withGram),
                           scratch.read(l, false, withGram)};
    };
}

LayerwiseExport writeLayerwiseExport(const LlamaCheckpoint& checkpoint, const GramScratch& scratch, const ScoreSet& scores,
                                     const SelectionResult& selection, const PruneSettings& settings, double defaultAlpha,
                                     const std::string& outDir,
                                     const std::function<std::string(const PruneReport&)>& manifestFor,
                                     const LayerwiseExportOptions& options, const ProgressFn& progress) {
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); };
    c10::InferenceMode guard;
    const LlamaConfig& config = checkpoint.config;
    const auto layers = static_cast<size_t>(config.num_layers);
    const Mask& mask = selection.mask;
    checkMaskLayers(config, mask);
    const LayerwiseExportJournal& journal = options.journal;
    LayerwiseExport out;

    // The written model's layout follows from the mask: sizes, and where FLAP's compensation adds
    // a bias (a site that lost a channel).
    const auto t = Clock::now();
    PrunedModel pruned;
    pruned.compensation = settings.effectiveCompensation();
    pruned.checkpoint.config = config;
    pruned.checkpoint.source = checkpoint.source;
    pruned.checkpoint.weights.embed = checkpoint.weights.embed;
    pruned.checkpoint.weights.final_norm = checkpoint.weights.final_norm;
    pruned.checkpoint.weights.lm_head = checkpoint.weights.lm_head;
    pruned.checkpoint.weights.layers.resize(layers);
    pruned.layers.resize(layers);
    LlamaConfig& newConfig = pruned.checkpoint.config;
    HfStreamedModel streamed;
    for (size_t l = 0; l < layers; ++l) {
        const LlamaLayerWeights& src = checkpoint.weights.layers[l];
        const AttentionUnits units(config, static_cast<int64_t>(l), settings.attentionUnit);
        bool prunedHeads = false, prunedChannels = false;
        if (units.count() > 0) {
            const std::vector<bool> keepQ = units.keptQueryHeads(mask.keepHeads[l]);
            newConfig.num_heads[l] = std::count(keepQ.begin(), keepQ.end(), true);
            const std::vector<bool> keepKv = units.keptKvHeads(mask.keepHeads[l]);
            newConfig.num_kv_heads[l] = std::count(keepKv.begin(), keepKv.end(), true);
            prunedHeads = newConfig.num_heads[l] < config.num_heads[l];
        }
        if (config.intermediate_size[l] > 0) {
            newConfig.intermediate_size[l] = std::count(mask.keepChannels[l].begin(), mask.keepChannels[l].end(), true);
            prunedChannels = newConfig.intermediate_size[l] < config.intermediate_size[l];
        }
        const bool flap = pruned.compensation == CompensationKind::FlapBias;
        streamed.oBias.push_back(src.wo_bias.defined() || (flap && prunedHeads));
        streamed.downBias.push_back(src.w_down_bias.defined() || (flap && prunedChannels));
    }
    streamed.config = newConfig;
    streamed.embed = checkpoint.weights.embed;
    streamed.finalNorm = checkpoint.weights.final_norm;
    streamed.lmHead = checkpoint.weights.lm_head;
    streamed.tokenizerPath = checkpoint.tokenizerPath;
    streamed.source = checkpoint.source;
    streamed.dtype = checkpoint.weights.layers.empty() ? at::kFloat : checkpoint.weights.layers[0].wq.scalar_type();
    streamed.shardBytes = options.shardBytes;

    const double readSeconds = scratch.readSeconds();
    auto pruneLayer = [&](size_t l) {
        const auto layerStart = Clock::now();
        reportProgress(progress, "apply", static_cast<double>(l), static_cast<double>(layers));
        LlamaConfig layerConfig = config;  // applyMaskToLayer writes the layer's sizes into it
        LlamaLayerWeights layer =  // not const: returned by move
            applyMaskToLayer(config, l, layerInFloat32(checkpoint.weights.layers[l]), scratch.read(l, true, true),
                             scratch.read(l, false, true), mask, settings, layerConfig, pruned.layers[l]);
        if (layerConfig.num_heads[l] != newConfig.num_heads[l] || layerConfig.num_kv_heads[l] != newConfig.num_kv_heads[l] ||
            layerConfig.intermediate_size[l] != newConfig.intermediate_size[l])
            throw Error("internal: layer " + std::to_string(l) + " was pruned to other sizes than the export planned");
        pruned.checkpoint.weights.layers[l] = shapesOnly(layer);
        out.layerSeconds += seconds(layerStart);
        if (journal.applied) journal.applied(l, pruned);
        return layer;
    };
    HfStreamedShards shardHooks;
    if (journal.finished)
        shardHooks.finished = [&](size_t shard, const std::string& file) { return journal.finished(shard, file, pruned); };
    shardHooks.committed = journal.committed;
    const auto exportStart = Clock::now();
    writeExportDirectory(
        checkpoint.source, outDir,
        std::function<std::string()>([&] {
            newConfig.validate(checkpoint.source);
            out.report = makePruneReport(settings, defaultAlpha, scores, selection, checkpoint, pruned);
            out.report.timings.applySeconds = seconds(t);
            return manifestFor(out.report);
        }),
        [&](const std::string& staging) {
            const nlohmann::json extra = {{"npw_pruned", {{"manifest", "npw-manifest.json"}}}};
            const std::string dir = journal.shardDir.empty() ? staging : journal.shardDir;
            saveHfLlamaDirectoryStreamed(streamed, dir, extra.dump(), pruneLayer, shardHooks);
            // Whole: into the export's staging folder (beside outDir, the same file system), which
            // writeExportDirectory completes with the manifest and renames to outDir.
            if (dir != staging) fs::rename(dir, staging);
        });
    reportProgress(progress, "apply", static_cast<double>(layers), static_cast<double>(layers));
    out.seconds = seconds(exportStart);
    out.scratchReadSeconds = scratch.readSeconds() - readSeconds;
    out.bytesWritten = static_cast<int64_t>(regularFileBytesUnder(outDir));
    return out;
}

nlohmann::json statisticsScratchJson(const std::string& precision, int64_t bytes, int64_t boundBytes, int64_t hiddenBytes) {
    return {{"precision", precision},
            {"bytes", bytes},
            {"bound_bytes", boundBytes},
            {"hidden_state_bytes", hiddenBytes},
            {"meaning", "upper triangle of each G = X^T X in " + precision +
                            " (accumulated in float64); bound = the checkpoint's size + the hidden states of every "
                            "calibration window"}};
}

std::string layerwiseManifestJson(const PruneReport& report, const PruneSettings& settings,
                                  const CalibrationSummary& calibration, const std::string& sourceModel,
                                  const nlohmann::json& statisticsScratch) {
    nlohmann::json manifest = nlohmann::json::parse(pruneManifestJson(report, settings, calibration, sourceModel));
    manifest["road"] = "layer-wise";
    manifest["statistics_scratch"] = statisticsScratch;
    return manifest.dump(2) + "\n";
}

LayerwisePruneRun pruneLayerwise(const LlamaModel& model, const CalibrationSet& set, const PruneSettings& settings,
                                 const std::string& outDir,
                                 const std::function<std::string(const LayerwisePruneRun&)>& manifestFor,
                                 const LayerwisePruneOptions& options, const ProgressFn& progress) {
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); };
    refuseMeasuredDamageLayerByLayer(settings, "use --ranking lstar-rel (the default) or prune in RAM");
    c10::InferenceMode guard;
    const LlamaCheckpoint& checkpoint = model.checkpoint();
    const LlamaConfig& config = checkpoint.config;
    const auto layers = static_cast<size_t>(config.num_layers);
    LayerwisePruneRun run;
    PruneReport& report = run.report;

    // The scratch file's precision: float64 when its triangle fits the bound (the checkpoint's
    // own size plus the hidden states), else float32.
    run.hiddenBytes = calibrationHiddenBytes(config, set.tokens());
    run.scratchBoundBytes = scratchBoundBytes(checkpoint, run.hiddenBytes);
    const at::ScalarType statsDtype = scratchDtype(config, run.scratchBoundBytes, options.precision);
    run.statsPrecision = statsDtype == at::kDouble ? "float64" : "float32";

    // The work folder: resumed when its fingerprint is this run's, else started afresh.
    const fs::path work(options.workDir);
    const std::string fingerprint = workFingerprint(model, set, statsDtype, options.calibration);
    const fs::path stateFile = work / "state.json";
    size_t finished = 0;
    // state.json: finished_layers (calibration), settings (settingsFingerprint of the steps
    // below), score_steps (how many score steps, in their order, have their record), shards (the
    // export's finished shards: file → bytes, mtime, layers). Each entry is written only once what
    // it names is on disk.
    nlohmann::json state = nlohmann::json::object();
    std::error_code ec;
    const bool kept = keepMatchingWorkFolder(
        work.string(), fingerprint,
        [&] {
            if (!fs::exists(stateFile)) return false;
            state = json_fields::parseJsonLimited(readTextFile(stateFile.string()), stateFile.string());
            finished = state.at("finished_layers").get<size_t>();
            return finished <= layers;
        },
        "another model, calibration or precision", options.note);
    if (!kept) {
        finished = 0;
        state = nlohmann::json::object();
    }
    // Score steps and shards of other settings: removed (the calibration does not depend on them).
    const std::string settingsPrint = settingsFingerprint(settings, options.shardBytes);
    const fs::path scoresDir = work / "scores", applyDir = work / "apply", exportDir = work / "export";
    auto saveState = [&] { writeTextAtomically(stateFile.string(), state.dump() + "\n"); };
    if (state.contains("settings") && state["settings"] != settingsPrint) {
        // state.json first stops naming them, then they go.
        state.erase("score_steps");
        state.erase("shards");
        state["settings"] = settingsPrint;
        saveState();
        for (const fs::path& dir : {scoresDir, applyDir, exportDir}) fs::remove_all(dir, ec);
        if (options.note)
            options.note("removed the scores and the export of an interrupted run with other settings from the work folder " +
                         work.string() + " (its calibration is kept)");
    }
    state["settings"] = settingsPrint;
    createWorkFolder(work.string(), fingerprint);
    const bool resuming = finished > 0 || fs::exists(work / "grams.bin");
    GramScratch scratch((work / "grams.bin").string(), config, statsDtype, resuming);
    run.scratchBytes = scratch.bytes();
    LayerwiseCalibrationResume resume;
    if (finished > 0) {
        for (size_t l = 0; l < finished; ++l) {
            const auto file = SafeTensorsFile::open(sumsFile(work, l));
            scratch.restoreSums(l, loadSums(*file, "attn"), loadSums(*file, "mlp"));
        }
        if (finished < layers) {
            const auto hidden = SafeTensorsFile::open((work / "hidden.safetensors").string());
            for (size_t b = 0; hidden->has("batch." + std::to_string(b)); ++b)
                resume.hidden.push_back(hidden->load("batch." + std::to_string(b)));
            resume.nextLayer = finished;
        }
        run.resumedAtLayer = static_cast<int64_t>(finished);
        if (options.note)
            options.note("resuming an interrupted run from its work folder " + work.string() + ": layers 0-" +
                         std::to_string(finished - 1) + " of " + std::to_string(layers) + " are calibrated");
    }

    auto t = Clock::now();
    run.calibratedFromLayer = finished;
    // A rerun resumes after the last layer whose outgoing hidden states are on disk. Up to
    // kHiddenSavedEveryLayerBytes (16 × 512 tokens at 70B) they are written after every layer, as
    // a layer's Gram updates cost far more on any machine. Above it (the papers' 128 × 2048: 4.3 GB
    // at 7B, every layer — minutes a layer on a GPU, where a layer calibrates in about a second)
    // they are written only once the calibration has run ten times as long as the last write
    // took: the writes stay under a tenth of the calibration, and a kill loses about that long.
    int64_t hiddenSavedEveryLayer = kHiddenSavedEveryLayerBytes;
    // Test hook: another size (0: the timed rule for any model), for the resume tests.
    if (const char* v = std::getenv("NPW_TEST_HIDDEN_EVERY_LAYER_BYTES"); v && *v) hiddenSavedEveryLayer = std::atoll(v);
    const bool hiddenEveryLayer = run.hiddenBytes <= hiddenSavedEveryLayer;
    auto lastHiddenSave = Clock::now();
    double lastHiddenSaveSeconds = 0;
    if (finished < layers)
        calibrateEachLayer(
            model, set,
            [&](size_t l, const LayerStats& attn, const LayerStats& mlp, const std::vector<at::Tensor>& hidden) {
                const auto written = Clock::now();
                scratch.write(l, attn, mlp);
                scratch.sync();
                saveSums(sumsFile(work, l), attn, mlp);
                const bool last = l + 1 == layers;
                const bool saveHidden =
                    !last && (hiddenEveryLayer || seconds(lastHiddenSave) >= 10 * lastHiddenSaveSeconds);
                if (saveHidden) {
                    const auto hiddenStart = Clock::now();
                    std::vector<std::pair<std::string, at::Tensor>> tensors;
                    for (size_t b = 0; b < hidden.size(); ++b) tensors.emplace_back("batch." + std::to_string(b), hidden[b].cpu());
                    writeSafeTensors((work / "hidden.safetensors").string(), tensors, {{"next_layer", std::to_string(l + 1)}});
                    lastHiddenSaveSeconds = seconds(hiddenStart);
                    lastHiddenSave = Clock::now();
                }
                // Last: the layer counts as finished only once everything it needs is on disk
                // (a layer after the saved hidden states is calibrated again by a rerun).
                if (saveHidden || last) {
                    state["finished_layers"] = l + 1;
                    saveState();
                }
                run.scratchWriteSeconds += seconds(written);
                run.scratchWriteBytes += static_cast<double>(fs::file_size(sumsFile(work, l), ec));
                if (saveHidden) run.scratchWriteBytes += static_cast<double>(fs::file_size(work / "hidden.safetensors", ec));
                if (saveHidden || last) run.scratchWriteBytes += static_cast<double>(fs::file_size(stateFile, ec));
                for (const LayerStats* site : {&attn, &mlp})
                    run.scratchWriteBytes += static_cast<double>(packedCount(site->channels()) * (statsDtype == at::kDouble ? 8 : 4));
                if (l == 1) testStallPoint("layerwise-calibrated-layer-1");
            },
            progress, options.calibration, finished > 0 ? &resume : nullptr);
    report.timings.calibrateSeconds = seconds(t);
    fs::remove(work / "hidden.safetensors", ec);  // every layer is calibrated: nothing to resume from
    run.stages.calibrated = finished < layers;
    run.stages.calibrateSeconds = std::max(report.timings.calibrateSeconds - run.scratchWriteSeconds, 0.0);
    run.stages.tokens = set.tokens();
    run.stages.seqlen = set.seqlen;

    t = Clock::now();
    const double readSeconds = scratch.readSeconds();
    const ScoredLayerSource layerAt = scoredLayersFrom(checkpoint, scratch);
    // Each score step's record in the work folder (score_journal.h): a rerun takes the steps an
    // interrupted one finished, in order, and computes from the first it did not.
    size_t stepsDone = state.value("score_steps", size_t{0});
    fs::create_directories(scoresDir);
    auto stepIndex = [&](ScorePass pass, size_t l) { return static_cast<size_t>(pass) * layers + l; };
    auto stepFile = [&](ScorePass pass, size_t l) {
        return (scoresDir / (std::string(scorePassName(pass)) + "-" + std::to_string(l) + ".safetensors")).string();
    };
    ScoreJournal journal;
    journal.load = [&](ScorePass pass, size_t l) -> std::optional<ScoreRecord> {
        if (stepIndex(pass, l) >= stepsDone) return std::nullopt;
        ScoreRecord record;
        try {
            const auto file = SafeTensorsFile::open(stepFile(pass, l));
            for (const std::string& name : file->names()) record[name] = file->load(name);
        } catch (const std::exception& e) {
            // A damaged record: this step and every later one are computed again.
            stepsDone = stepIndex(pass, l);
            if (options.note) options.note("scoring again from a damaged record in the work folder: " + std::string(e.what()));
            return std::nullopt;
        }
        ++run.resumedScoreSteps;
        return record;
    };
    journal.save = [&](ScorePass pass, size_t l, const ScoreRecord& record) {
        const auto start = Clock::now();
        std::vector<std::pair<std::string, at::Tensor>> tensors(record.begin(), record.end());
        writeSafeTensors(stepFile(pass, l), tensors, {{"format", "npw-prune-work-score-step"}});
        syncDirectory(scoresDir);
        state["score_steps"] = stepIndex(pass, l) + 1;
        saveState();
        run.recordSeconds += seconds(start);
        run.recordBytes += static_cast<double>(fs::file_size(stepFile(pass, l), ec) + fs::file_size(stateFile, ec));
        testStallPoint(("layerwise-scored-" + std::string(scorePassName(pass)) + "-layer-" + std::to_string(l)).c_str());
    };
    if (stepsDone > 0 && options.note)
        options.note("resuming the scoring from the work folder " + work.string() + ": " + std::to_string(stepsDone) +
                     " of its steps (one layer of one pass each) are recorded");
    run.scores = computeScoresByLayer(config, checkpoint.weights.embed, layerAt, settings, progress, journal);
    report.timings.scoreSeconds = seconds(t);
    run.stages.scoreSeconds =
        std::max(report.timings.scoreSeconds - (scratch.readSeconds() - readSeconds) - run.recordSeconds, 0.0);

    t = Clock::now();
    const MaskSelector selector(run.scores);
    run.selection = selector.select(settings.ratio, settings.alpha, settings.alphaMode);
    const Mask& mask = run.selection.mask;
    checkMaskLayers(config, mask);
    report.timings.selectSeconds = seconds(t);
    run.stages.selectSeconds = report.timings.selectSeconds;

    // The export, through the pass the studio's export uses too (writeLayerwiseExport), with its
    // work recorded here so that an interrupted run resumes it: each written layer's report and
    // shapes in apply/, the shards in the work folder's export/ (hf_streamed_resume.h). A shard
    // counts as finished once it is renamed into place and state.json lists it with its size and
    // time. A rerun keeps the finished ones (checked again by size and time) and removes anything
    // else there (a partial shard's temporary file, the last files of an export that was not yet
    // moved to --out), then writes from the first unfinished shard on.
    fs::create_directories(applyDir);
    bool exportResumed = false;  // some shards were finished by an interrupted run
    size_t shardsKept = 0, layersKept = 0;
    auto resumedNote = [&] {
        if (!options.note) return;
        const int64_t next = run.resumedExportAtLayer;
        options.note("resuming the export from the work folder " + work.string() + ": " + std::to_string(shardsKept) +
                     " shard(s) are written" +
                     (next > 1 ? " (layers 0-" + std::to_string(next - 1) + ")" : next == 1 ? " (layer 0)" : "") +
                     (next < static_cast<int64_t>(layers)
                          ? "; writing from layer " + std::to_string(next) + " of " + std::to_string(layers)
                          : "; every layer is written"));
    };
    auto applyFile = [&](size_t l) { return (applyDir / ("layer-" + std::to_string(l) + ".json")).string(); };
    if (!state.contains("shards") || !state["shards"].is_object()) state["shards"] = nlohmann::json::object();
    fs::create_directories(exportDir);
    std::vector<fs::path> unfinished;
    for (const auto& entry : fs::directory_iterator(exportDir))
        if (!state["shards"].contains(entry.path().filename().string())) unfinished.push_back(entry.path());
    for (const fs::path& path : unfinished) fs::remove_all(path, ec);
    LayerwiseExportOptions exportOptions;
    exportOptions.shardBytes = options.shardBytes;
    LayerwiseExportJournal& exportJournal = exportOptions.journal;
    exportJournal.shardDir = exportDir.string();
    exportJournal.finished = [&](size_t, const std::string& file, PrunedModel& pruned) {
        const bool kept = [&] {
            if (!state["shards"].contains(file)) return false;
            const nlohmann::json& e = state["shards"][file];
            const fs::path path = exportDir / file;
            if (!fs::is_regular_file(path, ec) ||
                static_cast<int64_t>(fs::file_size(path, ec)) != e.value("bytes", int64_t{-1}) ||
                mtimeNanoseconds(path) != e.value("mtime_ns", int64_t{-2}))
                return false;
            try {
                const std::vector<size_t> shardLayers = e.at("layers").get<std::vector<size_t>>();
                for (size_t l : shardLayers) {
                    if (l >= layers) return false;
                    readApplyRecord(applyFile(l), pruned.layers[l], pruned.checkpoint.weights.layers[l]);
                }
                layersKept += shardLayers.size();
            } catch (const std::exception&) {
                return false;  // a damaged record: the shard is written again
            }
            return true;
        }();
        if (kept) {
            exportResumed = true;
            ++shardsKept;
        } else if (exportResumed && run.resumedExportAtLayer < 0) {
            // The finished shards are a prefix holding layers 0 … layersKept − 1: the rest is written now.
            run.resumedExportAtLayer = static_cast<int64_t>(layersKept);
            resumedNote();
        }
        return kept;
    };
    // Before the layer goes into its shard: a finished shard's layers all have their record.
    exportJournal.applied = [&](size_t l, const PrunedModel& pruned) {
        const auto recordStart = Clock::now();
        writeTextAtomically(applyFile(l), applyRecordText(pruned.layers[l], pruned.checkpoint.weights.layers[l]));
        run.recordSeconds += seconds(recordStart);
        run.recordBytes += static_cast<double>(fs::file_size(applyFile(l), ec));
        testStallPoint(("layerwise-applied-layer-" + std::to_string(l)).c_str());
    };
    exportJournal.committed = [&](size_t shard, const std::string& file, const std::vector<size_t>& shardLayers) {
        syncDirectory(exportDir);
        const fs::path path = exportDir / file;
        state["shards"][file] = {{"bytes", static_cast<int64_t>(fs::file_size(path))}, {"mtime_ns", mtimeNanoseconds(path)},
                                 {"layers", shardLayers}};
        saveState();
        testStallPoint(("layerwise-exported-shard-" + std::to_string(shard + 1)).c_str());
    };
    const double recordsBeforeExport = run.recordSeconds;
    const LayerwiseExport written = writeLayerwiseExport(
        checkpoint, scratch, run.scores, run.selection, settings, selector.defaultAlpha(), outDir,
        [&](const PruneReport& r) {
            const PruneTimings timings = report.timings;  // calibrate, score, select
            report = r;
            report.timings = timings;
            report.timings.applySeconds = r.timings.applySeconds;
            if (exportResumed && run.resumedExportAtLayer < 0) {
                run.resumedExportAtLayer = static_cast<int64_t>(layers);
                resumedNote();
            }
            return manifestFor(run);
        },
        exportOptions, progress);
    run.stages.applySeconds = std::max(written.layerSeconds - written.scratchReadSeconds, 0.0);
    run.stages.saveSeconds =
        std::max(written.seconds - written.layerSeconds - (run.recordSeconds - recordsBeforeExport), 0.0);
    run.stages.bytesWritten = static_cast<double>(written.bytesWritten);
    run.scratchReadSeconds = scratch.readSeconds();
    run.scratchReadBytes = scratch.readBytes();
    // The export is complete: nothing to resume.
    fs::remove_all(work, ec);
    return run;
}

std::vector<StageMeasure> layerwiseStageMeasures(const LlamaConfig& config, const LayerwisePruneRun& run) {
    // The forward's work over the layers this process calibrated (a resumed run skipped the rest).
    LlamaConfig calibrated = config;
    const auto skip = static_cast<std::ptrdiff_t>(std::min<size_t>(run.calibratedFromLayer, config.num_heads.size()));
    calibrated.num_layers = config.num_layers - skip;
    for (std::vector<int64_t>* perLayer : {&calibrated.num_heads, &calibrated.num_kv_heads, &calibrated.intermediate_size})
        perLayer->erase(perLayer->begin(), perLayer->begin() + skip);
    std::vector<StageMeasure> stages = pruneStageMeasures(calibrated, run.stages);
    // The scratch file's I/O, after the calibration's stages (or first, when nothing was calibrated).
    auto after = std::find_if(stages.begin(), stages.end(), [](const StageMeasure& m) { return m.stage == "gram_accumulation"; });
    auto at = after == stages.end() ? stages.begin() : after + 1;
    StageMeasure write;
    write.stage = "scratch_writing";
    write.seconds = run.scratchWriteSeconds;
    write.bytes = run.scratchWriteBytes;
    write.note = "each calibrated layer's Gram triangles, sums and the hidden states leaving it (fsync'ed), against "
                 "the disk write rate";
    at = stages.insert(at, write) + 1;
    StageMeasure read;
    read.stage = "scratch_reading";
    read.seconds = run.scratchReadSeconds;
    read.note = "the Gram triangles read back for scoring and compensation (" + byteSizeText(static_cast<int64_t>(run.scratchReadBytes)) +
                "; page cache or disk): no bound measured";
    at = stages.insert(at, read) + 1;
    StageMeasure records;
    records.stage = "resume_records";
    records.seconds = run.recordSeconds;
    records.bytes = run.recordBytes;
    records.note = "each score step's and each written layer's record with state.json (fsync'ed: what a rerun resumes "
                   "from), against the disk write rate";
    stages.insert(at, records);
    return stages;
}

} // namespace npw
