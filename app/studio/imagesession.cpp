// Core and ATen first: Qt's `slots` macro must not meet ATen's ivalue headers.
#include <ATen/ATen.h>
#include "core/eval/metrics_run.h"
#include "core/io/image_png.h"
#include "core/models/vq_model.h"
#include "core/prune/export.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include "app/studio/imagesession.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <QFileInfo>
#include <algorithm>
#include <QPointer>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

std::vector<std::string> readClassNames(const std::string& model) {
    try {
        const auto config = std::filesystem::path(npw::resolveModelPath(model)) / "config.json";
        if (!std::filesystem::is_regular_file(config)) return {};
        const nlohmann::json j = npw::json_fields::readJsonFile(config.string());
        if (j.contains("class_names")) return j.at("class_names").get<std::vector<std::string>>();
    } catch (const std::exception&) {
    }
    return {};
}

} // namespace

ImageSession::ImageSession(JobRunner* jobs, QObject* parent) : QObject(parent), jobs_(jobs) {
    qRegisterMetaType<npw::ImageSweepRow>();
}

QString ImageSession::describeModel() const {
    if (!hasModel()) return tr("No image model open");
    const npw::LlamaGenConfig& c = workbench_->dense().config();
    return tr("%1: %2; %3").arg(reference_, qs(c.describe()), qs(workbench_->vq().config().describe()));
}

QImage ImageSession::gridImage(const at::Tensor& images, const std::vector<std::string>& labels, int64_t columns) {
    npw::GridOptions options;
    options.columns = std::max<int64_t>(1, columns);
    // The demo's 28 px tiles stay 1:1 (the view zooms), unless a row is too narrow for its class
    // label ("T-shirt/top" over one or two tiles): then the tiles grow by whole factors until it fits
    // (the grid's font is about 6 px per character).
    size_t longest = 0;
    for (const std::string& label : labels) longest = std::max(longest, label.size());
    const int64_t labelWidth = int64_t(longest) * 6 + 4;
    options.minTileSize = std::max<int64_t>(28, (labelWidth + options.columns - 1) / options.columns);
    const at::Tensor grid = npw::imageGrid(images, labels, options);  // [3, H, W] in [0, 1]
    const at::Tensor bytes =
        (grid.permute({1, 2, 0}) * 255.0 + 0.5).clamp(0, 255).to(at::kByte).contiguous();
    const int h = static_cast<int>(bytes.size(0)), w = static_cast<int>(bytes.size(1));
    QImage image(bytes.data_ptr<uint8_t>(), w, h, w * 3, QImage::Format_RGB888);
    return image.copy();  // owns its pixels
}

bool ImageSession::openModel(const QString& reference) { return openModelThen(reference, nullptr); }

bool ImageSession::openModelThen(const QString& reference, std::function<void()> then) {
    const std::string ref = reference.toStdString(), device = device_.toStdString();
    QPointer<ImageSession> self(this);
    struct Opened {
        std::shared_ptr<npw::ImagePruningWorkbench> workbench;
        QStringList names;
    };
    return jobs_->start<Opened>(
        tr("Open %1").arg(reference),
        [ref, device](const npw::ProgressFn& progress) {
            npw::reportProgress(progress, "load", 0, 1);
            // chooseRuntime also gives LibTorch every core (its own default is 1 on small machines).
            const npw::Runtime runtime = npw::chooseRuntime(device);
            std::string vqPath = (std::filesystem::path(npw::resolveModelPath(ref)) / "vq").string();
            if (!std::filesystem::is_directory(vqPath))
                throw npw::Error("image model '" + ref + "' has no VQ tokenizer beside it (expected " + vqPath + ")");
            auto vq = npw::VqModel::load(vqPath, runtime);
            Opened o;
            o.workbench = std::make_shared<npw::ImagePruningWorkbench>(npw::loadLlamaGenCheckpoint(ref), vq, runtime);
            const std::vector<std::string> names = readClassNames(ref);
            for (int64_t k = 0; k < o.workbench->dense().config().num_classes; ++k)
                o.names << (k < static_cast<int64_t>(names.size()) ? QString("%1 %2").arg(k).arg(qs(names[k]))
                                                                   : QString("class %1").arg(k));
            npw::reportProgress(progress, "load", 1, 1);
            return o;
        },
        [this, reference, then = std::move(then)](Opened o) {
            workbench_ = std::move(o.workbench);
            reference_ = reference;
            classNames_ = o.names;
            comparison_.reset();
            lastCompare_.reset();
            lastSweep_.reset();
            denseGrid_ = prunedGrid_ = QImage();
            if (!sweepRows_.empty()) {
                sweepRows_.clear();
                emit sweepCleared();
            }
            emit logMessage(tr("Opened %1").arg(describeModel()));
            emit modelChanged();
            if (then) then();
        });
}

