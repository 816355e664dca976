#include "core/prune/calibration.h"

#include "core/io/safetensors.h"
#include "core/io/shape_text.h"
#include "core/models/language_model.h"
#include "core/text/token_ids.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"
#include "core/util/finite.h"
#include "core/util/number_text.h"
#include "core/models/non_finite.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <algorithm>
#include <limits>
#include <map>
#include <cstdlib>
#include <random>
#include <sstream>
#include <tuple>
#include <unistd.h>

namespace npw {

namespace {

std::string siteName(TapSite site) { return site == TapSite::AttentionOutputInput ? "attn" : "mlp"; }

std::string statName(size_t layer, const std::string& site, const std::string& field) {
    return "layers." + std::to_string(layer) + "." + site + "." + field;
}

// Accumulates a tapped input (o_proj's or down_proj's, windows first..first+B−1 of `windows`);
// one that holds NaN or ±∞ is an error naming the layer, the site and the first such window,
// where it happens (the summed statistics would only say that something, somewhere,
// overflowed). The running sum tells cheaply: a float64 sum of float32 values cannot overflow,
// so it is non-finite exactly when an input was; only then is the input searched.
void accumulateFinite(LayerStats& stats, const at::Tensor& input, int64_t layer, TapSite site, int64_t first,
                      int64_t windows) {
    stats.accumulate(input);
    if (allFinite(stats.sum)) return;
    for (int64_t b = 0; b < input.size(0); ++b)
        if (const std::string values = nonFiniteValues(input[b]); !values.empty())
            throw Error("calibration: layer " + std::to_string(layer) + "'s " +
                        (site == TapSite::AttentionOutputInput ? "attention output (o_proj's input)"
                                                               : "MLP activation (down_proj's input)") +
                        " became non-finite (" + values + ") in calibration window " + std::to_string(first + b + 1) +
                        " of " + std::to_string(windows) + kNonFiniteHint);
    throw Error("calibration: layer " + std::to_string(layer) + "'s statistics became non-finite in calibration windows " +
                std::to_string(first + 1) + "-" + std::to_string(first + input.size(0)) + " of " + std::to_string(windows) +
                kNonFiniteHint);
}

// Also completes the Gram matrix (accumulate updates one triangle): every calibration ends here.
void requireFinite(LayerStats& s, size_t layer, const char* what) {
    if (s.channels() == 0) return;
    s.symmetriseGram();
    if (!allFinite(s.gram) || !allFinite(s.sum))
        throw Error("calibration: the input of " + std::string(what) + " in layer " + std::to_string(layer) +
                    " has NaN or infinite values (the model overflows on the calibration data; try float32 weights)");
}

// The one rule for where a window starts: uniform over [0, length − seqlen] as rng() mod the
// range (the same windows on every platform, unlike std::uniform_int_distribution).
int64_t drawWindowStart(std::mt19937_64& rng, int64_t length, int64_t seqlen) {
    return static_cast<int64_t>(rng() % static_cast<uint64_t>(length - seqlen + 1));
}

void requirePositive(int64_t samples, int64_t seqlen) {
    if (samples <= 0) throw Error("calibration: the number of samples must be positive, got " + std::to_string(samples));
    if (seqlen <= 0) throw Error("calibration: the window length must be positive, got " + std::to_string(seqlen));
}

// The one place a drawn set's provenance is filled in (the three draws below differ only in
// where their windows come from).
// Positions covered by windows of `seqlen` at `starts` (the union of the intervals).
int64_t coveredPositions(std::vector<int64_t> starts, int64_t seqlen) {
    std::sort(starts.begin(), starts.end());
    int64_t covered = 0, end = std::numeric_limits<int64_t>::min();
    for (int64_t start : starts) {
        const int64_t from = std::max(start, end);
        if (start + seqlen > from) covered += start + seqlen - from;
        end = std::max(end, start + seqlen);
    }
    return covered;
}

CalibrationSet newCalibrationSet(int64_t samples, int64_t seqlen, uint64_t seed, const std::string& source) {
    requirePositive(samples, seqlen);
    CalibrationSet set;
    set.seqlen = seqlen;
    set.seed = seed;
    set.source = source;
    set.windows.reserve(static_cast<size_t>(samples));
    return set;
}

} // namespace

CalibrationSet drawCalibrationSet(const std::vector<int32_t>& stream, int64_t samples, int64_t seqlen, uint64_t seed,
                                  const std::string& source) {
    const std::string where = source.empty() ? std::string("the calibration stream") : "calibration file '" + source + "'";
    CalibrationSet set = newCalibrationSet(samples, seqlen, seed, source);
    const auto length = static_cast<int64_t>(stream.size());
    if (length < seqlen)
        throw Error(where + " has " + std::to_string(length) + " tokens, fewer than one calibration window of " +
                    std::to_string(seqlen) + " (use a longer file or shorter windows)");
    set.streamTokens = length;
    std::mt19937_64 rng(seed);
    std::vector<int64_t> starts;
    for (int64_t i = 0; i < samples; ++i) {
        const int64_t start = drawWindowStart(rng, length, seqlen);
        starts.push_back(start);
        set.windows.emplace_back(stream.begin() + start, stream.begin() + start + seqlen);
    }
    set.distinctTokens = coveredPositions(std::move(starts), seqlen);
    return set;
}

CalibrationSet drawCalibrationSetFromSequences(const std::vector<std::vector<int32_t>>& sequences, int64_t samples,
                                               int64_t seqlen, uint64_t seed, const std::string& source) {
    const std::string where = source.empty() ? std::string("the calibration sequences") : "calibration file '" + source + "'";
    CalibrationSet set = newCalibrationSet(samples, seqlen, seed, source);
    std::vector<size_t> longEnough;
    int64_t tokens = 0;
    for (size_t i = 0; i < sequences.size(); ++i) {
        tokens += int64_t(sequences[i].size());
        if (int64_t(sequences[i].size()) >= seqlen) longEnough.push_back(i);
    }
    if (int64_t(longEnough.size()) < samples)
        throw Error(where + " has " + std::to_string(longEnough.size()) + " sequences of at least " +
                    std::to_string(seqlen) + " tokens; " + std::to_string(samples) +
                    " samples were asked for (one window per sequence)");
    std::mt19937_64 rng(seed);
    for (size_t i = longEnough.size() - 1; i > 0; --i) std::swap(longEnough[i], longEnough[size_t(rng() % (i + 1))]);
    set.streamTokens = tokens;
    set.sourceIsIds = true;
    for (int64_t k = 0; k < samples; ++k) {
        const std::vector<int32_t>& sequence = sequences[longEnough[size_t(k)]];
        set.windows.emplace_back(sequence.begin(), sequence.begin() + seqlen);
    }
    set.distinctTokens = set.tokens();  // distinct sequences, one window each
    return set;
}

CalibrationSet drawCalibrationSetFromDocuments(const std::vector<std::string>& documents, const DocumentEncoder& encode,
                                               int64_t samples, int64_t seqlen, uint64_t seed, const std::string& source) {
    const std::string where = source.empty() ? std::string("the calibration documents") : "'" + source + "'";
    CalibrationSet set = newCalibrationSet(samples, seqlen, seed, source);
    const auto count = static_cast<uint64_t>(documents.size());
    if (count == 0) throw Error(where + " holds no documents");
    // What is known of each document: 0 not tokenized yet, 1 shorter than a window, 2 long enough.
    std::vector<uint8_t> known(documents.size(), 0);
    uint64_t shortKnown = 0, draws = 0;
    auto tokens = [&](uint64_t i) {
        std::vector<int32_t> ids = encode(documents[size_t(i)]);
        if (known[size_t(i)] == 0 && int64_t(ids.size()) < seqlen) ++shortKnown;
        known[size_t(i)] = int64_t(ids.size()) >= seqlen ? 2 : 1;
        return ids;
    };
    auto noneLongEnough = [&] {
        return Error(where + " has no document of at least " + std::to_string(seqlen) + " tokens (" +
                     std::to_string(count) + " documents; use shorter windows)");
    };
    std::mt19937_64 rng(seed);
    std::map<uint64_t, std::vector<int64_t>> startsPerDocument;  // a document may be drawn again
    for (int64_t k = 0; k < samples; ++k) {
        for (;;) {
            if (shortKnown == count) throw noneLongEnough();
            // Rejection sampling as GPTQ's get_c4 does. Should long documents be rare, a bounded
            // number of draws is followed by one pass that tokenizes the rest, so that a file
            // without any long document ends in an error, not in an endless loop.
            if (++draws == 64 * count + 4096) {
                for (uint64_t i = 0; i < count; ++i)
                    if (known[size_t(i)] == 0) tokens(i);
                if (shortKnown == count) throw noneLongEnough();
            }
            const uint64_t i = rng() % count;
            if (known[size_t(i)] == 1) continue;
            const std::vector<int32_t> ids = tokens(i);
            const auto length = static_cast<int64_t>(ids.size());
            if (length < seqlen) continue;
            const int64_t start = drawWindowStart(rng, length, seqlen);
            set.windows.emplace_back(ids.begin() + start, ids.begin() + start + seqlen);
            startsPerDocument[i].push_back(start);
            set.streamTokens += length;
            break;
        }
    }
    for (auto& [document, starts] : startsPerDocument) set.distinctTokens += coveredPositions(std::move(starts), seqlen);
    return set;
}

std::vector<std::vector<int32_t>> readTokenIdLines(const std::string& path, int64_t vocabSize) {
    std::vector<std::vector<int32_t>> out;
    std::istringstream lines(readTextFile(path));
    int64_t number = 0;
    for (std::string line; std::getline(lines, line);) {
        ++number;
        std::istringstream words(line);
        std::vector<int32_t> ids;
        for (std::string word; words >> word;) {
            size_t used = 0;
            long long id = -1;
            try {
                id = std::stoll(word, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != word.size() || id < 0 || id >= vocabSize)
                throw Error("token-id file '" + path + "' line " + std::to_string(number) + ": '" + word +
                            "' is not a token id in [0, " + std::to_string(vocabSize) + ")");
            ids.push_back(int32_t(id));
        }
        if (!ids.empty()) out.push_back(std::move(ids));
    }
    if (out.empty()) throw Error("token-id file '" + path + "' holds no ids");
    return out;
}

std::vector<int32_t> readCalibrationStream(const std::string& path, bool idFile, const LanguageModel& model) {
    if (idFile) return readTokenIdFile(path, model.model->config().vocab_size);
    const std::string text = readTextInput(path, "calibration text");
    if (text.empty()) throw Error("calibration text '" + path + "' is empty");
    return model.encode(text, /*addBos=*/true);  // tokenized once, one BOS, as the perplexity protocol
}

CalibrationSummary CalibrationSummary::of(const CalibrationSet& set) {
    CalibrationSummary s;
    s.source = set.source;
    s.sourceIsIds = set.sourceIsIds;
    s.samples = static_cast<int64_t>(set.windows.size());
    s.seqlen = set.seqlen;
    s.streamTokens = set.streamTokens;
    s.tokens = set.tokens();
    s.seed = set.seed;
    s.distinctTokens = set.distinctTokens;
    s.sourceHash = set.sourceHash;
    return s;
}

std::map<std::string, std::string> CalibrationSummary::toMetadata() const {
    return {{"calibration_source", source},
            {"calibration_kind", sourceIsIds ? "ids" : "text"},
            {"calibration_samples", std::to_string(samples)},
            {"calibration_seqlen", std::to_string(seqlen)},
            {"calibration_stream_tokens", std::to_string(streamTokens)},
            {"calibration_tokens", std::to_string(tokens)},
            {"calibration_seed", std::to_string(seed)},
            {"calibration_distinct_tokens", std::to_string(distinctTokens)},
            {"calibration_source_hash", sourceHash}};
}

CalibrationSummary CalibrationSummary::fromMetadata(const std::map<std::string, std::string>& metadata,
                                                    const std::string& file) {
    auto field = [&](const std::string& key) -> const std::string& {
        auto it = metadata.find(key);
        if (it == metadata.end())
            throw Error("statistics file '" + file + "' lacks the metadata field '" + key +
                        "' (not a statistics file npw wrote with its calibration)");
        return it->second;
    };
    auto integer = [&](const std::string& key) {
        try {
            return std::stoll(field(key));
        } catch (const std::logic_error&) {
            throw Error("statistics file '" + file + "': metadata field '" + key + "' is not an integer");
        }
    };
    CalibrationSummary s;
    s.source = field("calibration_source");
    s.sourceIsIds = field("calibration_kind") == "ids";
    s.samples = integer("calibration_samples");
    s.seqlen = integer("calibration_seqlen");
    s.streamTokens = integer("calibration_stream_tokens");
    s.tokens = integer("calibration_tokens");
    s.seed = static_cast<uint64_t>(integer("calibration_seed"));
    // Recorded since the one protocol; older statistics files lack them (0 and empty: unknown).
    if (metadata.count("calibration_distinct_tokens")) s.distinctTokens = integer("calibration_distinct_tokens");
    if (const auto it = metadata.find("calibration_source_hash"); it != metadata.end()) s.sourceHash = it->second;
    s.statsFile = file;
    return s;
}

int64_t ModelStats::tokens() const {
    for (const auto* sites : {&attn, &mlp})
        for (const LayerStats& s : *sites)
            if (s.channels() > 0) return s.tokens;
    return 0;
}

namespace {

void checkCalibrationSet(const LlamaConfig& config, const CalibrationSet& set) {
    if (set.windows.empty()) throw Error("calibration: no windows to run");
    if (set.seqlen > config.max_position_embeddings)
        throw Error("calibration windows of " + std::to_string(set.seqlen) + " tokens exceed the model's context of " +
                    std::to_string(config.max_position_embeddings) + " (use shorter windows)");
    config.checkAttentionSpan(set.seqlen, "the calibration window");
    for (const auto& window : set.windows) {
        if (static_cast<int64_t>(window.size()) != set.seqlen)
            throw Error("calibration: a window has " + std::to_string(window.size()) + " tokens, expected " +
                        std::to_string(set.seqlen));
        for (int32_t id : window)
            if (id < 0 || id >= config.vocab_size)
                throw Error("calibration: token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                            std::to_string(config.vocab_size));
    }
}

int64_t windowsPerBatch(const LlamaConfig& config, c10::ScalarType dtype, const CalibrationSet& set,
                        const CalibrationOptions& options) {
    const int64_t maxHeads = *std::max_element(config.num_heads.begin(), config.num_heads.end());
    const int64_t attentionBytesPerWindow =
        std::max<int64_t>(1, maxHeads * set.seqlen * set.seqlen * static_cast<int64_t>(c10::elementSize(dtype)));
    return std::max<int64_t>(
        1, std::min(options.batchTokens / set.seqlen, options.batchAttentionBytes / attentionBytesPerWindow));
}

at::Tensor windowIds(const CalibrationSet& set, int64_t first, int64_t count) {
    at::Tensor ids = at::empty({count, set.seqlen}, at::kLong);
    auto acc = ids.accessor<int64_t, 2>();
    for (int64_t b = 0; b < count; ++b)
        for (int64_t t = 0; t < set.seqlen; ++t) acc[b][t] = set.windows[static_cast<size_t>(first + b)][static_cast<size_t>(t)];
    return ids;
}

// Zeroed statistics of one layer's scored sites (undefined where the layer has no heads / channels).
std::pair<LayerStats, LayerStats> emptyLayerStats(const LlamaConfig& config, size_t l, c10::Device device) {
    std::pair<LayerStats, LayerStats> out;
    if (config.num_heads[l] > 0) out.first = LayerStats(config.num_heads[l] * config.head_dim, device);
    if (config.intermediate_size[l] > 0) out.second = LayerStats(config.intermediate_size[l], device);
    return out;
}

// A block's seven matrices. One rule (llamaKeepsStoredDtype) says which of them the model keeps
// in bfloat16 / float16 for a float32 CPU runtime (a mapped file's views, widened in every
// product); both functions below ask it, so "holds narrow weights" and "what widening changes"
// cannot disagree.
constexpr at::Tensor LlamaLayerWeights::*kBlockMatrices[] = {
    &LlamaLayerWeights::wq,     &LlamaLayerWeights::wk,   &LlamaLayerWeights::wv,    &LlamaLayerWeights::wo,
    &LlamaLayerWeights::w_gate, &LlamaLayerWeights::w_up, &LlamaLayerWeights::w_down};

bool holdsNarrowWeights(const LlamaLayerWeights& L, const Runtime& rt) {
    for (at::Tensor LlamaLayerWeights::*m : kBlockMatrices)
        if (llamaKeepsStoredDtype(L.*m, rt)) return true;
    return false;
}

// The same block with those matrices widened to the runtime's float32 (the rest shared as it is).
LlamaLayerWeights widenedBlock(const LlamaLayerWeights& L, const Runtime& rt) {
    LlamaLayerWeights d = L;
    for (at::Tensor LlamaLayerWeights::*m : kBlockMatrices)
        if (llamaKeepsStoredDtype(L.*m, rt)) d.*m = (L.*m).to(rt.dtype).contiguous();
    return d;
}

std::map<std::string, std::string> statsFileMetadata(const std::map<std::string, std::string>& metadata) {
    std::map<std::string, std::string> meta = metadata;
    meta["format"] = "npw-calibration-stats";
    meta["normalisation"] =
        "raw sums over all calibration tokens: gram = sum x^T x, sum = sum x, sum_sq = sum x^2; divide by tokens "
        "(the numerical score and Theorem 3 use gram / tokens)";
    return meta;
}

} // namespace

ModelStats calibrateWithForward(const LlamaConfig& config, c10::Device statsDevice, int64_t samples,
                                int64_t perBatch, const CalibrationForward& forward, const ProgressFn& progress) {
    if (samples <= 0 || perBatch <= 0) throw Error("calibration needs at least one sample and a positive batch size");
    ModelStats stats;
    stats.attn.resize(static_cast<size_t>(config.num_layers));
    stats.mlp.resize(static_cast<size_t>(config.num_layers));
    for (size_t l = 0; l < stats.attn.size(); ++l)
        std::tie(stats.attn[l], stats.mlp[l]) = emptyLayerStats(config, l, statsDevice);
    int64_t first = 0;
    const ActivationTap tap = [&stats, &first, samples](int64_t layer, TapSite site, const at::Tensor& input) {
        auto& sites = site == TapSite::AttentionOutputInput ? stats.attn : stats.mlp;
        accumulateFinite(sites.at(static_cast<size_t>(layer)), input, layer, site, first, samples);
    };
    reportProgress(progress, "calibrate", 0, static_cast<double>(samples));
    for (first = 0; first < samples; first += perBatch) {
        const int64_t count = std::min(perBatch, samples - first);
        forward(first, count, tap);
        reportProgress(progress, "calibrate", static_cast<double>(first + count), static_cast<double>(samples));
    }
    for (size_t l = 0; l < stats.attn.size(); ++l) {
        requireFinite(stats.attn[l], l, "o_proj");
        requireFinite(stats.mlp[l], l, "down_proj");
    }
    return stats;
}

ModelStats calibrate(const LlamaModel& model, const CalibrationSet& set, const ProgressFn& progress,
                     const CalibrationOptions& options) {
    checkCalibrationSet(model.config(), set);
    if (model.runtime().device.is_cpu() && !options.blockRuntime &&
        layerwiseHiddenBytes(model, set) <= modelStatsBytes(model.config()) / 8) {
        // Layer by layer, the statistics kept here: a mapped 16-bit block is widened once per
        // layer instead of once per batch, and the output head (not a scored site) never runs.
        ModelStats stats;
        stats.attn.resize(static_cast<size_t>(model.config().num_layers));
        stats.mlp.resize(static_cast<size_t>(model.config().num_layers));
        CalibrationOptions layered = options;
        layered.widenBlocks = true;
        calibrateEachLayer(
            model, set,
            [&stats](size_t l, const LayerStats& attn, const LayerStats& mlp, const std::vector<at::Tensor>&) {
                stats.attn[l] = attn;
                stats.mlp[l] = mlp;
            },
            progress, layered);
        return stats;
    }
    const c10::Device statsDevice = options.statsOnModelDevice ? model.runtime().device : c10::Device(c10::kCPU);
    return calibrateWithForward(
        model.config(), statsDevice, static_cast<int64_t>(set.windows.size()), windowsPerBatch(model.config(), model.runtime().dtype, set, options),
        [&](int64_t first, int64_t count, const ActivationTap& tap) {
            model.logits(windowIds(set, first, count), /*cache=*/nullptr, /*keepOnDevice=*/true, tap);
        },
        progress);
}

int64_t modelStatsBytes(const LlamaConfig& config) {
    int64_t bytes = 0;
    for (int64_t l = 0; l < config.num_layers; ++l)
        for (int64_t d : {config.num_heads[static_cast<size_t>(l)] * config.head_dim,
                          config.intermediate_size[static_cast<size_t>(l)]})
            if (d > 0) bytes += (d * d + 2 * d + 1) * 8;
    return bytes;
}

bool statsBelongOnDisk(const LlamaConfig& config, int64_t physicalBytes) {
    return physicalBytes > 0 && static_cast<double>(modelStatsBytes(config)) > kStatsRamFraction * static_cast<double>(physicalBytes);
}

int64_t layerwiseHiddenBytes(const LlamaModel& model, const CalibrationSet& set) {
    return set.tokens() * model.config().hidden_size * static_cast<int64_t>(c10::elementSize(model.runtime().dtype));
}

void calibrateEachLayer(const LlamaModel& model, const CalibrationSet& set, const LayerStatsSink& sink,
                        const ProgressFn& progress, const CalibrationOptions& options,
                        const LayerwiseCalibrationResume* resume) {
    const LlamaConfig& config = model.config();
    checkCalibrationSet(config, set);
    c10::InferenceMode guard;
    const auto windows = static_cast<int64_t>(set.windows.size());
    // Where the blocks run: the model's runtime, or options.blockRuntime (one block copied there
    // at a time, the weights left where the model holds them).
    const Runtime compute = options.blockRuntime.value_or(model.runtime());
    const bool copyBlocks = options.blockRuntime.has_value();
    const int64_t perBatch = windowsPerBatch(config, compute.dtype, set, options);
    const LlamaWeights& weights = model.deviceWeights();
    const c10::Device statsDevice = options.statsOnModelDevice ? compute.device : c10::Device(c10::kCPU);
    // The forward's activations: the runtime's dtype (a mapped bfloat16 / float16 embedding
    // table is widened row by row as it is gathered, as llamaForward does).
    const at::TensorOptions activations = at::TensorOptions().device(compute.device).dtype(compute.dtype);

    // Hidden states of every window between blocks, batched exactly as calibrate() batches them
    // (so each block sees the same float32 inputs): tokens · hidden · element size bytes.
    std::vector<at::Tensor> hidden;
    int64_t batches = 0;
    for (int64_t first = 0; first < windows; first += perBatch) {
        const int64_t count = std::min(perBatch, windows - first);
        ++batches;
        if (!resume)
            hidden.push_back(at::embedding(weights.embed, windowIds(set, first, count).to(weights.embed.device())).to(activations));
    }
    size_t firstLayer = 0;
    if (resume) {
        if (static_cast<int64_t>(resume->hidden.size()) != batches || resume->nextLayer > static_cast<size_t>(config.num_layers))
            throw Error("calibration: the saved hidden states do not fit these windows (" +
                        std::to_string(resume->hidden.size()) + " batches, expected " + std::to_string(batches) + ")");
        for (const at::Tensor& h : resume->hidden) hidden.push_back(h.to(activations));
        firstLayer = resume->nextLayer;
    }
    const LlamaPositionTables tables = llamaPositionTables(config, 0, set.seqlen, activations);

    const double total = static_cast<double>(windows * config.num_layers);
    reportProgress(progress, "calibrate", static_cast<double>(static_cast<int64_t>(firstLayer) * windows), total);
    for (size_t l = firstLayer; l < static_cast<size_t>(config.num_layers); ++l) {
        std::pair<LayerStats, LayerStats> layerStats = emptyLayerStats(config, l, statsDevice);
        LayerStats& attn = layerStats.first;
        LayerStats& mlp = layerStats.second;
        int64_t done = 0;
        const ActivationTap tap = [&attn, &mlp, &done, windows](int64_t layer, TapSite site, const at::Tensor& input) {
            accumulateFinite(site == TapSite::AttentionOutputInput ? attn : mlp, input, layer, site, done, windows);
        };
        try {
            // This block on the compute runtime (a copy only when it is not the model's own).
            const bool widen = !copyBlocks && options.widenBlocks && hidden.size() > 1 && holdsNarrowWeights(weights.layers[l], compute);
            const LlamaLayerWeights copied = copyBlocks ? llamaLayerOnRuntime(weights.layers[l], compute)
                                             : widen    ? widenedBlock(weights.layers[l], compute)
                                                        : LlamaLayerWeights{};
            const LlamaLayerWeights& block = copyBlocks || widen ? copied : weights.layers[l];
            for (at::Tensor& x : hidden) {
                x = llamaBlockForward(config, block, static_cast<int64_t>(l), x, tables, nullptr, tap);
                done += x.size(0);
                reportProgress(progress, "calibrate", static_cast<double>(static_cast<int64_t>(l) * windows + done), total);
            }
        } catch (const c10::OutOfMemoryError& e) {
            // Which layer, where, and what it held: LibTorch's first line names the size it asked for.
            const std::string what = e.what_without_backtrace();
            throw Error("calibration: layer " + std::to_string(l) + " ran out of memory on " + compute.describe() + " (" +
                        what.substr(0, what.find('\n')) + "); it holds one block, the hidden states of " +
                        std::to_string(windows) + " windows (" + byteSizeText(set.tokens() * config.hidden_size *
                                                   static_cast<int64_t>(c10::elementSize(compute.dtype))) +
                        ") and this layer's statistics in float64: fewer --nsamples or a shorter --seqlen need less");
        }
        requireFinite(attn, l, "o_proj");
        requireFinite(mlp, l, "down_proj");
        sink(l, attn, mlp, hidden);
    }
}

ModelStats calibrateLayerwise(const LlamaModel& model, const CalibrationSet& set, const std::string& statsPath,
                              const std::map<std::string, std::string>& metadata, const ProgressFn& progress,
                              const CalibrationOptions& options) {
    const LlamaConfig& config = model.config();
    checkCalibrationSet(config, set);

    // The file's header is known before any statistic: every size follows from the config.
    std::vector<SafeTensorsEntry> entries;
    for (TapSite site : {TapSite::AttentionOutputInput, TapSite::MlpDownInput})
        for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l) {
            const int64_t d = site == TapSite::AttentionOutputInput ? config.num_heads[l] * config.head_dim
                                                                    : config.intermediate_size[l];
            if (d <= 0) continue;
            const std::string name = siteName(site);
            entries.push_back({statName(l, name, "gram"), at::kDouble, {d, d}});
            entries.push_back({statName(l, name, "sum"), at::kDouble, {d}});
            entries.push_back({statName(l, name, "sum_sq"), at::kDouble, {d}});
            entries.push_back({statName(l, name, "tokens"), at::kLong, {1}});
        }
    SafeTensorsStreamWriter writer(statsPath, entries, statsFileMetadata(metadata));
    calibrateEachLayer(
        model, set,
        [&writer](size_t l, const LayerStats& attn, const LayerStats& mlp, const std::vector<at::Tensor>&) {
            for (const auto& [site, s] : {std::pair<const char*, const LayerStats*>{"attn", &attn}, {"mlp", &mlp}}) {
                if (s->channels() == 0) continue;
                writer.write(statName(l, site, "gram"), s->gram);
                writer.write(statName(l, site, "sum"), s->sum);
                writer.write(statName(l, site, "sum_sq"), s->sumSq);
                writer.write(statName(l, site, "tokens"), at::full({1}, s->tokens, at::kLong));
            }
        },
        progress, options);
    writer.commit();
    return loadModelStats(statsPath, config.num_layers, nullptr, StatsStorage::Mapped);
}

void saveModelStats(const ModelStats& stats, const std::string& path, const std::map<std::string, std::string>& metadata) {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (TapSite site : {TapSite::AttentionOutputInput, TapSite::MlpDownInput}) {
        const auto& sites = site == TapSite::AttentionOutputInput ? stats.attn : stats.mlp;
        for (size_t l = 0; l < sites.size(); ++l) {
            const LayerStats& s = sites[l];
            if (s.channels() == 0) continue;
            const std::string name = siteName(site);
            tensors.emplace_back(statName(l, name, "gram"), s.gram.cpu());
            tensors.emplace_back(statName(l, name, "sum"), s.sum.cpu());
            tensors.emplace_back(statName(l, name, "sum_sq"), s.sumSq.cpu());
            tensors.emplace_back(statName(l, name, "tokens"), at::full({1}, s.tokens, at::kLong));
        }
    }
    writeSafeTensors(path, tensors, statsFileMetadata(metadata));
}

ModelStats loadModelStats(const std::string& path, int64_t layers, std::map<std::string, std::string>* metadata,
                          StatsStorage storage) {
    auto file = SafeTensorsFile::open(path);
    if (metadata) *metadata = file->metadata();
    // A view of the mapping where the file holds float64 (npw's own files always do), a
    // float64 copy otherwise.
    auto float64 = [&](const std::string& name) {
        if (storage == StatsStorage::Mapped && file->info(name).dtype == "F64") return file->view(name);
        return file->load(name).to(at::kDouble);
    };
    ModelStats stats;
    stats.attn.resize(static_cast<size_t>(layers));
    stats.mlp.resize(static_cast<size_t>(layers));
    for (TapSite site : {TapSite::AttentionOutputInput, TapSite::MlpDownInput}) {
        auto& sites = site == TapSite::AttentionOutputInput ? stats.attn : stats.mlp;
        const std::string name = siteName(site);
        for (size_t l = 0; l < sites.size(); ++l) {
            if (!file->has(statName(l, name, "gram"))) continue;
            LayerStats s;
            s.gram = float64(statName(l, name, "gram"));
            s.sum = float64(statName(l, name, "sum"));
            s.sumSq = float64(statName(l, name, "sum_sq"));
            const std::string tokensName = statName(l, name, "tokens");
            const TensorInfo& tokensInfo = file->info(tokensName);
            if ((tokensInfo.dtype != "I64" && tokensInfo.dtype != "I32") || tokensInfo.end - tokensInfo.begin !=
                                                                                  (tokensInfo.dtype == "I64" ? 8u : 4u))
                throw Error("statistics file '" + path + "': tensor '" + tokensName +
                            "' must hold one integer (the token count), got " + tokensInfo.dtype + " " +
                            formatShape(tokensInfo.shape));
            s.tokens = file->load(tokensName).to(at::kLong).reshape({-1})[0].item<int64_t>();
            if (s.tokens <= 0)
                throw Error("statistics file '" + path + "': tensor '" + tokensName + "' says " + std::to_string(s.tokens) +
                            " calibration tokens; it must be positive");
            const int64_t d = s.sum.numel();
            if (s.gram.dim() != 2 || s.gram.size(0) != d || s.gram.size(1) != d || s.sumSq.numel() != d)
                throw Error("statistics file '" + path + "': layer " + std::to_string(l) + " " + name +
                            " has inconsistent shapes");
            sites[l] = std::move(s);
        }
    }
    return stats;
}

} // namespace npw
