// The PyTorch checkpoint reader: the zip layer, the safe unpickler (opcodes, limits, hostile
// input) and TorchCheckpoint on checkpoints written by torch.save itself, by a zip writer that
// lies, and by pickles that run a shell command under Python's torch.load
// (tests/fixtures/make_torch_checkpoints.py, expectations in expected.json).
#include <ATen/ATen.h>

#include "error_of.h"
#include <QElapsedTimer>
#include <cmath>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/io/pickle.h"
#include "core/io/torch_checkpoint.h"
#include "core/io/zip_archive.h"
#include "core/util/error.h"

using namespace npw;
using npw::test::errorOf;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return std::string(NPW_TEST_DATA) + "/torch_checkpoints/" + name; }

const json& expectations() {
    static const json parsed = [] {
        std::ifstream in(fixture("expected.json"));
        if (!in) qFatal("cannot read %s", fixture("expected.json").c_str());
        return json::parse(in);
    }();
    return parsed;
}

QStringList toStringList(const json& list) {
    QStringList result;
    for (const json& item : list) result << QString::fromStdString(item.get<std::string>());
    return result;
}

void verifyMentionsAll(const QString& error, const QStringList& expected) {
    QVERIFY2(!error.isEmpty(), "no npw::Error was thrown");
    for (const QString& part : expected)
        QVERIFY2(error.contains(part), qPrintable("'" + part + "' missing from: " + error));
}

// Builds a pickle opcode by opcode, so each test shows the bytes it feeds the unpickler.
class PickleBuilder {
public:
    PickleBuilder& op(uint8_t code) { return u8(code); }
    PickleBuilder& u8(uint8_t value) {
        bytes_ += static_cast<char>(value);
        return *this;
    }
    PickleBuilder& u32(uint32_t value) {
        for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(value >> (8 * i)));
        return *this;
    }
    PickleBuilder& raw(std::string_view text) {
        bytes_ += text;
        return *this;
    }
    PickleBuilder& proto(uint8_t version = 2) { return op(0x80).u8(version); }
    PickleBuilder& global(std::string_view module, std::string_view name) {
        return op('c').raw(module).raw("\n").raw(name).raw("\n");
    }
    PickleBuilder& unicode(std::string_view text) { return op('X').u32(static_cast<uint32_t>(text.size())).raw(text); }
    PickleBuilder& int1(uint8_t value) { return op('K').u8(value); }
    PickleBuilder& int4(int32_t value) { return op('J').u32(static_cast<uint32_t>(value)); }
    PickleBuilder& binfloat(double value) {
        uint64_t bits;
        std::memcpy(&bits, &value, 8);
        op('G');
        for (int i = 7; i >= 0; --i) u8(static_cast<uint8_t>(bits >> (8 * i)));
        return *this;
    }
    // ('storage', torch.<type>, key, 'cpu', numel) BINPERSID
    PickleBuilder& storage(std::string_view type, std::string_view key, uint8_t numel) {
        return op('(').unicode("storage").global("torch", type).unicode(key).unicode("cpu").int1(numel).op('t').op('Q');
    }
    PickleBuilder& ints(std::initializer_list<int32_t> values) {
        op('(');
        for (int32_t value : values) int4(value);
        return op('t');
    }
    // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())
    PickleBuilder& tensor(std::string_view type, uint8_t numel, uint8_t offset, std::initializer_list<int32_t> size,
                          std::initializer_list<int32_t> stride, std::string_view key = "0") {
        global("torch._utils", "_rebuild_tensor_v2")
            .op('(')
            .storage(type, key, numel)
            .int1(offset)
            .ints(size)
            .ints(stride);
        return op(0x89).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    }
    PickleBuilder& stop() { return op('.'); }
    const std::string& bytes() const { return bytes_; }
    QByteArray qbytes() const { return QByteArray(bytes_.data(), static_cast<int>(bytes_.size())); }

private:
    std::string bytes_;
};

std::shared_ptr<const PickleDocument> parse(const PickleBuilder& pickle, const PickleLimits& limits = {}) {
    return unpickle(pickle.bytes(), "test.pkl", limits);
}