bool ImageSession::compare(const ImageCompareRequest& request) {
    if (!hasModel()) return false;
    auto workbench = workbench_;
    std::vector<int64_t> classes;
    const std::vector<int64_t> wanted = request.classes.empty()
                                            ? [&] {
                                                  std::vector<int64_t> all;
                                                  for (int64_t k = 0; k < numClasses(); ++k) all.push_back(k);
                                                  return all;
                                              }()
                                            : request.classes;
    std::vector<std::string> labels;
    for (int64_t k : wanted)
        for (int i = 0; i < request.perClass; ++i) {
            classes.push_back(k);
            labels.push_back(i == 0 && k < classNames_.size() ? classNames_[int(k)].toStdString() : "");
        }
    struct Result {
        npw::ImageComparison comparison;
        QImage dense, pruned;
    };
    return jobs_->start<Result>(
        tr("Compare dense and %1 at ρ = %2").arg(request.method).arg(request.ratio),
        [=](const npw::ProgressFn& progress) {
            npw::ImageSamplingOptions sampling;
            sampling.cfgScale = request.cfg;
            sampling.seed = static_cast<uint64_t>(request.seed);
            npw::ImageSamplingOptions calib = sampling;
            calib.seed = 1000000;  // calibration samples are not the ones compared
            // Whatever calibrated the workbench last (a comparison, or a sweep, even a cancelled
            // one): its own record says whether these statistics are the ones asked for.
            if (!workbench->isCalibratedFor(request.calibPerClass, calib))
                workbench->calibrate(request.calibPerClass, calib, progress);
            Result r;
            r.comparison = workbench->compare(request.method.toStdString(), request.ratio, classes, sampling,
                                              request.lambda, progress);
            r.dense = gridImage(r.comparison.dense, labels, request.perClass);
            r.pruned = gridImage(r.comparison.pruned, labels, request.perClass);
            return r;
        },
        [this, request](Result r) {
            lastCompare_ = request;
            comparisonLambda_ = request.lambda;
            comparison_ = std::move(r.comparison);
            denseGrid_ = r.dense;
            prunedGrid_ = r.pruned;
            emit logMessage(tr("%1 at ρ = %2: %3% of attention + MLP removed; %4 → %5 parameters, %6 → %7 tokens/s")
                                .arg(request.method)
                                .arg(request.ratio)
                                .arg(100 * comparison_->achievedRatio, 0, 'f', 1)
                                .arg(comparison_->denseParameters)
                                .arg(comparison_->prunedParameters)
                                .arg(comparison_->denseTokensPerSecond, 0, 'f', 0)
                                .arg(comparison_->prunedTokensPerSecond, 0, 'f', 0));
            emit comparisonReady();
        });
}

bool ImageSession::exportPrunedModel(const QString& dir) {
    if (!hasModel() || !comparison_) return false;
    auto workbench = workbench_;
    const std::string method = comparison_->method, source = reference_.toStdString(), target = dir.toStdString();
    const std::string sourcePath = workbench_->dense().checkpoint().source;
    const double ratio = comparison_->ratio, lambda = comparisonLambda_;
    const std::vector<std::string> names = readClassNames(source);
    return jobs_->start<int>(
        tr("Export %1 at ρ = %2").arg(QString::fromStdString(method)).arg(ratio),
        [=](const npw::ProgressFn& progress) {
            // Refused before the pruning (minutes on a real model), as savePrunedImageModel will.
            npw::checkExportTarget(sourcePath, target);
            npw::PrunedModel pruned = workbench->prune(method, ratio, lambda, progress);
            const npw::LlamaGenCheckpoint ck = workbench->dense().checkpoint().withTransformer(pruned.checkpoint);
            npw::savePrunedImageModel(ck, &workbench->vq(), target,
                                      workbench->manifestJson(source, method, ratio, lambda, pruned),
                                      names.empty() ? "" : npw::json_fields::dumpJson(nlohmann::json{{"class_names", names}}));
            return 0;
        },
        [this, dir](int) { emit logMessage(tr("Exported the pruned image model to %1").arg(dir)); });
}

