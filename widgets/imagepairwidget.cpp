#include "widgets/imagepairwidget.h"

#include <QGridLayout>
#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QScrollBar>
#include <algorithm>

ImagePairWidget::ImagePairWidget(QWidget* parent) : QWidget(parent) {
    auto* layout = new QGridLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto makeSide = [this](QLabel*& title, QLabel*& view, QScrollArea*& scroll) {
        title = new QLabel;
        title->setAlignment(Qt::AlignCenter);
        QFont f = title->font();
        f.setBold(true);
        title->setFont(f);
        view = new QLabel;
        view->setAlignment(Qt::AlignCenter);
        scroll = new QScrollArea;
        scroll->setWidget(view);
        scroll->setWidgetResizable(true);
        scroll->setAlignment(Qt::AlignCenter);
    };
    makeSide(leftTitle_, leftView_, leftScroll_);
    makeSide(rightTitle_, rightView_, rightScroll_);
    layout->addWidget(leftTitle_, 0, 0);
    layout->addWidget(rightTitle_, 0, 1);
    layout->addWidget(leftScroll_, 1, 0);
    layout->addWidget(rightScroll_, 1, 1);
    layout->setRowStretch(1, 1);
    // The two views show the same samples: they scroll together.
    for (Qt::Orientation o : {Qt::Horizontal, Qt::Vertical}) {
        auto bar = [o](QScrollArea* s) { return o == Qt::Horizontal ? s->horizontalScrollBar() : s->verticalScrollBar(); };
        connect(bar(leftScroll_), &QScrollBar::valueChanged, bar(rightScroll_), &QScrollBar::setValue);
        connect(bar(rightScroll_), &QScrollBar::valueChanged, bar(leftScroll_), &QScrollBar::setValue);
    }
    clear();
}

void ImagePairWidget::setImages(const QImage& left, const QString& leftCaption, const QImage& right,
                                const QString& rightCaption) {
    left_ = left;
    right_ = right;
    leftCaption_ = leftCaption;
    rightCaption_ = rightCaption;
    redraw();
}

void ImagePairWidget::clear() {
    left_ = right_ = QImage();
    leftCaption_ = tr("Dense model");
    rightCaption_ = tr("Pruned model");
    redraw();
}

void ImagePairWidget::setZoom(int zoom) {
    zoom = std::clamp(zoom, 1, 8);
    if (zoom == zoom_) return;
    zoom_ = zoom;
    redraw();
    emit zoomChanged(zoom_);
}

void ImagePairWidget::redraw() {
    leftTitle_->setText(leftCaption_);
    rightTitle_->setText(rightCaption_);
    auto show = [this](QLabel* view, const QImage& image) {
        if (image.isNull()) {
            view->setPixmap(QPixmap());
            view->setText(tr("Generate to see samples here"));
            return;
        }
        view->setPixmap(QPixmap::fromImage(image.scaled(image.size() * zoom_, Qt::IgnoreAspectRatio, Qt::FastTransformation)));
    };
    show(leftView_, left_);
    show(rightView_, right_);
}

QImage ImagePairWidget::composite() const {
    if (left_.isNull() || right_.isNull()) return {};
    const QImage a = left_.scaled(left_.size() * zoom_, Qt::IgnoreAspectRatio, Qt::FastTransformation);
    const QImage b = right_.scaled(right_.size() * zoom_, Qt::IgnoreAspectRatio, Qt::FastTransformation);
    const int gap = 16, caption = 24;
    QImage out(a.width() + gap + b.width(), caption + std::max(a.height(), b.height()), QImage::Format_RGB32);
    out.fill(Qt::white);
    QPainter p(&out);
    p.setPen(Qt::black);
    p.drawText(QRect(0, 0, a.width(), caption), Qt::AlignCenter, leftCaption_);
    p.drawText(QRect(a.width() + gap, 0, b.width(), caption), Qt::AlignCenter, rightCaption_);
    p.drawImage(0, caption, a);
    p.drawImage(a.width() + gap, caption, b);
    return out;
}

bool ImagePairWidget::saveComparison(const QString& path) const {
    const QImage image = composite();
    return !image.isNull() && image.save(path);
}
