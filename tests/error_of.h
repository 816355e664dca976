#pragma once
// The message of the npw::Error that fn throws, "" when it throws none: the suites check that
// errors name the file, the tensor and what was expected.
#include "core/util/error.h"

#include <QString>  // after ATen: Qt's `slots` macro breaks ATen headers

namespace npw::test {

template <class Fn>
QString errorOf(Fn fn) {
    try {
        fn();
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

} // namespace npw::test
