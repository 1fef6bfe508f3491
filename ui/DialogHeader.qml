import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// A dialog's title bar in the app's style: title, optional subtitle, a rule.
Item {
    id: header
    property string text: ""
    property string subtitle: ""
    implicitHeight: column.implicitHeight + 28
    ColumnLayout {
        id: column
        anchors.left: parent.left
        anchors.right: parent.right
        anchors.top: parent.top
        anchors.leftMargin: 20
        anchors.rightMargin: 20
        anchors.topMargin: 16
        spacing: 3
        Label {
            Layout.fillWidth: true
            text: header.text
            elide: Text.ElideMiddle
            font.pixelSize: 17
            font.weight: Font.DemiBold
            color: Theme.text
        }
        Label {
            Layout.fillWidth: true
            visible: header.subtitle.length > 0
            text: header.subtitle
            elide: Text.ElideRight
            font.pixelSize: Theme.small
            color: Theme.textFaint
        }
    }
    Rectangle { anchors.bottom: parent.bottom; x: 0; width: parent.width; height: 1; color: Theme.border }
}
