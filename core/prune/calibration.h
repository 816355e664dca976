#pragma once
// Calibration: the token windows a pruning run looks at, and the statistics of the scored
// layers' inputs over them (the first arrow of design.md's flow).
//
// Windows are drawn as GPTQ, FLAP and the paper draw them: N windows of L consecutive tokens at
// uniformly random offsets (seeded) in one token stream: a text tokenized once with one BOS at
// the start, or a file of token ids used exactly as given.
//
// Statistics (core/prune/layer_stats.h) are raw sums over every position of every window plus
// the token count; the numerical score and Theorem 3 use LayerStats::gramPerToken() (G/N, so
// λ and L* mean the same whatever N is), FLAP mean/variance, Wanda-sp the channel norms.
//
// Two ways to compute them, giving the same numbers (the same batches of windows reach every
// block as the same float32 activations, and each G is summed in the same order):
//  - calibrate() runs the whole model on each batch of windows and taps every scored layer in
//    the same pass: all layers' statistics are in RAM at once (float64: D² per attention layer,
//    D_inter² per MLP layer; modelStatsBytes()). Fine up to ~1B parameters (1.1B: 6.3 GB).
//  - calibrateLayerwise() embeds every window once, then runs one decoder block at a time over
//    all of them, accumulates that block's statistics, writes them into a statistics file and
//    moves the windows' hidden states on to the next block. Only one layer's statistics are in
//    RAM at a time, plus the hidden states of all windows (tokens · hidden · element size:
//    128 × 2048 × 4096 × 4 B = 4 GiB for a 7B model in float32). The returned statistics are
//    read-only views of the memory-mapped file: scoring and compensation page in one layer at
//    a time and the kernel can drop those pages again (a 7B model's are ~35 GB). Measured on the
//    synthetic 1.1B model (npw bench --suite calibration-memory): peak RSS 10.7 GB in RAM against
//    5.0 GB layer-wise, 4.4 GB of which are the weights.
// The CLI chooses layer-wise when modelStatsBytes() exceeds kStatsRamFraction of physical RAM.
#include "core/models/llama.h"
#include "core/prune/layer_stats.h"
#include "core/util/progress.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace npw {

struct LanguageModel;

struct CalibrationSet {
    std::vector<std::vector<int32_t>> windows;  // N windows of exactly `seqlen` token ids
    int64_t seqlen = 0;
    uint64_t seed = 0;          // of the offsets
    int64_t streamTokens = 0;   // length of the stream the windows were drawn from
    std::string source;         // where the stream came from (for the manifest); may be empty
    bool sourceIsIds = false;   // an id file (true) or a text tokenized with BOS (false)

    int64_t tokens() const { return static_cast<int64_t>(windows.size()) * seqlen; }
};

// What a manifest records about the calibration (also stored in a statistics file, so that
// statistics reused with `npw prune --stats` keep their provenance).
struct CalibrationSummary {
    std::string source;
    bool sourceIsIds = false;
    int64_t samples = 0, seqlen = 0, streamTokens = 0, tokens = 0;
    uint64_t seed = 0;
    std::string statsFile;  // set when the statistics were read from a file instead of computed

    static CalibrationSummary of(const CalibrationSet& set);
    std::map<std::string, std::string> toMetadata() const;
    // Throws npw::Error naming `file` when a field is missing or malformed.
    static CalibrationSummary fromMetadata(const std::map<std::string, std::string>& metadata, const std::string& file);
};

// `samples` windows of `seqlen` tokens at offsets drawn with std::mt19937_64(seed) in
// [0, stream.size() − seqlen] (start = rng() mod range: the same windows on every platform,
// unlike std::uniform_int_distribution). Windows may overlap, as in GPTQ/FLAP. Throws npw::Error
// when the stream is shorter than one window, or samples/seqlen are not positive.
CalibrationSet drawCalibrationSet(const std::vector<int32_t>& stream, int64_t samples, int64_t seqlen, uint64_t seed,
                                  const std::string& source = "");

// The calibration stream of a file: an id file as readTokenIdFile reads it, or a UTF-8 text
// encoded once with BOS by the model's tokenizer (an error names the file when it is empty or
// the model has no tokenizer).
std::vector<int32_t> readCalibrationStream(const std::string& path, bool idFile, const LanguageModel& model);

