#include "core/experiments/sweep_request.h"

#include "core/experiments/dataset_inputs.h"
#include "core/text/token_ids.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>

namespace npw {

SweepEvalSet sweepEvalSet(const LanguageModel& lm, const std::string& source, int64_t evalSeqlen) {
    if (const std::optional<TextDatasetRef> dataset = parseTextDatasetRef(source))
        return datasetEvalSet(*dataset, lm, evalSeqlen);
    const auto colon = source.find(':');
    const std::string kind = colon == std::string::npos ? std::string() : source.substr(0, colon);
    if (kind != "text" && kind != "ids")
        throw Error("evaluation set '" + source + "' must be text:FILE, ids:FILE or a data set (" + textDatasetSyntax() + ")");
    SweepEvalSet set;
    const std::string path = source.substr(colon + 1);
    set.name = std::filesystem::path(path).stem().string();
    set.isText = kind == "text";  // bits per byte only for text
    set.ids = set.isText ? lm.encode(readTextInput(path, "evaluation text"), true) : readTokenIdFile(path, lm.model->config().vocab_size);
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

SweepSpec buildSweepSpec(const LanguageModel& lm, const SweepRequest& r) {
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
    spec.evalSeqlen = r.evalSeqlen;
    spec.evalMaxWindows = r.evalMaxWindows;
    // The workbench's one calibration builder (its pool; the sweep draws each seed's windows).
    setSweepCalibrationPool(spec, readCalibrationPool(lm, r.calibration.source, r.calibration.sourceIsIds,
                                                      r.calibration.perLine));
    if (!r.zeroShotTask.empty()) spec.zeroShotTasks = loadZeroShotTasks(r.zeroShotTask, r.zeroShotLimit);
    spec.measureSpeed = r.measureSpeed;
    spec.speedPromptTokens = spec.speedDecodeTokens = r.speedTokens;
    spec.speedRepeats = r.speedRepeats;
    for (const std::string& source : r.evalSources) spec.evalSets.push_back(sweepEvalSet(lm, source, spec.evalSeqlen));
    return spec;
}

std::string sweepRowSummary(const SweepRow& row) {
    std::ostringstream out;
    out << row.method << " at ρ = " << row.ratio << ": " << std::fixed;  // ρ as given (%g)
    if (row.isSpeedRow())
        out << "decode " << std::setprecision(0) << row.decodeTokensPerSecond << " tokens/s, prefill "
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
