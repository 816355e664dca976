#pragma once
// The dark palette npw-studio and the gallery switch to (the light one is the style's own).
// The plot widgets follow whatever palette is set (widgets/plotstyle.h).
#include <QPalette>

namespace studio {

QPalette darkPalette();

} // namespace studio
