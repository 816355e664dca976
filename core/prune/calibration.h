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
// calibrate() runs the whole model on batches of windows and taps every scored layer in the
// same pass: all layers' statistics are held at once (float64: D² per attention layer,
// D_inter² per MLP layer). That is fine up to ~1B parameters; a 7B model needs ~35 GB. Streaming
// layer by layer (forward one block over all windows, keep only that block's statistics, spill
// them to disk) is future work; nothing here depends on the statistics being built in one pass.
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

// --save-stats: raw sums in float64, tensor names "layers.{l}.{attn|mlp}.{gram|sum|sum_sq}" and
// "layers.{l}.{attn|mlp}.tokens" (I64 [1]); metadata describes the normalisation. Atomic.
void saveModelStats(const ModelStats& stats, const std::string& path,
                    const std::map<std::string, std::string>& metadata = {});
// Reads what saveModelStats wrote, for `layers` layers (missing sites stay empty); the file's
// metadata into *metadata when given.
ModelStats loadModelStats(const std::string& path, int64_t layers, std::map<std::string, std::string>* metadata = nullptr);

} // namespace npw
