#pragma once
// LlamaGen's VQ image tokenizer (FoundationVision/LlamaGen tokenizer/tokenizer_image/
// vq_model.py, reference.md §4): encoder → quant_conv → L2-normalised codebook lookup →
// post_quant_conv → decoder. ResnetBlocks of GroupNorm + swish + 3×3 convs (1×1 nin_shortcut
// when the width changes), AttnBlocks (single-head, 1×1 q/k/v/proj_out) at the lowest
// resolution and in the middle, Downsample = pad (0,1,0,1) + 3×3 stride-2 conv, Upsample =
// nearest ×2 + 3×3 conv; the decoder has one ResnetBlock more per level than the encoder.
//
// The sizes are read from the weights themselves (conv widths, level and block counts, codebook),
// so LlamaGen's VQ-16 and VQ-8 and small models of the same design load alike; GroupNorm uses 32
// groups as LlamaGen does unless an npw config.json says otherwise.
#include "core/models/runtime.h"

#include <ATen/core/Tensor.h>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace npw {

struct VqConfig {
    int64_t codebookSize = 16384;
    int64_t embedDim = 8;             // codebook vectors (quant_conv's output width)
    bool l2Norm = true;               // codes and encoder outputs compared after L2 normalisation
    int64_t zChannels = 256;
    int64_t inChannels = 3, outChannels = 3;
    int64_t encoderCh = 128;                  // encoder.conv_in's width (0: no encoder)
    std::vector<int64_t> encoderChannels;     // per level, full resolution first (ch·ch_mult)
    std::vector<int64_t> decoderChannels;     // per level, full resolution first
    int64_t encoderResBlocks = 2;             // per level
    int64_t decoderResBlocks = 3;             // per level (LlamaGen: encoder's + 1)
    int64_t normGroups = 32;
    double normEps = 1e-6;

    bool hasEncoder() const { return !encoderChannels.empty(); }
    int64_t downsample() const { return int64_t{1} << (decoderChannels.size() - 1); }
    std::string describe() const;  // "VQ: codebook 16384×8, levels 128,128,256,256,512, z 256, downsample 16"
};

// Every tensor of the model with its shape, in LlamaGen's names.
std::vector<std::pair<std::string, std::vector<int64_t>>> vqTensorShapes(const VqConfig& config);

// The two halves as functions of named parameters (LlamaGen's names), differentiable: the
// demo trainer runs them with autograd, VqModel with its loaded weights.
using VqParameterFn = std::function<at::Tensor(const std::string&)>;
// images [B, in, H, W] in [0, 1] (mapped to [−1, 1] first) → quant_conv's output [B, e, H/f, W/f].
at::Tensor vqEncoderForward(const VqConfig& config, const VqParameterFn& params, const at::Tensor& images);
// quantised latents [B, e, h, w] → images [B, out, h·f, w·f] in the model's range (about [−1, 1]).
at::Tensor vqDecoderForward(const VqConfig& config, const VqParameterFn& params, const at::Tensor& latent);

class VqModel {
public:
    // A PyTorch checkpoint (LlamaGen's {"model": state dict, "optimizer", "discriminator", ...}
    // or a raw state dict) or an npw directory (config.json "model_type": "llamagen-vq" +
    // model.safetensors). Encoder weights are optional (decoding needs only the decoder).
    // npw::Error names the file, the tensor, the expected and actual shapes.
    static std::shared_ptr<VqModel> load(const std::string& path, const Runtime& runtime = Runtime{});
    // From named tensors (float32, LlamaGen's names); the config is inferred from the shapes.
    static std::shared_ptr<VqModel> fromTensors(const std::map<std::string, at::Tensor>& tensors,
                                                const std::string& source, const Runtime& runtime = Runtime{},
                                                int64_t normGroups = 32, bool l2Norm = true);

    const VqConfig& config() const { return config_; }
    const std::string& source() const { return source_; }

    // codes [B, h, w] int64 → images [B, out, h·f, w·f] float32 in the model's range
    // (LlamaGen: about [−1, 1]), on the CPU.
    at::Tensor decodeRaw(const at::Tensor& codes) const;
    // The same mapped to [0, 1] as LlamaGen saves samples: clamp((x + 1) / 2, 0, 1).
    at::Tensor decode(const at::Tensor& codes) const;
    // images [B, in, H, W] in [0, 1] (mapped to [−1, 1] as LlamaGen's data pipeline does) →
    // codes [B, H/f, W/f] int64, the nearest (L2-normalised) codebook entry of each position.
    at::Tensor encode(const at::Tensor& images) const;

    // Writes config.json + model.safetensors (atomically per file).
    void save(const std::string& dir) const;

private:
    VqModel() = default;
    at::Tensor p(const std::string& name) const;
    VqConfig config_;
    std::string source_;
    Runtime runtime_;
    std::map<std::string, at::Tensor> params_;  // on the runtime
};

} // namespace npw
