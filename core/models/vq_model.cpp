#include "core/models/vq_model.h"
#include "core/models/non_finite.h"

#include "core/io/safetensors.h"
#include "core/io/shape_text.h"
#include "core/io/torch_checkpoint.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <string_view>

namespace fs = std::filesystem;

namespace npw {

using Shape = std::vector<int64_t>;
using nlohmann::json;

std::string VqConfig::describe() const {
    std::string levels;
    for (int64_t c : decoderChannels) levels += (levels.empty() ? "" : ",") + std::to_string(c);
    return "VQ: codebook " + std::to_string(codebookSize) + "×" + std::to_string(embedDim) + ", decoder levels " + levels +
           ", z " + std::to_string(zChannels) + ", downsample " + std::to_string(downsample()) +
           (hasEncoder() ? "" : ", no encoder");
}

namespace {

void addConv(std::vector<std::pair<std::string, Shape>>& out, const std::string& name, int64_t cout, int64_t cin, int64_t k) {
    out.push_back({name + ".weight", {cout, cin, k, k}});
    out.push_back({name + ".bias", {cout}});
}
void addNorm(std::vector<std::pair<std::string, Shape>>& out, const std::string& name, int64_t c) {
    out.push_back({name + ".weight", {c}});
    out.push_back({name + ".bias", {c}});
}
void addResnet(std::vector<std::pair<std::string, Shape>>& out, const std::string& p, int64_t cin, int64_t cout) {
    addNorm(out, p + ".norm1", cin);
    addConv(out, p + ".conv1", cout, cin, 3);
    addNorm(out, p + ".norm2", cout);
    addConv(out, p + ".conv2", cout, cout, 3);
    if (cin != cout) addConv(out, p + ".nin_shortcut", cout, cin, 1);
}
void addAttn(std::vector<std::pair<std::string, Shape>>& out, const std::string& p, int64_t c) {
    addNorm(out, p + ".norm", c);
    for (const char* n : {".q", ".k", ".v", ".proj_out"}) addConv(out, p + n, c, c, 1);
}

} // namespace

std::vector<std::pair<std::string, Shape>> vqTensorShapes(const VqConfig& c) {
    std::vector<std::pair<std::string, Shape>> out;
    if (c.hasEncoder()) {
        const int64_t L = static_cast<int64_t>(c.encoderChannels.size());
        addConv(out, "encoder.conv_in", c.encoderCh, c.inChannels, 3);
        int64_t in = c.encoderCh;
        for (int64_t i = 0; i < L; ++i) {
            const std::string p = "encoder.conv_blocks." + std::to_string(i);
            const int64_t ch = c.encoderChannels[static_cast<size_t>(i)];
            for (int64_t j = 0; j < c.encoderResBlocks; ++j) {
                addResnet(out, p + ".res." + std::to_string(j), in, ch);
                in = ch;
                if (i == L - 1) addAttn(out, p + ".attn." + std::to_string(j), in);
            }
            if (i != L - 1) addConv(out, p + ".downsample.conv", in, in, 3);
        }
        addResnet(out, "encoder.mid.0", in, in);
        addAttn(out, "encoder.mid.1", in);
        addResnet(out, "encoder.mid.2", in, in);
        addNorm(out, "encoder.norm_out", in);
        addConv(out, "encoder.conv_out", c.zChannels, in, 3);
        addConv(out, "quant_conv", c.embedDim, c.zChannels, 1);
    }
    out.push_back({"quantize.embedding.weight", {c.codebookSize, c.embedDim}});
    addConv(out, "post_quant_conv", c.zChannels, c.embedDim, 1);
    const int64_t L = static_cast<int64_t>(c.decoderChannels.size());
    int64_t in = c.decoderChannels.back();
    addConv(out, "decoder.conv_in", in, c.zChannels, 3);
    addResnet(out, "decoder.mid.0", in, in);
    addAttn(out, "decoder.mid.1", in);
    addResnet(out, "decoder.mid.2", in, in);
    for (int64_t b = 0; b < L; ++b) {  // decoder.conv_blocks run from the lowest resolution up
        const std::string p = "decoder.conv_blocks." + std::to_string(b);
        const int64_t ch = c.decoderChannels[static_cast<size_t>(L - 1 - b)];
        for (int64_t j = 0; j < c.decoderResBlocks; ++j) {
            addResnet(out, p + ".res." + std::to_string(j), in, ch);
            in = ch;
            if (b == 0) addAttn(out, p + ".attn." + std::to_string(j), in);
        }
        if (b != L - 1) addConv(out, p + ".upsample.conv", in, in, 3);
    }
    addNorm(out, "decoder.norm_out", in);
    addConv(out, "decoder.conv_out", c.outChannels, in, 3);
    return out;
}

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
    throw Error("VQ model '" + source + "': " + problem);
}

