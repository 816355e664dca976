#include "widgets/logaxisticker.h"

#include <array>
#include <cmath>
#include <vector>

LogAxisTicker::LogAxisTicker() { setTickCount(6); }

int LogAxisTicker::getSubTickCount(double) { return 0; }

QVector<double> LogAxisTicker::createTickVector(double tickStep, const QCPRange& range) {
    if (range.lower <= 0 || range.upper <= range.lower) return QCPAxisTicker::createTickVector(tickStep, range);
    // Mantissa sets from sparse to dense; the sparsest one that gives at least 3 ticks wins.
    static const std::array<std::vector<double>, 4> mantissas = {
        std::vector<double>{1}, std::vector<double>{1, 2, 5}, std::vector<double>{1, 1.5, 2, 3, 5, 7},
        std::vector<double>{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9}};
    const int firstDecade = static_cast<int>(std::floor(std::log10(range.lower)));
    const int lastDecade = static_cast<int>(std::floor(std::log10(range.upper)));
    QVector<double> ticks;
    for (const std::vector<double>& set : mantissas) {
        ticks.clear();
        int inside = 0;
        for (int decade = firstDecade; decade <= lastDecade; ++decade)
            for (double m : set) {
                const double tick = m * std::pow(10.0, decade);
                ticks.push_back(tick);
                inside += range.contains(tick);
            }
        if (inside >= 3) break;
    }
    return ticks;
}
