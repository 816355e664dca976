// The one table of pruning methods (core/prune/method_registry.h) and everything that lists
// methods from it: every row's name round-trips through its parser (methodName/parsePruneMethod,
// baselineMethodName/parseBaselineMethod, parseSweepMethod for language and image models), the
// rows' compensation and ranking rules are what PruneSettings applies, and the lists users see
// (`npw prune --method`, `npw sweep --methods`, the studio's Run settings, Images and Sweep tabs)
// are the registry's, with λ active only for a method that takes it. Links the studio and the CLI.
#include "app/npw/commands.h"
#include "app/npw/flag_table.h"
#include "app/studio/imagesession.h"
#include "app/studio/imagespage.h"
#include "app/studio/jobrunner.h"
#include "app/studio/methodlists.h"
#include "app/studio/runsettingspanel.h"
#include "core/experiments/sweep.h"
#include "core/experiments/sweep_method.h"
#include "core/prune/baselines.h"
#include "core/prune/method_registry.h"
#include "core/util/error.h"
#include "widgets/scientificspinbox.h"

#include <QComboBox>
#include <QLineEdit>
#include <QtTest/QtTest>

#include <set>

using namespace npw;

namespace {

const cli::Flag& flagOf(const std::string& command, const std::string& name) {
    for (const cli::Command& c : cli::allCommands())
        if (c.name == command)
            for (const cli::Flag& f : c.flags)
                if (f.name == name) return f;
    throw std::runtime_error("no flag --" + name + " for " + command);
}

bool accepted(const cli::Flag& flag, const std::string& value) {
    try {
        flag.parse(value);
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

QStringList itemsOf(const QComboBox* combo) {
    QStringList items;
    for (int i = 0; i < combo->count(); ++i)
        if (!combo->itemText(i).isEmpty()) items << combo->itemText(i);  // separators have no text
    return items;
}

QStringList names(const std::vector<std::string>& v) {
    QStringList out;
    for (const std::string& s : v) out << QString::fromStdString(s);
    return out;
}

} // namespace

class TestMethodRegistry : public QObject {
    Q_OBJECT
private slots:
    void everyRowRoundTrips() {
        std::set<std::string> seen;
        for (const MethodInfo& m : methodRegistry()) {
            const std::string name = m.name;
            QVERIFY2(seen.insert(name).second, name.c_str());
            QVERIFY2(std::string(m.description).size() > 10, name.c_str());
            QCOMPARE(findMethod(name), &m);
            switch (m.kind) {
            case MethodKind::PerUnit:
                QCOMPARE(methodName(m.method), name);
                QVERIFY(parsePruneMethod(name) == m.method);
                QCOMPARE(&methodInfo(m.method), &m);
                QVERIFY(!parseBaselineMethod(name));
                break;
            case MethodKind::Variant:
                QVERIFY(m.method == PruneMethod::Numerical);
                QVERIFY_THROWS_EXCEPTION(Error, parsePruneMethod(name));
                QVERIFY(!parseBaselineMethod(name));
                if (m.sameAs) {
                    const MethodInfo* same = findMethod(m.sameAs);
                    QVERIFY(same);
                    QVERIFY(parseSweepMethod(same->name).crossLayer == parseSweepMethod(name).crossLayer);
                }
                break;
            case MethodKind::Baseline:
                QCOMPARE(std::string(baselineMethodName(m.baseline)), name);
                QVERIFY(parseBaselineMethod(name) == m.baseline);
                QCOMPARE(&methodInfo(m.baseline), &m);
                QVERIFY_THROWS_EXCEPTION(Error, parsePruneMethod(name));
                QVERIFY(!m.perUnitScores && m.wholeModel);
                break;
            }
            if (m.kind == MethodKind::Baseline) continue;
            // The sweeps' parser: the row's method and fixed setting; refused on image models unless offered.
            const SweepMethod sweep = parseSweepMethod(name);
            QVERIFY(sweep.method == m.method);
            QVERIFY(sweep.compensation == m.fixedCompensation);
            QCOMPARE(sweep.boxConstrained, m.fixedBox);
            QVERIFY(sweep.crossLayer == m.fixedRanking);
            bool image = true;
            try {
                parseSweepMethod(name, SweptModel::Image);
            } catch (const Error&) {
                image = false;
            }
            QCOMPARE(image, m.image);
            QCOMPARE(sweepMethodNeedsWholeModel(name), m.wholeModel);
        }
        // Every PruneMethod value has its row; the first value past the last has none, and
        // methodName says so instead of naming it.
        int values = 0;
        for (;; ++values) {
            try {
                methodName(static_cast<PruneMethod>(values));
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).contains("has no row in the method registry"), e.what());
                break;
            }
        }
        QCOMPARE(size_t(values), methodNames(MethodKind::PerUnit).size());
        QVERIFY_THROWS_EXCEPTION(Error, parsePruneMethod("no-such-method"));
        QVERIFY(!findMethod("no-such-method"));
        QVERIFY(!sweepMethodNeedsWholeModel("no-such-method"));
    }

