import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The tool bar: the model (state, name, load / recent / reload), panel
// toggle, settings and the help menu.
ToolBar {
    id: bar
    property bool showPanels: true
    signal loadModelRequested()
    signal recentModelChosen(string path)
    signal remoteRequested()
    signal settingsRequested()
    signal aboutRequested()
    signal showPanelsToggled()

    implicitHeight: 52
    background: Rectangle {
        color: Theme.surface
        Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
    }

    RowLayout {
        anchors.fill: parent
        anchors.leftMargin: 16
        anchors.rightMargin: 10
        spacing: 10

        Row {
            spacing: 8
            Layout.alignment: Qt.AlignVCenter
            Rectangle {
                width: 22; height: 22; radius: 6
                anchors.verticalCenter: parent.verticalCenter
                gradient: Gradient {
                    GradientStop { position: 0; color: "#63a8ff" }
                    GradientStop { position: 1; color: "#7a5cff" }
                }
                Column {
                    anchors.centerIn: parent
                    spacing: 2
                    Repeater {
                        model: 3
                        Rectangle { width: 12 - index * 3; height: 2; radius: 1; color: "white"; anchors.horizontalCenter: parent.horizontalCenter }
                    }
                }
            }
            Label {
                text: "Strata"
                font.pixelSize: 17
                font.weight: Font.DemiBold
                color: Theme.text
                anchors.verticalCenter: parent.verticalCenter
            }
        }

        Item { implicitWidth: 118 }

        // The model chip.
        Rectangle {
            id: chip
            Layout.preferredHeight: 34
            Layout.preferredWidth: Math.min(chipRow.implicitWidth + 24, 560)
            radius: 17
            color: Theme.surfaceAlt
            border.color: Theme.border
            RowLayout {
                id: chipRow
                anchors.fill: parent
                anchors.leftMargin: 12
                anchors.rightMargin: 12
                spacing: 8
                Rectangle {
                    implicitWidth: 8; implicitHeight: 8; radius: 4
                    color: chat.modelState === "ready" ? Theme.success
                         : chat.modelState === "loading" ? Theme.warning
                         : chat.modelState === "failed" ? Theme.danger : Theme.textFaint
                }
                Label {
                    Layout.maximumWidth: 260
                    elide: Text.ElideRight
                    color: Theme.text
                    font.weight: Font.Medium
                    text: chat.modelState === "ready" ? chat.modelInfo.name
                        : chat.modelState === "loading" ? "Loading " + chat.modelPath.split("/").pop()
                        : chat.modelState === "failed" ? "Model failed to load" : "No model"
                }
                Label {
                    visible: chat.modelState === "ready"
                    Layout.maximumWidth: 300
                    elide: Text.ElideMiddle
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                    text: chat.modelState !== "ready" ? ""
                          : chat.remote ? "server · " + chat.modelInfo.url
                          : chat.modelInfo.arch + " · " + TextUtil.formatCount(chat.modelInfo.paramsTotal) + " params · "
                            + (chat.modelInfo.experts > 0 ? chat.modelInfo.experts + " experts top-" + chat.modelInfo.expertsUsed : "dense")
                }
                ProgressBar {
                    visible: chat.modelState === "loading"
                    Layout.preferredWidth: 90
                    from: 0; to: 1
                    value: chat.loadFraction
                }
            }
            ToolTip.visible: chipMouse.containsMouse && chat.modelState !== "none"
            ToolTip.delay: 400
            ToolTip.text: chat.modelState === "ready" ? chat.modelPath + "\n" + chat.modelInfo.templateNote
                        : chat.modelState === "failed" ? chat.modelError : chat.modelPath
            MouseArea { id: chipMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
        }

        StrataButton {
            text: "Load model…"
            highlighted: chat.modelState !== "ready" && chat.modelState !== "loading"
            onClicked: bar.loadModelRequested()
        }
        StrataButton {
            id: recentButton
            objectName: "openMenuButton"
            text: "Open ▾"
            onClicked: recentMenu.open()
            Menu {
                id: recentMenu
                y: recentButton.height
                MenuItem {
                    text: "Connect to a server…"
                    onTriggered: bar.remoteRequested()
                }
                MenuSeparator { visible: chat.recentModels.length > 0 }
                Repeater {
                    model: chat.recentModels
                    MenuItem {
                        text: modelData.split("/").pop()
                        onTriggered: bar.recentModelChosen(modelData)
                        ToolTip.visible: hovered
                        ToolTip.text: modelData
                    }
                }
            }
        }
        StrataButton {
            text: "Reload"
            visible: chat.settingsNeedReload && chat.modelState === "ready"
            highlighted: true
            onClicked: chat.reloadModel()
            ToolTip.visible: hovered
            ToolTip.text: "Some settings apply on the next load: reload the model with them now"
        }

        Item { Layout.fillWidth: true }

        StrataButton {
            text: bar.showPanels ? "Hide panels" : "Show panels"
            flat: true
            onClicked: bar.showPanelsToggled()
        }
        StrataButton {
            text: "Settings"
            flat: true
            onClicked: bar.settingsRequested()
        }
        StrataButton {
            id: moreButton
            text: "Help ▾"
            flat: true
            onClicked: moreMenu.open()
            Menu {
                id: moreMenu
                y: moreButton.height
                MenuItem { text: "Open log"; onTriggered: if (!appInfo.openLog()) chat.showNotice("No application could open the log. It is at " + appInfo.logFile) }
                MenuItem { text: "Open data folder"; onTriggered: appInfo.openDataDir() }
                MenuSeparator {}
                MenuItem { text: "About Strata"; onTriggered: bar.aboutRequested() }
            }
        }
    }
}
