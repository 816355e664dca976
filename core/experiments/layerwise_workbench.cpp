// The studio's share of the layer-by-layer road (layerwise_workbench.h).
#include "core/experiments/layerwise_workbench.h"

#include "core/models/model_loader.h"
#include "core/models/weight_values.h"
#include "core/util/error.h"
#include "core/util/number_text.h"
#include "core/util/system_memory.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <sys/types.h>
#include <unistd.h>

namespace npw {

namespace fs = std::filesystem;

namespace {

constexpr const char* kScratchPrefix = "npw-studio-grams-";

// Scratch files of processes that no longer run (a studio killed while it held statistics):
// removed, so that kills do not pile up gigabytes. Files of running processes are theirs.
void removeOrphanedScratchFiles(const fs::path& dir) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind(kScratchPrefix, 0) != 0) continue;
        const std::string rest = name.substr(std::char_traits<char>::length(kScratchPrefix));
        const size_t dash = rest.find('-');
        if (dash == std::string::npos || dash == 0) continue;
        pid_t pid = 0;
        try {
            pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
        } catch (const std::exception&) {
            continue;
        }
        if (pid <= 0 || pid == ::getpid()) continue;
        if (::kill(pid, 0) == -1 && errno == ESRCH) {
            std::error_code removeError;
            fs::remove(it->path(), removeError);
        }
    }
}

} // namespace

LanguageModel openLanguageModelInSteps(const std::string& model, const Runtime& runtime,
                                       const std::function<void(const LlamaCheckpoint&)>& headersRead,
                                       const ProgressFn& progress) {
    LanguageModel lm;
    lm.name = model;
    LlamaCheckpoint ckpt = loadLlamaCheckpoint(model, WeightStorage::Mapped);  // headers only where the format maps
    lm.tokenizer = openTokenizerOf(ckpt);
    if (headersRead) headersRead(ckpt);
    if (!ckpt.valuesChecked) {
        // What LlamaModel would check in one go, one layer at a time: a 7B's 13.5 GB are read here
        // once, with progress, and a cancel stops between layers.
        const int64_t layers = ckpt.config.num_layers;
        for (int64_t l = -1; l < layers; ++l) {
            reportProgress(progress, "check weights", static_cast<double>(l + 1), static_cast<double>(layers + 1));
            checkLayerValues(ckpt, l);
        }
        reportProgress(progress, "check weights", static_cast<double>(layers + 1), static_cast<double>(layers + 1));
        ckpt.valuesChecked = true;
    }
    lm.model = std::make_shared<LlamaModel>(std::move(ckpt), runtime);
    return lm;
}

PruneRoad studioPruneRoad(const LlamaConfig& config) {
    return choosePruneRoad(config, physicalMemoryBytes(), /*forceLayerwise=*/false);
}

std::shared_ptr<const LayerwiseStatistics> LayerwiseStatistics::calibrate(const LanguageModel& lm,
                                                                          const CalibrationRequest& request,
                                                                          const std::string& scratchDir,
                                                                          const ProgressFn& progress,
                                                                          const CalibrationOptions& options) {
    if (!lm.model) throw Error("no model is open");
    std::string note;
    const CalibrationSet set = buildCalibrationSet(lm, request, &note);
    return calibrate(*lm.model, set, scratchDir, progress, options, note);
}

