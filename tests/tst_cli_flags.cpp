// The command line's table of flags (app/npw/flag_table.h): every command's flags walked for
// duplicates, defaults that do not pass their own validation, numeric flags that take NaN, Inf or
// values out of range, and help screens that miss a flag; the one parser of α mode and of
// compensation (both spellings of FLAP's bias); and, through the npw binary of this build tree,
// the errors a user sees for a bad value before anything is loaded.
#include "core/experiments/sweep.h"
#include "app/npw/commands.h"
#include "app/npw/flag_table.h"
#include "app/npw/help_pages.h"
#include "core/experiments/sweep_method.h"
#include "core/prune/baselines.h"
#include "core/eval/generate.h"
#include "core/eval/perplexity.h"
#include "core/prune/pruner.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "error_of.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

using namespace npw;
using namespace npw::cli;

namespace {

// The error parseArgs throws for `--NAME VALUE` on COMMAND, or "" when it accepts the value.
QString refusal(const Command& c, const std::string& name, const std::string& value) {
    try {
        parseArgs(c.flags, {"--" + name, value}, c.name);
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

const Command& command(std::string_view name) {  // by value: gcc 14 would see a dangling temporary
    for (const Command& c : allCommands())
        if (c.name == name) return c;
    throw std::runtime_error("no command " + std::string(name));
}

const Flag& flagOf(const std::string& commandName, const std::string& name) {
    for (const Flag& f : command(commandName).flags)
        if (f.name == name) return f;
    throw std::runtime_error("no flag --" + name + " for " + commandName);
}

std::string exact(double x) {
    std::ostringstream out;
    out << std::setprecision(17) << x;
    return out.str();
}

std::string shortNumber(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

bool integral(const Flag& f) { return f.type == FlagType::Int || f.type == FlagType::IntList; }

double step(double x) { return 1e-6 * (1 + std::fabs(x)); }

// Values just outside the flag's range (none where the range is open on that side).
std::vector<std::string> outOfRange(const Flag& f) {
    std::vector<std::string> out;
    if (std::isfinite(f.min))
        out.push_back(integral(f) ? std::to_string(static_cast<long long>(f.min) - 1)
                                  : exact(f.minExclusive ? f.min : f.min - step(f.min)));
    if (std::isfinite(f.max) && f.max < 9e15)
        out.push_back(integral(f) ? std::to_string(static_cast<long long>(f.max) + 1)
                                  : exact(f.maxExclusive ? f.max : f.max + step(f.max)));
    return out;
}

// A value inside the range.
std::string inRange(const Flag& f) {
    if (!f.defaultValue.empty()) return f.defaultValue;
    if (!std::isfinite(f.min)) return "1";
    if (integral(f)) return std::to_string(static_cast<long long>(f.min) + (f.minExclusive ? 1 : 0));
    return exact(f.minExclusive ? f.min + step(f.min) : f.min);
}

} // namespace

class TestCliFlags : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { npw_ = QCoreApplication::applicationDirPath() + "/../app/npw"; }

    void everyCommandTakesTheTablesFlags() {
        std::set<std::string> names;
        for (const Command& c : allCommands()) {
            QVERIFY2(names.insert(c.name).second, c.name.c_str());
            const std::vector<Flag> fromTable = flagsFor(c.name);
            QCOMPARE(c.flags.size(), fromTable.size());
            for (size_t i = 0; i < fromTable.size(); ++i) QCOMPARE(c.flags[i].name, fromTable[i].name);
        }
        // Every scope names a command, and each name's declarations stand together.
        std::set<std::string> seen;
        std::string previous;
        for (const FlagEntry& e : flagTable()) {
            QVERIFY2(!e.commands.empty(), e.flag.name.c_str());
            for (const std::string& c : e.commands)
                QVERIFY2(names.count(c), qPrintable(QString::fromStdString("--" + e.flag.name + " names no command " + c)));
            if (e.flag.name != previous)
                QVERIFY2(seen.insert(e.flag.name).second,
                         qPrintable(QString::fromStdString("--" + e.flag.name + " is declared in two places of the table")));
            previous = e.flag.name;
        }
    }

    void noDuplicatesAndEveryFlagDescribed() {
        for (const Command& c : allCommands()) {
            std::set<std::string> names;
            for (const Flag& f : c.flags) {
                const QString where = QString::fromStdString("npw " + c.name + " --" + f.name);
                QVERIFY2(names.insert(f.name).second, qPrintable(where + " twice"));
                QVERIFY2(!f.help.empty(), qPrintable(where + ": no help"));
                QVERIFY2(f.takesValue() == !f.valueName.empty(), qPrintable(where + ": value name"));
                QVERIFY2(f.type != FlagType::Choice || (f.parse && !f.choices.empty()), qPrintable(where + ": choices"));
                QVERIFY2(f.takesValue() || f.defaultValue.empty(), qPrintable(where + ": a switch with a default"));
            }
            // A command parses with no flags at all (every default is taken as is).
            QVERIFY(parseArgs(c.flags, {}, c.name).positional().empty());
        }
    }

    // The run's output guard is derived from the table (outputGuardFromArgs): a flag whose value
    // names a file must say whether the run reads or writes it, or an output could overwrite it
    // unchecked. Only these value names are not paths.
    void everyPathFlagDeclaresItsRole() {
        const std::set<std::string> notPaths = {"S", "TEXT", "IDS", "LAYERS", "A-B", "A,B", "NAME", "HOW", "SIZE", "DEV", "TYPE", "WxL,..."};
        std::set<std::string> writes;
        for (const FlagEntry& e : flagTable()) {
            const Flag& f = e.flag;
            if (f.type != FlagType::Text) continue;
            const QString where = QString::fromStdString("--" + f.name + " " + f.valueName);
            QVERIFY2(f.role != PathRole::None || notPaths.count(f.valueName), qPrintable(where + " declares no path role"));
            QVERIFY2(f.role == PathRole::None || !notPaths.count(f.valueName), qPrintable(where + ": a path role on a non-path"));
            if (f.role == PathRole::Writes) writes.insert(f.name);
        }
        QCOMPARE(writes, (std::set<std::string>{"out", "save-scores", "save-stats", "stats-on-disk", "csv", "save-reference",
                                                "work", "cache-dir", "logits"}));
        // Built from parsed flags: --csv over --calib (a data set's file too) is refused.
        QTemporaryDir dir;
        const std::string calib = dir.filePath("calib.txt").toStdString();
        std::ofstream(calib) << "text";
        const std::vector<Flag> sweep = flagsFor("sweep");
        for (const std::string& given : {calib, "wikitext2:" + calib}) {
            const Args a = parseArgs(sweep, {"demo:lm", "--calib", given, "--csv", calib}, "sweep");
            const QString e = npw::test::errorOf([&] { outputGuardFromArgs(sweep, a); });
            QVERIFY2(e.contains("refusing to write --csv") && e.contains("--calib"), qPrintable(e));
        }
        const Args fine = parseArgs(sweep, {"demo:lm", "--calib", calib, "--csv", dir.filePath("rows.csv").toStdString()}, "sweep");
        QVERIFY(npw::test::errorOf([&] { outputGuardFromArgs(sweep, fine); }).isEmpty());
    }

    void everyDefaultPassesItsOwnValidation() {
        for (const Command& c : allCommands())
            for (const Flag& f : c.flags) {
                if (f.defaultValue.empty()) continue;
                const QString where = QString::fromStdString("npw " + c.name + " --" + f.name + " " + f.defaultValue);
                try {
                    validateFlagValue(f, f.defaultValue);
                } catch (const Error& e) {
                    QFAIL(qPrintable(where + ": " + e.what()));
                }
                QVERIFY2(refusal(c, f.name, f.defaultValue).isEmpty(), qPrintable(where));
                if (f.isNumeric()) QVERIFY2(!flagNumbers(f, f.defaultValue).empty(), qPrintable(where));
            }
    }

    void numericFlagsRefuseNanInfAndOutOfRange() {
        int numeric = 0;
        for (const Command& c : allCommands())
            for (const Flag& f : c.flags) {
                if (!f.isNumeric()) continue;
                ++numeric;
                const QString where = QString::fromStdString("npw " + c.name + " --" + f.name);
                std::vector<std::string> bad = {"nan", "NaN", "inf", "-inf", "1e400", "x", ""};
                for (const std::string& v : outOfRange(f)) bad.push_back(v);
                if (integral(f)) bad.emplace_back("1.5");
                for (const std::string& v : bad) {
                    const QString e = refusal(c, f.name, v);
                    QVERIFY2(!e.isEmpty(), qPrintable(where + " took '" + QString::fromStdString(v) + "'"));
                    QVERIFY2(e.startsWith(QString::fromStdString("--" + f.name + " expects ")) &&
                                 e.contains(QString::fromStdString("got '" + v + "'")) &&
                                 e.contains(QString::fromStdString("'npw " + c.name + " --help'")),
                             qPrintable(where + ": " + e));
                }
                QVERIFY2(refusal(c, f.name, inRange(f)).isEmpty(),
                         qPrintable(where + " refused " + QString::fromStdString(inRange(f)) + ": " +
                                    refusal(c, f.name, inRange(f))));
                if (f.isList()) {  // one bad item spoils the list, and the error shows it
                    const QString e = refusal(c, f.name, inRange(f) + ",nan");
                    QVERIFY2(e.contains("got 'nan' in '"), qPrintable(where + ": " + e));
                }
            }
        QVERIFY(numeric > 50);
    }

    void choicesRefuseOtherNames() {
        for (const Command& c : allCommands())
            for (const Flag& f : c.flags) {
                if (f.type != FlagType::Choice) continue;
                const QString e = refusal(c, f.name, "no-such-choice");
                QVERIFY2(e.startsWith(QString::fromStdString("--" + f.name + " expects " + f.choices + ", got 'no-such-choice'")),
                         qPrintable(e));
            }
    }

    void issueExamplesAreRefused() {
        QVERIFY(refusal(command("prune"), "alpha", "nan").startsWith("--alpha expects a positive number, got 'nan'"));
        QVERIFY(refusal(command("generate"), "temperature", "nan").startsWith("--temperature expects a number ≥ 0, got 'nan'"));
        QVERIFY(refusal(command("eval"), "seqlen", "0").startsWith("--seqlen expects an integer in [2, "));
        QVERIFY(refusal(command("eval"), "seqlen", "1").startsWith("--seqlen expects an integer in [2, "));
        QVERIFY(refusal(command("prune"), "nsamples", "1e11").startsWith("--nsamples expects an integer in [1, 1000000], got '1e11'"));
        QVERIFY(refusal(command("sweep"), "nsamples", "128,1e11")
                    .startsWith("--nsamples expects comma-separated integers in [1, 1000000], got '1e11' in '128,1e11'"));
        QVERIFY(refusal(command("prune"), "ratio", "1").startsWith("--ratio expects a number in [0, 1), got '1'"));
        QVERIFY(refusal(command("sweep"), "ratios", "0.1,1").contains("got '1' in '0.1,1'"));
        QVERIFY(refusal(command("generate"), "top-p", "0").startsWith("--top-p expects a number in (0, 1], got '0'"));
        QVERIFY(refusal(command("prune"), "per-class", "0").startsWith("--per-class expects an integer in [1, "));
        QVERIFY(refusal(command("export-gguf"), "dtype", "q8").startsWith("--dtype expects f32, f16 or bf16, got 'q8'"));
        QVERIFY(refusal(command("prune"), "alpha-mode", "both").startsWith("--alpha-mode expects paper or budget, got 'both'"));
        // Integers may be written as exact numbers; values the table takes read back as given.
        QVERIFY(refusal(command("prune"), "nsamples", "1e3").isEmpty());
        const Args args = parseArgs(command("prune").flags, {"--nsamples", "1e3", "--seed=7", "--ratio", "0.25"}, "prune");
        QCOMPARE(args.getInt("nsamples"), 1000LL);
        QCOMPARE(args.getInt("seed"), 7LL);
        QCOMPARE(args.getDouble("ratio"), 0.25);
        const Args lists = parseArgs(command("sweep").flags, {"--ratios", "0,0.5", "--nsamples", "8,,16"}, "sweep");
        QCOMPARE(lists.getDoubleList("ratios"), (std::vector<double>{0, 0.5}));
        QCOMPARE(lists.getIntList("nsamples"), (std::vector<int64_t>{8, 16}));
        QVERIFY(!lists.has("seqlen"));  // no default: the protocol's, the model's context at most 2048
    }

    void defaultsComeFromTheSettings() {
        const PruneSettings prune;
        QCOMPARE(flagOf("prune", "method").defaultValue, methodName(prune.method));
        QCOMPARE(flagOf("prune", "ratio").defaultValue, shortNumber(prune.ratio));
        // λ is relative by default (--lambda-rel); an absolute --lambda has no default.
        QCOMPARE(flagOf("prune", "lambda").defaultValue, std::string());
        QCOMPARE(flagOf("prune", "lambda-rel").defaultValue, shortNumber(prune.lambdaRel));
        QCOMPARE(flagOf("prune", "ranking").defaultValue, crossLayerRankingName(prune.crossLayer));
        QCOMPARE(flagOf("prune", "damp").defaultValue, shortNumber(prune.damp));
        QCOMPARE(flagOf("prune", "iters").defaultValue, std::to_string(prune.iters));
        QCOMPARE(flagOf("prune", "alpha-mode").defaultValue, alphaModeName(prune.alphaMode));
        QCOMPARE(flagOf("prune", "compensation").defaultValue, std::string("auto"));
        QCOMPARE(flagOf("prune", "unit").defaultValue, std::string("kv-group"));
        QCOMPARE(flagOf("prune", "seed").defaultValue, std::to_string(prune.seed));
        QCOMPARE(flagOf("sweep", "lambda").defaultValue, std::string());
        QCOMPARE(flagOf("sweep", "lambda-rel").defaultValue, shortNumber(SweepSpec{}.lambdaRel));
        QCOMPARE(flagOf("generate", "tokens").defaultValue, std::to_string(SamplingOptions{}.maxNewTokens));
        QCOMPARE(flagOf("eval", "batch").defaultValue, std::to_string(PerplexityOptions{}.batchWindows));
        // The window lengths follow the one protocol (evaluation_protocol.h): evaluation 2048
        // capped at the context (eval none given, sweep's --eval-seqlen 2048), calibration the
        // model's context at most 2048 (prune and sweep none given); --max-windows: every window.
        QCOMPARE(flagOf("eval", "seqlen").defaultValue, std::string());
        QVERIFY(flagOf("eval", "seqlen").help.find("2048") != std::string::npos);
        QCOMPARE(flagOf("prune", "seqlen").defaultValue, std::string());
        QVERIFY(flagOf("prune", "seqlen").help.find("2048") != std::string::npos);
        QCOMPARE(flagOf("sweep", "seqlen").defaultValue, std::string());
        QVERIFY(flagOf("sweep", "seqlen").help.find("2048") != std::string::npos);
        QCOMPARE(flagOf("sweep", "eval-seqlen").defaultValue, std::to_string(kProtocolSeqlen));
        QCOMPARE(flagOf("sweep", "max-windows").defaultValue, std::string("0"));
        QCOMPARE(flagOf("eval", "max-windows").defaultValue, std::string("0"));
        QCOMPARE(flagOf("sweep", "nsamples").defaultValue, std::to_string(kDefaultCalibrationSamples));
        QCOMPARE(flagOf("prune", "nsamples").defaultValue, std::to_string(kDefaultCalibrationSamples));
        QCOMPARE(flagOf("bench", "calib-seqlen").defaultValue, std::string("128"));
        QCOMPARE(flagOf("demo", "ratio").defaultValue, std::string("0.3"));
    }

    void oneParserForAlphaModeAndCompensation() {
        QCOMPARE(int(parseAlphaMode("paper")), int(AlphaMode::Paper));
        QCOMPARE(int(parseAlphaMode("budget")), int(AlphaMode::Budget));
        for (AlphaMode m : {AlphaMode::Paper, AlphaMode::Budget}) QCOMPARE(int(parseAlphaMode(alphaModeName(m))), int(m));
        QVERIFY_THROWS_EXCEPTION(Error, parseAlphaMode("Paper"));
        // FLAP's bias compensation: both spellings read, "flap-bias" written.
        QCOMPARE(int(parseCompensation("bias")), int(CompensationKind::FlapBias));
        QCOMPARE(int(parseCompensation("flap-bias")), int(CompensationKind::FlapBias));
        QCOMPARE(compensationSettingName(CompensationKind::FlapBias), std::string("flap-bias"));
        QCOMPARE(compensationName(CompensationKind::FlapBias), std::string("flap-bias"));
        for (CompensationKind k : {CompensationKind::MethodDefault, CompensationKind::Theorem3, CompensationKind::FlapBias,
                                   CompensationKind::None}) {
            QCOMPARE(int(parseCompensation(compensationSettingName(k))), int(k));
            QCOMPARE(int(parseCompensation(compensationName(k))), int(k));
        }
        QVERIFY_THROWS_EXCEPTION(Error, parseCompensation("bias2"));
        for (AttentionUnitKind k : {AttentionUnitKind::KvGroup, AttentionUnitKind::QuerySlot})
            QCOMPARE(int(parseAttentionUnit(attentionUnitName(k))), int(k));
        QVERIFY_THROWS_EXCEPTION(Error, parseAttentionUnit("head"));
        // The CLI takes both spellings; its help writes flap-bias.
        const Command& prune = command("prune");
        QVERIFY(refusal(prune, "compensation", "bias").isEmpty());
        QVERIFY(refusal(prune, "compensation", "flap-bias").isEmpty());
        QVERIFY(formatFlagHelp(prune.flags).find("flap-bias") != std::string::npos);
        // Issue 15: the cross-layer ranking by name, λ_rel positive.
        for (const char* name : {"lstar-rel", "lstar", "z"}) QVERIFY(refusal(prune, "ranking", name).isEmpty());
        QVERIFY(!refusal(prune, "ranking", "L*").isEmpty());
        QVERIFY(refusal(prune, "lambda-rel", "4").isEmpty());
        QVERIFY(!refusal(prune, "lambda-rel", "0").isEmpty());
        QVERIFY(!refusal(prune, "lambda-rel", "-1").isEmpty());
        QVERIFY(!refusal(command("sweep"), "lambda-rel", "nan").isEmpty());
    }

    void helpListsEveryFlag() {
        for (const Command& c : allCommands()) {
            const std::string help = formatFlagHelp(c.flags);
            for (const Flag& f : c.flags) {
                const std::string line = "  --" + f.name + (f.valueName.empty() ? "" : " " + f.valueName);
                QVERIFY2(help.find(line) != std::string::npos, qPrintable(QString::fromStdString(c.name + ": " + line)));
                if (!f.defaultValue.empty())
                    QVERIFY2(help.find("[default: " + f.defaultValue + "]") != std::string::npos,
                             qPrintable(QString::fromStdString(c.name + " --" + f.name)));
            }
        }
    }

    void helpScreensOfTheBinary() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        for (const Command& c : allCommands()) {
            QProcess p;
            p.start(npw_, {QString::fromStdString(c.name), "--help"});
            QVERIFY(p.waitForFinished(30000));
            QCOMPARE(p.exitCode(), 0);
            const QString out = QString::fromUtf8(p.readAllStandardOutput());
            for (const Flag& f : c.flags)
                QVERIFY2(out.contains(QString::fromStdString("--" + f.name + (f.valueName.empty() ? "" : " " + f.valueName))),
                         qPrintable(QString::fromStdString(c.name + " --" + f.name)));
        }
    }

    // --method and --methods list what core's parsers take (flag_table.cpp reads the names from
    // core): every method named here, independently, is offered and accepted.
    void methodListsAreCores() {
        const Flag& method = flagOf("prune", "method");
        const std::vector<std::string> methods = {"numerical", "flap", "wanda-sp", "magnitude", "random",
                                                  "llm-pruner", "slicegpt", "block-influence"};
        for (const std::string& m : methods) {
            QVERIFY2(method.choices.find(m) != std::string::npos, m.c_str());
            QVERIFY2(method.help.find(m) != std::string::npos, m.c_str());
            QVERIFY2(refusal(command("prune"), "method", m).isEmpty(), m.c_str());
        }
        QCOMPARE(method.choices, std::string("numerical, flap, wanda-sp, magnitude, random, llm-pruner, slicegpt or "
                                             "block-influence"));
        QVERIFY(!refusal(command("prune"), "method", "numerical-z").isEmpty());
        const std::string sweepHelp = flagOf("sweep", "methods").help;
        // A name in the list: followed by ", " or, the last, by " (".
        auto listed = [&](const std::string& m) {
            return sweepHelp.find(" " + m + ",") != std::string::npos || sweepHelp.find(" " + m + " (") != std::string::npos;
        };
        for (const std::string& m : methods) QVERIFY2(listed(m), m.c_str());
        for (const char* variant : {"numerical-z", "numerical-lstar", "numerical-lstar-rel", "numerical-lstar-kl",
                                    "numerical-nocomp", "numerical-box"}) {
            QVERIFY2(listed(variant), variant);
            parseSweepMethod(variant);  // and the sweep takes it
        }
    }

    // A flag's JSON key (Flag::jsonKey, shown in the CLI reference) is where `npw prune --json`
    // reports the value given: a real prune of demo:lm with a value for every such flag.
    void jsonKeysReportTheValueGiven() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string out = (dir.path() + "/pruned").toStdString();
        // The values given: others than the defaults (but the method's).
        const std::map<std::string, std::string> given = {
            {"method", "numerical"},  {"ratio", "0.25"},       {"alpha", "2"},
            {"alpha-mode", "paper"},  {"lambda-rel", "2"},     {"ranking", "z"},
            {"compensation", "theorem3"}, {"nsamples", "3"},  {"seqlen", "32"},
            {"seed", "5"},            {"out", out},
        };
        // A slice of the demo's calibration text: tokenizing all of it would be most of the run.
        const std::string calib = (dir.path() + "/calib.txt").toStdString();
        {
            std::ifstream in(resourcesDir() + "/demo/data/kjv-ot.txt", std::ios::binary);
            std::string text(60000, '\0');
            in.read(text.data(), static_cast<std::streamsize>(text.size()));
            text.resize(static_cast<size_t>(in.gcount()));
            QVERIFY(text.size() > 10000);
            std::ofstream(calib, std::ios::binary) << text;
        }
        QStringList args = {"prune", "demo:lm", "--json", "--calib", QString::fromStdString(calib)};
        int keyed = 0;
        for (const Flag& f : command("prune").flags) {
            if (f.jsonKey.empty()) continue;
            ++keyed;
            QVERIFY2(given.count(f.name), qPrintable(QString::fromStdString("give --" + f.name + " a value in this test")));
            args << QString::fromStdString("--" + f.name) << QString::fromStdString(given.at(f.name));
        }
        QVERIFY(keyed >= 8);
        QProcess p;
        p.start(npw_, args);
        QVERIFY(p.waitForFinished(300000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const nlohmann::json j = nlohmann::json::parse(p.readAllStandardOutput().toStdString());
        for (const Flag& f : command("prune").flags) {
            if (f.jsonKey.empty()) continue;
            const nlohmann::json* v = &j;
            std::stringstream path(f.jsonKey);
            for (std::string part; std::getline(path, part, '.');) {
                QVERIFY2(v->contains(part), qPrintable(QString::fromStdString("--" + f.name + ": no key " + f.jsonKey)));
                v = &(*v)[part];
            }
            const std::string& value = given.at(f.name);
            if (v->is_number())
                QVERIFY2(std::fabs(v->get<double>() - std::stod(value)) < 1e-12,
                         qPrintable(QString::fromStdString("--" + f.name + " " + value + " reported as " + v->dump())));
            else
                QVERIFY2(v->is_string() && v->get<std::string>() == value,
                         qPrintable(QString::fromStdString("--" + f.name + " " + value + " reported as " + v->dump())));
        }
    }

    void markupIsEscaped() {
        QCOMPARE(markdownEscaped("4*D_h/3 [x] <b> a|b `c` \\"), std::string("4\\*D\\_h/3 \\[x\\] \\<b> a\\|b \\`c\\` \\\\"));
        QCOMPARE(roffEscaped(".TH\n'x\n--a \\ b"), std::string("\\&.TH\n\\&'x\n\\-\\-a \\e b"));
        QCOMPARE(roffEscaped("ρ ≥ 1 — ok"), std::string("\\[u03C1] \\[u2265] 1 \\[u2014] ok"));
    }

    // The reference pages hold every command and flag, and the binary prints the same pages
    // (through the launcher, which hands `help --markdown|--man` to npw-run).
    void referencePages() {
        const std::string markdown = markdownReference(allCommands());
        const std::string man = manPage(allCommands(), versionString());
        for (const Command& c : allCommands()) {
            QVERIFY2(markdown.find("\n## npw " + c.name + "\n") != std::string::npos, c.name.c_str());
            QVERIFY2(man.find(".SS \"npw " + roffEscaped(c.name) + "\"\n") != std::string::npos, c.name.c_str());
            for (const Flag& f : c.flags) {
                const std::string md = "- `--" + f.name + (f.valueName.empty() ? "" : " " + f.valueName) + "` — ";
                QVERIFY2(markdown.find(md) != std::string::npos, qPrintable(QString::fromStdString(c.name + ": " + md)));
                QVERIFY2(man.find(".B " + roffEscaped("--" + f.name)) != std::string::npos,
                         qPrintable(QString::fromStdString(c.name + " --" + f.name)));
            }
        }
        QVERIFY(markdown.find("`--json` key `cross_layer_ranking`") != std::string::npos);
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        auto run = [&](const QStringList& args) {
            QProcess p;
            p.start(npw_, args);
            p.waitForFinished(60000);
            return std::make_pair(p.exitCode(), p.readAllStandardOutput().toStdString());
        };
        const std::vector<std::pair<QStringList, std::string>> pages = {
            {{"help", "--markdown"}, markdown}, {{"help", "--man"}, man}, {{"help", "prune"}, commandHelpText(command("prune"))}};
        for (const auto& [args, expected] : pages) {
            const auto [rc, out] = run(args);
            QCOMPARE(rc, 0);
            QVERIFY2(out == expected, qPrintable("npw " + args.join(' ') + " prints another text"));
        }
        QCOMPARE(run({"help", "--no-such-page"}).first, 2);
    }

    void badValuesFailBeforeAnythingLoads() {
        if (!QFileInfo::exists(npw_)) QSKIP("the npw binary is not built in this tree");
        auto run = [&](const QStringList& args) {
            QProcess p;
            p.start(npw_, args);
            p.waitForFinished(60000);
            return std::make_pair(p.exitCode(), QString::fromUtf8(p.readAllStandardError()));
        };
        struct Case {
            QStringList args;
            QString expected;
        };
        const std::vector<Case> cases = {
            {{"prune", "demo:lm", "--alpha", "nan", "--calib", "x.txt", "--out", "/nonexistent/x"},
             "npw prune: error: --alpha expects a positive number, got 'nan' (see 'npw prune --help')"},
            {{"eval", "demo:lm", "--text", "x.txt", "--seqlen", "0"}, "npw eval: error: --seqlen expects an integer in [2, "},
            {{"generate", "demo:lm", "--temperature", "inf"}, "npw generate: error: --temperature expects a number ≥ 0, got 'inf'"},
            {{"sweep", "demo:lm", "--nsamples", "1e11"}, "npw sweep: error: --nsamples expects comma-separated integers in [1, 1000000], got '1e11'"},
            {{"prune", "demo:c2i", "--per-class", "0"}, "npw prune: error: --per-class expects an integer in [1, "},
            {{"export-gguf", "demo:lm", "--dtype", "f64"}, "npw export-gguf: error: --dtype expects f32, f16 or bf16, got 'f64'"},
            {{"prune", "demo:lm", "--calib", "x.txt", "--out", "/nonexistent/x", "--compensation", "bias", "--no-compensation"},
             "npw prune: error: --no-compensation contradicts --compensation bias"},
        };
        for (const Case& c : cases) {
            const auto [rc, err] = run(c.args);
            QVERIFY2(rc == 1 && err.startsWith(c.expected), qPrintable(c.args.join(' ') + " → " + QString::number(rc) + ": " + err));
        }
    }

private:
    QString npw_;
};

QTEST_GUILESS_MAIN(TestCliFlags)
#include "tst_cli_flags.moc"
