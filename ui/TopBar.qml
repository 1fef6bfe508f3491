import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The tool bar: the model (state, file name, load / recent / reload), panel
// toggle, settings and the help menu. Where the window is too narrow for all
// of it (fullWidth: what the bar's items need with the model chip at 300 px,
// Reload and the server badge counted when shown), the panel toggle,
// Settings and Help fold into one "⋯" menu; the model chip then shrinks, its
// details dropping whole parts, never cut mid-word. Every action stays in
// the bar at any width from the window's 960 px minimum.
ToolBar {
    id: bar
    property bool showPanels: true
    readonly property bool reloadShown: chat.settingsNeedReload && chat.modelState === "ready"
    readonly property real fullWidth: 16 + 22 + 8 + titleLabel.implicitWidth + 118 + 300
        + loadButton.implicitWidth + recentButton.implicitWidth + (reloadShown ? reloadButton.implicitWidth + 10 : 0)
        + (appServer.running ? badgeMetrics.advanceWidth("Serving · :" + appServer.port + " · 00000 requests") + 42 : 0)
        + panelsButton.implicitWidth + settingsButton.implicitWidth + moreButton.implicitWidth + 10 * 7 + 10
    readonly property bool compact: width < fullWidth
    FontMetrics { id: badgeMetrics; font.pixelSize: Theme.small }
    signal loadModelRequested()
    signal recentModelChosen(string path)
    signal remoteRequested()
    signal settingsRequested()
    signal aboutRequested()
    signal showPanelsToggled()
    signal reloadRequested()

    function openLog() {
        if (!appInfo.openLog()) chat.showNotice("No application could open the log. It is at " + appInfo.logFile)
    }
    function openDataFolder() { appInfo.openDataDir() }

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
                id: titleLabel
                visible: !bar.compact
                text: "Strata"
                font.pixelSize: 17
                font.weight: Font.DemiBold
                color: Theme.text
                anchors.verticalCenter: parent.verticalCenter
            }
        }

        Item { implicitWidth: bar.compact ? 0 : 118 }

        // The model chip: its file name (as the user named it) and quantization.
        Rectangle {
            id: chip
            objectName: "modelChip"
            Layout.preferredHeight: 34
            Layout.preferredWidth: Math.min(chipRow.implicitWidth + 24, 560)
            Layout.minimumWidth: 120
            Layout.maximumWidth: Math.min(chipRow.implicitWidth + 24, 560)
            Layout.fillWidth: true  // gives way first where the bar is short
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
                    objectName: "modelName"
                    Layout.maximumWidth: 260
                    Layout.fillWidth: bar.compact
                    elide: Text.ElideRight
                    color: Theme.text
                    font.weight: Font.Medium
                    text: chat.modelState === "ready" ? chat.modelInfo.name
                        : chat.modelState === "loading" ? "Loading " + chat.modelPath.split("/").pop()
                        : chat.modelState === "failed" ? "Model failed to load" : "No model"
                }
                // As many of its parts as fit, whole: "Q4_K_M · qwen3moe · 30.5 B params · 128 experts top-8".
                // The label sits in an item the layout sizes, so what it shows
                // does not feed back into its own width.
                Item {
                    id: detailsBox
                    visible: chat.modelState === "ready" && !bar.compact
                    readonly property var parts: chat.modelState !== "ready" ? []
                        : chat.remote ? ["server · " + chat.modelInfo.url]
                        : (chat.modelInfo.quant ? [chat.modelInfo.quant] : []).concat([
                              chat.modelInfo.arch, TextUtil.formatCount(chat.modelInfo.paramsTotal) + " params",
                              chat.modelInfo.experts > 0 ? chat.modelInfo.experts + " experts top-" + chat.modelInfo.expertsUsed : "dense"])
                    Layout.fillWidth: true
                    Layout.minimumWidth: 0
                    Layout.maximumWidth: 300
                    Layout.preferredWidth: Math.min(300, detailsMetrics.advanceWidth(parts.join(" · ")) + 2)
                    implicitHeight: details.implicitHeight
                    Label {
                        id: details
                        objectName: "modelDetails"
                        readonly property var parts: detailsBox.parts
                        width: detailsBox.width
                        anchors.verticalCenter: parent.verticalCenter
                        elide: Text.ElideRight  // a single part wider than the room (a server's URL)
                        color: Theme.textDim
                        font.pixelSize: Theme.small
                        text: {
                            let shown = ""
                            for (let i = 0; i < parts.length; ++i) {
                                const next = shown.length > 0 ? shown + " · " + parts[i] : parts[i]
                                if (i > 0 && detailsMetrics.advanceWidth(next) > detailsBox.width) break
                                shown = next
                            }
                            return shown
                        }
                    }
                    FontMetrics { id: detailsMetrics; font: details.font }
                }
                Label {
                    objectName: "modelQuant"
                    visible: chat.modelState === "ready" && bar.compact && !chat.remote && !!chat.modelInfo.quant
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                    text: chat.modelInfo.quant || ""
                }
                ProgressBar {
                    visible: chat.modelState === "loading"
                    Layout.preferredWidth: 90
                    from: 0; to: 1
                    value: chat.loadFraction
                }
                // How far, and Cancel: here too, since the chat's own Cancel is
                // in its empty state, hidden while a conversation is open.
                Label {
                    objectName: "loadPercent"
                    visible: chat.modelState === "loading" && !bar.compact
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                    text: Math.round((chat.loadFraction || 0) * 100) + "%"
                }
                Label {
                    objectName: "cancelLoadButton"
                    visible: chat.modelState === "loading"
                    text: "✕"
                    color: cancelLoadMouse.containsMouse ? Theme.text : Theme.textDim
                    font.pixelSize: Theme.small
                    Accessible.role: Accessible.Button
                    Accessible.name: "Cancel loading"
                    ToolTip.visible: cancelLoadMouse.containsMouse
                    ToolTip.text: "Cancel loading (" + (chat.loadStage || "") + ")"
                    MouseArea {
                        id: cancelLoadMouse
                        anchors.fill: parent
                        anchors.margins: -6
                        hoverEnabled: true
                        cursorShape: Qt.PointingHandCursor
                        onClicked: chat.cancelModelLoad()
                    }
                }
            }
            ToolTip.visible: chipMouse.containsMouse && chat.modelState !== "none"
            ToolTip.delay: 400
            ToolTip.text: chat.modelState === "ready"
                          ? chat.modelPath
                            + (chat.modelInfo.storedName && chat.modelInfo.storedName !== chat.modelInfo.name
                               ? "\nname inside the file: " + chat.modelInfo.storedName : "")
                            + "\n" + chat.modelInfo.templateNote
                        : chat.modelState === "failed" ? chat.modelError : chat.modelPath
            MouseArea { id: chipMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
        }

        StrataButton {
            id: loadButton
            objectName: "loadButton"
            text: "Load model…"
            highlighted: chat.modelState !== "ready" && chat.modelState !== "loading"
            onClicked: bar.loadModelRequested()
        }
        StrataButton {
            id: recentButton
            objectName: "openMenuButton"
            text: "Open ▾"
            ToolTip.visible: hovered
            ToolTip.delay: 600
            ToolTip.text: "Open a recent model or connect to a server"
            onClicked: recentMenu.open()
            Menu {
                id: recentMenu
                y: recentButton.height
                MenuItem {
                    text: "Connect to a server…"
                    onTriggered: bar.remoteRequested()
                }
                MenuItem {
                    objectName: "unloadItem"
                    text: chat.remote ? "Disconnect from the server" : "Unload the model"
                    // Offered only with something to unload (a greyed item read as broken).
                    visible: chat.modelState === "ready" || chat.modelState === "loading"
                    height: visible ? implicitHeight : 0
                    onTriggered: chat.unloadModel()
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
            id: reloadButton
            objectName: "reloadButton"
            text: "Reload"
            visible: bar.reloadShown
            highlighted: true
            onClicked: bar.reloadRequested()
            ToolTip.visible: hovered
            ToolTip.text: "Some settings apply on the next load: see the memory plan with them, then reload"
        }

        Item { Layout.fillWidth: true }

        // "Serve to other apps" is on: where, and how many requests other apps
        // sent since it started. A click opens the settings (where it is turned off).
        Rectangle {
            id: serverBadge
            objectName: "serverBadge"
            readonly property bool serving: appServer.running && chat.modelState === "ready" && !chat.remote
            visible: appServer.running
            Layout.preferredHeight: 26
            Layout.preferredWidth: serverRow.implicitWidth + 20
            radius: 13
            color: serverMouse.containsMouse ? Theme.hover : "transparent"
            border.color: serving ? Theme.success : Theme.border
            Row {
                id: serverRow
                anchors.centerIn: parent
                spacing: 6
                Rectangle {
                    width: 6; height: 6; radius: 3
                    anchors.verticalCenter: parent.verticalCenter
                    color: serverBadge.serving ? Theme.success : Theme.textFaint
                }
                Label {
                    objectName: "serverBadgeText"
                    anchors.verticalCenter: parent.verticalCenter
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                    text: (bar.compact ? "" : "Serving · ") + ":" + appServer.port + " · "
                          + (serverBadge.serving ? appServer.requests + (appServer.requests === 1 ? " request" : " requests")
                                                 : "no model")
                }
            }
            ToolTip.visible: serverMouse.containsMouse
            ToolTip.delay: 400
            ToolTip.text: (serverBadge.serving ? "Other apps on this machine can use " + chat.modelInfo.name + " at " + appServer.url
                                                 + ": " + appServer.requests + " requests since the server started."
                                               : "The server at " + appServer.url + " is on, but no local model is loaded: "
                                                 + "its requests get 503 until one is.")
                          + "\nClick for the settings."
            MouseArea {
                id: serverMouse
                anchors.fill: parent
                hoverEnabled: true
                cursorShape: Qt.PointingHandCursor
                onClicked: bar.settingsRequested()
            }
        }

        StrataButton {
            id: panelsButton
            objectName: "panelsButton"
            visible: !bar.compact
            text: bar.showPanels ? "Hide panels" : "Show panels"
            flat: true
            onClicked: bar.showPanelsToggled()
        }
        StrataButton {
            id: settingsButton
            objectName: "settingsButton"
            visible: !bar.compact
            text: "Settings"
            flat: true
            onClicked: bar.settingsRequested()
        }
        // Narrow windows: the three actions above and the help menu in one.
        StrataButton {
            id: overflowButton
            objectName: "overflowButton"
            visible: bar.compact
            text: "⋯"
            flat: true
            onClicked: overflowMenu.open()
            ToolTip.visible: hovered
            ToolTip.text: "Panels, settings and help"
            Menu {
                id: overflowMenu
                objectName: "overflowMenu"
                y: overflowButton.height
                MenuItem { objectName: "overflowPanels"; text: bar.showPanels ? "Hide panels" : "Show panels"; onTriggered: bar.showPanelsToggled() }
                MenuItem { objectName: "overflowSettings"; text: "Settings…"; onTriggered: bar.settingsRequested() }
                MenuSeparator {}
                MenuItem { text: "Open log"; onTriggered: bar.openLog() }
                MenuItem { text: "Open data folder"; onTriggered: bar.openDataFolder() }
                MenuSeparator {}
                MenuItem { objectName: "overflowAbout"; text: "About Strata"; onTriggered: bar.aboutRequested() }
            }
        }
        StrataButton {
            id: moreButton
            objectName: "helpButton"
            visible: !bar.compact
            text: "Help ▾"
            flat: true
            onClicked: moreMenu.open()
            Menu {
                id: moreMenu
                y: moreButton.height
                MenuItem { text: "Open log"; onTriggered: bar.openLog() }
                MenuItem { text: "Open data folder"; onTriggered: bar.openDataFolder() }
                MenuSeparator {}
                MenuItem { text: "About Strata"; onTriggered: bar.aboutRequested() }
            }
        }
    }
}
