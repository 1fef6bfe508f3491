import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The start screen's word on the last model when the launch did not load it
// (ChatController::loadAtLaunch): why (it would take most of the machine, or
// its plan does not fit), and a button to load it anyway.
ColumnLayout {
    id: notice
    objectName: "launchNotice"
    readonly property var launch: chat.launch !== undefined ? chat.launch : ({})
    readonly property string state_: launch.state !== undefined ? launch.state : ""
    readonly property bool wanted: state_ === "held" || state_ === "planning"
    visible: wanted
    spacing: 8

    Rectangle {
        Layout.fillWidth: true
        implicitHeight: launchText.implicitHeight + 20
        Layout.minimumHeight: implicitHeight
        radius: 6
        color: notice.state_ === "held" ? Theme.surfaceAlt : "transparent"
        border.color: notice.state_ === "held" ? Theme.warning : "transparent"
        Label {
            id: launchText
            objectName: "launchText"
            x: 10
            y: 10
            width: parent.width - 20
            wrapMode: Text.Wrap
            horizontalAlignment: Text.AlignHCenter
            color: notice.state_ === "held" ? Theme.text : Theme.textDim
            font.pixelSize: Theme.small
            text: notice.launch.message !== undefined ? notice.launch.message : ""
        }
    }
    StrataButton {
        objectName: "loadAnywayButton"
        Layout.alignment: Qt.AlignHCenter
        visible: notice.state_ === "held" && notice.launch.canLoad === true
        text: "Load " + (notice.launch.path !== undefined ? notice.launch.path.split("/").pop() : "") + " anyway"
        onClicked: chat.loadLaunchModel()
    }
}
