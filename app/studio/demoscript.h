#pragma once
// `npw-studio --demo STATE`: drives the window through a bundled demo as a person would
// (open demo:lm, Run, move ρ; or run a sweep), everything computed live by core, then saves
// the window as PNG and/or reports the longest event-loop stall seen while it ran.
//
//   scores  demo:lm scored with FLAP and then the numerical method (both kept), ρ = 0.3
//   sweep   perplexity and the demo task's zero-shot accuracy against sparsity, numerical /
//           FLAP / Wanda-sp × ρ 0.1, 0.2, 0.3
//   images  demo:c2i dense vs numerically pruned (ρ = 0.2) samples of every class side by side,
//           then FID against sparsity for numerical and FLAP (ρ 0.1, 0.2, 0.3; 300 images each)
//   baselines  demo:lm scored with SliceGPT, block influence and LLM-Pruner (shown), ρ = 0.3
//   blocks     the same, block influence shown last; sliced: SliceGPT shown last
#include "app/studio/runsettings.h"

#include <QObject>
#include <QString>

class StallMeter;
class StudioWindow;

class DemoScript : public QObject {
    Q_OBJECT
public:
    static bool isKnownState(const QString& state);

    // screenshot may be empty; measureStalls prints the longest stall to stderr at the end.
    // model: the language model the states other than images open (empty: demo:lm), so that a
    // baseline or scores state can be looked at on any checkpoint.
    DemoScript(StudioWindow* window, QString state, QString screenshot, bool measureStalls, QString model = {});
    void start();
    double longestStallMs() const;
    // --calib-samples / --calib-seqlen: the Run settings' calibration size for the script's runs
    // (0: as the settings hold it), e.g. 1 × 128 to try a 7B's layer-by-layer calibration quickly.
    void setCalibrationSize(int64_t samples, int64_t seqlen) {
        calibSamples_ = samples;
        calibSeqlen_ = seqlen;
    }

signals:
    void done(int exitCode);

private:
    void onJobFinished(const QString& title);
    // The Run settings' panel and the session set to `settings`, ρ at 0.3, then Run.
    studio::RunSettings scriptSettings() const;  // the session's, with a calibration text
    void scoreWith(const studio::RunSettings& settings);
    void fail(const QString& why);
    void finish();

    StudioWindow* window_;
    QString state_, screenshot_, model_;
    bool measure_;
    StallMeter* meter_;
    int step_ = 0;
    int64_t calibSamples_ = 0, calibSeqlen_ = 0;
};
