// The expert heat map: layers (rows) x experts (columns), colour = heat (the
// engine's recent share of activations, scaled to the hottest cell), with
// residency marks: an outline for resident experts, a corner triangle for
// pinned ones, a dot for experts being loaded, a bar along the bottom for
// experts a GPU engine computes on the CPU (hybrid placement, --cpu-moe
// layers). Dense layers (no experts) are
// drawn as dimmed rows. Painted in C++: one item, not thousands of Rectangles.
#pragma once

#include <QColor>
#include <QFontMetricsF>
#include <QPointer>
#include <QQuickPaintedItem>
#include <QVariantList>
#include <QVariantMap>

#include "telemetry_model.h"

namespace strata::desktop {



class HeatMapItem : public QQuickPaintedItem {
    Q_OBJECT
    Q_PROPERTY(strata::desktop::TelemetryModel* source READ telemetry WRITE setTelemetry NOTIFY telemetryChanged)
    // Indexes of the MoE layers; other rows are dense. Empty: every row is MoE.
    Q_PROPERTY(QVariantList moeLayers READ moeLayers WRITE setMoeLayers NOTIFY moeLayersChanged)
    Q_PROPERTY(QColor textColor MEMBER text_color_ NOTIFY styleChanged)
    Q_PROPERTY(QColor gridColor MEMBER grid_color_ NOTIFY styleChanged)
    Q_PROPERTY(int labelWidth READ labelWidth CONSTANT)
public:
    explicit HeatMapItem(QQuickItem* parent = nullptr);

    TelemetryModel* telemetry() const { return telemetry_; }
    void setTelemetry(TelemetryModel* t);
    QVariantList moeLayers() const { return moe_layers_; }
    void setMoeLayers(const QVariantList& l);
    int labelWidth() const { return 30; }

    void paint(QPainter* painter) override;

    // The cell under (x, y): {layer, expert, heat, residency ("absent" |
    // "loading" | "resident" | "pinned"), dense}; empty outside the grid.
    Q_INVOKABLE QVariantMap cellAt(qreal x, qreal y) const;

    // Which expert indexes and layer names are labelled: every `column`-th
    // and every `row`-th, so labels never overlap (tests).
    Q_INVOKABLE QVariantMap labelSteps() const;

    // The colour of a heat value in [0, 1] (also used by the legend).
    Q_INVOKABLE static QColor heatColor(qreal t);
    // The mark of an expert computed on the CPU (the legend uses it too).
    Q_INVOKABLE static QColor cpuMarkColor() { return cpu_mark_color(); }

Q_SIGNALS:
    void telemetryChanged();
    void moeLayersChanged();
    void styleChanged();

private:
    struct LabelSteps {
        int column = 1, row = 1;
    };
    LabelSteps label_steps(const QFontMetricsF& fm) const;
    QRectF grid_rect() const;
    bool is_dense(int layer) const;

    QPointer<TelemetryModel> telemetry_;
    QVariantList moe_layers_;
    static QColor cpu_mark_color() { return QColor(0xff, 0xc8, 0x57); }
    QColor text_color_{0x9a, 0xa4, 0xb2};
    QColor grid_color_{0x23, 0x29, 0x33};
};

}  // namespace strata::desktop
