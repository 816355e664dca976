#pragma once
// Ticks for a logarithmic axis that read well over any span: 1-2-5 steps (10, 20, 50, 100)
// over a few decades, decades alone over many, finer steps (15, 20, 30) within one. The
// stock QCPAxisTickerLog labels powers of the base only, so a perplexity axis from 16 to 60
// gets no label at all.
#include <qcustomplot.h>

class LogAxisTicker : public QCPAxisTicker {
public:
    LogAxisTicker();

protected:
    int getSubTickCount(double tickStep) override;
    QVector<double> createTickVector(double tickStep, const QCPRange& range) override;
};
