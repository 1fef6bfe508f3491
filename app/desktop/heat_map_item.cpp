#include "heat_map_item.h"

#include <QFontMetricsF>

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "telemetry_model.h"

namespace strata::desktop {

HeatMapItem::HeatMapItem(QQuickItem* parent) : QQuickPaintedItem(parent) {
    setAntialiasing(true);
    connect(this, &HeatMapItem::styleChanged, this, [this] { update(); });
}

void HeatMapItem::setTelemetry(TelemetryModel* t) {
    if (telemetry_ == t) return;
    if (telemetry_) disconnect(telemetry_, nullptr, this, nullptr);
    telemetry_ = t;
    if (t) connect(t, &TelemetryModel::updated, this, [this] { update(); });
    update();
    Q_EMIT telemetryChanged();
}

void HeatMapItem::setMoeLayers(const QVariantList& l) {
    moe_layers_ = l;
    update();
    Q_EMIT moeLayersChanged();
}

bool HeatMapItem::is_dense(int layer) const {
    if (moe_layers_.isEmpty()) return false;
    for (const QVariant& v : moe_layers_)
        if (v.toInt() == layer) return false;
    return true;
}

QColor HeatMapItem::heatColor(qreal t) {
    // A perceptual ramp from the panel background through blue and magenta to amber and pale yellow.
    static const QColor stops[] = {QColor(0x1b, 0x22, 0x30), QColor(0x2b, 0x4c, 0x9a), QColor(0x8e, 0x3b, 0xb0),
                                   QColor(0xe3, 0x5d, 0x5b), QColor(0xf5, 0xa6, 0x23), QColor(0xfc, 0xf2, 0xa8)};
    constexpr int n = int(sizeof stops / sizeof stops[0]);
    t = std::clamp<qreal>(t, 0.0, 1.0);
    const qreal x = t * (n - 1);
    const int i = std::min(int(x), n - 2);
    const qreal f = x - i;
    const QColor& a = stops[i];
    const QColor& b = stops[i + 1];
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * f), float(a.greenF() + (b.greenF() - a.greenF()) * f),
                            float(a.blueF() + (b.blueF() - a.blueF()) * f));
}

QRectF HeatMapItem::grid_rect() const {
    return QRectF(labelWidth(), 16, std::max<qreal>(0, width() - labelWidth()), std::max<qreal>(0, height() - 16));
}

void HeatMapItem::paint(QPainter* p) {
    if (!telemetry_ || telemetry_->nLayer() <= 0 || telemetry_->nExpert() <= 0) return;
    const TelemetrySnapshot& s = telemetry_->snapshot();
    const int L = int(s.n_layer), E = int(s.n_expert);
    const QRectF g = grid_rect();
    const qreal cw = g.width() / E, ch = g.height() / L;
    const qreal gap = (cw >= 6 && ch >= 6) ? 1.0 : 0.0;
    const double maxh = std::max(1e-9, telemetry_->maxHeat());

    QFont f = p->font();
    f.setPixelSize(10);
    p->setFont(f);
    p->setPen(text_color_);
    const LabelSteps steps = label_steps(QFontMetricsF(f));
    // Expert indexes along the top, every steps.column-th: never closer than their width.
    for (int e = 0; e < E; e += steps.column)
        p->drawText(QRectF(g.left() + (e + 0.5) * cw - 20, 0, 40, 14), Qt::AlignHCenter | Qt::AlignBottom | Qt::TextDontClip,
                    QString::number(e));

    for (int l = 0; l < L; ++l) {
        const qreal y = g.top() + l * ch;
        // A label a line high, centred on its row even where the row is thinner than the text.
        if (l % steps.row == 0)
            p->drawText(QRectF(0, y + ch / 2 - 7, labelWidth() - 6, 14), Qt::AlignRight | Qt::AlignVCenter | Qt::TextDontClip,
                        QStringLiteral("L%1").arg(l));
        const bool dense = is_dense(l);
        if (dense) {
            const QRectF row(g.left(), y + gap / 2, g.width(), ch - gap);
            p->fillRect(row, grid_color_);
            if (ch >= 11) {
                p->save();
                p->setPen(QColor(text_color_.red(), text_color_.green(), text_color_.blue(), 120));
                p->drawText(row, Qt::AlignCenter, QStringLiteral("dense layer"));
                p->restore();
            }
            continue;
        }
        for (int e = 0; e < E; ++e) {
            const size_t i = size_t(l) * size_t(E) + size_t(e);
            const double h = i < s.heat.size() ? s.heat[i] : 0.0;
            const QRectF cell(g.left() + e * cw + gap / 2, y + gap / 2, cw - gap, ch - gap);
            p->fillRect(cell, h > 0 ? heatColor(std::sqrt(h / maxh)) : grid_color_);
            const int r = i < s.residency.size() ? s.residency[i] : 0;
            if (r == 2 && cw >= 4 && ch >= 4) {  // resident: outline
                p->save();
                p->setPen(QPen(QColor(255, 255, 255, 150), 1));
                p->setBrush(Qt::NoBrush);
                p->drawRect(cell.adjusted(0.5, 0.5, -0.5, -0.5));
                p->restore();
            } else if (r == 2) {  // resident, in a cell too small to outline: a line along its top
                p->fillRect(QRectF(g.left() + e * cw, y, std::max<qreal>(cw, 1), std::max<qreal>(1, ch * 0.3)), QColor(255, 255, 255, 170));
            } else if (r == 3) {  // pinned: corner triangle
                const qreal t = std::min<qreal>({cw, ch, 8.0}) * 0.7;
                QPainterPath path;
                path.moveTo(cell.topLeft());
                path.lineTo(cell.left() + t, cell.top());
                path.lineTo(cell.left(), cell.top() + t);
                path.closeSubpath();
                p->fillPath(path, QColor(0xff, 0xff, 0xff));
                p->save();
                p->setPen(QPen(QColor(255, 255, 255, 200), 1));
                p->drawRect(cell.adjusted(0.5, 0.5, -0.5, -0.5));
                p->restore();
            } else if (r == 4) {  // computed on the CPU: a bar along the bottom
                const qreal bar = std::max<qreal>(1.5, std::min<qreal>(ch * 0.22, 3.0));
                p->fillRect(QRectF(cell.left(), cell.bottom() - bar, cell.width(), bar), cpu_mark_color());
            } else if (r == 1) {  // loading: a dot
                const qreal d = std::min<qreal>({cw, ch, 8.0}) * 0.45;
                p->save();
                p->setPen(Qt::NoPen);
                p->setBrush(QColor(0x5e, 0xe0, 0xc0));
                p->drawEllipse(cell.center(), d / 2, d / 2);
                p->restore();
            }
        }
    }
}

