import QtQuick
import QtQuick.Controls
import Strata

// The app's one-line text field: the same height, radius and focus ring as StrataButton.
TextField {
    id: control
    implicitHeight: 34
    leftPadding: 10
    rightPadding: 10
    selectByMouse: true
    color: Theme.text
    placeholderTextColor: Theme.textFaint
    selectionColor: Theme.accent
    selectedTextColor: "#ffffff"
    font.pixelSize: Theme.fontSize - 1
    background: Rectangle {
        implicitWidth: 120
        radius: 8
        color: Theme.surfaceAlt
        border.color: control.activeFocus ? Theme.accent : control.hovered ? Theme.textFaint : Theme.border
    }
}
