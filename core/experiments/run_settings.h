#pragma once
// What an interactive run (npw-studio) computes from: the calibration (which statistics) and the
// method (which scores), and the knobs that only re-select. Plain values with JSON forms for the
// workspace file and the studio's stored settings; the defaults are the CLI's (`npw prune`).
// Also the decisions a session makes from them that need no GUI: the calibration request of the
// settings, a method's settings at the knobs, and why the scores shown no longer match what the
// settings and knobs ask (recomputeReason). The studio keeps its names for these
// (app/studio/runsettings.h: studio::RunSettings, …). No Qt.
#include "core/prune/pruner.h"
#include "core/experiments/language_workbench.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace npw {

struct CalibrationSettings {
    std::string source;        // a text file, or token ids when sourceIsIds; empty: the demo corpus
    bool sourceIsIds = false;
    // The protocol's calibration (core/eval/evaluation_protocol.h), as `npw prune` and `npw sweep`.
    int64_t samples = kDefaultCalibrationSamples;  // windows (the paper's 128)
    int64_t seqlen = kDefaultCalibrationSeqlen;    // tokens per window; 0: the model's context, at most 2048
    uint64_t seed = 0;         // of the window offsets (and of the random method's scores)

    bool operator==(const CalibrationSettings& o) const {
        return source == o.source && sourceIsIds == o.sourceIsIds && samples == o.samples && seqlen == o.seqlen &&
               seed == o.seed;
    }
    bool operator!=(const CalibrationSettings& o) const { return !(*this == o); }
};

// The calibration text used when none is given: the demo models' training corpus.
std::string defaultCalibrationSource();
// The held-out text the studio's sweep evaluates on by default (the demo's New Testament).
std::string defaultEvaluationSource();
// The demo's zero-shot task (choose a New Testament verse's true ending), as NAME:FILE.
std::string defaultZeroShotTask();

// What a model brings to the studio's empty fields. The bundled demo models ("demo:lm", or their
// folders under resources/demo) were trained on the King James Bible: they calibrate on the Old
// Testament, evaluate on the New, score the New Testament verse task and continue a New Testament
// prompt. Any other model brings nothing: its user names the texts (an empty calibration source
// is then refused, not silently replaced by the demo's corpus).
struct ModelDefaults {
    bool demo = false;
    std::string calibrationSource;  // empty: none
    std::string evaluationSource;
    std::string zeroShotTask;
    std::string prompt;
};
bool isDemoModel(const std::string& reference);
ModelDefaults modelDefaults(const std::string& reference);

struct RunSettings {
    CalibrationSettings calibration;
    PruneSettings prune;  // method, iters (T), damp (γ), compensation, ranking; λ and ρ come from the knobs
    // A baseline in its own structure instead of prune.method (README, "Baselines"): LLM-Pruner
    // (its global ranking with llmPrunerGlobal), block influence or SliceGPT, with the CLI's
    // defaults for their other options.
    std::optional<BaselineMethod> baseline;
    bool llmPrunerGlobal = false;

    // What Run scores: the baseline when one is chosen, else prune.
    ScoreRequest scoreRequest() const;
};

// The selection knobs: moving them never re-solves (core's MaskSelector, rescoreNumerical).
struct SelectionKnobs {
    double rho = 0.3;
    double alpha = std::numeric_limits<double>::quiet_NaN();  // NaN: the model's default
    AlphaMode mode = AlphaMode::Budget;
    // λ_rel, as `npw prune --lambda-rel`: the score uses λ = λ_rel / median c of the model's
    // layers (ScoreSet::medianC), so one value means the same on every model (issue 15).
    double lambda = kDefaultLambdaRel;

    bool operator==(const SelectionKnobs& o) const;
};

nlohmann::json toJson(const CalibrationSettings& s);
nlohmann::json toJson(const PruneSettings& s);
nlohmann::json toJson(const SelectionKnobs& k);
nlohmann::json toJson(const RunSettings& s);  // {"calibration": …, "prune": …}
// Missing fields keep their defaults; a wrong type or value throws npw::Error naming the field.
CalibrationSettings calibrationFromJson(const nlohmann::json& j);
PruneSettings pruneSettingsFromJson(const nlohmann::json& j);
SelectionKnobs knobsFromJson(const nlohmann::json& j);
RunSettings runSettingsFromJson(const nlohmann::json& j);  // both parts required
// A score set's request: toJson(settings) for a PruneMethod's, for a baseline its name and
// options ({"method": "llm-pruner", "llm_pruner_global": false, "taylor": "param_first",
// "llm_pruner_layers": null or [first, end), "layer_ratio": null}).
nlohmann::json toJson(const ScoreRequest& r);
ScoreRequest scoreRequestFromJson(const nlohmann::json& j);

// The settings' calibration as the workbench takes it (an empty source: the demo corpus).
CalibrationRequest calibrationRequest(const CalibrationSettings& settings);

// The knobs are the selection's settings (ρ, α and its reading; the run keeps scope and
// protection) plus λ_rel, and the studio selects with them directly (workbench select, no
// re-score). What scoring reads of them, and only that, is set here: ρ where the z is solved at
// one ρ (the box-constrained z, Algorithm 1: ScoreSettings::solvesAtRatio), and a relative λ at
// the knobs' λ_rel (the λ the z shown and a box solve use). α and its reading are never scored.
PruneSettings scoredAtKnobs(PruneSettings settings, const SelectionKnobs& knobs);
ScoreRequest scoredAtKnobs(ScoreRequest request, const SelectionKnobs& knobs);  // its settings

// What Run and Recompute compute off the GUI thread: the calibration (`calibration` as given when
// it holds statistics, else calibrated from `settings`), then each request's score set on it (a
// baseline's from the calibration windows, drawn again from `settings` when the statistics came
// from a workspace and no windows were kept).
struct ScoringResult {
    LanguagePruningWorkbench::Calibration calibration;
    bool recalibrated = false;
    std::vector<ComputedScores> scores;  // in the order of `list`
};
ScoringResult calibrateAndScore(const LanguageModel& lm, LanguagePruningWorkbench::Calibration calibration,
                                const CalibrationSettings& settings, const std::vector<ScoreRequest>& list,
                                const ProgressFn& progress = nullptr, const CalibrationOptions& options = {});

// Why the scores of `current` (a score set of `workbench`) no longer show what is asked: the
// statistics came from other calibration settings (`statsFrom`, null when unknown) than
// `asked`, or a box-constrained set was solved at another ρ/λ than the knobs' (its z is solved
// per ρ and λ). Empty when nothing needs a new solve; else a sentence for the user.
std::string recomputeReason(const LanguagePruningWorkbench& workbench, const std::string& current,
                            const std::optional<CalibrationSettings>& statsFrom, const CalibrationSettings& asked,
                            const SelectionKnobs& knobs);

// One line each for a log: the calibration adopted ("Calibrated on 128 windows of 128 tokens of
// kjv-ot.txt."; calibrationSeqlen's note in brackets) and a box-constrained solve's outcome.
std::string calibrationLine(const CalibrationSummary& summary, const std::string& note);
std::string boxSolveLine(const ScoreSet& scores);

// What the views call an attention unit: "head", or on a GQA model "KV group" (or "query slot"
// when query heads are the unit).
std::string attentionUnitLabel(const LlamaConfig& config, AttentionUnitKind kind);

} // namespace npw
