#pragma once
// Two images side by side — the dense and the pruned model's samples of the same classes and
// seeds — each under a caption, enlarged by an integer zoom with crisp (nearest-neighbour)
// pixels, in scroll areas that scroll together. Shows what it is given; computes nothing.
#include <QImage>
#include <QString>
#include <QWidget>

class QLabel;
class QScrollArea;

class ImagePairWidget : public QWidget {
    Q_OBJECT
public:
    explicit ImagePairWidget(QWidget* parent = nullptr);

    void setImages(const QImage& left, const QString& leftCaption, const QImage& right, const QString& rightCaption);
    void clear();
    bool hasImages() const { return !left_.isNull(); }
    const QImage& leftImage() const { return left_; }
    const QImage& rightImage() const { return right_; }

    int zoom() const { return zoom_; }
    // Both images enlarged zoom× (1…8).
    void setZoom(int zoom);

    // Both images (at the current zoom) with their captions in one PNG; false when it could not
    // be written.
    bool saveComparison(const QString& path) const;
    QImage composite() const;

signals:
    void zoomChanged(int zoom);

private:
    void redraw();

    QImage left_, right_;
    QString leftCaption_, rightCaption_;
    int zoom_ = 2;
    QLabel *leftTitle_, *rightTitle_, *leftView_, *rightView_;
    QScrollArea *leftScroll_, *rightScroll_;
};
