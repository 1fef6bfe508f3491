import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The last error (until dismissed) or notice (for a few seconds).
Rectangle {
    id: toast
    readonly property bool isError: chat.lastError.length > 0
    readonly property string message: isError ? chat.lastError : chat.notice
    visible: message.length > 0
    implicitHeight: row.implicitHeight + 20
    radius: 8
    color: isError ? Theme.dangerSoft : Theme.raised
    border.color: isError ? Theme.danger : Theme.border

    Timer {
        running: !toast.isError && chat.notice.length > 0
        interval: 7000
        onTriggered: chat.clearNotice()
    }
    RowLayout {
        id: row
        anchors.fill: parent
        anchors.margins: 10
        anchors.leftMargin: 14
        spacing: 10
        Label {
            Layout.fillWidth: true
            text: toast.message
            wrapMode: Text.Wrap
            color: toast.isError ? "#ffd9d9" : Theme.text
        }
        ToolButton {
            text: "×"
            flat: true
            onClicked: toast.isError ? chat.clearError() : chat.clearNotice()
        }
    }
}
