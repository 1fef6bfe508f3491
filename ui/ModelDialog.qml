import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// Before loading: the plan (every ledger account per tier against the
// budgets, whether it fits and why), then Load.
Dialog {
    id: dialog
    signal loadRequested(string path)
    signal settingsRequested()

    readonly property var plan: chat.plan
    readonly property string path: plan.path !== undefined ? plan.path : ""
    readonly property var info: plan.info !== undefined ? plan.info : ({})

    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(parent.width - 80, 760)
    height: Math.min(parent.height - 80, 620)
    modal: true
    title: "Load " + path.split("/").pop()
    padding: 18

    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader { text: dialog.title }
    Overlay.modal: Rectangle { color: "#a0080a0e" }

    contentItem: ColumnLayout {
        spacing: 12

        Label {
            Layout.fillWidth: true
            text: dialog.path
            color: Theme.textFaint
            font.pixelSize: Theme.small
            elide: Text.ElideMiddle
        }

        // Planning / failed.
        RowLayout {
            visible: chat.planState === "planning"
            spacing: 10
            BusyIndicator { implicitWidth: 28; implicitHeight: 28; running: visible }
            Label { text: "Reading the model and planning its memory…"; color: Theme.textDim }
        }
        Rectangle {
            visible: chat.planState === "failed"
            Layout.fillWidth: true
            implicitHeight: failText.implicitHeight + 20
            Layout.minimumHeight: implicitHeight
            radius: 6
            color: Theme.dangerSoft
            border.color: Theme.danger
            Label {
                id: failText
                anchors.fill: parent
                anchors.margins: 10
                wrapMode: Text.Wrap
                color: "#ffd9d9"
                text: "This file cannot be loaded: " + chat.planError
            }
        }

        // The plan.
        ColumnLayout {
            visible: chat.planState === "ready"
            Layout.fillWidth: true
            Layout.fillHeight: true
            spacing: 10

            Label {
                Layout.fillWidth: true
                // One line each (the layout gives a wrapped label one line's height): elided, whole in the tooltip.
                elide: Text.ElideRight
                ToolTip.visible: truncated && infoMouse.containsMouse
                ToolTip.text: text
                MouseArea { id: infoMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
                color: Theme.text
                text: dialog.info.name !== undefined
                      ? dialog.info.name + " · " + dialog.info.arch + " · " + dialog.info.layers + " layers"
                        + (dialog.info.experts > 0 ? " (" + dialog.info.moeLayers + " MoE) · " + dialog.info.experts + " experts, top-"
                           + dialog.info.expertsUsed : " · dense") + " · " + TextUtil.formatCount(dialog.info.paramsTotal) + " parameters ("
                        + TextUtil.formatCount(dialog.info.paramsActive) + " active) · " + TextUtil.formatBytes(dialog.info.bytesTotal)
                      : ""
            }
            // The file's recipe: the weight types of each tensor class.
            Label {
                objectName: "recipe"
                visible: dialog.info.recipe !== undefined && dialog.info.recipe !== ""
                Layout.fillWidth: true
                elide: Text.ElideRight
                ToolTip.visible: truncated && recipeMouse.containsMouse
                ToolTip.text: text
                MouseArea { id: recipeMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
                color: Theme.textDim
                font.pixelSize: Theme.small
                text: visible ? "Types: " + dialog.info.recipe : ""
            }
            // The verdict, whole: its height is the text's (the layout may not
            // squeeze it, or the advice at its end spilled under the table);
            // past a quarter of the dialog it scrolls.
            Rectangle {
                id: verdictBox
                objectName: "verdictBox"
                Layout.fillWidth: true
                readonly property real wanted: verdict.implicitHeight + 20
                implicitHeight: Math.min(wanted, Math.max(72, dialog.height / 4))
                Layout.minimumHeight: implicitHeight
                Layout.preferredHeight: implicitHeight
                radius: 6
                color: dialog.plan.fits ? "#15302a" : Theme.dangerSoft
                border.color: dialog.plan.fits ? Theme.success : Theme.danger
                clip: true
                Flickable {
                    id: verdictFlick
                    anchors.fill: parent
                    anchors.margins: 10
                    contentWidth: width
                    contentHeight: verdict.implicitHeight
                    boundsBehavior: Flickable.StopAtBounds
                    clip: true
                    ScrollBar.vertical: ScrollBar { policy: verdictFlick.contentHeight > verdictFlick.height ? ScrollBar.AlwaysOn : ScrollBar.AsNeeded }
                    Label {
                        id: verdict
                        objectName: "verdict"
                        width: verdictFlick.width - 12
                        wrapMode: Text.Wrap
                        color: Theme.text
                        // One clause a line: what is wrong, then what to do.
                        text: {
                            const r = dialog.plan.reason !== undefined ? dialog.plan.reason : ""
                            return (dialog.plan.fits ? "✓ " : "✗ ") + (r.charAt(0).toUpperCase() + r.slice(1)).split("; ").join(";\n")
                        }
                    }
                }
            }
            Label {
                text: "Expert cache: " + dialog.plan.expertSlots + " of " + dialog.plan.expertsTotal + " experts get a slot ("
                      + TextUtil.formatPercent(dialog.plan.cacheFraction !== undefined ? dialog.plan.cacheFraction : 0, 0)
                      + ") · context " + dialog.plan.nCtx + " tokens"
                visible: dialog.plan.expertsTotal > 0
                color: Theme.textDim
                font.pixelSize: Theme.small
            }
            // Where experts stream from disk: how fast that can go, and on what basis.
            Label {
                objectName: "speedLine"
                visible: text.length > 0
                Layout.fillWidth: true
                Layout.minimumHeight: implicitHeight
                wrapMode: Text.Wrap
                color: Theme.warning
                font.pixelSize: Theme.small
                text: dialog.plan.speed !== undefined ? dialog.plan.speed : ""
            }

            // Table: account | tier | bytes | what.
            Rectangle {
                objectName: "planTable"
                Layout.fillWidth: true
                Layout.fillHeight: true
                Layout.minimumHeight: 80
                color: Theme.surfaceAlt
                radius: 6
                border.color: Theme.border
                ListView {
                    id: table
                    anchors.fill: parent
                    anchors.margins: 1
                    clip: true
                    model: dialog.plan.rows !== undefined ? dialog.plan.rows : []
                    ScrollBar.vertical: ScrollBar {}
                    header: Rectangle {
                        width: table.width
                        height: 28
                        color: Theme.raised
                        RowLayout {
                            anchors.fill: parent
                            anchors.leftMargin: 10
                            anchors.rightMargin: 10
                            Label { Layout.preferredWidth: 150; Layout.minimumWidth: 150; Layout.maximumWidth: 150; text: "account"; color: Theme.textDim; font.pixelSize: Theme.tiny }
                            Label { Layout.preferredWidth: 40; Layout.minimumWidth: 40; Layout.maximumWidth: 40; text: "tier"; color: Theme.textDim; font.pixelSize: Theme.tiny }
                            Label { Layout.preferredWidth: 90; Layout.minimumWidth: 90; Layout.maximumWidth: 90; text: "bytes"; color: Theme.textDim; font.pixelSize: Theme.tiny; horizontalAlignment: Text.AlignRight }
                            Label { Layout.fillWidth: true; text: "what it holds"; color: Theme.textDim; font.pixelSize: Theme.tiny }
                        }
                    }
                    delegate: Rectangle {
                        required property var modelData
                        required property int index
                        width: table.width
                        height: 26
                        color: index % 2 ? "transparent" : Theme.surface
                        RowLayout {
                            anchors.fill: parent
                            anchors.leftMargin: 10
                            anchors.rightMargin: 10
                            RowLayout {
                                Layout.preferredWidth: 150
                                Layout.minimumWidth: 150
                                Layout.maximumWidth: 150
                                spacing: 6
                                Rectangle { implicitWidth: 8; implicitHeight: 8; radius: 2; color: Theme.accountColor(modelData.account) }
                                Label { Layout.fillWidth: true; text: modelData.account; color: Theme.text; font.pixelSize: Theme.small }
                            }
                            Label { Layout.preferredWidth: 40; Layout.minimumWidth: 40; Layout.maximumWidth: 40; text: modelData.tier; color: Theme.textDim; font.pixelSize: Theme.small }
                            Label {
                                Layout.preferredWidth: 90
                                Layout.minimumWidth: 90
                                Layout.maximumWidth: 90
                                horizontalAlignment: Text.AlignRight
                                text: TextUtil.formatBytes(modelData.bytes)
                                font.family: Theme.mono
                                font.pixelSize: Theme.small
                                color: Theme.text
                            }
                            Label {
                                Layout.fillWidth: true
                                text: modelData.note
                                elide: Text.ElideRight
                                color: Theme.textFaint
                                font.pixelSize: Theme.small
                            }
                        }
                    }
                    footer: Rectangle {
                        width: table.width
                        height: 48
                        color: Theme.raised
                        Column {
                            anchors.verticalCenter: parent.verticalCenter
                            x: 10
                            spacing: 2
                            Label {
                                font.pixelSize: Theme.small
                                color: Theme.text
                                text: "fast tier: " + TextUtil.formatBytes(dialog.plan.fastTotal)
                                      + (dialog.plan.fastBudget > 0 ? " of a " + TextUtil.formatBytes(dialog.plan.fastBudget)
                                         + (dialog.plan.fastBudgetAuto ? " automatic budget (" + TextUtil.formatBytes(dialog.plan.fastAvailable) + " available"
                                            + (dialog.plan.fastReturned > 0 ? ", " + TextUtil.formatBytes(dialog.plan.fastReturned) + " of it from the loaded model" : "")
                                            + ")" : " budget")
                                         : " (no budget)")
                                      + " · resident minimum " + TextUtil.formatBytes(dialog.plan.residentMinimum)
                            }
                            Label {
                                font.pixelSize: Theme.small
                                color: Theme.text
                                text: "slow tier: " + TextUtil.formatBytes(dialog.plan.slowTotal)
                                      + (dialog.plan.slowBudget > 0 ? " of a " + TextUtil.formatBytes(dialog.plan.slowBudget) + " budget" : " (no budget)")
                            }
                        }
                    }
                }
            }
        }
        Item { Layout.fillHeight: chat.planState !== "ready" }
    }

    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        StrataButton {
            text: "Settings…"
            flat: true
            DialogButtonBox.buttonRole: DialogButtonBox.HelpRole
            onClicked: dialog.settingsRequested()
        }
        StrataButton {
            text: "Re-plan"
            flat: true
            enabled: dialog.path.length > 0 && chat.planState !== "planning"
            DialogButtonBox.buttonRole: DialogButtonBox.ApplyRole
            onClicked: chat.planModel(dialog.path)
            ToolTip.visible: hovered
            ToolTip.text: "Plan again with the current settings"
        }
        StrataButton {
            text: "Cancel"
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
        StrataButton {
            text: "Load"
            highlighted: true
            enabled: chat.planState === "ready" && dialog.plan.fits === true
            DialogButtonBox.buttonRole: DialogButtonBox.AcceptRole
        }
    }
    onAccepted: loadRequested(path)
}