// The result refers into `t` only; name and why are views taken by value, so that callers may
// pass temporaries without a reference parameter bound to them (nothing to dangle from).
const at::Tensor& need(const std::map<std::string, at::Tensor>& t, const std::string& source, std::string_view name,
                       std::string_view why) {
    auto it = t.find(std::string(name));
    if (it == t.end()) fail(source, "tensor '" + std::string(name) + "' is missing (" + std::string(why) + ")");
    return it->second;
}

int64_t countIndexed(const std::map<std::string, at::Tensor>& t, const std::string& prefix, const std::string& suffix) {
    int64_t n = 0;
    while (t.count(prefix + std::to_string(n) + suffix)) ++n;
    return n;
}

VqConfig inferConfig(const std::map<std::string, at::Tensor>& t, const std::string& source, int64_t normGroups) {
    VqConfig c;
    c.normGroups = normGroups;
    const at::Tensor& emb = need(t, source, "quantize.embedding.weight", "the codebook");
    if (emb.dim() != 2) fail(source, "tensor 'quantize.embedding.weight' has shape " + formatShape(emb.sizes()) + ", expected [codes, dim]");
    c.codebookSize = emb.size(0);
    c.embedDim = emb.size(1);
    const at::Tensor& pq = need(t, source, "post_quant_conv.weight", "the decoder's input projection");
    if (pq.dim() != 4) fail(source, "tensor 'post_quant_conv.weight' has shape " + formatShape(pq.sizes()) + ", expected a 1×1 conv");
    c.zChannels = pq.size(0);
    const int64_t levels = countIndexed(t, "decoder.conv_blocks.", ".res.0.conv1.weight");
    if (levels == 0) fail(source, "tensor 'decoder.conv_blocks.0.res.0.conv1.weight' is missing: no decoder");
    c.decoderResBlocks = countIndexed(t, "decoder.conv_blocks.0.res.", ".conv1.weight");
    c.decoderChannels.assign(static_cast<size_t>(levels), 0);
    for (int64_t b = 0; b < levels; ++b)
        c.decoderChannels[static_cast<size_t>(levels - 1 - b)] =
            t.at("decoder.conv_blocks." + std::to_string(b) + ".res.0.conv1.weight").size(0);
    c.outChannels = need(t, source, "decoder.conv_out.weight", "the decoder's output conv").size(0);
    if (t.count("encoder.conv_in.weight")) {
        const at::Tensor& in = t.at("encoder.conv_in.weight");
        c.encoderCh = in.size(0);
        c.inChannels = in.dim() == 4 ? in.size(1) : 0;
        const int64_t el = countIndexed(t, "encoder.conv_blocks.", ".res.0.conv1.weight");
        c.encoderResBlocks = countIndexed(t, "encoder.conv_blocks.0.res.", ".conv1.weight");
        for (int64_t i = 0; i < el; ++i)
            c.encoderChannels.push_back(t.at("encoder.conv_blocks." + std::to_string(i) + ".res.0.conv1.weight").size(0));
        if (c.encoderChannels.empty()) fail(source, "the encoder has no levels (encoder.conv_blocks.0.res.0.conv1.weight)");
    }
    return c;
}

} // namespace

