#include "core/util/version.h"

namespace npw {

std::string npwVersion() { return NPW_VERSION; }

} // namespace npw
