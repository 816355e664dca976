#include "core/eval/sweep_curves.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace npw {

namespace {

bool isDense(const SweepPointKey& p) { return p.method == "dense"; }

// "%.3g": 0.0001, 100, 1e-08 (as the studio has always named λ).
std::string shortNumber(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
    return buffer;
}

} // namespace

std::vector<SweepCurvePoint> sweepCurves(const std::vector<SweepPointKey>& points) {
    // An ablation axis names the curves when the pruned points take more than one value of it.
    std::set<int64_t> samples, seqlens;
    std::set<double> lambdas;
    std::set<std::string> texts;  // perplexity sets (dense points included)
    for (const SweepPointKey& p : points) {
        if (p.plot == SweepPlot::Perplexity) texts.insert(p.evalSet);
        if (isDense(p)) continue;
        samples.insert(p.calibSamples);
        seqlens.insert(p.calibSeqlen);
        if (std::isfinite(p.lambda)) lambdas.insert(p.lambda);
    }
    const bool severalTexts = texts.size() > 1;
    auto curveName = [&](const SweepPointKey& p) {
        std::string name = p.method;
        if (samples.size() > 1) name += " n=" + std::to_string(p.calibSamples);
        if (seqlens.size() > 1) name += " L=" + std::to_string(p.calibSeqlen);
        if (lambdas.size() > 1 && std::isfinite(p.lambda)) name += " λ=" + shortNumber(p.lambda);
        if (p.plot == SweepPlot::Perplexity && severalTexts) name += " · " + p.evalSet;
        return name;
    };

    std::vector<SweepCurvePoint> out;
    std::map<std::string, std::string> curveText;  // perplexity curve → its text
    std::map<std::string, size_t> denseOnText;     // text → the dense model's point, several texts
    for (size_t i = 0; i < points.size(); ++i) {
        const SweepPointKey& p = points[i];
        if (isDense(p)) {
            if (p.plot == SweepPlot::Perplexity && severalTexts) denseOnText[p.evalSet] = i;
            else out.push_back({i, p.plot, std::string(), false});
            continue;
        }
        std::string name = curveName(p);
        if (p.plot == SweepPlot::Perplexity) curveText[name] = p.evalSet;
        out.push_back({i, p.plot, std::move(name), false});
    }
    for (const auto& [name, text] : curveText) {
        const auto dense = denseOnText.find(text);
        if (dense != denseOnText.end()) out.push_back({dense->second, SweepPlot::Perplexity, name, true});
    }
    return out;
}

} // namespace npw
