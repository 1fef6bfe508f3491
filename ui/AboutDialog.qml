import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// Versions, the engine build, and where the app keeps its files.
Dialog {
    id: dialog
    parent: Overlay.overlay
    anchors.centerIn: parent
    width: 500
    modal: true
    title: "About Strata"
    // The text keeps clear of the edges (it touched them).
    padding: 20
    topPadding: 14
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader { text: "About Strata" }
    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        padding: 16
        StrataButton {
            text: "Close"
            highlighted: true
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
    }

    // The engine build ends with the device sentence ("device auto: the CPU,
    // because ..."), which is also what the loaded model reports: said once,
    // under "Computing on", and the probe's "no GPU: why" not again beside it.
    readonly property var buildLines: appInfo.engineBuild.split("\n")
    readonly property string computingOn: telemetry.device !== "" ? telemetry.device
                                        : buildLines.length > 1 ? buildLines[buildLines.length - 1] : ""
    readonly property string buildText: {
        let text = buildLines.length > 1 ? buildLines.slice(0, -1).join("\n") : appInfo.engineBuild
        const i = text.indexOf("; no GPU: ")
        if (i >= 0 && computingOn.indexOf(text.slice(i + 10)) >= 0) text = text.slice(0, i)
        return text
    }

    ColumnLayout {
        width: parent.width
        spacing: 10
        Label {
            text: "Strata " + appInfo.version
            font.pixelSize: 20
            font.weight: Font.DemiBold
            color: Theme.text
        }
        Label {
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            color: Theme.textDim
            text: "Chat with Mixture-of-Experts models larger than fast memory: shared weights stay resident, "
                  + "experts move through a budgeted cache with predicted prefetch."
        }
        GridLayout {
            columns: 2
            columnSpacing: 14
            rowSpacing: 6
            Layout.fillWidth: true
            Label { text: "Qt"; color: Theme.textFaint }
            Label { text: appInfo.qtVersion; color: Theme.text }
            Label { text: "Engine"; color: Theme.textFaint }
            Label { objectName: "aboutEngine"; text: dialog.buildText; color: Theme.text; Layout.fillWidth: true; wrapMode: Text.Wrap }
            Label { text: "Computing on"; color: Theme.textFaint; visible: dialog.computingOn !== "" }
            Label {
                objectName: "aboutDevice"
                visible: dialog.computingOn !== ""
                text: dialog.computingOn
                color: Theme.text
                Layout.fillWidth: true
                wrapMode: Text.Wrap
            }
            Label { text: "Model"; color: Theme.textFaint }
            Label {
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                color: Theme.text
                text: chat.modelState === "ready" ? chat.modelInfo.name + " — " + chat.modelInfo.templateNote : "none loaded"
            }
            Label { text: "Chats"; color: Theme.textFaint }
            Label { text: chat.databasePath; color: Theme.text; Layout.fillWidth: true; elide: Text.ElideMiddle }
            Label { text: "Log"; color: Theme.textFaint }
            Label { text: appInfo.logFile; color: Theme.text; Layout.fillWidth: true; elide: Text.ElideMiddle }
        }
        RowLayout {
            StrataButton { text: "Open log"; onClicked: if (!appInfo.openLog()) chat.showNotice("No application could open the log. It is at " + appInfo.logFile) }
            StrataButton { text: "Open data folder"; onClicked: appInfo.openDataDir() }
        }
    }
}
