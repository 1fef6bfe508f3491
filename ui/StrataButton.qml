import QtQuick
import QtQuick.Controls
import Strata

// The app's button: flat, rounded, on the dark palette. `highlighted` is the
// primary action (accent fill), `flat` a quiet one (text until hovered),
// otherwise a raised secondary button; `danger` colours the text.
Button {
    id: control
    property bool danger: false

    implicitHeight: 34
    leftPadding: 14
    rightPadding: 14
    topPadding: 6
    bottomPadding: 6
    font.pixelSize: Theme.fontSize - 1
    font.weight: Font.Medium
    hoverEnabled: true

    contentItem: Text {
        text: control.text
        font: control.font
        color: !control.enabled ? Theme.textFaint
             : control.highlighted ? "#ffffff"
             : control.danger ? Theme.danger
             : control.flat && !control.hovered && !control.checked ? Theme.textDim : Theme.text
        horizontalAlignment: Text.AlignHCenter
        verticalAlignment: Text.AlignVCenter
        elide: Text.ElideRight
    }
    background: Rectangle {
        implicitWidth: 64
        implicitHeight: 34
        radius: 8
        color: !control.enabled ? (control.flat ? "transparent" : Theme.surfaceAlt)
             : control.highlighted ? (control.down ? Qt.darker(Theme.accent, 1.15) : control.hovered ? Theme.accentHover : Theme.accent)
             : control.flat ? (control.down || control.checked ? Theme.raised : control.hovered ? Theme.hover : "transparent")
             : (control.down || control.checked ? Theme.border : control.hovered ? Theme.hover : Theme.raised)
        border.width: control.visualFocus ? 1 : (control.highlighted || control.flat ? 0 : 1)
        border.color: control.visualFocus ? Theme.accentHover : Theme.border
    }
}
