#pragma once
// The studio's names for core's run settings (core/experiments/run_settings.h): the settings,
// knobs and their JSON live in core beside the workspace file that stores them; the panels and
// the session keep calling them studio::RunSettings, studio::SelectionKnobs, ….
#include "core/experiments/run_settings.h"

namespace studio {

using npw::CalibrationSettings;
using npw::RunSettings;
using npw::SelectionKnobs;
using npw::defaultCalibrationSource;
using npw::defaultEvaluationSource;
using npw::defaultZeroShotTask;
using npw::toJson;
using npw::calibrationFromJson;
using npw::pruneSettingsFromJson;
using npw::knobsFromJson;
using npw::runSettingsFromJson;
using npw::scoreRequestFromJson;

} // namespace studio
