#pragma once
// What a run of npw-studio computes from: the calibration (which statistics) and the method
// (which scores), and the knobs that only re-select. Plain values with JSON forms for the
// workspace file and QSettings; the defaults are the CLI's (`npw prune`).
#include "core/experiments/language_workbench.h"
#include "core/prune/pruner.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace studio {

struct CalibrationSettings {
    std::string source;        // a text file, or token ids when sourceIsIds; empty: the demo corpus
    bool sourceIsIds = false;
    int64_t samples = 128;     // windows (the paper's 128)
    int64_t seqlen = 128;      // tokens per window (capped at the model's context)
    uint64_t seed = 0;         // of the window offsets (and of the random method's scores)

    bool operator==(const CalibrationSettings& o) const {
        return source == o.source && sourceIsIds == o.sourceIsIds && samples == o.samples && seqlen == o.seqlen &&
               seed == o.seed;
    }
    bool operator!=(const CalibrationSettings& o) const { return !(*this == o); }
};

// The calibration text used when none is given: the demo models' training corpus.
std::string defaultCalibrationSource();
// The held-out text the sweep evaluates on by default (the demo's New Testament).
std::string defaultEvaluationSource();
// The demo's zero-shot task (choose a New Testament verse's true ending), as NAME:FILE.
std::string defaultZeroShotTask();

struct RunSettings {
    CalibrationSettings calibration;
    npw::PruneSettings prune;  // method, iters (T), damp (γ), compensation, ranking; λ and ρ come from the knobs
    // A baseline in its own structure instead of prune.method (README, "Baselines"): LLM-Pruner
    // (its global ranking with llmPrunerGlobal), block influence or SliceGPT, with the CLI's
    // defaults for their other options.
    std::optional<npw::BaselineMethod> baseline;
    bool llmPrunerGlobal = false;

    // What Run scores: the baseline when one is chosen, else prune.
    npw::ScoreRequest scoreRequest() const;
};

// The selection knobs: moving them never re-solves (core's MaskSelector, rescoreNumerical).
struct SelectionKnobs {
    double rho = 0.3;
    double alpha = std::numeric_limits<double>::quiet_NaN();  // NaN: the model's default
    npw::AlphaMode mode = npw::AlphaMode::Budget;
    // λ_rel, as `npw prune --lambda-rel`: the score uses λ = λ_rel / median c of the model's
    // layers (ScoreSet::medianC), so one value means the same on every model (issue 15).
    double lambda = npw::kDefaultLambdaRel;

    bool operator==(const SelectionKnobs& o) const;
};

nlohmann::json toJson(const CalibrationSettings& s);
nlohmann::json toJson(const npw::PruneSettings& s);
nlohmann::json toJson(const SelectionKnobs& k);
// Missing fields keep their defaults; a wrong type or value throws npw::Error naming the field.
CalibrationSettings calibrationFromJson(const nlohmann::json& j);
npw::PruneSettings pruneSettingsFromJson(const nlohmann::json& j);
SelectionKnobs knobsFromJson(const nlohmann::json& j);
// A score set's request: toJson(settings) for a PruneMethod's, for a baseline its name and
// options ({"method": "llm-pruner", "llm_pruner_global": false, "taylor": "param_first",
// "llm_pruner_layers": null or [first, end), "layer_ratio": null}).
nlohmann::json toJson(const npw::ScoreRequest& r);
npw::ScoreRequest scoreRequestFromJson(const nlohmann::json& j);

} // namespace studio
