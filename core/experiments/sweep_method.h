#pragma once
// A sweep's method names (`npw sweep --methods`, the studio's Sweep and Images tabs): a pruning
// method's name as `npw prune --method` takes it, or one of numerical's variants, each of which
// fixes one setting. The one parser of them, for the language sweep and the image sweep alike.
#include "core/prune/settings.h"

#include <string>

namespace npw {

// What a sweep method name asks of the scores; every other setting comes from the sweep.
struct SweepMethod {
    PruneMethod method = PruneMethod::Numerical;
    CompensationKind compensation = CompensationKind::MethodDefault;
    bool boxConstrained = false;  // solved again for every ratio
    CrossLayerRanking crossLayer = kDefaultCrossLayerRanking;
};

// Which model a sweep prunes: an image model (LlamaGen) cannot be ranked lstar-kl.
enum class SweptModel { Language, Image };

// A per-unit method's or a variant's name (their rows in method_registry.h: "numerical-nocomp",
// "numerical-box", "numerical-z", "numerical-lstar", ... each fixes one setting). npw::Error for
// any other name (listing the methods), and for a row not offered for image models on one
// (numerical-lstar-kl: saying why).
SweepMethod parseSweepMethod(const std::string& name, SweptModel model = SweptModel::Language);

// Why an image model is not ranked lstar-kl: the one message of the image sweep and the image
// workbench (npw prune IMAGE_MODEL --ranking lstar-kl, the studio's Images tab).
std::string siteDamageOnImageModelRefusal();

} // namespace npw
