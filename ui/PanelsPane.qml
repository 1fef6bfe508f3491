import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The engine's panels, fed only by its telemetry snapshots: the memory
// ledger, the expert heat map, the expert cache (hit rate, bytes per token)
// and throughput (tokens/s). The engine is the local one or a Strata
// server's; a server that reports no engine shows throughput alone.
Rectangle {
    id: pane
    color: Theme.window
    property bool showLedger: true
    property bool showHeat: true
    property bool showCache: true
    property bool showThroughput: true
    signal toggle(string name)

    readonly property bool live: telemetry.hasData

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        ScrollBar.horizontal.policy: ScrollBar.AlwaysOff

        ColumnLayout {
            width: scroll.availableWidth
            spacing: 8

            Item { implicitHeight: 0 }

            Label {
                Layout.fillWidth: true
                Layout.leftMargin: 12
                Layout.rightMargin: 12
                visible: !pane.live
                wrapMode: Text.Wrap
                color: Theme.textFaint
                font.pixelSize: Theme.small
                text: chat.modelState === "loading" ? "The panels fill in once the model has loaded."
                                                    : "The panels show the engine's memory and experts once a model is loaded."
            }

            // A server: whose figures these are, and what it does not report.
            Label {
                objectName: "sourceNote"
                Layout.fillWidth: true
                Layout.leftMargin: 12
                Layout.rightMargin: 12
                visible: telemetry.sourceNote !== ""
                wrapMode: Text.Wrap
                color: telemetry.source === "answers" ? Theme.warning : Theme.textFaint
                font.pixelSize: Theme.small
                text: telemetry.sourceNote
            }

            LedgerPanel {
                visible: telemetry.source !== "answers"
                Layout.fillWidth: true
                Layout.leftMargin: 10
                Layout.rightMargin: 10
                expanded: pane.showLedger
                onToggled: pane.toggle("showLedger")
            }
            HeatMapPanel {
                visible: telemetry.source !== "answers"
                Layout.fillWidth: true
                Layout.leftMargin: 10
                Layout.rightMargin: 10
                expanded: pane.showHeat
                onToggled: pane.toggle("showHeat")
            }
            CachePanel {
                visible: telemetry.source !== "answers"
                Layout.fillWidth: true
                Layout.leftMargin: 10
                Layout.rightMargin: 10
                expanded: pane.showCache
                onToggled: pane.toggle("showCache")
            }
            ThroughputPanel {
                Layout.fillWidth: true
                Layout.leftMargin: 10
                Layout.rightMargin: 10
                expanded: pane.showThroughput
                onToggled: pane.toggle("showThroughput")
            }
            Item { implicitHeight: 6 }
        }
    }
}