// Statistics of every scored layer's input. attn[l] / mlp[l] have channels() == 0 for a layer
// without heads / MLP channels (nothing to tap).
struct ModelStats {
    std::vector<LayerStats> attn;  // input of o_proj: [heads·head_dim]
    std::vector<LayerStats> mlp;   // input of down_proj: [intermediate]
    int64_t tokens() const;        // tokens seen (every layer sees the same ones)
};

struct CalibrationOptions {
    // Windows per forward pass: as many as fit both budgets, at least one. The attention
    // scores [windows, heads, L, L] dominate the memory of a pass; keeping them small also
    // keeps glibc from mmap-ing and zeroing a fresh block on every call (measured on
    // stories260K: 16 windows of 512 per pass spent more time in the kernel than computing).
    int64_t batchTokens = 8192;
    int64_t batchAttentionBytes = 16 << 20;
    bool statsOnModelDevice = true;  // accumulate where the activations are (no transfer);
                                     // false: on the CPU (a GPU too small for every G)
};

// Runs `model` on the windows and accumulates every scored layer's input. Reports progress
// per batch ("calibrate", windows done / windows) and throws npw::Cancelled when asked to.
// Throws npw::Error when a window is longer than the model's context, a token id is outside the
// vocabulary, or an activation is NaN/Inf (the error names the layer and site).
ModelStats calibrate(const LlamaModel& model, const CalibrationSet& set, const ProgressFn& progress = nullptr,
                     const CalibrationOptions& options = {});

// Bytes of every scored layer's statistics in float64 (G, Σx, Σx², N): what calibrate() holds in
// RAM and what a statistics file holds.
int64_t modelStatsBytes(const LlamaConfig& config);
// Statistics bigger than this fraction of physical RAM are computed layer-wise and kept on disk.
constexpr double kStatsRamFraction = 0.5;
// Physical RAM of this machine (sysconf), 0 when unknown; the environment variable
// NPW_PHYSICAL_MEMORY_BYTES overrides it (to try the layer-wise path on a small model).
int64_t physicalMemoryBytes();
// modelStatsBytes(config) > kStatsRamFraction · physicalBytes (never when physicalBytes is 0).
bool statsBelongOnDisk(const LlamaConfig& config, int64_t physicalBytes);
// The hidden states calibrateLayerwise() keeps for all windows: tokens · hidden · element size.
int64_t layerwiseHiddenBytes(const LlamaModel& model, const CalibrationSet& set);

// Layer by layer (see the top of this file): writes the statistics of each block into
// `statsPath` as soon as the block is done, in exactly saveModelStats's layout and metadata
// (the header is planned from the config up front), atomically: the file appears complete
// when the run ends; an error or a cancel (npw::Cancelled) leaves `statsPath` as it was and no
// temporary file behind. Returns statistics mapped from the file (loadModelStats, Mapped).
// Progress: "calibrate", (layer · windows + windows done) / (layers · windows).
ModelStats calibrateLayerwise(const LlamaModel& model, const CalibrationSet& set, const std::string& statsPath,
                              const std::map<std::string, std::string>& metadata = {},
                              const ProgressFn& progress = nullptr, const CalibrationOptions& options = {});

// --save-stats: raw sums in float64, tensor names "layers.{l}.{attn|mlp}.{gram|sum|sum_sq}" and
// "layers.{l}.{attn|mlp}.tokens" (I64 [1]); metadata describes the normalisation. Atomic.
void saveModelStats(const ModelStats& stats, const std::string& path,
                    const std::map<std::string, std::string>& metadata = {});
// Copy: the statistics are read into RAM. Mapped: G, Σx and Σx² are read-only views of the
// memory-mapped file (no copy; they keep the mapping alive; pages are read when touched).
enum class StatsStorage { Copy, Mapped };
// Reads what saveModelStats or calibrateLayerwise wrote, for `layers` layers (missing sites stay
// empty); the file's metadata into *metadata when given. A truncated or malformed file is an
// npw::Error naming the file and the tensor.
ModelStats loadModelStats(const std::string& path, int64_t layers, std::map<std::string, std::string>* metadata = nullptr,
                          StatsStorage storage = StatsStorage::Copy);

} // namespace npw
