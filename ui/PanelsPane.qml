import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The engine's panels, fed only by its telemetry snapshots: the memory
// ledger, the expert heat map, the expert cache (hit rate, bytes per token)
// and throughput (tokens/s).
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

            LedgerPanel {
                Layout.fillWidth: true
                Layout.leftMargin: 10
                Layout.rightMargin: 10
                expanded: pane.showLedger
                onToggled: pane.toggle("showLedger")
            }
            HeatMapPanel {
                Layout.fillWidth: true
                Layout.leftMargin: 10
                Layout.rightMargin: 10
                expanded: pane.showHeat
                onToggled: pane.toggle("showHeat")
            }
            CachePanel {
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