void ImageSession::exportSweepCsv(const QString& path) const {
    if (hasModel()) npw::checkOutputPath({workbench_->dense().checkpoint().source}, path.toStdString(), "the sweep CSV");
    npw::writeTextAtomically(path.toStdString(), npw::imageSweepRowsCsv(sweepRows_));
}

bool ImageSession::runSweep(const ImageSweepRequest& request) {
    if (!hasModel()) return false;
    auto workbench = workbench_;
    const bool started = jobs_->startWithPartials<int, npw::ImageSweepRow>(
        tr("Image sweep"),
        [=](const npw::ProgressFn& progress, const PartialResults<npw::ImageSweepRow>& rowsSoFar) {
            npw::ImageSweepSpec spec;
            for (const QString& m : request.methods) spec.methods.push_back(m.toStdString());
            spec.ratios = request.ratios;
            spec.evalSamples = request.samples;
            spec.evalSampling.cfgScale = request.cfg;
            spec.calibSampling = spec.evalSampling;
            spec.calibSampling.seed = 1000000;
            spec.calibPerClass = request.calibPerClass;
            spec.lambda = request.lambda;
            auto network = npw::loadFeatureNetwork("demo");
            const npw::ResolvedReference reference =
                npw::resolveReference("fashion-mnist-test", *network, npw::defaultCacheDir(), 250, progress);
            const auto rows = npw::runImageSweep(*workbench, *network, reference.stats, spec, rowsSoFar.callback(),
                                                 progress);
            return static_cast<int>(rows.size());
        },
        [this](const npw::ImageSweepRow& row) {
            sweepRows_.push_back(row);
            emit logMessage(tr("%1 at ρ = %2: FID %3, IS %4, class accuracy %5, %6 tokens/s")
                                .arg(qs(row.method))
                                .arg(row.ratio)
                                .arg(row.eval.metrics.fid, 0, 'f', 2)
                                .arg(row.eval.metrics.is.mean, 0, 'f', 2)
                                .arg(row.eval.classAccuracy, 0, 'f', 3)
                                .arg(row.eval.tokensPerSecond, 0, 'f', 0) +
                            // Below the images FID needs, its differences are noise: said on the row.
                            (npw::fidSampleWarning(row.eval.metrics).empty()
                                 ? QString()
                                 : tr(" — FID unreliable: %1 images, it needs %2 (%3 feature dimensions)")
                                       .arg(row.eval.metrics.samples)
                                       .arg(npw::fidMinimumSamples(row.eval.metrics.featureDims))
                                       .arg(row.eval.metrics.featureDims)));
            emit sweepRowAvailable(row);
        },
        [this](int rows) { emit logMessage(tr("Image sweep: %1 rows.").arg(rows)); });
    if (started) {
        sweepRows_.clear();
        lastSweep_ = request;
        emit sweepCleared();
    }
    return started;
}

