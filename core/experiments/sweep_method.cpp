#include "core/experiments/sweep_method.h"

#include "core/prune/method_registry.h"
#include "core/util/error.h"

namespace npw {

std::string siteDamageOnImageModelRefusal() {
    return "ranking lstar-kl (method numerical-lstar-kl) is not available for image models: it measures each "
           "site's damage with the language model's forward pass on text calibration windows, which an image "
           "model (a class token, 2D rotary positions, generated samples) does not run; use lstar-rel (the "
           "default, method numerical) or lstar";
}

SweepMethod parseSweepMethod(const std::string& name, SweptModel model) {
    const MethodInfo* row = findMethod(name);
    // Unknown (or a baseline): parsePruneMethod's error, listing the methods.
    if (!row || row->kind == MethodKind::Baseline) return SweepMethod{parsePruneMethod(name)};
    if (model == SweptModel::Image && !row->image) {
        if (row->fixedRanking == CrossLayerRanking::MeasuredDamage) throw Error(siteDamageOnImageModelRefusal());
        throw Error("method " + name + " is not available for image models");
    }
    SweepMethod m;
    m.method = row->method;
    m.compensation = row->fixedCompensation;
    m.boxConstrained = row->fixedBox;
    m.crossLayer = row->fixedRanking;
    return m;
}

} // namespace npw
