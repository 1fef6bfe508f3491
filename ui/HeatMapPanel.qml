import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// Expert heat: layers x experts, colour = recent share of activations;
// outlines mark resident experts, corner triangles pinned ones, dots loading ones.
Panel {
    id: panel
    title: "Expert heat map"
    subtitle: telemetry.hasExperts ? telemetry.nLayer + " layers × " + telemetry.nExpert + " experts" : ""

    Label {
        visible: !telemetry.hasExperts
        text: telemetry.hasData ? "This model has no experts (a dense model)." : "No model loaded."
        color: Theme.textFaint
        font.pixelSize: Theme.small
    }

    HeatMap {
        id: heat
        visible: telemetry.hasExperts
        Layout.fillWidth: true
        // Rows of at least 7 px (48 layers: 352 px), so residency marks stay visible.
        implicitHeight: Math.max(64, Math.min(16 + telemetry.nLayer * 17, Math.max(300, 16 + telemetry.nLayer * 7)))
        source: telemetry
        moeLayers: chat.modelInfo.moeLayerIndexes !== undefined ? chat.modelInfo.moeLayerIndexes : []
        textColor: Theme.textDim
        gridColor: Theme.surfaceAlt

        HoverHandler { id: hover }
        ToolTip {
            id: tip
            readonly property var cell: hover.hovered ? heat.cellAt(hover.point.position.x, hover.point.position.y) : ({})
            visible: hover.hovered && cell.layer !== undefined
            x: hover.point.position.x + 12
            y: hover.point.position.y + 12
            text: cell.layer === undefined ? "" : cell.dense ? "layer " + cell.layer + ": dense (no experts)"
                  : "layer " + cell.layer + ", expert " + cell.expert + "\nheat " + (cell.heat * 100).toFixed(1) + "% · " + cell.residency
        }
    }

    // Legend: one line, or two in a narrow panel (colours, then counts).
    GridLayout {
        visible: telemetry.hasExperts
        Layout.fillWidth: true
        columns: panel.width < 380 ? 1 : 2
        columnSpacing: 6
        rowSpacing: 4
    RowLayout {
        spacing: 6
        Label { text: "cold"; color: Theme.textFaint; font.pixelSize: Theme.tiny }
        Rectangle {
            implicitWidth: 50
            implicitHeight: 8
            radius: 2
            gradient: Gradient {
                orientation: Gradient.Horizontal
                GradientStop { position: 0.0; color: heat.heatColor(0.02) }
                GradientStop { position: 0.25; color: heat.heatColor(0.25) }
                GradientStop { position: 0.5; color: heat.heatColor(0.5) }
                GradientStop { position: 0.75; color: heat.heatColor(0.75) }
                GradientStop { position: 1.0; color: heat.heatColor(1.0) }
            }
        }
        Label { text: "hot"; color: Theme.textFaint; font.pixelSize: Theme.tiny }
    }
    RowLayout {
        Layout.alignment: Qt.AlignRight
        spacing: 6
        Rectangle { implicitWidth: 9; implicitHeight: 9; color: "transparent"; border.color: "#c8ffffff"; border.width: 1 }
        Label { text: telemetry.residentExperts + " resident"; color: Theme.textDim; font.pixelSize: Theme.tiny }
        Canvas {
            implicitWidth: 9; implicitHeight: 9
            onPaint: {
                const c = getContext("2d"); c.fillStyle = "white"
                c.beginPath(); c.moveTo(0, 0); c.lineTo(8, 0); c.lineTo(0, 8); c.closePath(); c.fill()
            }
        }
        Label { text: telemetry.pinnedExperts + " pinned"; color: Theme.textDim; font.pixelSize: Theme.tiny }
        Rectangle { implicitWidth: 7; implicitHeight: 7; radius: 4; color: "#5ee0c0" }
        Label { text: telemetry.loadingExperts + " loading"; color: Theme.textDim; font.pixelSize: Theme.tiny }
        // Only where a GPU engine computes experts on the CPU (hybrid placement, --cpu-moe layers).
        Rectangle {
            visible: telemetry.cpuExperts > 0
            implicitWidth: 9; implicitHeight: 3; color: heat.cpuMarkColor()
        }
        Label {
            visible: telemetry.cpuExperts > 0
            text: telemetry.cpuExperts + " on the CPU"; color: Theme.textDim; font.pixelSize: Theme.tiny
        }
    }
    }
}