std::shared_ptr<VqModel> VqModel::fromTensors(const std::map<std::string, at::Tensor>& tensors,
                                              const std::string& source, const Runtime& runtime, int64_t normGroups,
                                              bool l2Norm) {
    VqConfig config = inferConfig(tensors, source, normGroups);
    config.l2Norm = l2Norm;
    auto model = std::shared_ptr<VqModel>(new VqModel());
    model->config_ = config;
    model->source_ = source;
    model->runtime_ = runtime;
    const std::string why = "for " + config.describe();
    const auto shapes = vqTensorShapes(config);
    std::set<std::string> expected;
    for (const auto& entry : shapes) expected.insert(entry.first);
    for (const auto& entry : tensors)
        if (!expected.count(entry.first))
            fail(source, "unexpected tensor '" + entry.first + "' (shape " + formatShape(entry.second.sizes()) + ") " + why);
    for (const auto& [name, shape] : shapes) {
        const at::Tensor& t = need(tensors, source, name, "expected shape " + formatShape(shape) + " " + why);
        if (t.sizes() != at::IntArrayRef(shape))
            fail(source, "tensor '" + name + "' has shape " + formatShape(t.sizes()) + ", expected " + formatShape(shape) + " " + why);
        if (name.find("norm") != std::string::npos && name.find(".weight") != std::string::npos && shape[0] % config.normGroups != 0)
            fail(source, "tensor '" + name + "' has " + std::to_string(shape[0]) + " channels, not a multiple of the " +
                             std::to_string(config.normGroups) + " GroupNorm groups");
        if (!allFinite(t)) fail(source, "tensor '" + name + "' holds NaN or Inf values");
        model->params_[name] = t.to(runtime.device, at::kFloat).contiguous();
    }
    return model;
}

std::shared_ptr<VqModel> VqModel::load(const std::string& model, const Runtime& runtime) {
    const std::string path = resolveModelPath(model);
    std::error_code ec;
    std::map<std::string, at::Tensor> tensors;
    int64_t groups = 32;
    bool l2 = true;
    if (fs::is_directory(path, ec)) {
        const std::string configPath = (fs::path(path) / "config.json").string();
        if (!fs::is_regular_file(configPath)) fail(path, "the directory has no config.json");
        const json j = json_fields::readJsonFile(configPath, "VQ model config '" + configPath + "'");
        std::string modelType;
        try {
            modelType = j.is_object() ? json_fields::stringOr(j, "model_type", "", "") : "";
            groups = json_fields::intOr(j, "norm_groups", 32, "");
            l2 = json_fields::boolOr(j, "codebook_l2_norm", true, "");
        } catch (const Error& e) {
            fail(configPath, e.what());
        }
        if (modelType != "llamagen-vq") fail(configPath, "not an npw VQ config (model_type must be \"llamagen-vq\")");
        if (groups < 1 || groups > 65536)
            fail(configPath, "norm_groups is " + std::to_string(groups) + "; expected 1 to 65536 GroupNorm groups");
        auto file = SafeTensorsFile::open((fs::path(path) / "model.safetensors").string());
        for (const std::string& name : file->names()) tensors[name] = file->loadFloat(name);
    } else if (fs::is_regular_file(path, ec)) {
        auto ck = TorchCheckpoint::open(path);
        for (const std::string& name : ck->names()) {
            if (name == "quantize.codebook_used") continue;  // a training statistic (a buffer), not a weight
            if (name.rfind("encoder.", 0) && name.rfind("decoder.", 0) && name.rfind("quant", 0) &&
                name.rfind("post_quant_conv", 0))
                continue;
            tensors[name] = ck->loadFloat(name);
        }
    } else {
        fail(model, "no such file or directory");
    }
    return fromTensors(tensors, path, runtime, groups, l2);
}

at::Tensor VqModel::p(const std::string& name) const {
    auto it = params_.find(name);
    if (it == params_.end()) fail(source_, "tensor '" + name + "' is missing");
    return it->second;
}

namespace {

struct Net {
    VqParameterFn p;
    int64_t groups;
    double eps;

