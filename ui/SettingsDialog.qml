import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Dialogs
import Strata

// Every setting the engine implements, grouped; refused values show why.
Dialog {
    id: dialog
    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(parent.width - 80, 680)
    height: Math.min(parent.height - 60, 700)
    modal: true
    title: "Settings"
    padding: 0
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }

    contentItem: ListView {
        id: list
        clip: true
        model: appSettings
        spacing: 14
        topMargin: 8
        bottomMargin: 16
        ScrollBar.vertical: ScrollBar {}
        section.property: "group"
        section.delegate: Item {
            required property string section
            width: list.width
            height: 40
            Label {
                anchors.left: parent.left
                anchors.leftMargin: 20
                anchors.bottom: parent.bottom
                anchors.bottomMargin: 4
                text: section
                font.pixelSize: 13
                font.weight: Font.Bold
                color: Theme.accentHover
            }
        }
        delegate: SettingsField {
            required key
            required label
            required kind
            required value
            required text
            required choices
            required applies
            required help
            required error
            required placeholder
            x: 20
            width: list.width - 40
            onSubmitted: (v) => appSettings.setValue(key, v)
            onBrowseRequested: { pinDialog.open() }
        }
    }

    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        Button {
            text: "Restore defaults"
            flat: true
            DialogButtonBox.buttonRole: DialogButtonBox.ResetRole
            onClicked: appSettings.resetToDefaults()
        }
        Button {
            text: "Reload model now"
            visible: chat.settingsNeedReload && chat.modelState === "ready"
            DialogButtonBox.buttonRole: DialogButtonBox.ApplyRole
            onClicked: chat.reloadModel()
        }
        Button {
            text: "Close"
            highlighted: true
            DialogButtonBox.buttonRole: DialogButtonBox.AcceptRole
        }
    }

    FileDialog {
        id: pinDialog
        title: "Choose a pin file (strata-cli calibrate)"
        nameFilters: ["Calibration files (*.json)", "All files (*)"]
        onAccepted: appSettings.setValue("pin_file", chat.localPath(selectedFile))
    }
}
