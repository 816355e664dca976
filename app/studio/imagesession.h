#pragma once
#include <limits>
// The Images tab's logic without widgets: one class-conditional image model (demo:c2i or a
// LlamaGen checkpoint with its VQ), held by core's ImagePruningWorkbench, so that dense and
// pruned samples of the same classes and seeds can be compared, and an image sweep (FID, IS,
// sFID, precision, recall, class accuracy, speed and memory against sparsity) can run. Long
// work runs on the JobRunner it shares with StudioSession (one progress bar, one Cancel).
#include "core/experiments/image_sweep.h"
#include "core/experiments/image_workbench.h"
#include "app/studio/jobrunner.h"  // after core: Qt's macros must not meet ATen's headers

#include <QImage>
#include <QObject>
#include <QStringList>
#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <vector>

struct ImageCompareRequest {
    QString method = QStringLiteral("numerical");
    double ratio = 0.3;
    std::vector<int64_t> classes;  // empty: every class of the model
    int perClass = 2;              // samples of each class (a row each)
    int seed = 0;                  // sample i uses seed + i, for both models
    double cfg = 2.0;
    int calibPerClass = 16;        // calibration samples the dense model generates per class
    double lambda = std::numeric_limits<double>::quiet_NaN();  // the numerical score's λ
};

struct ImageSweepRequest {
    QStringList methods{"numerical", "flap"};
    std::vector<double> ratios{0.1, 0.2, 0.3};
    int samples = 200;             // images per model
    double cfg = 2.0;
    int calibPerClass = 16;
    double lambda = std::numeric_limits<double>::quiet_NaN();
};

class ImageSession : public QObject {
    Q_OBJECT
public:
    explicit ImageSession(JobRunner* jobs, QObject* parent = nullptr);

    bool hasModel() const { return workbench_ != nullptr; }
    const npw::ImagePruningWorkbench* workbench() const { return workbench_.get(); }  // null without a model
    QString modelReference() const { return reference_; }
    QStringList classNames() const { return classNames_; }  // "0 T-shirt/top", … or "class 0", …
    int64_t numClasses() const { return hasModel() ? workbench_->dense().config().num_classes : 0; }
    QString describeModel() const;

    const std::optional<npw::ImageComparison>& comparison() const { return comparison_; }
    QImage denseGrid() const { return denseGrid_; }
    QImage prunedGrid() const { return prunedGrid_; }
    const std::vector<npw::ImageSweepRow>& sweepRows() const { return sweepRows_; }

    // Where the next model opens: "cpu" (every core) or "cuda:N" (core's chooseRuntime).
    void setDevice(const QString& device) { device_ = device; }
    QString device() const { return device_; }

    // Long jobs; false (and nothing done) while another job runs.
    bool openModel(const QString& reference);
    bool compare(const ImageCompareRequest& request);  // calibrates first when needed
    bool runSweep(const ImageSweepRequest& request);
    // The model of the current comparison (its method, ρ and λ) as an npw image-model folder
    // (core's savePrunedImageModel: config, weights, vq/, manifest; atomic).
    bool exportPrunedModel(const QString& dir);
    // Quick and synchronous; throws npw::Error naming the file.
    void exportSweepCsv(const QString& path) const;

    // The tab's part of a workspace file: the model, the requests of the last comparison and
    // sweep, the sweep rows. Null when no image model is open. Images are not stored: the
    // comparison is regenerated on reopen (same classes and seeds give the same images).
    nlohmann::json workspaceState() const;
    // Opens the state's model (a job), shows its sweep rows, hands the requests to the form
    // (requestsRestored) and regenerates the comparison when there was one. npw::Error naming
    // the field when the state is malformed; false when another job runs.
    bool restoreWorkspaceState(const nlohmann::json& state);
    // The same from the JSON text StudioSession::imageWorkspaceRestored hands over; a part that
    // cannot be restored is logged (logMessage), never thrown into the event loop.
    void restoreWorkspaceText(const QByteArray& state);
    const std::optional<ImageCompareRequest>& lastCompareRequest() const { return lastCompare_; }
    const std::optional<ImageSweepRequest>& lastSweepRequest() const { return lastSweep_; }

    // A labelled grid (core's imageGrid: one row per class, `columns` samples per row) as a QImage.
    static QImage gridImage(const at::Tensor& images, const std::vector<std::string>& labels, int64_t columns);

signals:
    void modelChanged();
    void comparisonReady();
    void sweepCleared();
    void sweepRowAvailable(const npw::ImageSweepRow& row);
    void logMessage(const QString& text);
    void requestsRestored();  // lastCompareRequest / lastSweepRequest came from a workspace

private:
    // Loads the model on the JobRunner; `then` runs on the GUI thread once it is in place.
    bool openModelThen(const QString& reference, std::function<void()> then);

    JobRunner* jobs_;
    std::shared_ptr<npw::ImagePruningWorkbench> workbench_;
    QString reference_;
    QString device_ = QStringLiteral("cpu");
    QStringList classNames_;
    std::optional<npw::ImageComparison> comparison_;
    double comparisonLambda_ = std::numeric_limits<double>::quiet_NaN();
    QImage denseGrid_, prunedGrid_;
    std::vector<npw::ImageSweepRow> sweepRows_;
    std::optional<ImageCompareRequest> lastCompare_;
    std::optional<ImageSweepRequest> lastSweep_;
};

Q_DECLARE_METATYPE(npw::ImageSweepRow)
