#pragma once
// A sweep as a user asks for it, before anything is read: file names, data-set references and
// the axes, as `npw sweep`'s flags and the studio's Sweep tab give them. buildSweepSpec reads
// and tokenizes what it names (the calibration pool through the workbench's one builder, the
// evaluation sets, the zero-shot task) into core's SweepSpec — one translation for the CLI and
// the studio, so both sweep the same way. No Qt.
#include "core/experiments/language_workbench.h"
#include "core/experiments/sweep.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace npw {

struct SweepRequest {
    // The defaults are a quick look (the studio's Sweep form); `npw sweep` sets every field.
    std::vector<std::string> methods{"numerical", "flap", "wanda-sp"};
    std::vector<double> ratios{0.1, 0.2, 0.3};
    int seeds = 1;  // seeds 0..seeds-1 (the calibration's own seed is not used)
    // The one protocol (evaluation_protocol.h): windows of 2048 capped at the model's context, every
    // window unless a cap is given (rows record the cap).
    EvaluationProtocol evaluation;
    // Held-out sets, one perplexity curve per method and set: text:FILE, ids:FILE or a data set
    // (NAME:FILE, parseTextDatasetRef). Empty: none (then a zero-shot task or speed is the point).
    std::vector<std::string> evalSources;
    // Where the windows come from (source, sourceIsIds, perLine) and the axes' defaults
    // (samples, seqlen: used when calibSamples / calibSeqlens are empty).
    CalibrationRequest calibration;
    // The ablation axes; every combination is calibrated (or scored) once. Seqlens are capped
    // at the model's context by the workbench's rule (the rows record the length used).
    std::vector<int64_t> calibSamples, calibSeqlens;
    // Numerical only: absolute λ values, one curve each; empty: relative, λ = lambdaRel / median c.
    std::vector<double> lambdas;
    double lambdaRel = kDefaultLambdaRel;
    AlphaMode alphaMode = AlphaMode::Budget;
    double alpha = std::numeric_limits<double>::quiet_NaN();  // NaN: the model's default
    // Zero-shot accuracy beside perplexity: a task as `npw zeroshot --task` takes it (NAME:FILE;
    // empty: none) and how many of its items to score (0 = all).
    std::string zeroShotTask;
    int64_t zeroShotLimit = 200;
    // Memory and generation speed of every model (Figure 5): prompt tokens, as many decoded.
    bool measureSpeed = false;
    int64_t speedTokens = 64;
    int speedRepeats = 5;  // timed runs, the median reported: short runs beside a redrawing GUI are noisy
};

// One evaluation source of a request (text:FILE, ids:FILE or a data set), read and tokenized;
// named by the file's stem (a data set: by its label). npw::Error naming the item otherwise.
// evalSeqlen: the resolved window length (a data set such as C4 is cut to windows of it).
SweepEvalSet sweepEvalSet(const LanguageModel& lm, const std::string& source, int64_t evalSeqlen);

// An item of a form that lists texts by path (the studio's Sweep tab): a plain path is a text
// (text:PATH); text:, ids: and data-set items stay as they are.
std::string evalSourceOfPath(const std::string& item);

// Reads what the request names (npw::Error naming the file or item) into the spec runSweep runs.
// `warnings` (when given) receives what the user should know before trusting the rows: a
// calibration that reuses a short text heavily (calibrationReuseWarning, per seed and setting)
// and an evaluation text that is the calibration's (calibrationOverlapWarning).
SweepSpec buildSweepSpec(const LanguageModel& lm, const SweepRequest& request, std::vector<std::string>* warnings = nullptr);

// How a speed figure was measured, for a reader: "1 run", or "median of 5 runs, 4980–5410"
// (slowest–fastest, tokens/s); never a spread of 0 for a single run.
std::string speedRunsText(int runs, double slowest, double fastest);

// A row in one line, as the studio logs it while the sweep runs: speed, accuracy or perplexity.
std::string sweepRowSummary(const SweepRow& row);

} // namespace npw
