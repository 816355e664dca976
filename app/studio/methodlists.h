#pragma once
// The studio's method lists, each read from core's one table of methods
// (core/prune/method_registry.h): the Run settings' methods, the Images tab's, the names the
// Sweep and Images tabs' tips offer, and which methods take λ. No method is named here or in
// the pages.
#include "core/prune/method_registry.h"

#include <QString>
#include <QStringList>
#include <functional>

namespace studio {

// The names of the registry's rows `keep` accepts, in its order.
QStringList methodNames(const std::function<bool(const npw::MethodInfo&)>& keep);
// Names as a tip lists them: comma-separated, a new line before one would pass `width` characters.
QString methodList(const QStringList& names, int width = 90);

// What the Images tab compares and sweeps: every per-unit method and variant offered for image
// models (numerical-lstar-rel, which is numerical, left out).
QStringList imageMethods();
// What the Sweep tab sweeps: every per-unit method and variant offered for language models
// (aliases left out), and the baselines.
QStringList languageSweepMethods();
QStringList baselineMethods();
// The same on the layer-by-layer road: what it runs, and the variants it does not (they need the
// whole model in memory, as every baseline does).
QStringList layerwiseSweepMethods();
QStringList wholeModelVariants();

// Whether a method (any name the sweeps take) uses λ and λ_rel; false for an unknown name.
bool usesLambda(const QString& method);
bool anyUsesLambda(const QStringList& methods);

} // namespace studio
