#include "core/experiments/sweep_request.h"

#include "core/experiments/dataset_inputs.h"
#include "core/text/token_ids.h"
#include "core/util/atomic_file.h"
#include "core/util/content_hash.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>

namespace npw {

SweepEvalSet sweepEvalSet(const LanguageModel& lm, const std::string& source, int64_t evalSeqlen) {
    if (const std::optional<TextDatasetRef> dataset = parseTextDatasetRef(source)) {
        SweepEvalSet set = datasetEvalSet(*dataset, lm, evalSeqlen);
        set.hash = fileContentHash(dataset->path);
        return set;
    }
    const auto colon = source.find(':');
    const std::string kind = colon == std::string::npos ? std::string() : source.substr(0, colon);
    if (kind != "text" && kind != "ids")
        throw Error("evaluation set '" + source + "' must be text:FILE, ids:FILE or a data set (" + textDatasetSyntax() + ")");
    SweepEvalSet set;
    const std::string path = source.substr(colon + 1);
    set.name = std::filesystem::path(path).stem().string();
    set.isText = kind == "text";  // bits per byte only for text
    set.ids = set.isText ? lm.encode(readTextInput(path, "evaluation text"), true) : readTokenIdFile(path, lm.model->config().vocab_size);
    set.hash = fileContentHash(path);
    return set;
}

std::string evalSourceOfPath(const std::string& item) {
    if (item.rfind("text:", 0) == 0 || item.rfind("ids:", 0) == 0) return item;
    try {
        if (parseTextDatasetRef(item)) return item;
    } catch (const Error&) {
        return item;  // a data set's name with a bad split: buildSweepSpec says so
    }
    return "text:" + item;
}

SweepSpec buildSweepSpec(const LanguageModel& lm, const SweepRequest& r, std::vector<std::string>* warnings) {
    SweepSpec spec;
    spec.methods = r.methods;
    spec.ratios = r.ratios;
    spec.seeds = r.seeds;
    spec.calibSamples = r.calibSamples.empty() ? std::vector<int64_t>{r.calibration.samples} : r.calibSamples;
    spec.calibSeqlens = r.calibSeqlens.empty() ? std::vector<int64_t>{r.calibration.seqlen} : r.calibSeqlens;
    // NaN: relative λ (SweepSpec's convention); the listed values are absolute.
    spec.lambdas = r.lambdas.empty() ? std::vector<double>{std::numeric_limits<double>::quiet_NaN()} : r.lambdas;
    spec.lambdaRel = r.lambdaRel;
    spec.alphaMode = r.alphaMode;
    spec.alpha = r.alpha;
    spec.evaluation = r.evaluation;
    // The workbench's one calibration builder (its pool; the sweep draws each seed's windows).
    CalibrationPool pool = readCalibrationPool(lm, r.calibration.source, r.calibration.sourceIsIds, r.calibration.perLine);

    if (!r.zeroShotTask.empty()) spec.zeroShotTasks = loadZeroShotTasks(r.zeroShotTask, r.zeroShotLimit);
    spec.measureSpeed = r.measureSpeed;
    spec.speedPromptTokens = spec.speedDecodeTokens = r.speedTokens;
    spec.speedRepeats = r.speedRepeats;
    // Data sets cut to windows of the length the protocol resolves to on this model.
    const int64_t evalSeqlen = spec.evaluation.seqlenFor(lm.causal().config().max_position_embeddings);
    for (const std::string& source : r.evalSources) {
        spec.evalSets.push_back(sweepEvalSet(lm, source, evalSeqlen));
        if (warnings) {
            const SweepEvalSet& set = spec.evalSets.back();
            const std::string w = calibrationOverlapWarning(pool, set.name, set.hash, set.ids);
            if (!w.empty()) warnings->push_back(w);
        }
    }
    if (warnings) {
        // The windows each seed and setting will draw (cheap: offsets and copies), checked for
        // reuse. A setting that cannot be drawn is runSweep's error to report, in its order.
        for (int seed = 0; seed < r.seeds; ++seed)
            for (int64_t samples : spec.calibSamples)
                for (int64_t seqlen : spec.calibSeqlens) {
                    std::string w;
                    try {
                        w = calibrationReuseWarning(
                            CalibrationSummary::of(drawCalibration(pool, lm, samples, seqlen, uint64_t(seed))));
                    } catch (const Error&) {
                    }
                    if (!w.empty() && std::find(warnings->begin(), warnings->end(), w) == warnings->end())
                        warnings->push_back(w);
                }
    }
    setSweepCalibrationPool(spec, std::move(pool));
    return spec;
}

std::string speedRunsText(int runs, double slowest, double fastest) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(0);
    if (runs <= 0) return "runs not recorded";
    if (runs == 1) return "1 run";
    out << "median of " << runs << " runs";
    if (std::isfinite(slowest) && std::isfinite(fastest)) out << ", " << slowest << "–" << fastest;
    return out.str();
}

std::string sweepRowSummary(const SweepRow& row) {
    std::ostringstream out;
    out << row.method << " at ρ = " << row.ratio << ": " << std::fixed;  // ρ as given (%g)
    if (row.isSpeedRow())
        out << "decode " << std::setprecision(0) << row.decodeTokensPerSecond << " tokens/s ("
            << speedRunsText(row.speedRuns, row.decodeSlowest, row.decodeFastest) << "), prefill "
            << row.prefillTokensPerSecond << " tokens/s, weights " << std::setprecision(2) << row.weightsMiB
            << " MiB, KV cache " << std::setprecision(3) << row.kvCacheMiB << " MiB";
    else if (std::isfinite(row.acc))
        out << row.evalSet << " accuracy " << std::setprecision(3) << row.acc << " (" << row.evalTokens << " items)";
    else
        out << std::setprecision(1) << 100 * row.achievedRatio << "% of attention + MLP removed, perplexity "
            << std::setprecision(2) << row.ppl;
    return out.str();
}

} // namespace npw
