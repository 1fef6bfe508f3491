import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// One figure: a small caption over its value.
ColumnLayout {
    property string caption: ""
    property string value: ""
    property color valueColor: Theme.text
    spacing: 1
    Label {
        text: caption
        color: Theme.textFaint
        font.pixelSize: Theme.tiny
    }
    Label {
        text: value
        color: valueColor
        font.pixelSize: 15
        font.weight: Font.DemiBold
        font.family: Theme.mono
    }
}
