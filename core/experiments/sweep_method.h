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

// "numerical-nocomp" (no compensation), "numerical-box" (the box-constrained score),
// "numerical-z", "numerical-lstar", "numerical-lstar-rel", "numerical-lstar-kl" (numerical
// ranked across layers so), or a PruneMethod's name. npw::Error for any other name (listing
// the methods), and for numerical-lstar-kl on an image model (saying why).
SweepMethod parseSweepMethod(const std::string& name, SweptModel model = SweptModel::Language);

// Why an image model is not ranked lstar-kl: the one message of the image sweep and the image
// workbench (npw prune IMAGE_MODEL --ranking lstar-kl, the studio's Images tab).
std::string siteDamageOnImageModelRefusal();

} // namespace npw