    void settingsFollowTheRows() {
        for (const MethodInfo* m : methodsWhere([](const MethodInfo& r) { return r.kind == MethodKind::PerUnit; })) {
            PruneSettings s;
            s.method = m->method;
            QVERIFY(s.effectiveCompensation() == m->compensation);
            QCOMPARE(s.selectsGlobally(), m->selectsGlobally);
            s.standardisedGlobal = true;
            QVERIFY(s.selectsGlobally());
            // Only the methods whose row takes the box accept it.
            s.standardisedGlobal = false;
            s.boxConstrained = true;
            bool boxAccepted = true;
            try {
                s.validate();
            } catch (const Error&) {
                boxAccepted = false;
            }
            QCOMPARE(boxAccepted, m->options.box);
        }
    }

    void commandLineListsTheRegistry() {
        const cli::Flag& method = flagOf("prune", "method");
        for (const MethodInfo& m : methodRegistry()) {
            const bool takes = m.kind != MethodKind::Variant;  // --method: a per-unit method or a baseline
            QCOMPARE(accepted(method, m.name), takes);
            if (takes) QVERIFY2(method.choices.find(m.name) != std::string::npos, m.name);
            QVERIFY2(flagOf("sweep", "methods").help.find(m.name) != std::string::npos, m.name);
        }
        QVERIFY(!accepted(method, "no-such-method"));
        // auto compensation's help names each method's own.
        for (const MethodInfo* m : methodsWhere([](const MethodInfo& r) {
                 return r.kind == MethodKind::PerUnit && r.compensation != CompensationKind::None;
             }))
            QVERIFY(flagOf("prune", "compensation").help.find(compensationName(m->compensation) + " for " + m->name) !=
                    std::string::npos);
    }

    void studioListsTheRegistry() {
        // Run settings: every per-unit method, then every baseline (LLM-Pruner also with its global ranking).
        RunSettingsPanel panel;
        QStringList expected = names(methodNames(MethodKind::PerUnit)) + names(methodNames(MethodKind::Baseline));
        expected.insert(expected.indexOf(QStringLiteral("llm-pruner")) + 1, QStringLiteral("llm-pruner-global"));
        auto* combo = panel.findChild<QComboBox*>(QStringLiteral("methodCombo"));
        QVERIFY(combo);
        QCOMPARE(itemsOf(combo), expected);
        // Each item's knobs are its row's: the box and the ranking only where the row takes them.
        for (int i = 0; i < combo->count(); ++i) {
            if (combo->itemText(i).isEmpty()) continue;
            combo->setCurrentIndex(i);
            const MethodInfo* row = findMethod(combo->itemText(i) == QStringLiteral("llm-pruner-global")
                                                   ? std::string("llm-pruner")
                                                   : combo->itemText(i).toStdString());
            QVERIFY(row);
            QCOMPARE(panel.findChild<QComboBox*>(QStringLiteral("rankingCombo"))->isEnabled(), row->options.ranking);
        }

        // Images: every per-unit method and variant offered for image models, none refused by the image sweep.
        JobRunner jobs;
        ImageSession session(&jobs);
        ImagesPage page(&session);
        auto* imageCombo = page.findChild<QComboBox*>(QStringLiteral("imageMethodCombo"));
        QVERIFY(imageCombo);
        QCOMPARE(itemsOf(imageCombo), studio::imageMethods());
        const QStringList imageNames = names(methodNamesWhere([](const MethodInfo& m) {
            return m.kind != MethodKind::Baseline && m.image && !m.sameAs;
        }));
        QCOMPARE(studio::imageMethods(), imageNames);
        for (const QString& m : imageNames) parseSweepMethod(m.toStdString(), SweptModel::Image);
        // λ only for a method that takes it.
        auto* lambda = page.findChild<ScientificSpinBox*>(QStringLiteral("imageLambda"));
        auto* sweepMethods = page.findChild<QLineEdit*>(QStringLiteral("imageSweepMethods"));
        QVERIFY(lambda && sweepMethods);
        sweepMethods->setText(QStringLiteral("flap,wanda-sp"));
        imageCombo->setCurrentText(QStringLiteral("flap"));
        QVERIFY(!lambda->isEnabled());
        imageCombo->setCurrentText(QStringLiteral("numerical-z"));
        QVERIFY(lambda->isEnabled());
        imageCombo->setCurrentText(QStringLiteral("magnitude"));
        sweepMethods->setText(QStringLiteral("flap,numerical-nocomp"));  // the sweep's numerical takes it
        QVERIFY(lambda->isEnabled());

        // The Sweep tab's lists.
        QCOMPARE(studio::baselineMethods(), names(methodNames(MethodKind::Baseline)));
        for (const QString& m : studio::languageSweepMethods()) QVERIFY(findMethod(m.toStdString()));
        for (const QString& m : studio::layerwiseSweepMethods()) QVERIFY(!sweepMethodNeedsWholeModel(m.toStdString()));
        for (const QString& m : studio::wholeModelVariants()) QVERIFY(sweepMethodNeedsWholeModel(m.toStdString()));
        QVERIFY(studio::usesLambda(QStringLiteral("numerical")));
        QVERIFY(!studio::usesLambda(QStringLiteral("wanda-sp")));
        QVERIFY(!studio::anyUsesLambda({QStringLiteral("flap"), QStringLiteral("llm-pruner")}));
    }
};

QTEST_MAIN(TestMethodRegistry)
#include "tst_studio_method_registry.moc"
