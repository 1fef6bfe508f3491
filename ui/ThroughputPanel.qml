import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// Tokens per second over time (forward-pass tokens per second of
// forward-pass time, between two snapshots).
Panel {
    id: panel
    title: "Throughput"
    subtitle: telemetry.hasData ? TextUtil.formatCount(telemetry.tokensProcessed) + " tokens since load" : ""

    Label {
        visible: !telemetry.hasData
        text: "No model loaded."
        color: Theme.textFaint
        font.pixelSize: Theme.small
    }
    RowLayout {
        visible: telemetry.hasData
        Layout.fillWidth: true
        spacing: 14
        ColumnLayout {
            Layout.preferredWidth: 110
            spacing: 6
            Stat {
                caption: "tokens/s"
                value: telemetry.tokensPerSecond > 0 ? telemetry.tokensPerSecond.toFixed(1) : "–"
                valueColor: Theme.accentHover
            }
            Stat {
                caption: "forward-pass time"
                value: telemetry.computeSeconds.toFixed(2) + " s"
            }
        }
        LineChart {
            Layout.fillWidth: true
            implicitHeight: 76
            values: telemetry.tokensPerSecondHistory
            format: "number"
            color: Theme.accent
            gridColor: Theme.border
            textColor: Theme.textFaint
        }
    }
}