HeatMapItem::LabelSteps HeatMapItem::label_steps(const QFontMetricsF& fm) const {
    LabelSteps st;
    if (!telemetry_ || telemetry_->nLayer() <= 0 || telemetry_->nExpert() <= 0) return st;
    const QRectF g = grid_rect();
    const qreal cw = g.width() / telemetry_->nExpert(), ch = g.height() / telemetry_->nLayer();
    // Every column's index when they fit, else every 2nd, 4th, ...: the widest index and a gap per label.
    const qreal widest = fm.horizontalAdvance(QString::number(telemetry_->nExpert() - 1)) + 6;
    while (st.column * cw < widest && st.column < telemetry_->nExpert()) st.column *= 2;
    while (st.row * ch < fm.height() && st.row < telemetry_->nLayer()) st.row *= 2;
    return st;
}

QVariantMap HeatMapItem::labelSteps() const {
    QFont f;
    f.setPixelSize(10);
    const LabelSteps st = label_steps(QFontMetricsF(f));
    return {{QStringLiteral("column"), st.column}, {QStringLiteral("row"), st.row}};
}

QVariantMap HeatMapItem::cellAt(qreal x, qreal y) const {
    QVariantMap m;
    if (!telemetry_ || telemetry_->nLayer() <= 0 || telemetry_->nExpert() <= 0) return m;
    const TelemetrySnapshot& s = telemetry_->snapshot();
    const QRectF g = grid_rect();
    if (!g.contains(x, y)) return m;
    const int e = std::clamp(int((x - g.left()) / (g.width() / s.n_expert)), 0, int(s.n_expert) - 1);
    const int l = std::clamp(int((y - g.top()) / (g.height() / s.n_layer)), 0, int(s.n_layer) - 1);
    const size_t i = size_t(l) * size_t(s.n_expert) + size_t(e);
    static const char* names[] = {"absent", "loading", "resident", "pinned", "computed on the CPU"};
    const int r = i < s.residency.size() ? std::min<int>(s.residency[i], 4) : 0;
    m[QStringLiteral("layer")] = l;
    m[QStringLiteral("expert")] = e;
    m[QStringLiteral("heat")] = i < s.heat.size() ? double(s.heat[i]) : 0.0;
    m[QStringLiteral("residency")] = QString::fromLatin1(names[r]);
    m[QStringLiteral("dense")] = is_dense(l);
    return m;
}

}  // namespace strata::desktop
