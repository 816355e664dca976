// The safetensors reader and writer: round trips of every dtype, the writer's layout, and
// one malformed file per check the reader must make (shared/notes/formats.md).
#include "core/io/safetensors.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include "error_of.h"
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>

using namespace npw;
using npw::test::errorOf;

namespace {

QByteArray safetensorsBytes(const QByteArray& header, const QByteArray& data, uint64_t declaredHeaderLength) {
    QByteArray bytes(reinterpret_cast<const char*>(&declaredHeaderLength), 8);
    return bytes + header + data;
}

QByteArray safetensorsBytes(const QByteArray& header, const QByteArray& data) {
    return safetensorsBytes(header, data, static_cast<uint64_t>(header.size()));
}

QByteArray floatBytes(std::initializer_list<float> values) {
    QByteArray bytes;
    for (float value : values) bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
    return bytes;
}

QString writeBytes(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
    QString path = dir.filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(path));
    return path;
}

uint64_t headerLengthOf(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
    QByteArray first = file.read(8);
    uint64_t length = 0;
    std::memcpy(&length, first.constData(), 8);
    return length;
}

const char* kEntryA = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";

} // namespace

class TestSafeTensors : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;

private slots:
    void roundTripEveryDtype_data() {
        QTest::addColumn<int>("scalarType");
        QTest::addColumn<QString>("dtype");
        QTest::newRow("F32") << int(at::kFloat) << "F32";
        QTest::newRow("F16") << int(at::kHalf) << "F16";
        QTest::newRow("BF16") << int(at::kBFloat16) << "BF16";
        QTest::newRow("F64") << int(at::kDouble) << "F64";
        QTest::newRow("I64") << int(at::kLong) << "I64";
        QTest::newRow("I32") << int(at::kInt) << "I32";
        QTest::newRow("I16") << int(at::kShort) << "I16";
        QTest::newRow("I8") << int(at::kChar) << "I8";
        QTest::newRow("U8") << int(at::kByte) << "U8";
        QTest::newRow("BOOL") << int(at::kBool) << "BOOL";
    }

    void roundTripEveryDtype() {
        QFETCH(int, scalarType);
        QFETCH(QString, dtype);
        const auto type = static_cast<at::ScalarType>(scalarType);
        at::Tensor matrix = (at::arange(0, 12, at::kDouble).reshape({3, 4}) * 1.5 - 4).to(type);
        at::Tensor transposed = matrix.t();  // not contiguous: the writer must cope
        at::Tensor scalar = at::ones({}, at::kDouble).to(type);
        at::Tensor empty = at::zeros({0, 5}, at::kDouble).to(type);
        QString path = dir_.filePath("roundtrip_" + dtype + ".safetensors");
        writeSafeTensors(path.toStdString(), {{"matrix", matrix}, {"transposed", transposed}, {"scalar", scalar}, {"empty", empty}});

        auto file = SafeTensorsFile::open(path.toStdString());
        QCOMPARE(file->names(), (std::vector<std::string>{"empty", "matrix", "scalar", "transposed"}));
        QCOMPARE(QString::fromStdString(file->info("matrix").dtype), dtype);
        QCOMPARE(file->info("transposed").shape, (std::vector<int64_t>{4, 3}));
        QCOMPARE(file->info("scalar").shape, std::vector<int64_t>{});
        QCOMPARE(file->info("empty").shape, (std::vector<int64_t>{0, 5}));
        for (const auto& [name, original] : {std::pair<std::string, at::Tensor>{"matrix", matrix},
                                             {"transposed", transposed}, {"scalar", scalar}, {"empty", empty}}) {
            at::Tensor loaded = file->load(name);
            QCOMPARE(loaded.scalar_type(), type);
            QVERIFY2(at::equal(loaded, original), name.c_str());
        }
        const bool floating = dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
        if (floating) {
            at::Tensor asFloat = file->loadFloat("matrix");
            QCOMPARE(asFloat.scalar_type(), at::kFloat);
            QVERIFY(at::equal(asFloat, matrix.to(at::kFloat)));
        } else {
            QString message = errorOf([&] { file->loadFloat("matrix"); });
            QVERIFY2(message.contains(path) && message.contains("'matrix'") && message.contains(dtype), qPrintable(message));
        }
    }

    void loadFloatConvertsHalfPrecision() {
        at::Tensor values = at::tensor({0.1f, -2.5f, 65504.0f, 1e-3f});
        QString path = dir_.filePath("halves.safetensors");
        writeSafeTensors(path.toStdString(), {{"f16", values.to(at::kHalf)}, {"bf16", values.to(at::kBFloat16)}});
        auto file = SafeTensorsFile::open(path.toStdString());
        QVERIFY(at::equal(file->loadFloat("f16"), values.to(at::kHalf).to(at::kFloat)));
        QVERIFY(at::equal(file->loadFloat("bf16"), values.to(at::kBFloat16).to(at::kFloat)));
        QVERIFY(at::allclose(file->loadFloat("f16"), values, 1e-3, 1e-3));
    }

    void metadataRoundTrips() {
        QString path = dir_.filePath("metadata.safetensors");
        std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "ünïcode ok"}};
        writeSafeTensors(path.toStdString(), {{"w", at::ones({2})}}, metadata);
        auto file = SafeTensorsFile::open(path.toStdString());
        QCOMPARE(file->metadata(), metadata);
        QVERIFY(!file->has("__metadata__"));
    }

    // Reference writer layout: header padded with spaces to 8 bytes, tensors ordered by
    // element size (largest first) then name, so each is aligned to its element size.
    void writerPadsAndAlignsLikeTheReference() {
        QString path = dir_.filePath("layout.safetensors");
        writeSafeTensors(path.toStdString(), {{"u8", at::ones({3}, at::kByte)},
                                              {"f16", at::ones({3}, at::kHalf)},
                                              {"b_f32", at::ones({3}, at::kFloat)},
                                              {"a_f32", at::ones({1}, at::kFloat)},
                                              {"f64", at::ones({2}, at::kDouble)}});
        QCOMPARE(headerLengthOf(path) % 8, uint64_t(0));
        auto file = SafeTensorsFile::open(path.toStdString());
        QCOMPARE(file->info("f64").begin, uint64_t(0));
        QCOMPARE(file->info("a_f32").begin, uint64_t(16));
        QCOMPARE(file->info("b_f32").begin, uint64_t(20));
        QCOMPARE(file->info("f16").begin, uint64_t(32));
        QCOMPARE(file->info("u8").begin, uint64_t(38));
    }

    // The streaming writer plans the header from names, dtypes and shapes alone and takes the
    // data in any order: the file is byte for byte what writeSafeTensors writes.
    void streamWriterMatchesWriter() {
        const std::vector<std::pair<std::string, at::Tensor>> tensors = {
            {"u8", at::arange(3, at::kByte)},         {"f16", at::randn({3}).to(at::kHalf)},
            {"b_f32", at::randn({2, 3})},             {"a_f32", at::randn({1})},
            {"f64", at::randn({2, 2}, at::kDouble)},  {"i64", at::arange(5, at::kLong)},
            {"empty", at::zeros({0, 4})}};
        const std::map<std::string, std::string> metadata = {{"format", "test"}, {"note", "é"}};
        const QString whole = dir_.filePath("whole.safetensors"), streamed = dir_.filePath("streamed.safetensors");
        writeSafeTensors(whole.toStdString(), tensors, metadata);
        std::vector<SafeTensorsEntry> entries;
        entries.reserve(tensors.size());
        for (const auto& [name, t] : tensors) entries.push_back({name, t.scalar_type(), t.sizes().vec()});
        {
            SafeTensorsStreamWriter writer(streamed.toStdString(), entries, metadata);
            QVERIFY(QFile::exists(QString::fromStdString(writer.tempPath())));
            QVERIFY(!QFile::exists(streamed));
            for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) writer.write(it->first, it->second);
            writer.commit();
        }
        QFile a(whole), b(streamed);
        QVERIFY(a.open(QIODevice::ReadOnly) && b.open(QIODevice::ReadOnly));
        QCOMPARE(b.readAll(), a.readAll());
        // Views of the mapping: in place, no copy, equal to the data.
        auto file = SafeTensorsFile::open(streamed.toStdString());
        const at::Tensor f64 = file->view("f64"), i64 = file->view("i64");
        QVERIFY(at::equal(f64, tensors[4].second));
        QCOMPARE(static_cast<const char*>(i64.data_ptr()) - static_cast<const char*>(f64.data_ptr()),
                 static_cast<std::ptrdiff_t>(file->info("i64").begin - file->info("f64").begin));
    }

    void streamWriterErrorsLeaveNoFile() {
        const QString path = dir_.filePath("stream-error.safetensors");
        const std::vector<SafeTensorsEntry> entries = {{"a", at::kFloat, {2}}, {"b", at::kDouble, {3}}};
        std::string temp;
        QString message = errorOf([&] {
            SafeTensorsStreamWriter writer(path.toStdString(), entries);
            temp = writer.tempPath();
            writer.write("a", at::ones({2}));
            writer.commit();  // "b" never written
        });
        QVERIFY2(message.contains(path) && message.contains("tensor 'b' was never written"), qPrintable(message));
        message = errorOf([&] {
            SafeTensorsStreamWriter writer(path.toStdString(), entries);
            writer.write("b", at::ones({4}, at::kDouble));
        });
        QVERIFY2(message.contains(path) && message.contains("tensor 'b'") && message.contains("[3]") &&
                     message.contains("[4]"),
                 qPrintable(message));
        message = errorOf([&] { SafeTensorsStreamWriter(path.toStdString(), entries).write("c", at::ones({1})); });
        QVERIFY2(message.contains("'c'") && message.contains("not in the planned header"), qPrintable(message));
        QVERIFY(!QFile::exists(path));
        QVERIFY(!temp.empty() && !QFile::exists(QString::fromStdString(temp)));
    }

    void writerRejectsBadNames() {
        QString path = dir_.filePath("rejected.safetensors");
        QString message = errorOf([&] { writeSafeTensors(path.toStdString(), {{"__metadata__", at::ones({1})}}); });
        QVERIFY2(message.contains(path) && message.contains("__metadata__"), qPrintable(message));
        message = errorOf([&] { writeSafeTensors(path.toStdString(), {{"w", at::ones({1})}, {"w", at::ones({2})}}); });
        QVERIFY2(message.contains(path) && message.contains("two tensors named 'w'"), qPrintable(message));
        message = errorOf([&] { writeSafeTensors(path.toStdString(), {{"c", at::ones({1}, at::kComplexFloat)}}); });
        QVERIFY2(message.contains(path) && message.contains("'c'"), qPrintable(message));
        QVERIFY(!QFile::exists(path));
    }

    void missingTensorAndMissingFile() {
        QString path = dir_.filePath("one.safetensors");
        writeSafeTensors(path.toStdString(), {{"w", at::ones({1})}});
        auto file = SafeTensorsFile::open(path.toStdString());
        QString message = errorOf([&] { file->info("nope"); });
        QVERIFY2(message.contains(path) && message.contains("'nope'"), qPrintable(message));
        QString absent = dir_.filePath("absent.safetensors");
        message = errorOf([&] { SafeTensorsFile::open(absent.toStdString()); });
        QVERIFY2(message.contains(absent) && message.contains("cannot open"), qPrintable(message));
    }

    // A dtype the format knows and LibTorch 1.13 lacks: the header is valid, loading is not.
    void dtypeWithoutTorchEquivalent() {
        QString path = writeBytes(dir_, "u16.safetensors",
                                  safetensorsBytes(R"({"u":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}})", QByteArray(4, '\0')));
        auto file = SafeTensorsFile::open(path.toStdString());
        QCOMPARE(file->info("u").dtype, std::string("U16"));
        QString message = errorOf([&] { file->load("u"); });
        QVERIFY2(message.contains(path) && message.contains("'u'") && message.contains("U16"), qPrintable(message));
    }

    void malformedFilesAreRejected_data() {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QStringList>("expected");  // parts the message must contain besides the file name
        const QByteArray four = floatBytes({1});
        auto entry = [](const char* name, const char* dtype, const char* shape, const char* offsets) {
            return QByteArray("\"") + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
        };

        QTest::newRow("too_small") << QByteArray("abc") << QStringList{"3 bytes", "fewer than the 8"};
        QTest::newRow("header_too_large") << safetensorsBytes("{}", QByteArray(), 100'000'001)
                                          << QStringList{"100000001", "exceeds the limit"};
        QTest::newRow("header_past_eof") << safetensorsBytes("{}", QByteArray(), 64) << QStringList{"64 bytes", "past the end"};
        QTest::newRow("not_utf8") << safetensorsBytes("{\"a\xff\":{}}", QByteArray()) << QStringList{"not valid UTF-8", "offset 3"};
        QTest::newRow("overlong_utf8") << safetensorsBytes("{\"\xc0\xaf\":{}}", QByteArray()) << QStringList{"not valid UTF-8"};
        QTest::newRow("invalid_json") << safetensorsBytes("{\"a\": ", QByteArray()) << QStringList{"not valid JSON"};
        QTest::newRow("not_object") << safetensorsBytes("[1, 2]", QByteArray()) << QStringList{"not a JSON object", "array"};
        QTest::newRow("entry_not_object") << safetensorsBytes(R"({"w": 5})", QByteArray()) << QStringList{"'w'", "must be an object"};
        QTest::newRow("missing_dtype") << safetensorsBytes(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", four)
                                       << QStringList{"'w'", "no 'dtype'"};
        QTest::newRow("unknown_field") << safetensorsBytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", four)
                                       << QStringList{"'w'", "unknown field 'x'"};
        QTest::newRow("dtype_not_string") << safetensorsBytes("{" + entry("w", "F32", "[1]", "[0,4]").replace("\"F32\"", "32") + "}", four)
                                          << QStringList{"'w'", "dtype must be a string", "32"};
        QTest::newRow("unknown_dtype") << safetensorsBytes("{" + entry("w", "F17", "[1]", "[0,4]") + "}", four)
                                       << QStringList{"'w'", "unknown dtype 'F17'"};
        QTest::newRow("negative_dim") << safetensorsBytes("{" + entry("w", "F32", "[-1]", "[0,4]") + "}", four)
                                      << QStringList{"'w'", "non-negative integer", "-1"};
        QTest::newRow("fractional_dim") << safetensorsBytes("{" + entry("w", "F32", "[1.5]", "[0,4]") + "}", four)
                                        << QStringList{"'w'", "non-negative integer", "1.5"};
        QTest::newRow("shape_not_list") << safetensorsBytes("{" + entry("w", "F32", "4", "[0,4]") + "}", four)
                                        << QStringList{"'w'", "shape must be a list"};
        QTest::newRow("offsets_not_pair") << safetensorsBytes("{" + entry("w", "F32", "[1]", "[0,4,8]") + "}", four)
                                          << QStringList{"'w'", "data_offsets must be [begin, end]"};
        QTest::newRow("end_before_begin") << safetensorsBytes("{" + entry("w", "F32", "[0]", "[4,0]") + "}", four)
                                          << QStringList{"'w'", "end 0 is before begin 4"};
        QTest::newRow("shape_mismatch") << safetensorsBytes("{" + entry("w", "F32", "[2,2]", "[0,12]") + "}", QByteArray(12, 0))
                                        << QStringList{"'w'", "[2, 2]", "needs 16 bytes", "hold 12"};
        QTest::newRow("shape_overflow")
            << safetensorsBytes("{" + entry("w", "F32", "[4294967296,4294967296]", "[0,4]") + "}", four)
            << QStringList{"'w'", "overflows"};
        QTest::newRow("gap") << safetensorsBytes("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[1]", "[8,12]") + "}",
                                                 QByteArray(12, 0))
                             << QStringList{"'b' begins at data byte 8", "byte 4, where tensor 'a' ends", "a gap"};
        QTest::newRow("overlap") << safetensorsBytes("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}",
                                                     QByteArray(12, 0))
                                 << QStringList{"'b' begins at data byte 4", "byte 8, where tensor 'a' ends", "an overlap"};
        QTest::newRow("first_not_at_zero") << safetensorsBytes("{" + entry("a", "F32", "[1]", "[4,8]") + "}", QByteArray(8, 0))
                                           << QStringList{"'a' begins at data byte 4", "must begin at byte 0", "a gap"};
        QTest::newRow("trailing_bytes") << safetensorsBytes(QByteArray("{") + kEntryA + "}", four + "X")
                                        << QStringList{"1 trailing bytes", "data ends at 4"};
        QTest::newRow("data_past_eof") << safetensorsBytes("{" + entry("a", "F32", "[4]", "[0,16]") + "}", QByteArray(8, 0))
                                       << QStringList{"'a' ends at data byte 16", "only 8 data bytes", "truncated"};
        QTest::newRow("duplicate_name") << safetensorsBytes(QByteArray("{") + kEntryA + "," + kEntryA + "}", four)
                                        << QStringList{"duplicate tensor name 'a'"};
        QTest::newRow("duplicate_field")
            << safetensorsBytes(R"({"w":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})", four)
            << QStringList{"duplicate key 'dtype'", "'w'"};
        QTest::newRow("metadata_not_object") << safetensorsBytes(R"({"__metadata__":[1]})", QByteArray())
                                             << QStringList{"__metadata__ must be an object"};
        QTest::newRow("metadata_not_string") << safetensorsBytes(R"({"__metadata__":{"epoch":3}})", QByteArray())
                                             << QStringList{"__metadata__ entry 'epoch' must be a string", "3"};
    }

    void malformedFilesAreRejected() {
        QFETCH(QByteArray, bytes);
        QFETCH(QStringList, expected);
        QString path = writeBytes(dir_, QString("bad_%1.safetensors").arg(QTest::currentDataTag()), bytes);
        QString message = errorOf([&] { SafeTensorsFile::open(path.toStdString()); });
        QVERIFY2(!message.isEmpty(), "no error");
        QVERIFY2(message.contains(path), qPrintable(message));
        for (const QString& part : expected) QVERIFY2(message.contains(part), qPrintable(message + "\n  lacks: " + part));
    }

    // The limits themselves are fine: an empty file list and zero-size tensors are valid.
    void edgeCasesThatAreValid() {
        QString path = writeBytes(dir_, "empty_header.safetensors", safetensorsBytes("{}      ", QByteArray()));
        QVERIFY(SafeTensorsFile::open(path.toStdString())->names().empty());
        path = writeBytes(dir_, "zero_sized.safetensors",
                          safetensorsBytes(R"({"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)" + QByteArray(kEntryA) + "}",
                                           floatBytes({7})));
        auto file = SafeTensorsFile::open(path.toStdString());
        QCOMPARE(file->load("a").item<float>(), 7.0f);
        QCOMPARE(file->load("z").numel(), int64_t(0));
    }
};

QTEST_GUILESS_MAIN(TestSafeTensors)
#include "tst_safetensors.moc"
