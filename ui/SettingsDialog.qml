import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Dialogs
import Strata

// Every setting the engine implements, grouped; refused values show why.
Dialog {
    id: dialog
    // "Reload model now": the owner shows the memory plan under the new
    // settings first (a budget that no longer fits says so there, and the
    // loaded model stays).
    signal reloadRequested()
    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(parent.width - 80, 680)
    height: Math.min(parent.height - 60, 700)
    modal: true
    title: "Settings"
    padding: 0
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader { text: dialog.title; subtitle: "Refused values stay as they were and say why." }
    Overlay.modal: Rectangle { color: "#a0080a0e" }

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
            height: 40 + (presetBox.visible ? presetBox.implicitHeight + 8 : 0)
            Label {
                anchors.left: parent.left
                anchors.leftMargin: 20
                y: 40 - height - 4
                text: section
                font.pixelSize: 13
                font.weight: Font.Bold
                color: Theme.accentHover
            }
            // Sampling: the loaded model's own defaults (with the system prompt).
            ColumnLayout {
                id: presetBox
                objectName: "presetBox"
                visible: section === "Sampling" && appSettings.presetModel.length > 0
                x: 20
                y: 44
                width: parent.width - 40
                spacing: 6
                Label {
                    objectName: "presetNote"
                    Layout.fillWidth: true
                    wrapMode: Text.Wrap
                    font.pixelSize: Theme.small
                    color: appSettings.presetActive ? Theme.success : Theme.textFaint
                    text: appSettings.presetActive
                          ? appSettings.presetModel + "'s saved defaults are in force: the sampling below, and its system prompt for new chats."
                          : "Save the sampling below and this conversation's system prompt as " + appSettings.presetModel
                            + "'s defaults: they are put in force whenever it is loaded."
                }
                RowLayout {
                    Layout.fillWidth: true
                    spacing: 8
                    StrataButton {
                        objectName: "savePresetButton"
                        Layout.maximumWidth: presetBox.width * 0.65
                        text: "Save as defaults for " + appSettings.presetModel
                        onClicked: {
                            const err = appSettings.savePreset(chat.systemPrompt)
                            chat.showNotice(err.length > 0 ? err : "Saved as the defaults for " + appSettings.presetModel + ".")
                        }
                    }
                    StrataButton {
                        objectName: "forgetPresetButton"
                        text: "Forget this model's defaults"
                        flat: true
                        visible: appSettings.presetActive
                        onClicked: appSettings.forgetPreset()
                    }
                    Item { Layout.fillWidth: true }
                }
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
            onBrowseRequested: key === "spec_draft_file" ? draftDialog.open() : pinDialog.open()
        }
        // Calibration: count expert use on a prompts file and pin the hot ones.
        footer: ColumnLayout {
            x: 20
            width: list.width - 40
            spacing: 8
            Item { implicitHeight: 18 }
            Label {
                text: "Hot experts"
                font.pixelSize: 13
                font.weight: Font.Bold
                color: Theme.accentHover
            }
            Label {
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                color: Theme.textFaint
                font.pixelSize: Theme.small
                text: "Runs the prompts of a file through the loaded model, counts which experts it routes to, and pins "
                      + "the most used eighth of them (written under the data folder and set as the Pin file)."
            }
            RowLayout {
                Layout.fillWidth: true
                spacing: 8
                StrataButton {
                    objectName: "calibrateButton"
                    text: "Calibrate hot experts…"
                    enabled: chat.modelState === "ready" && chat.calibrationState !== "running" && !chat.anyGenerating
                    onClicked: promptsDialog.open()
                }
                StrataButton {
                    text: "Use " + (chat.defaultPromptsFile.length > 0 ? chat.defaultPromptsFile.split("/").pop() : "default prompts")
                    flat: true
                    visible: chat.defaultPromptsFile.length > 0 && chat.calibrationState !== "running"
                    enabled: chat.modelState === "ready" && !chat.anyGenerating
                    onClicked: chat.calibrate("")
                }
                ProgressBar {
                    Layout.fillWidth: true
                    visible: chat.calibrationState === "running"
                    from: 0; to: 1
                    value: chat.calibrationFraction
                }
                StrataButton {
                    text: "Cancel"
                    visible: chat.calibrationState === "running"
                    onClicked: chat.cancelCalibration()
                }
                Item { Layout.fillWidth: true; visible: chat.calibrationState !== "running" }
            }
            Label {
                Layout.fillWidth: true
                visible: chat.calibrationMessage.length > 0
                wrapMode: Text.Wrap
                font.pixelSize: Theme.small
                color: chat.calibrationState === "failed" ? Theme.danger
                     : chat.calibrationState === "done" ? Theme.success : Theme.textDim
                text: chat.calibrationMessage
            }

            // Serving: the loaded model over the OpenAI API to other apps on this machine.
            Item { implicitHeight: 18 }
            Label {
                text: "Serve to other apps"
                font.pixelSize: 13
                font.weight: Font.Bold
                color: Theme.accentHover
            }
            Label {
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                color: Theme.textFaint
                font.pixelSize: Theme.small
                text: "An OpenAI-compatible server on this machine only (127.0.0.1): editors, scripts and chat front-ends "
                      + "set their base URL to it. Their requests share the engine with your chats."
            }
            RowLayout {
                Layout.fillWidth: true
                spacing: 8
                Switch {
                    id: serveSwitch
                    objectName: "serveSwitch"
                    checked: appServer.enabled
                    onToggled: appServer.setServing(checked, parseInt(portField.text), keyField.text)
                }
                Label {
                    text: "Serve the loaded model at http://127.0.0.1:"
                    color: Theme.text
                }
                StrataTextField {
                    id: portField
                    objectName: "servePortField"
                    Layout.preferredWidth: 80
                    text: String(appServer.port)
                    validator: IntValidator { bottom: 1; top: 65535 }
                    onEditingFinished: if (appServer.enabled) appServer.setServing(true, parseInt(text), keyField.text)
                }
                Item { Layout.fillWidth: true }
            }
            RowLayout {
                Layout.fillWidth: true
                spacing: 8
                Label { text: "API key (optional)"; color: Theme.textDim }
                StrataTextField {
                    id: keyField
                    objectName: "serveKeyField"
                    Layout.preferredWidth: 260
                    placeholderText: "none: any app on this machine may use it"
                    text: appServer.apiKey
                    echoMode: TextInput.PasswordEchoOnEdit
                    onEditingFinished: if (appServer.enabled) appServer.setServing(true, parseInt(portField.text), text)
                }
                Item { Layout.fillWidth: true }
            }
            Label {
                Layout.fillWidth: true
                objectName: "serveStatus"
                wrapMode: Text.Wrap
                font.pixelSize: Theme.small
                visible: text.length > 0
                color: appServer.error.length > 0 ? Theme.danger : Theme.success
                text: appServer.error.length > 0 ? appServer.error
                    : appServer.running ? "Serving at " + appServer.url + (chat.modelState === "ready" ? "" : " (no model loaded yet: requests get 503)")
                    : ""
            }
        }
    }

    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        StrataButton {
            text: "Restore defaults"
            flat: true
            DialogButtonBox.buttonRole: DialogButtonBox.ResetRole
            onClicked: appSettings.resetToDefaults()
        }
        StrataButton {
            text: "Reload model now"
            visible: chat.settingsNeedReload && chat.modelState === "ready"
            DialogButtonBox.buttonRole: DialogButtonBox.ApplyRole
            onClicked: {
                dialog.close()
                dialog.reloadRequested()
            }
        }
        StrataButton {
            text: "Close"
            highlighted: true
            DialogButtonBox.buttonRole: DialogButtonBox.AcceptRole
        }
    }

    FileDialog {
        id: draftDialog
        title: "Choose a draft model (a GGUF with the same vocabulary)"
        nameFilters: ["GGUF models (*.gguf)", "All files (*)"]
        onAccepted: appSettings.setValue("spec_draft_file", chat.localPath(selectedFile))
    }
    FileDialog {
        id: promptsDialog
        title: "Choose a prompts file for calibration (one prompt per line)"
        nameFilters: ["Text files (*.txt)", "All files (*)"]
        currentFolder: chat.defaultPromptsFile.length > 0 ? "file://" + chat.defaultPromptsFile.substring(0, chat.defaultPromptsFile.lastIndexOf("/")) : ""
        onAccepted: chat.calibrate(selectedFile)
    }
    FileDialog {
        id: pinDialog
        title: "Choose a pin file (strata-cli calibrate)"
        nameFilters: ["Calibration files (*.json)", "All files (*)"]
        onAccepted: appSettings.setValue("pin_file", chat.localPath(selectedFile))
    }
}
