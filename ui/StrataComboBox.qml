import QtQuick
import QtQuick.Controls
import Strata

// The app's drop-down: a flat field with a chevron and a dark pop-up list.
ComboBox {
    id: control
    implicitHeight: 34
    font.pixelSize: Theme.fontSize - 1
    hoverEnabled: true

    background: Rectangle {
        implicitWidth: 120
        radius: 8
        color: control.hovered ? Theme.hover : Theme.surfaceAlt
        border.color: control.visualFocus || control.popup.visible ? Theme.accent : Theme.border
    }
    contentItem: Text {
        leftPadding: 12
        rightPadding: 8
        text: control.displayText
        font: control.font
        color: control.enabled ? Theme.text : Theme.textFaint
        verticalAlignment: Text.AlignVCenter
        elide: Text.ElideRight
    }
    indicator: Text {
        x: control.width - width - 12
        y: (control.height - height) / 2
        text: "▾"
        color: Theme.textDim
        font.pixelSize: 12
    }
    rightPadding: 28
    delegate: ItemDelegate {
        required property var modelData
        required property int index
        width: ListView.view ? ListView.view.width : control.width
        height: 32
        highlighted: control.highlightedIndex === index
        contentItem: Text {
            text: modelData
            font: control.font
            color: index === control.currentIndex ? Theme.accentHover : Theme.text
            verticalAlignment: Text.AlignVCenter
            elide: Text.ElideRight
        }
        background: Rectangle { radius: 6; color: highlighted ? Theme.hover : "transparent" }
    }
    popup: Popup {
        y: control.height + 4
        width: control.width
        implicitHeight: Math.min(contentItem.implicitHeight + 8, 320)
        padding: 4
        contentItem: ListView {
            clip: true
            implicitHeight: contentHeight
            model: control.popup.visible ? control.delegateModel : null
            currentIndex: control.highlightedIndex
        }
        background: Rectangle { color: Theme.raised; radius: 8; border.color: Theme.border }
    }
}