bool markerExists() { return QFile::exists(QString::fromStdString(expectations()["marker"].get<std::string>())); }

at::Tensor expectedValues(const json& tensor) {
    std::vector<double> values = tensor["values"].get<std::vector<double>>();
    std::vector<int64_t> shape = tensor["shape"].get<std::vector<int64_t>>();
    return at::tensor(values, at::TensorOptions().dtype(at::kDouble)).reshape(shape);
}

}  // namespace

class TestTorchCheckpoint : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { QFile::remove(QString::fromStdString(expectations()["marker"].get<std::string>())); }

    // ---------------- zip ----------------

    void crc32MatchesTheStandardCheckValue() { QCOMPARE(crc32Of("123456789"), 0xCBF43926u); }

    void torchSaveWritesAlignedStoredEntries() {
        auto archive = ZipArchive::open(fixture("llamagen_like.pt"));
        QVERIFY(archive->entries().size() > 3);
        for (const ZipEntry& entry : archive->entries()) {
            QCOMPARE(entry.method, uint16_t(0));
            QVERIFY2(entry.dataOffset % 64 == 0, entry.name.c_str());
            archive->verifyCrc32(entry);
        }
        QCOMPARE(archive->data("llamagen_like/version"), std::string_view("3\n"));
    }

    void readsZip64ExtraFields() {
        // Every central-directory size and offset saturated, the values in ZIP64 extra fields.
        auto archive = ZipArchive::open(fixture("raw_state_dict_zip64.pt"));
        QCOMPARE(archive->entries().front().name, std::string("archive/version"));
        QCOMPARE(archive->data("archive/byteorder"), std::string_view("little"));
        for (const ZipEntry& entry : archive->entries()) archive->verifyCrc32(entry);
    }

    void rejectsFilesThatAreNotZipArchives() {
        QTemporaryDir dir;
        const std::string tiny = dir.filePath("tiny.pt").toStdString(), noise = dir.filePath("noise.pt").toStdString();
        std::ofstream(tiny) << "PK";
        std::ofstream(noise) << std::string(200, 'x');
        verifyMentionsAll(errorOf([&] { ZipArchive::open(tiny); }), {"tiny.pt", "fewer than the 22"});
        verifyMentionsAll(errorOf([&] { ZipArchive::open(noise); }),
                          {"noise.pt", "no end-of-central-directory record"});
        verifyMentionsAll(errorOf([&] { ZipArchive::open(dir.filePath("absent.pt").toStdString()); }),
                          {"absent.pt", "cannot open"});
    }

    // ---------------- unpickler ----------------

    void unknownCallableBecomesAnInertPlaceholder() {
        PickleBuilder pickle;
        pickle.proto().global("os", "system").unicode("touch " + expectations()["marker"].get<std::string>());
        pickle.op(0x85).op('R').stop();
        auto document = parse(pickle);
        const PickleValue& root = document->root();
        QCOMPARE(root.kind, PickleKind::Object);
        QCOMPARE(root.qualifiedName(), std::string("os.system"));
        QVERIFY(!root.instantiated);
        QCOMPARE(root.args->items.size(), size_t(1));
        QCOMPARE(describePickleValue(root), std::string("os.system(...) (inert placeholder, never called)"));
        QVERIFY(!markerExists());
    }

    void argparseNamespaceKeepsItsStateInert() {
        PickleBuilder pickle;
        pickle.proto().global("argparse", "Namespace").op(')').op(0x81);
        pickle.op('}')
            .op('(')
            .unicode("lr")
            .binfloat(1e-4)
            .unicode("gpt_model")
            .unicode("GPT-B")
            .op('u')
            .op('b')
            .stop();
        auto document = parse(pickle);
        const PickleValue& root = document->root();
        QCOMPARE(root.kind, PickleKind::Object);
        QVERIFY(root.instantiated);
        QCOMPARE(describePickleValue(root), std::string("argparse.Namespace (inert placeholder)"));
        QVERIFY(root.state && root.state->is(PickleKind::Dict));
        QCOMPARE(root.state->get("gpt_model")->text, std::string("GPT-B"));
        QCOMPARE(root.state->get("lr")->real, 1e-4);
    }

    void dictKeysFollowPythonEquality() {
        // {1: 'a', True: 'b', 1.0: 'c'} is {1: 'c'} in Python.
        PickleBuilder pickle;
        pickle.proto()
            .op('}')
            .op('(')
            .int1(1)
            .unicode("a")
            .op(0x88)
            .unicode("b")
            .binfloat(1.0)
            .unicode("c")
            .op('u')
            .stop();
        auto document = parse(pickle);
        const PickleValue& root = document->root();
        QCOMPARE(root.entries.size(), size_t(1));
        QCOMPARE(root.entries[0].key->kind, PickleKind::Int);
        QCOMPARE(root.entries[0].value->text, std::string("c"));
    }

    void nanAndTupleKeysFollowPythonAndStayLinear() {
        // A NaN equals only itself (the same object): {nan: 1, nan: 2} with one memoized NaN is
        // one key, with two NaN objects two keys; (1, nan) with the same NaN is one key too.
        PickleBuilder same;
        same.proto().op('}').op('(').binfloat(std::nan("")).op('q').u8(0).int1(1).op('h').u8(0).int1(2);
        same.int1(1).op('h').u8(0).op(0x86).int1(3).int1(1).op('h').u8(0).op(0x86).int1(4).op('u').stop();
        auto document = parse(same);
        QCOMPARE(document->root().entries.size(), size_t(2));
        QCOMPARE(document->root().entries[0].value->integer, int64_t(2));
        QCOMPARE(document->root().entries[1].value->integer, int64_t(4));
        PickleBuilder two;
        two.proto().op('}').op('(').binfloat(std::nan("")).int1(1).binfloat(std::nan("")).int1(2).op('u').stop();
        QCOMPARE(parse(two)->root().entries.size(), size_t(2));
        // -0.0 == 0 == False; 0.5 stays a float key; 'a' and b'a' differ.
        PickleBuilder mixed;
        mixed.proto().op('}').op('(').binfloat(-0.0).int1(1).op(0x89).int1(2).binfloat(0.5).int1(3).binfloat(0.5).int1(4);
        mixed.unicode("a").int1(5).op('C').u8(1).raw("a").int1(6).op('u').stop();
        document = parse(mixed);
        QCOMPARE(document->root().entries.size(), size_t(4));
        QCOMPARE(document->root().entries[0].value->integer, int64_t(2));
        QCOMPARE(document->root().entries[1].value->integer, int64_t(4));

        // 300,000 NaN keys (issue 16: minutes, each insert compared with every NaN before it).
        PickleBuilder many;
        many.proto().op('}').op('(');
        for (int i = 0; i < 300000; ++i) many.binfloat(std::nan("")).int1(static_cast<uint8_t>(i));
        many.op('u').stop();
        QElapsedTimer timer;
        timer.start();
        QCOMPARE(parse(many)->root().entries.size(), size_t(300000));
        QVERIFY2(timer.elapsed() < 20000, qPrintable(QString("took %1 ms").arg(timer.elapsed())));
    }

    void codecsEncodeIsBoundedInTotal() {
        // One memoized 1 MiB string encoded 300 times: 300 MiB, past the 256 MiB in all.
        PickleBuilder pickle;
        pickle.proto().op(']').op('(').global("_codecs", "encode").op('q').u8(0).unicode(std::string(1 << 20, 'a'));
        pickle.op('q').u8(1).unicode("latin1").op('q').u8(2).op(0x86).op('R');
        for (int i = 1; i < 300; ++i) pickle.op('h').u8(0).op('h').u8(1).op('h').u8(2).op(0x86).op('R');
        pickle.op('e').stop();
        verifyMentionsAll(errorOf([&] { parse(pickle); }), {"_codecs.encode", "in all"});
    }

    void long1CoversInt64AndBeyond() {
        PickleBuilder pickle;
        pickle.proto().op('(');
        pickle.op(0x8a).u8(0);
        pickle.op(0x8a).u8(1).u8(0xff);
        pickle.op(0x8a).u8(2).u8(0xff).u8(0x7f);
        pickle.op(0x8a).u8(8).raw(std::string(7, '\xff')).u8(0x7f);
        pickle.op(0x8a).u8(9).raw(std::string(7, '\0')).u8(0x80).u8(0x00);  // 2^63: too big
        pickle.op(0x8a).u8(9).raw(std::string(7, '\0')).u8(0x80).u8(0xff);  // -2^63: fits
        pickle.op('t').stop();
        auto document = parse(pickle);
        const auto& items = document->root().items;
        QCOMPARE(items.size(), size_t(6));
        QCOMPARE(items[0]->integer, int64_t(0));
        QCOMPARE(items[1]->integer, int64_t(-1));
        QCOMPARE(items[2]->integer, int64_t(32767));
        QCOMPARE(items[3]->integer, std::numeric_limits<int64_t>::max());
        QCOMPARE(items[4]->kind, PickleKind::BigInt);
        QCOMPARE(items[5]->kind, PickleKind::Int);
        QCOMPARE(items[5]->integer, std::numeric_limits<int64_t>::min());
    }

    void protocol2BytesComeFromCodecsEncode() {
        // Python 3 pickles b'\xff\x00a' at protocol 2 as _codecs.encode('\u00ff\x00a', 'latin1').
        PickleBuilder pickle;
        pickle.proto().global("_codecs", "encode").unicode(std::string("\xc3\xbf\0a", 4)).unicode("latin1");
        pickle.op(0x86).op('R').stop();
        auto document = parse(pickle);
        QCOMPARE(document->root().kind, PickleKind::Bytes);
        QCOMPARE(document->root().text, std::string("\xff\0a", 3));
    }

    void selfContainingListIsHarmless() {
        PickleBuilder pickle;
        pickle.proto().op(']').op('q').u8(0).op('h').u8(0).op('a').stop();
        auto document = parse(pickle);
        const PickleValue& root = document->root();
        QCOMPARE(root.items.size(), size_t(1));
        QCOMPARE(root.items[0], &root);
        QCOMPARE(describePickleValue(root), std::string("list (1 item)"));
    }

    void rebuildsTensorReferences() {
        PickleBuilder pickle;
        pickle.proto().tensor("HalfStorage", 6, 1, {2, 2}, {2, 1}).stop();
        auto document = parse(pickle);
        const PickleValue& root = document->root();
        QCOMPARE(root.kind, PickleKind::Tensor);
        const PickleStorageRef& storage = *root.tensor->storage->storage;
        QCOMPARE(storage.key, std::string("0"));
        QCOMPARE(std::string(storage.type->dtype), std::string("F16"));
        QCOMPARE(storage.numel, int64_t(6));
        QCOMPARE(root.tensor->storageOffset, int64_t(1));
        QCOMPARE(root.tensor->size, (std::vector<int64_t>{2, 2}));
        QCOMPARE(root.tensor->stride, (std::vector<int64_t>{2, 1}));
        QCOMPARE(describePickleValue(root), std::string("tensor F16 [2, 2]"));
    }

    void rejectsDisallowedOrMalformedPickles_data() {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QStringList>("expected");
        auto row = [](const char* name, const PickleBuilder& pickle, const QStringList& expected) {
            QTest::newRow(name) << pickle.qbytes() << (QStringList{"test.pkl"} + expected);
        };
        row("INST calls a class", PickleBuilder().proto().op('(').op('i').raw("os\nsystem\n").stop(),
            {"INST (0x69) at offset 3", "not allowed"});
        row("OBJ calls a class", PickleBuilder().proto().op('(').global("os", "system").op('o').stop(),
            {"OBJ (0x6f) at offset 14"});
        row("EXT1 registry lookup", PickleBuilder().proto().op(0x82).u8(1).stop(), {"EXT1 (0x82) at offset 2"});
        row("protocol 0 text opcode", PickleBuilder().raw("I1\n").stop(), {"INT (0x49) at offset 0"});
        row("PROTO later", PickleBuilder().op('N').proto().stop(), {"PROTO (0x80) at offset 1", "only as the first"});
        row("protocol 6", PickleBuilder().proto(6).op('N').stop(), {"protocol 6"});
        row("bytes after STOP", PickleBuilder().proto().op('N').stop().op('N'), {"1 bytes after STOP"});
        row("no STOP", PickleBuilder().proto().op('N'), {"without STOP"});
        row("two values at STOP", PickleBuilder().proto().op('N').op('N').stop(), {"not exactly one"});
        row("MARK left open", PickleBuilder().proto().op('(').op('N').stop(), {"still open"});
        row("stack underflow", PickleBuilder().proto().op('a').stop(),
            {"APPEND (0x61) at offset 2", "stack underflow"});
        row("underflow below MARK", PickleBuilder().proto().op(']').op('(').op('a').stop(), {"stack underflow"});
        row("TUPLE without MARK", PickleBuilder().proto().op('N').op('t').stop(),
            {"TUPLE (0x74) at offset 3", "no open MARK"});
        row("memo miss", PickleBuilder().proto().op('h').u8(5).stop(), {"BINGET (0x68) at offset 2", "memo entry 5"});
        row("truncated string", PickleBuilder().proto().op('X').u32(100).raw("abc"), {"needs 100 bytes, only 3"});
        row("invalid UTF-8", PickleBuilder().proto().op('X').u32(2).raw("\xc3\x28").stop(), {"not valid UTF-8"});
        row("list as dict key", PickleBuilder().proto().op('}').op(']').int1(1).op('s').stop(),
            {"a list as a dict key"});
        row("call a non-global", PickleBuilder().proto().int1(1).op(')').op('R').stop(),
            {"only a global can be called"});
        row("BUILD on a list", PickleBuilder().proto().op(']').op('}').op('b').stop(), {"cannot BUILD a list"});
        row("not a dotted name", PickleBuilder().proto().global("os;rm", "x").stop(), {"not a dotted Python name"});
        row("bad persistent id", PickleBuilder().proto().unicode("x").op('Q').stop(),
            {"BINPERSID", "persistent id must be"});
        row("quantized storage", PickleBuilder().proto().storage("QInt8Storage", "0", 4).stop(),
            {"unsupported storage type torch.QInt8Storage"});
        row("negative stride", PickleBuilder().proto().tensor("FloatStorage", 4, 0, {2, 2}, {-2, 1}).stop(),
            {"_rebuild_tensor_v2", "stride must be a non-negative int"});
        row("size and stride lengths", PickleBuilder().proto().tensor("FloatStorage", 4, 0, {2, 2}, {1}).stop(),
            {"size has 2 dimensions, stride 1"});
        PickleBuilder redeclared;
        redeclared.proto().op('(').storage("FloatStorage", "0", 4).storage("FloatStorage", "0", 5).op('t').stop();
        row("storage declared twice", redeclared, {"storage '0' is declared again"});
        row("codecs.encode as utf-8",
            PickleBuilder().proto().global("_codecs", "encode").unicode("x").unicode("utf-8").op(0x86).op('R').stop(),
            {"_codecs.encode is accepted only as (str, 'latin1')"});
        row("OrderedDict of junk",
            PickleBuilder()
                .proto()
                .global("collections", "OrderedDict")
                .op(']')
                .int1(1)
                .op('a')
                .op(0x85)
                .op('R')
                .stop(),
            {"not a (key, value) pair"});
    }

    void rejectsDisallowedOrMalformedPickles() {
        QFETCH(QByteArray, bytes);
        QFETCH(QStringList, expected);
        verifyMentionsAll(
            errorOf([&] { unpickle(std::string_view(bytes.constData(), size_t(bytes.size())), "test.pkl"); }),
            expected);
    }

    void limitsStopHostilePickles() {
        PickleBuilder marks;
        marks.proto().raw(std::string(300, '('));
        verifyMentionsAll(errorOf([&] { parse(marks); }), {"more than 256 MARKs"});

        PickleBuilder nested;
        nested.proto().op(')').raw(std::string(300, '\x85'));
        verifyMentionsAll(errorOf([&] { parse(nested); }), {"tuples nested 257 deep"});

        PickleLimits limits;
        limits.maxObjects = 10;
        PickleBuilder lists;
        lists.proto().raw(std::string(12, ']'));
        verifyMentionsAll(errorOf([&] { parse(lists, limits); }), {"more than 10 objects"});

        limits = {};
        limits.maxStringBytes = 4;
        verifyMentionsAll(errorOf([&] { parse(PickleBuilder().proto().unicode("hello").stop(), limits); }),
                          {"a string of 5 bytes exceeds the limit of 4"});

        limits = {};
        limits.maxMemoEntries = 2;
        PickleBuilder memo;
        memo.proto().op('N').op('q').u8(0).op('q').u8(1).op('q').u8(2).stop();
        verifyMentionsAll(errorOf([&] { parse(memo, limits); }), {"BINPUT", "more than 2 memo entries"});
    }

    // ---------------- checkpoints ----------------

    void readsCheckpoints_data() {
        QTest::addColumn<QString>("file");
        for (const auto& item : expectations()["checkpoints"].items())
            QTest::newRow(item.key().c_str()) << QString::fromStdString(item.key());
    }

    void readsCheckpoints() {
        QFETCH(QString, file);
        const json& expected = expectations()["checkpoints"][file.toStdString()];
        auto checkpoint = TorchCheckpoint::open(fixture(file.toStdString()));
        QCOMPARE(checkpoint->prefix(), expected["prefix"].get<std::string>());
        QCOMPARE(checkpoint->stateDictPath(), expected["state_dict_path"].get<std::string>());
        QCOMPARE(checkpoint->names(), expected["names"].get<std::vector<std::string>>());
        QCOMPARE(checkpoint->summary(), expected["summary"].get<std::vector<std::string>>());
        for (const std::string& name : checkpoint->names()) {
            const json& tensor = expected["tensors"][name];
            const TorchTensorInfo& info = checkpoint->info(name);
            const std::string dtype = tensor["dtype"].get<std::string>();
            QCOMPARE(info.dtype, dtype);
            QCOMPARE(info.shape, tensor["shape"].get<std::vector<int64_t>>());
            QCOMPARE(info.stride, tensor["stride"].get<std::vector<int64_t>>());
            QCOMPARE(info.storageOffset, tensor["storage_offset"].get<int64_t>());
            QCOMPARE(info.parameter, tensor["parameter"].get<bool>());

            const at::Tensor values = expectedValues(tensor);
            const at::Tensor loaded = checkpoint->load(name);
            QVERIFY2(loaded.is_contiguous(), name.c_str());
            QCOMPARE(loaded.sizes().vec(), info.shape);
            QVERIFY2(at::equal(loaded.to(at::kDouble), values), name.c_str());
            if (dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64") {
                const at::Tensor asFloat = checkpoint->loadFloat(name);
                QCOMPARE(asFloat.scalar_type(), at::kFloat);
                QVERIFY2(at::equal(asFloat, values.to(at::kFloat)), name.c_str());
            } else {  // integers and booleans are never weights: refused by name
                verifyMentionsAll(errorOf([&] { checkpoint->loadFloat(name); }),
                                  {QString::fromStdString("tensor '" + name + "'"), QString::fromStdString("has dtype " + dtype)});
            }
        }
    }

    void viewsShareStorages() {
        const json& expected = expectations()["checkpoints"]["llamagen_like.pt"];
        auto checkpoint = TorchCheckpoint::open(fixture("llamagen_like.pt"));
        for (const json& pair : expected["shared_storage"]) {
            const TorchTensorInfo& first = checkpoint->info(pair[0].get<std::string>());
            const TorchTensorInfo& second = checkpoint->info(pair[1].get<std::string>());
            QCOMPARE(first.storageKey, second.storageKey);
            QCOMPARE(first.storageNumel, second.storageNumel);
        }
        QCOMPARE(checkpoint->info("layers.0.ffn_norm.weight").storageOffset, int64_t(8));
        QCOMPARE(checkpoint->info("layers.0.ffn_norm.weight").storageNumel, int64_t(16));
    }

    void hostileCheckpointsNeverExecute() {
        QVERIFY(!markerExists());
        auto checkpoint = TorchCheckpoint::open(fixture("hostile_payload.pt"));
        for (const std::string& name : checkpoint->names()) checkpoint->loadFloat(name);
        const PickleValue* payload = checkpoint->root().get("payload");
        QVERIFY(payload && payload->is(PickleKind::Object));
        QCOMPARE(payload->qualifiedName(), std::string("posix.system"));
        QVERIFY(!errorOf([] { TorchCheckpoint::open(fixture("hostile_root.pt")); }).isEmpty());
        QVERIFY2(!markerExists(), "a checkpoint's pickle ran a shell command");
    }

    void rejectsBrokenCheckpoints_data() {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QStringList>("expected");
        for (const auto& item : expectations()["errors"].items())
            QTest::newRow(item.key().c_str()) << QString::fromStdString(item.key()) << toStringList(item.value());
    }

    void rejectsBrokenCheckpoints() {
        QFETCH(QString, file);
        QFETCH(QStringList, expected);
        verifyMentionsAll(errorOf([&] { TorchCheckpoint::open(fixture(file.toStdString())); }), expected);
    }

    void storageCrcIsCheckedWhenAsked() {
        const json& expected = expectations()["bad_storage_crc"];
        const std::string file = fixture(expected["file"].get<std::string>());
        const std::string tensor = expected["tensor"].get<std::string>();
        TorchCheckpoint::open(file)->loadFloat(tensor);  // open() and load() read no CRC but data.pkl's
        TorchCheckpointOptions options;
        options.verifyStorageCrc32 = true;
        auto checkpoint = TorchCheckpoint::open(file, options);
        verifyMentionsAll(errorOf([&] { checkpoint->loadFloat(tensor); }), toStringList(expected["error"]));
    }

    void stateDictPathOption() {
        const std::string file = fixture("llamagen_like.pt");
        auto openAt = [&](const std::string& path) {
            TorchCheckpointOptions options;
            options.stateDictPath = path;
            return TorchCheckpoint::open(file, options);
        };
        QCOMPARE(openAt("model")->names().size(), expectations()["checkpoints"]["llamagen_like.pt"]["names"].size());
        verifyMentionsAll(errorOf([&] { openAt(""); }), {"llamagen_like.pt", "no tensors in the state dict at the root",
                                                         "model, optimizer, steps, args"});
        verifyMentionsAll(errorOf([&] { openAt("nope"); }),
                          {"no key 'nope' in the root dict (its keys: model, optimizer, steps, args)"});
        verifyMentionsAll(errorOf([&] { openAt("optimizer/state"); }),
                          {"no tensors in the state dict at 'optimizer/state'"});
        verifyMentionsAll(errorOf([&] { openAt("steps"); }), {"'steps' holds int 123, not a state dict"});
        verifyMentionsAll(errorOf([&] { openAt("model/"); }), {"has an empty key"});
    }

    void refusesWhatItCannotConvert() {
        auto checkpoint = TorchCheckpoint::open(fixture("llamagen_like.pt"));
        verifyMentionsAll(errorOf([&] { checkpoint->loadFloat("test.mask"); }),
                          {"tensor 'test.mask'", "has dtype BOOL"});
        // Integer storages are never weights: refused by name, as the safetensors reader does.
        verifyMentionsAll(errorOf([&] { checkpoint->loadFloat("test.i32"); }),
                          {"tensor 'test.i32'", "has dtype I32", "a floating-point tensor (F32, F16, BF16, F64) was expected"});
        verifyMentionsAll(errorOf([&] { checkpoint->loadFloat("test.i64"); }), {"tensor 'test.i64'", "has dtype I64"});
        QCOMPARE(checkpoint->load("test.i32").scalar_type(), at::kInt);  // still readable as stored
        QCOMPARE(checkpoint->loadFloat("test.f64").scalar_type(), at::kFloat);
        verifyMentionsAll(errorOf([&] { checkpoint->info("nope"); }),
                          {"llamagen_like.pt", "no tensor named 'nope'", "at 'model'"});
    }

    void cleanupTestCase() { QVERIFY2(!markerExists(), "a checkpoint's pickle ran a shell command"); }
};

QTEST_GUILESS_MAIN(TestTorchCheckpoint)
#include "tst_torch_checkpoint.moc"
