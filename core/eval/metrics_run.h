#pragma once
// The glue of `npw metrics` (and later the GUI): image sets named by a string, reference
// statistics computed once and cached by (feature network, images), degraded copies for
// sanity checks.
#include "core/eval/feature_network.h"
#include "core/eval/image_metrics.h"

#include <string>

namespace npw {

// "fashion-mnist-test", "fashion-mnist-train", a folder of images, or an IDX image file
// (.gz or plain).
ImageSource imageSourceFromSpec(const std::string& spec);

// The first n images (n <= 0: all).
ImageSource limitImages(ImageSource source, int64_t n);

// "noise:S" adds Gaussian noise of standard deviation S (then clamps to [0,1]); "blur:S" blurs
// with a Gaussian of standard deviation S pixels (kernel radius ceil(3S), replicated borders).
// The noise of image i depends only on (seed, i). "" or "none" returns the source unchanged.
ImageSource degradeImages(ImageSource source, const std::string& how, uint64_t seed = 1);

// $NPW_CACHE_DIR, else $XDG_CACHE_HOME/npw, else ~/.cache/npw.
std::string defaultCacheDir();

struct ResolvedReference {
    ReferenceStats stats;
    std::string description;  // what images made them
    std::string cachePath;    // the file read or written ("" when not cached)
    bool fromCache = false;
};

// spec: a reference-statistics file (.safetensors, written by npw; its feature network must be
// this one) or an image set for imageSourceFromSpec, whose statistics are computed with
// `network` and cached in cacheDir (empty: not cached) under a key of the network's identity
// and the images' identity (path and content hash).
ResolvedReference resolveReference(const std::string& spec, FeatureNetwork& network, const std::string& cacheDir,
                                   int64_t batch = 250, const ProgressFn& progress = nullptr);

} // namespace npw
