#include "core/util/progress.h"
#include "core/util/error.h"

namespace npw {

void reportProgress(const ProgressFn& fn, const std::string& stage, double done, double total) {
    if (fn && !fn(Progress{stage, done, total})) throw Cancelled();
}

} // namespace npw