std::shared_ptr<const LayerwiseStatistics> LayerwiseStatistics::calibrate(const LlamaModel& model,
                                                                          const CalibrationSet& set,
                                                                          const std::string& scratchDir,
                                                                          const ProgressFn& progress,
                                                                          const CalibrationOptions& options,
                                                                          const std::string& note) {
    c10::InferenceMode guard;
    const LlamaConfig& config = model.config();
    std::shared_ptr<LayerwiseStatistics> out(new LayerwiseStatistics);
    out->note_ = note;
    out->summary_ = CalibrationSummary::of(set);

    // float64 triangles when they fit in the checkpoint's own size plus the hidden states
    // (layerwise_prune.h's bound), else float32.
    const int64_t hiddenBytes = calibrationHiddenBytes(config, set.tokens());
    out->hiddenBytes_ = hiddenBytes;
    out->boundBytes_ = scratchBoundBytes(model.checkpoint(), hiddenBytes);
    out->modelSource_ = model.checkpoint().source;
    const at::ScalarType dtype = scratchDtype(config, out->boundBytes_);

    static std::atomic<int> counter{0};
    const fs::path dir(scratchDir.empty() ? fs::temp_directory_path() : fs::path(scratchDir));
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create the scratch folder '" + dir.string() + "': " + ec.message());
    removeOrphanedScratchFiles(dir);
    out->file_ = (dir / (std::string(kScratchPrefix) + std::to_string(::getpid()) + "-" + std::to_string(++counter) + ".bin"))
                     .string();
    // From here on the destructor removes the file, also when calibration throws (a cancel).
    out->scratch_ = std::make_unique<GramScratch>(out->file_, config, dtype);

    const auto start = std::chrono::steady_clock::now();
    calibrateEachLayer(
        model, set,
        [&](size_t l, const LayerStats& attn, const LayerStats& mlp, const std::vector<at::Tensor>&) {
            out->scratch_->write(l, attn, mlp);
        },
        progress, options);
    out->seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

LayerwiseStatistics::~LayerwiseStatistics() {
    scratch_.reset();  // closes the file
    if (!file_.empty()) {
        std::error_code ec;
        fs::remove(file_, ec);
    }
}

ScoreSet LayerwiseStatistics::score(const LlamaModel& model, const PruneSettings& settings, const ProgressFn& progress) const {
    refuseMeasuredDamageLayerByLayer(settings, "use the L*-relative ranking (the default)");
    c10::InferenceMode guard;
    const LlamaCheckpoint& checkpoint = model.checkpoint();
    return computeScoresByLayer(checkpoint.config, checkpoint.weights.embed, scoredLayersFrom(checkpoint, *scratch_),
                                settings, progress);
}

LayerwiseExport LayerwiseStatistics::exportSelection(const LlamaModel& model, const WorkbenchSelection& selection,
                                                     const PruneSettings& given, const std::string& outDir,
                                                     const std::string& sourceModel, const ProgressFn& progress) const {
    if (!selection.scores)
        throw Error(selection.method + " is a baseline's selection: it is written in its own structure, not from these "
                                       "statistics");
    const PruneSettings settings = LanguagePruningWorkbench::appliedSettings(selection, given);
    // The selection's α is resolved already (settings.alpha): it is the report's α too.
    return exportScores(model, *selection.scores, selection.selection, settings, selection.alpha, outDir, sourceModel,
                        progress);
}

LayerwiseExport LayerwiseStatistics::exportScores(const LlamaModel& model, const ScoreSet& scores,
                                                  const SelectionResult& selection, const PruneSettings& settings,
                                                  double defaultAlpha, const std::string& outDir,
                                                  const std::string& sourceModel, const ProgressFn& progress) const {
    const LlamaCheckpoint& checkpoint = model.checkpoint();
    if (checkpoint.source != modelSource_)
        throw Error("internal: the statistics in " + file_ + " are of '" + modelSource_ + "', not of '" +
                    checkpoint.source + "'");
    const nlohmann::json scratchFacts = statisticsScratchJson(precision(), bytes(), boundBytes_, hiddenBytes_);
    return writeLayerwiseExport(
        checkpoint, *scratch_, scores, selection, settings, defaultAlpha, outDir,
        [&](const PruneReport& report) {
            return layerwiseManifestJson(report, settings, summary_, sourceModel, scratchFacts);
        },
        LayerwiseExportOptions{}, progress);
}

int64_t LayerwiseStatistics::bytes() const { return scratch_ ? scratch_->bytes() : 0; }

std::string LayerwiseStatistics::precision() const {
    return scratch_ && scratch_->dtype() == at::kFloat ? "float32" : "float64";
}

std::string LayerwiseStatistics::describe() const {
    return "Calibrated layer by layer on " + std::to_string(summary_.samples) + " windows of " +
           std::to_string(summary_.seqlen) + " tokens; the Gram matrices' upper triangles (" + precision() + ", " +
           byteSizeText(bytes()) + ") are in " + file_ + " until the model is closed.";
}

} // namespace npw
