#include "line_chart_item.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "text_util.h"

namespace strata::desktop {

LineChartItem::LineChartItem(QQuickItem* parent) : QQuickPaintedItem(parent) {
    setAntialiasing(true);
    connect(this, &LineChartItem::styleChanged, this, [this] { update(); });
}

void LineChartItem::setValues(const QList<qreal>& v) {
    values_ = v;
    update();
    Q_EMIT valuesChanged();
}

QString LineChartItem::label(qreal v) const {
    if (format_ == QLatin1String("percent")) return TextUtil::formatPercent(v, 0);
    if (format_ == QLatin1String("bytes")) return TextUtil::formatBytes(v);
    if (v >= 1000) return TextUtil::formatCount(v);
    return QString::number(v, 'f', v >= 100 ? 0 : 1);
}

namespace {

// 1, 2, 5 x 10^k at or above v.
qreal nice_ceiling(qreal v) {
    if (v <= 0) return 1;
    const qreal e = std::pow(10.0, std::floor(std::log10(v)));
    for (qreal m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * e >= v * 0.999) return m * e;
    return 10 * e;
}

}  // namespace

qreal LineChartItem::axisMax() const {
    if (fixed_max_ > 0) return fixed_max_;
    qreal m = 0;
    for (qreal v : values_) m = std::max(m, v);
    const qreal top = nice_ceiling(m);
    return format_ == QLatin1String("bytes") ? std::max<qreal>(top, 1024) : top;
}

QStringList LineChartItem::axisLabels() const {
    const qreal vmax = axisMax();
    return {label(vmax), label(vmax / 2), label(0)};
}

void LineChartItem::paint(QPainter* p) {
    const qreal w = width(), h = height();
    if (w <= 0 || h <= 0) return;
    QFont f = p->font();
    f.setPixelSize(10);
    p->setFont(f);
    const qreal top = 6, bottom = h - 6, left = 0, right = w - 50;
    const qreal vmax = axisMax();
    // Grid: 0, half, top, with the values at the right.
    p->setPen(QPen(grid_color_, 1));
    for (int i = 0; i <= 2; ++i) {
        const qreal y = std::round(top + (bottom - top) * i / 2.0) + 0.5;
        p->drawLine(QPointF(left, y), QPointF(right, y));
        p->save();
        p->setPen(text_color_);
        p->drawText(QRectF(right + 4, y - 7, 46, 14), Qt::AlignLeft | Qt::AlignVCenter, label(vmax * (2 - i) / 2.0));
        p->restore();
    }
    if (values_.isEmpty()) return;
    const int cap = std::max(capacity_, 2);
    const qreal dx = (right - left) / (cap - 1);
    const int n = int(values_.size());
    const qreal x0 = right - (n - 1) * dx;
    auto yof = [&](qreal v) { return bottom - (bottom - top) * std::clamp<qreal>(v / vmax, 0.0, 1.0); };
    QPainterPath line;
    line.moveTo(x0, yof(values_[0]));
    for (int i = 1; i < n; ++i) line.lineTo(x0 + i * dx, yof(values_[i]));
    QPainterPath fill = line;
    fill.lineTo(x0 + (n - 1) * dx, bottom);
    fill.lineTo(x0, bottom);
    fill.closeSubpath();
    QColor fc = color_;
    fc.setAlpha(50);
    p->fillPath(fill, fc);
    p->setPen(QPen(color_, 1.6, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
    p->drawPath(line);
    p->setBrush(color_);
    p->setPen(Qt::NoPen);
    p->drawEllipse(QPointF(x0 + (n - 1) * dx, yof(values_.last())), 2.5, 2.5);
}

}  // namespace strata::desktop
