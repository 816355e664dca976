// IDX files (plain and gzip) and Fashion-MNIST: round trips of small files written here, one
// broken file per check the reader makes (the message names the file and the problem), and
// the real data set from Debian's dataset-fashion-mnist (skipped when it is not installed),
// checked against facts computed independently with numpy.
#include "core/data/fashion_mnist.h"
#include "core/io/idx_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <zlib.h>

using namespace npw;

namespace {

QByteArray idxBytes(const std::vector<uint32_t>& dims, const QByteArray& data, uint8_t type = 0x08) {
    QByteArray b;
    b.append(char(0)).append(char(0)).append(char(type)).append(char(dims.size()));
    for (uint32_t d : dims)
        for (int shift = 24; shift >= 0; shift -= 8) b.append(char((d >> shift) & 0xff));
    return b + data;
}

QByteArray gzipped(const QByteArray& raw) {
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    QByteArray out(int(deflateBound(&zs, raw.size())) + 64, 0);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
    zs.avail_in = uInt(raw.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = uInt(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(int(zs.total_out));
    deflateEnd(&zs);
    return out;
}

std::string write(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
    QFile f(dir.filePath(name));
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(name));
    return f.fileName().toStdString();
}

QByteArray ramp(int n) {
    QByteArray b;
    for (int i = 0; i < n; ++i) b.append(char(i * 7 % 256));
    return b;
}

void expectError(const std::function<void()>& f, const QStringList& mustContain) {
    try {
        f();
    } catch (const Error& e) {
        for (const QString& s : mustContain)
            QVERIFY2(QString(e.what()).contains(s), qPrintable(QString("'%1' lacks '%2'").arg(e.what(), s)));
        return;
    }
    QFAIL("no npw::Error thrown");
}

} // namespace

class TestFashionMnist : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void readsPlainAndGzip_data() {
        QTest::addColumn<bool>("gzip");
        QTest::newRow("plain") << false;
        QTest::newRow("gzip") << true;
    }
    void readsPlainAndGzip() {
        QFETCH(bool, gzip);
        QByteArray raw = idxBytes({3, 4, 5}, ramp(60));
        const std::string path = write(dir_, gzip ? "img.gz" : "img", gzip ? gzipped(raw) : raw);
        IdxArray a = readIdxFile(path, 3);
        QCOMPARE(a.shape, (std::vector<int64_t>{3, 4, 5}));
        QCOMPARE(a.data.dtype(), at::kByte);
        QCOMPARE(a.data[2][3][4].item<int>(), (59 * 7) % 256);
        QCOMPARE(a.data[0][1][0].item<int>(), 35);
    }

    void imagesAndLabels() {
        const std::string images = write(dir_, "i-idx3-ubyte.gz", gzipped(idxBytes({2, 2, 2}, QByteArray("\x00\xff\x33\x66\x00\x00\x00\xff", 8))));
        const std::string labels = write(dir_, "l-idx1-ubyte", idxBytes({2}, QByteArray("\x01\x09", 2)));
        LabelledImages set = loadIdxImages(images, labels, 10);
        QCOMPARE(set.images.sizes(), at::IntArrayRef({2, 1, 2, 2}));
        QCOMPARE(set.images[0][0][0][1].item<float>(), 1.0f);
        QVERIFY(std::abs(set.images[0][0][1][0].item<float>() - 0x33 / 255.0f) < 1e-7);
        QCOMPARE(set.labels[1].item<int64_t>(), int64_t(9));
        QCOMPARE(greyToRgb(set.images).sizes(), at::IntArrayRef({2, 3, 2, 2}));
        QVERIFY(at::equal(greyToRgb(set.images)[1][2], set.images[1][0]));
        expectError([&] { loadIdxImages(images, labels, 5); }, {"l-idx1-ubyte", "label 9"});
        const std::string three = write(dir_, "l3", idxBytes({3}, QByteArray("\x01\x02\x03", 3)));
        expectError([&] { loadIdxImages(images, three); }, {"l3", "3 labels", "2 images"});
    }

    void brokenFilesAreNamed() {
        QByteArray good = idxBytes({4, 3, 3}, ramp(36));
        const std::string truncatedData = write(dir_, "short.idx", good.left(good.size() - 5));
        expectError([&] { readIdxFile(truncatedData); }, {"short.idx", "truncated", "36 bytes", "31"});
        const std::string trailing = write(dir_, "long.idx", good + "xx");
        expectError([&] { readIdxFile(trailing); }, {"long.idx", "trailing"});
        QByteArray magic = good;
        magic[0] = 'P';
        expectError([&] { readIdxFile(write(dir_, "magic.idx", magic)); }, {"magic.idx", "magic"});
        expectError([&] { readIdxFile(write(dir_, "float.idx", idxBytes({2}, ramp(8), 0x0D))); },
                    {"float.idx", "0x08"});
        expectError([&] { readIdxFile(write(dir_, "dims.idx", good), 1); }, {"dims.idx", "3 dimensions", "expected 1"});
        QByteArray gz = gzipped(good);
        expectError([&] { readIdxFile(write(dir_, "cut.gz", gz.left(gz.size() / 2))); }, {"cut.gz", "truncated"});
        QByteArray corrupt = gz;
        for (int i = 12; i < 20; ++i) corrupt[i] = char(0xff);
        expectError([&] { readIdxFile(write(dir_, "corrupt.gz", corrupt)); }, {"corrupt.gz"});
        expectError([&] { readIdxFile(dir_.filePath("absent.gz").toStdString()); }, {"absent.gz"});
        expectError([&] { loadFashionMnist("train", dir_.path().toStdString()); },
                    {"train-images-idx3-ubyte", "dataset-fashion-mnist"});
        expectError([&] { loadFashionMnist("validation"); }, {"validation"});
    }

    // Facts from numpy on Debian's files: 1000 per class, first labels 9 2 1 1 6, pixel mean
    // 0.286849, the first image's byte sum 33456 and the last's 24390.
    void realTestSet() {
        if (!std::filesystem::exists(fashionMnistDir() + "/t10k-images-idx3-ubyte.gz"))
            QSKIP("dataset-fashion-mnist is not installed");
        LabelledImages test = loadFashionMnist("test");
        QCOMPARE(test.images.sizes(), at::IntArrayRef({10000, 1, 28, 28}));
        QVERIFY(at::equal(test.labels.bincount(), at::full({10}, 1000, at::kLong)));
        QVERIFY(at::equal(test.labels.narrow(0, 0, 5), at::tensor({9, 2, 1, 1, 6}, at::kLong)));
        QVERIFY(std::abs(test.images.mean().item<double>() - 0.28684928071228494) < 1e-6);
        QCOMPARE(test.images[0].mul(255).round().sum().item<double>(), 33456.0);
        QCOMPARE(test.images[9999].mul(255).round().sum().item<double>(), 24390.0);
        QCOMPARE(fashionMnistClassNames()[9], std::string("Ankle boot"));
    }
};

QTEST_GUILESS_MAIN(TestFashionMnist)
#include "tst_fashion_mnist.moc"
