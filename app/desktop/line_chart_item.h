// A small line chart over the last samples (telemetry histories): a filled
// line, three grid lines, the scale's top value and the latest value.
#pragma once

#include <QColor>
#include <QList>
#include <QQuickPaintedItem>

namespace strata::desktop {

class LineChartItem : public QQuickPaintedItem {
    Q_OBJECT
    Q_PROPERTY(QList<qreal> values READ values WRITE setValues NOTIFY valuesChanged)
    Q_PROPERTY(int capacity MEMBER capacity_ NOTIFY styleChanged)          // samples across the width
    Q_PROPERTY(qreal fixedMax MEMBER fixed_max_ NOTIFY styleChanged)       // > 0: the scale's top; else from the data
    Q_PROPERTY(QString format MEMBER format_ NOTIFY styleChanged)          // "percent" | "bytes" | "number"
    Q_PROPERTY(QColor color MEMBER color_ NOTIFY styleChanged)
    Q_PROPERTY(QColor gridColor MEMBER grid_color_ NOTIFY styleChanged)
    Q_PROPERTY(QColor textColor MEMBER text_color_ NOTIFY styleChanged)
public:
    explicit LineChartItem(QQuickItem* parent = nullptr);
    QList<qreal> values() const { return values_; }
    void setValues(const QList<qreal>& v);
    void paint(QPainter* painter) override;

    // How the chart labels a value in its format.
    QString label(qreal v) const;
    // The scale's top: fixedMax, else a round value at or above the data's
    // largest (for bytes at least 1 KiB, so an idle chart's scale reads
    // "1.00 KiB / 512 B / 0 B", not "1 B / 1 B / 0 B").
    qreal axisMax() const;
    // The grid lines' labels, top first.
    Q_INVOKABLE QStringList axisLabels() const;

Q_SIGNALS:
    void valuesChanged();
    void styleChanged();

private:
    QList<qreal> values_;
    int capacity_ = 120;
    qreal fixed_max_ = 0;
    QString format_ = QStringLiteral("number");
    QColor color_{0x4c, 0x9a, 0xff};
    QColor grid_color_{0x2a, 0x31, 0x3c};
    QColor text_color_{0x9a, 0xa4, 0xb2};
};

}  // namespace strata::desktop
