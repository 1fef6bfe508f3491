import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The expert cache: hit rate and bytes moved per token over time, and the
// current figures.
Panel {
    id: panel
    title: "Expert cache"
    subtitle: telemetry.hasExperts ? telemetry.expertSlots + " slots × " + TextUtil.formatBytes(telemetry.expertSlotBytes)
                                     + " · " + telemetry.policy : ""

    Label {
        visible: !telemetry.hasExperts
        text: telemetry.hasData ? "This model has no experts to cache." : "No model loaded."
        color: Theme.textFaint
        font.pixelSize: Theme.small
    }

    GridLayout {
        visible: telemetry.hasExperts
        Layout.fillWidth: true
        columns: panel.width < 380 ? 2 : 3
        columnSpacing: 10
        rowSpacing: 6
        Stat { Layout.fillWidth: true; caption: "hit rate (recent)"; value: TextUtil.formatPercent(telemetry.hitRateRecent) }
        Stat { Layout.fillWidth: true; caption: "hit rate (total)"; value: TextUtil.formatPercent(telemetry.hitRateTotal) }
        Stat { Layout.fillWidth: true; caption: "stall"; value: TextUtil.formatPercent(telemetry.stallFraction)
               valueColor: telemetry.stallFraction > 0.25 ? Theme.warning : Theme.text }
        Stat { Layout.fillWidth: true; caption: "loaded per token"; value: TextUtil.formatBytes(telemetry.bytesPerToken) }
        Stat { Layout.fillWidth: true; caption: "prefetch precision"; value: TextUtil.formatPercent(telemetry.prefetchPrecision) }
        Stat { Layout.fillWidth: true; caption: "prefetch recall"; value: TextUtil.formatPercent(telemetry.prefetchRecall) }
    }

    // A GPU engine's missing experts by path (hybrid placement).
    Label {
        visible: telemetry.hasExperts && telemetry.missPaths !== ""
        Layout.fillWidth: true
        wrapMode: Text.Wrap
        text: "Missing experts: " + telemetry.missPaths
        color: Theme.textDim
        font.pixelSize: Theme.tiny
    }

    GridLayout {
        visible: telemetry.hasExperts
        Layout.fillWidth: true
        columns: 2
        columnSpacing: 14
        rowSpacing: 2
        Label { text: "Hit rate, recent tokens"; color: Theme.textDim; font.pixelSize: Theme.tiny; Layout.fillWidth: true }
        Label { text: "Expert bytes loaded per token"; color: Theme.textDim; font.pixelSize: Theme.tiny; Layout.fillWidth: true }
        LineChart {
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            implicitHeight: 58
            values: telemetry.hitRateHistory
            fixedMax: 1
            format: "percent"
            color: Theme.success
            gridColor: Theme.border
            textColor: Theme.textFaint
        }
        LineChart {
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            implicitHeight: 58
            values: telemetry.bytesPerTokenHistory
            format: "bytes"
            color: Theme.warning
            gridColor: Theme.border
            textColor: Theme.textFaint
        }
    }
}
