#include "core/experiments/sweep_method.h"

#include "core/util/error.h"

namespace npw {

std::string siteDamageOnImageModelRefusal() {
    return "ranking lstar-kl (method numerical-lstar-kl) is not available for image models: it measures each "
           "site's damage with the language model's forward pass on text calibration windows, which an image "
           "model (a class token, 2D rotary positions, generated samples) does not run; use lstar-rel (the "
           "default, method numerical) or lstar";
}

SweepMethod parseSweepMethod(const std::string& name, SweptModel model) {
    SweepMethod m;
    if (name == "numerical-nocomp") {
        m.compensation = CompensationKind::None;
    } else if (name == "numerical-box") {
        m.boxConstrained = true;
    } else if (name == "numerical-z") {
        m.crossLayer = CrossLayerRanking::Relaxed;
    } else if (name == "numerical-lstar") {
        m.crossLayer = CrossLayerRanking::CompensatedError;
    } else if (name == "numerical-lstar-rel") {
        m.crossLayer = CrossLayerRanking::RelativeCompensatedError;
    } else if (name == "numerical-lstar-kl") {
        if (model == SweptModel::Image) throw Error(siteDamageOnImageModelRefusal());
        m.crossLayer = CrossLayerRanking::MeasuredDamage;
    } else {
        m.method = parsePruneMethod(name);
    }
    return m;
}

} // namespace npw