    at::Tensor conv(const std::string& name, const at::Tensor& x, int64_t stride = 1, int64_t pad = -1) const {
        at::Tensor w = p(name + ".weight");
        if (pad < 0) pad = w.size(-1) / 2;
        return at::conv2d(x, w, p(name + ".bias"), {stride, stride}, {pad, pad});
    }
    at::Tensor norm(const std::string& name, const at::Tensor& x) const {
        return at::group_norm(x, groups, p(name + ".weight"), p(name + ".bias"), eps);
    }
    static at::Tensor swish(const at::Tensor& x) { return x * at::sigmoid(x); }
    at::Tensor resnet(const std::string& q, const at::Tensor& x) const {
        at::Tensor h = conv(q + ".conv1", swish(norm(q + ".norm1", x)));
        h = conv(q + ".conv2", swish(norm(q + ".norm2", h)));
        const bool shortcut = p(q + ".conv1.weight").size(0) != p(q + ".conv1.weight").size(1);
        return (shortcut ? conv(q + ".nin_shortcut", x) : x) + h;
    }
    at::Tensor attn(const std::string& q, const at::Tensor& x) const {
        at::Tensor h = norm(q + ".norm", x);
        const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
        at::Tensor qq = conv(q + ".q", h).reshape({B, C, H * W}).permute({0, 2, 1});
        at::Tensor kk = conv(q + ".k", h).reshape({B, C, H * W});
        at::Tensor vv = conv(q + ".v", h).reshape({B, C, H * W});
        at::Tensor w = at::softmax(at::bmm(qq, kk) * (1.0 / std::sqrt(static_cast<double>(C))), 2);
        at::Tensor out = at::bmm(vv, w.permute({0, 2, 1})).reshape({B, C, H, W});
        return x + conv(q + ".proj_out", out);
    }
};

} // namespace

at::Tensor vqEncoderForward(const VqConfig& config, const VqParameterFn& params, const at::Tensor& images) {
    Net n{params, config.normGroups, config.normEps};
    at::Tensor h = n.conv("encoder.conv_in", images * 2.0 - 1.0);
    const int64_t L = static_cast<int64_t>(config.encoderChannels.size());
    for (int64_t i = 0; i < L; ++i) {
        const std::string q = "encoder.conv_blocks." + std::to_string(i);
        for (int64_t j = 0; j < config.encoderResBlocks; ++j) {
            h = n.resnet(q + ".res." + std::to_string(j), h);
            if (i == L - 1) h = n.attn(q + ".attn." + std::to_string(j), h);
        }
        if (i != L - 1) h = n.conv(q + ".downsample.conv", at::constant_pad_nd(h, {0, 1, 0, 1}, 0), 2, 0);
    }
    h = n.resnet("encoder.mid.0", h);
    h = n.attn("encoder.mid.1", h);
    h = n.resnet("encoder.mid.2", h);
    h = n.conv("encoder.conv_out", Net::swish(n.norm("encoder.norm_out", h)));
    return n.conv("quant_conv", h);
}

at::Tensor vqDecoderForward(const VqConfig& config, const VqParameterFn& params, const at::Tensor& latent) {
    Net n{params, config.normGroups, config.normEps};
    at::Tensor h = n.conv("post_quant_conv", latent);
    h = n.conv("decoder.conv_in", h);
    h = n.resnet("decoder.mid.0", h);
    h = n.attn("decoder.mid.1", h);
    h = n.resnet("decoder.mid.2", h);
    const int64_t L = static_cast<int64_t>(config.decoderChannels.size());
    for (int64_t b = 0; b < L; ++b) {
        const std::string q = "decoder.conv_blocks." + std::to_string(b);
        for (int64_t j = 0; j < config.decoderResBlocks; ++j) {
            h = n.resnet(q + ".res." + std::to_string(j), h);
            if (b == 0) h = n.attn(q + ".attn." + std::to_string(j), h);
        }
        if (b != L - 1) h = n.conv(q + ".upsample.conv", h.repeat_interleave(2, 2).repeat_interleave(2, 3));
    }
    return n.conv("decoder.conv_out", Net::swish(n.norm("decoder.norm_out", h)));
}

