#include "core/models/parameter_count.h"

namespace npw {

int64_t prunableLayerParameters(const LlamaConfig& config, size_t l) {
    return config.hidden_size * (2 * config.num_heads[l] * config.head_dim + 2 * config.num_kv_heads[l] * config.head_dim +
                                 3 * config.intermediate_size[l]);
}

int64_t prunableParameters(const LlamaConfig& config) {
    int64_t count = 0;
    for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l) count += prunableLayerParameters(config, l);
    return count;
}

int64_t checkpointParameters(const LlamaCheckpoint& checkpoint) {
    LlamaWeights weights = checkpoint.weights;  // handles only
    int64_t count = 0;
    for (const auto& [name, tensor] : namedTensors(weights))
        if (tensor->defined()) count += tensor->numel();
    return count;
}

} // namespace npw
