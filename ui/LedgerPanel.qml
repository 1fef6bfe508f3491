import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The memory ledger: per tier a stacked bar of its accounts (the solid part
// used, the pale part reserved), the budget line, and the accounts by name.
// Narrow (the window's minimum), the tier's totals go under its name and the
// accounts into one column, so neither is cut.
Panel {
    id: panel
    readonly property bool narrow: width < 340
    title: "Memory ledger"
    subtitle: telemetry.hasData ? "reserved and used, per tier" : ""

    Label {
        visible: !telemetry.hasData
        text: "No model loaded."
        color: Theme.textFaint
        font.pixelSize: Theme.small
    }

    // Indexes, not the arrays, are the Repeaters' models: a new array at every
    // snapshot (five a second while answering) rebuilt every item; by index
    // the items stay and only their bindings update.
    Repeater {
        model: telemetry.ledger.length
        delegate: ColumnLayout {
            id: tier
            required property int index
            readonly property var modelData: telemetry.ledger[index] || ({ accounts: [], reserved: 0, used: 0, budget: 0 })
            readonly property real budget: modelData.budget
            readonly property real scale: Math.max(budget, modelData.reserved, 1)
            Layout.fillWidth: true
            spacing: 5
            visible: modelData.accounts.length > 0

            GridLayout {
                Layout.fillWidth: true
                columns: panel.narrow ? 1 : 2
                columnSpacing: 8
                rowSpacing: 1
                Label {
                    Layout.fillWidth: panel.narrow
                    elide: Text.ElideRight
                    text: (tier.modelData.tier === "fast" ? "Fast tier" : "Slow tier") + " · " + tier.modelData.description
                    color: Theme.text
                    font.pixelSize: Theme.small
                    font.weight: Font.Medium
                }
                Label {
                    objectName: "tierTotals"
                    Layout.fillWidth: true
                    horizontalAlignment: panel.narrow ? Text.AlignLeft : Text.AlignRight
                    elide: Text.ElideRight
                    color: Theme.textDim
                    font.pixelSize: Theme.tiny
                    font.family: Theme.mono
                    text: TextUtil.formatBytes(tier.modelData.used) + " / " + TextUtil.formatBytes(tier.modelData.reserved)
                          + (tier.budget > 0 ? " of " + TextUtil.formatBytes(tier.budget) : " · no budget")
                }
            }
            // The stacked bar.
            Item {
                Layout.fillWidth: true
                implicitHeight: 18
                Rectangle {
                    anchors.fill: parent
                    radius: 4
                    color: Theme.surfaceAlt
                }
                Row {
                    id: bar
                    anchors.fill: parent
                    Repeater {
                        model: tier.modelData.accounts.length
                        delegate: Item {
                            required property int index
                            readonly property var modelData: tier.modelData.accounts[index] || ({ account: "", reserved: 0, used: 0 })
                            width: Math.max(2, bar.width * modelData.reserved / tier.scale)
                            height: bar.height
                            Rectangle {  // reserved
                                anchors.fill: parent
                                anchors.rightMargin: 1
                                color: Theme.accountColor(modelData.account)
                                opacity: 0.35
                            }
                            Rectangle {  // used
                                height: parent.height
                                width: Math.max(0, (parent.width - 1) * Math.min(1, modelData.used / Math.max(1, modelData.reserved)))
                                color: Theme.accountColor(modelData.account)
                            }
                            ToolTip.visible: tipArea.containsMouse
                            ToolTip.text: modelData.account + ": " + TextUtil.formatBytes(modelData.used) + " used of "
                                          + TextUtil.formatBytes(modelData.reserved) + " reserved"
                            MouseArea { id: tipArea; anchors.fill: parent; hoverEnabled: true }
                        }
                    }
                }
                // The budget line.
                Rectangle {
                    visible: tier.budget > 0
                    x: Math.min(parent.width - 2, parent.width * tier.budget / tier.scale - 1)
                    y: -3
                    width: 2
                    height: parent.height + 6
                    color: Theme.text
                }
            }
            // The accounts.
            GridLayout {
                Layout.fillWidth: true
                columns: panel.narrow ? 1 : 2
                columnSpacing: 12
                rowSpacing: 2
                Repeater {
                    model: tier.modelData.accounts.length
                    delegate: RowLayout {
                        required property int index
                        readonly property var modelData: tier.modelData.accounts[index] || ({ account: "", reserved: 0, used: 0 })
                        Layout.fillWidth: true
                        Layout.preferredWidth: 1
                        Layout.minimumWidth: 0
                        spacing: 6
                        Rectangle { implicitWidth: 9; implicitHeight: 9; radius: 2; color: Theme.accountColor(modelData.account) }
                        Label {
                            objectName: "accountName"
                            text: modelData.account
                            color: Theme.textDim
                            font.pixelSize: Theme.tiny
                            Layout.fillWidth: true
                            Layout.minimumWidth: 20
                            elide: Text.ElideRight
                        }
                        Label {
                            text: TextUtil.formatBytes(modelData.reserved)
                            color: Theme.text
                            font.pixelSize: Theme.tiny
                            font.family: Theme.mono
                        }
                    }
                }
            }
            Item { implicitHeight: 2 }
        }
    }

    // Which CPU kernels run, and how much of the model's weights the engine
    // rewrites in place (no extra bytes) into their layout as they load.
    Label {
        visible: telemetry.hasData && telemetry.kernels !== ""
        Layout.fillWidth: true
        elide: Text.ElideRight
        color: Theme.textFaint
        font.pixelSize: Theme.tiny
        text: "CPU kernels: " + telemetry.kernels
              + (telemetry.repackedBytes > 0 ? " · " + TextUtil.formatBytes(telemetry.repackedBytes)
                                               + " of weights repacked in place" : "")
        ToolTip.visible: kernelsTip.containsMouse
        ToolTip.text: telemetry.repackedBytes > 0
                      ? "The engine rewrites these weights, as they load, into the layout its "
                        + telemetry.kernels + " kernels read fastest: same bytes, same results, no extra memory."
                      : "The weights stay in the model file's layout: these kernels have no faster one for them."
        MouseArea { id: kernelsTip; anchors.fill: parent; hoverEnabled: true }
    }
}