at::Tensor VqModel::decodeRaw(const at::Tensor& codes) const {
    if (codes.dim() != 3) throw Error("VQ decode: codes must be [batch, height, width], got " + formatShape(codes.sizes()));
    c10::InferenceMode guard;
    at::Tensor ids = codes.to(runtime_.device, at::kLong);
    if (ids.numel() > 0) {
        const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
        if (lo < 0 || hi >= config_.codebookSize)
            throw Error("VQ decode: code " + std::to_string(lo < 0 ? lo : hi) + " is outside the codebook of " +
                        std::to_string(config_.codebookSize) + " (" + source_ + ")");
    }
    const VqParameterFn params = [this](const std::string& s) { return p(s); };
    at::Tensor emb = p("quantize.embedding.weight");
    if (config_.l2Norm) emb = emb / emb.norm(2, {1}, true).clamp_min(1e-12);  // F.normalize
    at::Tensor latent = at::embedding(emb, ids).permute({0, 3, 1, 2}).contiguous();  // [B, e, h, w]
    at::Tensor h = vqDecoderForward(config_, params, latent);
    return h.to(at::kCPU, at::kFloat);
}

at::Tensor VqModel::decode(const at::Tensor& codes) const {
    return ((decodeRaw(codes) + 1.0) / 2.0).clamp(0.0, 1.0);
}

at::Tensor VqModel::encode(const at::Tensor& images) const {
    if (!config_.hasEncoder()) throw Error("VQ model '" + source_ + "' has no encoder weights: it can only decode");
    if (images.dim() != 4 || images.size(1) != config_.inChannels)
        throw Error("VQ encode: images must be [batch, " + std::to_string(config_.inChannels) + ", H, W], got " +
                    formatShape(images.sizes()));
    const int64_t f = int64_t{1} << (config_.encoderChannels.size() - 1);
    if (images.size(2) % f || images.size(3) % f)
        throw Error("VQ encode: image size " + std::to_string(images.size(2)) + "×" + std::to_string(images.size(3)) +
                    " is not a multiple of the downsampling " + std::to_string(f));
    c10::InferenceMode guard;
    at::Tensor h = vqEncoderForward(config_, [this](const std::string& s) { return p(s); },
                                    images.to(runtime_.device, at::kFloat));  // [B, e, h, w]
    at::Tensor z = h.permute({0, 2, 3, 1}).reshape({-1, config_.embedDim});
    at::Tensor emb = p("quantize.embedding.weight");
    if (config_.l2Norm) {
        z = z / z.norm(2, {1}, true).clamp_min(1e-12);
        emb = emb / emb.norm(2, {1}, true).clamp_min(1e-12);
    }
    at::Tensor d = z.pow(2).sum(1, true) + emb.pow(2).sum(1) - 2.0 * at::matmul(z, emb.t());
    return d.argmin(1).reshape({h.size(0), h.size(2), h.size(3)}).cpu();
}

void VqModel::save(const std::string& dir) const {
    if (!source_.empty()) ensureNotOverwritingSource(source_, dir);
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const auto& [name, t] : params_) tensors.emplace_back(name, t.to(at::kCPU, at::kFloat).contiguous());
    json j = {{"model_type", "llamagen-vq"},         {"codebook_size", config_.codebookSize},
              {"codebook_embed_dim", config_.embedDim}, {"codebook_l2_norm", config_.l2Norm},
              {"z_channels", config_.zChannels},     {"decoder_channels", config_.decoderChannels},
              {"encoder_channels", config_.encoderChannels}, {"norm_groups", config_.normGroups},
              {"downsample_size", config_.downsample()}};
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create the directory '" + dir + "': " + ec.message());
    writeSafeTensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
    writeTextAtomically((fs::path(dir) / "config.json").string(), json_fields::dumpJson(j, 2, "config.json") + "\n");
}

} // namespace npw
