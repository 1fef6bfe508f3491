import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// A card on the right: a title (click to collapse) and its content.
Rectangle {
    id: panel
    property string title: ""
    property string subtitle: ""
    property bool expanded: true
    signal toggled()
    default property alias content: body.data

    implicitHeight: head.height + (expanded ? body.implicitHeight + 12 : 0)
    radius: Theme.radius
    color: Theme.surface
    border.color: Theme.border
    clip: true

    Item {
        id: head
        width: parent.width
        height: 34
        Label {
            id: titleLabel
            anchors.left: parent.left
            anchors.leftMargin: 14
            anchors.verticalCenter: parent.verticalCenter
            text: panel.title
            font.pixelSize: 13
            font.weight: Font.DemiBold
            color: Theme.text
        }
        Label {
            anchors.left: titleLabel.right
            anchors.leftMargin: 8
            anchors.right: chevron.left
            anchors.rightMargin: 8
            anchors.verticalCenter: parent.verticalCenter
            text: panel.subtitle
            elide: Text.ElideRight
            font.pixelSize: Theme.tiny
            color: Theme.textFaint
        }
        Label {
            id: chevron
            anchors.right: parent.right
            anchors.rightMargin: 14
            anchors.verticalCenter: parent.verticalCenter
            text: panel.expanded ? "▾" : "▸"
            color: Theme.textDim
        }
        MouseArea {
            anchors.fill: parent
            cursorShape: Qt.PointingHandCursor
            onClicked: panel.toggled()
        }
    }
    ColumnLayout {
        id: body
        visible: panel.expanded
        anchors.top: head.bottom
        anchors.left: parent.left
        anchors.right: parent.right
        anchors.leftMargin: 14
        anchors.rightMargin: 14
        spacing: 8
    }
}