namespace {

nlohmann::json compareRequestJson(const ImageCompareRequest& r) {
    return {{"method", r.method.toStdString()}, {"ratio", r.ratio},   {"classes", r.classes},
            {"per_class", r.perClass},          {"seed", r.seed},     {"cfg", r.cfg},
            {"calib_per_class", r.calibPerClass},
            {"lambda", std::isnan(r.lambda) ? nlohmann::json(nullptr) : nlohmann::json(r.lambda)}};
}

nlohmann::json sweepRequestJson(const ImageSweepRequest& r) {
    std::vector<std::string> methods;
    for (const QString& m : r.methods) methods.push_back(m.toStdString());
    return {{"methods", methods}, {"ratios", r.ratios}, {"samples", r.samples},
            {"cfg", r.cfg},       {"calib_per_class", r.calibPerClass},
            {"lambda", std::isnan(r.lambda) ? nlohmann::json(nullptr) : nlohmann::json(r.lambda)}};
}

// A field of the workspace's "images" object, with the file's context in the error.
template <class T>
T imageField(const nlohmann::json& j, const char* name) {
    try {
        return j.at(name).get<T>();
    } catch (const std::exception&) {
        throw npw::Error(std::string("workspace 'images': field '") + name + "' is missing or has the wrong type");
    }
}

ImageCompareRequest compareRequestFromJson(const nlohmann::json& j) {
    ImageCompareRequest r;
    r.method = qs(imageField<std::string>(j, "method"));
    r.ratio = imageField<double>(j, "ratio");
    r.classes = imageField<std::vector<int64_t>>(j, "classes");
    r.perClass = imageField<int>(j, "per_class");
    r.seed = imageField<int>(j, "seed");
    r.cfg = imageField<double>(j, "cfg");
    r.calibPerClass = imageField<int>(j, "calib_per_class");
    r.lambda = j.contains("lambda") && j["lambda"].is_null() ? std::numeric_limits<double>::quiet_NaN()  // relative
                                                              : imageField<double>(j, "lambda");
    return r;
}

ImageSweepRequest sweepRequestFromJson(const nlohmann::json& j) {
    ImageSweepRequest r;
    r.methods.clear();
    for (const std::string& m : imageField<std::vector<std::string>>(j, "methods")) r.methods << qs(m);
    r.ratios = imageField<std::vector<double>>(j, "ratios");
    r.samples = imageField<int>(j, "samples");
    r.cfg = imageField<double>(j, "cfg");
    r.calibPerClass = imageField<int>(j, "calib_per_class");
    r.lambda = j.contains("lambda") && j["lambda"].is_null() ? std::numeric_limits<double>::quiet_NaN()  // relative
                                                              : imageField<double>(j, "lambda");
    return r;
}

} // namespace

nlohmann::json ImageSession::workspaceState() const {
    if (!hasModel()) return nullptr;
    nlohmann::json j = {{"model", reference_.toStdString()},
                        {"device", device_.toStdString()},
                        {"compare", lastCompare_ ? compareRequestJson(*lastCompare_) : nlohmann::json(nullptr)},
                        {"compared", comparison_.has_value()},
                        {"sweep", lastSweep_ ? sweepRequestJson(*lastSweep_) : nlohmann::json(nullptr)},
                        {"sweep_rows", nlohmann::json::array()}};
    for (const npw::ImageSweepRow& r : sweepRows_) j["sweep_rows"].push_back(npw::imageSweepRowJson(r));
    return j;
}

void ImageSession::restoreWorkspaceText(const QByteArray& state) {
    try {
        restoreWorkspaceState(npw::json_fields::parseJsonLimited(state.toStdString(), "the workspace's Images part"));
    } catch (const std::exception& e) {
        emit logMessage(tr("The workspace's Images part was not restored: %1").arg(QString::fromUtf8(e.what())));
    }
}

bool ImageSession::restoreWorkspaceState(const nlohmann::json& state) {
    if (!state.is_object()) throw npw::Error("workspace 'images': expected an object");
    const QString model = qs(imageField<std::string>(state, "model"));
    std::optional<ImageCompareRequest> compareRequest;
    std::optional<ImageSweepRequest> sweepRequest;
    if (state.contains("compare") && !state.at("compare").is_null()) compareRequest = compareRequestFromJson(state.at("compare"));
    if (state.contains("sweep") && !state.at("sweep").is_null()) sweepRequest = sweepRequestFromJson(state.at("sweep"));
    std::vector<npw::ImageSweepRow> rows;
    for (const nlohmann::json& r : imageField<nlohmann::json>(state, "sweep_rows")) rows.push_back(npw::imageSweepRowFromJson(r));
    const bool compared = state.value("compared", false) && compareRequest;
    if (state.contains("device")) device_ = qs(imageField<std::string>(state, "device"));
    return openModelThen(model, [this, compareRequest, sweepRequest, rows, compared] {
        lastCompare_ = compareRequest;
        lastSweep_ = sweepRequest;
        emit requestsRestored();
        for (const npw::ImageSweepRow& row : rows) {
            sweepRows_.push_back(row);
            emit sweepRowAvailable(row);
        }
        if (compared) {
            emit logMessage(tr("Workspace: generating the saved comparison again (same classes and seeds)."));
            compare(*compareRequest);
        }
    });
}
