#pragma once
// Colours and layout shared by the plot widgets, so that every view reads the same in a light
// and a dark palette: text, axes and backgrounds come from the widget's QPalette; data colours
// are the Okabe–Ito set (distinguishable with the common colour-vision deficiencies), lifted
// for dark backgrounds; the head map uses viridis (perceptually uniform, legible in grey).
#include <QColor>
#include <QPalette>
#include <QString>
#include <qcustomplot.h>

namespace plotstyle {

// A palette is dark when its base (the plot background) is darker than mid-grey.
bool isDark(const QPalette& palette);

QColor keptColor(const QPalette& palette);       // kept units and channels
QColor prunedColor(const QPalette& palette);     // pruned units and channels
QColor thresholdColor(const QPalette& palette);  // the selection threshold line
QColor highlightColor(const QPalette& palette);  // the current layer's outline/band
// The colour of the index-th method of a sweep (cycles after 7).
QColor seriesColor(int index, const QPalette& palette);

// Viridis as colour stops; NaN cells (absent units) transparent.
QCPColorGradient viridisGradient();

// Backgrounds, axes, ticks, grids, labels, legends, titles and colour scales of `plot` from
// `palette`. Items (lines, labels) are the caller's: it restyles them after this.
void applyPalette(QCustomPlot& plot, const QPalette& palette);

// A bold title in a new first row of the plot layout.
QCPTextElement* addTitle(QCustomPlot& plot, const QString& text);
// Moves the legend out of the axis rect into its own row above it, entries side by side, so
// it never covers data.
void placeLegendAbovePlot(QCustomPlot& plot, int row);
// Before every replot, fits the plot's texts to its size: the legend wraps into the columns that
// fit, and a title, axis label or colour-scale label longer than its room breaks into lines at
// spaces (whole again when the plot grows). placeLegendAbovePlot installs it.
void fitTextsToSize(QCustomPlot& plot);
// Text colour, and a translucent background so that a label stays legible over data.
void styleLabel(QCPItemText& label, const QPalette& palette);
// Integer ticks for `count` layers or units: every one up to 16, else multiples.
void setIntegerTicks(QCPAxis& axis, int count);

} // namespace plotstyle
