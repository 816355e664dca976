#pragma once
// saveHfLlamaDirectoryStreamed (model_loader.h) that an interrupted export takes up again, shard
// by shard: the bounded prune writes its export into its work folder this way (layerwise_prune.h).
#include "core/models/model_loader.h"

#include <functional>
#include <string>
#include <vector>

namespace npw {

struct HfStreamedShards {
    // Asked once per shard, in order, before anything is written: true when `file` (the shard's
    // name in the directory) is already complete there from an earlier run. Such a shard is not
    // written again and its layers are not asked of layerAt. Only a prefix of the shards can be
    // finished: after the first false, later shards are not asked and are written.
    std::function<bool(size_t shard, const std::string& file)> finished;
    // Shard `shard` is committed (fsync'ed, renamed into place) holding `layers`.
    std::function<void(size_t shard, const std::string& file, const std::vector<size_t>& layers)> committed;
};

void saveHfLlamaDirectoryStreamed(const HfStreamedModel& model, const std::string& dir, const std::string& extraConfigJson,
                                  const std::function<LlamaLayerWeights(size_t layer)>& layerAt,
                                  const HfStreamedShards& shards);

} // namespace npw
