#include "app/studio/methodlists.h"

namespace studio {

namespace {

bool listed(const npw::MethodInfo& m) { return m.kind != npw::MethodKind::Baseline && !m.sameAs; }

} // namespace

QStringList methodNames(const std::function<bool(const npw::MethodInfo&)>& keep) {
    QStringList names;
    for (const std::string& name : npw::methodNamesWhere(keep)) names << QString::fromStdString(name);
    return names;
}

QString methodList(const QStringList& names, int width) {
    QString out;
    qsizetype line = 0;
    for (qsizetype i = 0; i < names.size(); ++i) {
        if (i > 0) {
            out += QLatin1Char(',');
            const bool wrap = line + 2 + names[i].size() > width;
            out += wrap ? QLatin1Char('\n') : QLatin1Char(' ');
            line = wrap ? 0 : line + 2;
        }
        out += names[i];
        line += names[i].size();
    }
    return out;
}

QStringList imageMethods() {
    return methodNames([](const npw::MethodInfo& m) { return listed(m) && m.image; });
}

QStringList languageSweepMethods() {
    return methodNames([](const npw::MethodInfo& m) { return listed(m) && m.language; });
}

QStringList baselineMethods() {
    return methodNames([](const npw::MethodInfo& m) { return m.kind == npw::MethodKind::Baseline && m.language; });
}

QStringList layerwiseSweepMethods() {
    return methodNames([](const npw::MethodInfo& m) { return listed(m) && m.language && !m.wholeModel; });
}

QStringList wholeModelVariants() {
    return methodNames([](const npw::MethodInfo& m) { return listed(m) && m.language && m.wholeModel; });
}

bool usesLambda(const QString& method) {
    const npw::MethodInfo* m = npw::findMethod(method.trimmed().toStdString());
    return m && m->options.lambda;
}

bool anyUsesLambda(const QStringList& methods) {
    for (const QString& m : methods)
        if (usesLambda(m)) return true;
    return false;
}

} // namespace studio
