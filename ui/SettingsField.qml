import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// One setting: its label, when it applies (live / next message / next
// load), the editor for its kind, its help, and the reason when a value was
// refused. Emits submitted(value); the owner validates and sets `error`,
// and the editor then shows the value in force again (a refused choice or
// switch goes back to what applies, with the reason beside it).
ColumnLayout {
    id: field
    property string key: ""
    property string label: ""
    property string kind: "int"        // size | int | real | choice | bool | file
    property var value
    property string text: ""
    property var choices: []
    property string applies: "live"
    property string help: ""
    property string error: ""
    property string placeholder: ""
    signal submitted(var value)
    signal browseRequested()

    spacing: 4

    RowLayout {
        Layout.fillWidth: true
        spacing: 8
        Label {
            text: field.label
            color: Theme.text
            font.weight: Font.Medium
        }
        Rectangle {
            implicitWidth: appliesLabel.implicitWidth + 10
            implicitHeight: appliesLabel.implicitHeight + 4
            radius: 4
            color: "transparent"
            border.color: Theme.appliesColor(field.applies)
            Label {
                id: appliesLabel
                anchors.centerIn: parent
                text: field.applies === "live" ? "applies live" : "applies on " + field.applies
                color: Theme.appliesColor(field.applies)
                font.pixelSize: 10
            }
        }
        Item { Layout.fillWidth: true }

        StrataTextField {
            id: textEditor
            objectName: "textEditor"
            visible: field.kind === "size" || field.kind === "int" || field.kind === "real" || field.kind === "file"
            Layout.preferredWidth: field.kind === "file" ? 260 : 150
            text: field.text
            placeholderText: field.placeholder
            selectByMouse: true
            horizontalAlignment: field.kind === "file" ? Text.AlignLeft : Text.AlignRight
            color: field.error.length > 0 ? Theme.danger : Theme.text
            background: Rectangle {
                radius: 4
                color: Theme.surfaceAlt
                border.color: field.error.length > 0 ? Theme.danger : textEditor.activeFocus ? Theme.accent : Theme.border
            }
            onEditingFinished: if (text !== field.text || field.error.length > 0) field.submitted(text)
        }
        StrataButton {
            visible: field.kind === "file"
            text: "Browse…"
            onClicked: field.browseRequested()
        }
        StrataComboBox {
            id: combo
            objectName: "choiceEditor"
            visible: field.kind === "choice"
            Layout.preferredWidth: 150
            model: field.choices
            currentIndex: field.choices.indexOf(field.text)
            onActivated: (i) => {
                field.submitted(field.choices[i])
                currentIndex = Qt.binding(() => field.choices.indexOf(field.text))
            }
        }
        Switch {
            id: toggle
            visible: field.kind === "bool"
            checked: field.value === true
            onToggled: {
                field.submitted(checked)
                checked = Qt.binding(() => field.value === true)
            }
        }
    }
    Label {
        Layout.fillWidth: true
        visible: field.help.length > 0
        text: field.help
        wrapMode: Text.Wrap
        color: Theme.textFaint
        font.pixelSize: Theme.small
    }
    Label {
        id: errorLabel
        objectName: "errorLabel"
        Layout.fillWidth: true
        visible: field.error.length > 0
        text: field.error
        wrapMode: Text.Wrap
        color: Theme.danger
        font.pixelSize: Theme.small
    }
}
