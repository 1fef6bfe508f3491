import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// Chat with a server instead of the local engine: any OpenAI-compatible
// endpoint (vLLM, SGLang, llama-server, Ollama, LM Studio, another Strata).
// Its models come from its /v1/models; the conversation store keeps every
// exchange as with a local model.
Dialog {
    id: dialog
    objectName: "remoteDialog"
    parent: Overlay.overlay
    anchors.centerIn: parent
    width: 560
    modal: true
    leftPadding: 20
    rightPadding: 20
    topPadding: 12
    title: "Connect to a server"
    background: Rectangle { color: Theme.surface; radius: 10; border.color: Theme.border }
    header: DialogHeader { text: dialog.title; subtitle: "vLLM, SGLang, llama-server, Ollama, LM Studio or Strata: any OpenAI API" }

    property var models: []
    property string status: ""
    property bool statusIsError: false
    property bool listing: false

    onOpened: {
        urlField.text = chat.remoteUrl.length > 0 ? chat.remoteUrl : "http://127.0.0.1:8080/v1"
        keyField.text = chat.remoteKey
        models = chat.remoteModel.length > 0 ? [chat.remoteModel] : []
        status = ""
    }

    Connections {
        target: chat
        function onRemoteModelsListed(ids, error) {
            dialog.listing = false
            dialog.statusIsError = error.length > 0
            dialog.status = error.length > 0 ? error : ids.length + (ids.length === 1 ? " model" : " models") + " on this server"
            if (error.length === 0) {
                dialog.models = ids
                const i = ids.indexOf(chat.remoteModel)
                modelBox.currentIndex = i >= 0 ? i : 0
            }
        }
    }

    ColumnLayout {
        width: parent.width
        spacing: 10
        Label { text: "Address"; color: Theme.textDim }
        StrataTextField {
            id: urlField
            objectName: "remoteUrlField"
            Layout.fillWidth: true
            placeholderText: "http://host:port/v1"
        }
        Label { text: "API key (if the server wants one)"; color: Theme.textDim }
        StrataTextField {
            id: keyField
            objectName: "remoteKeyField"
            Layout.fillWidth: true
            echoMode: TextInput.PasswordEchoOnEdit
            placeholderText: "none"
        }
        RowLayout {
            Layout.fillWidth: true
            spacing: 8
            StrataButton {
                text: dialog.listing ? "Asking…" : "List models"
                enabled: !dialog.listing && urlField.text.length > 0
                onClicked: {
                    dialog.listing = true
                    dialog.status = ""
                    chat.listRemoteModels(urlField.text, keyField.text)
                }
            }
            StrataComboBox {
                id: modelBox
                objectName: "remoteModelBox"
                Layout.fillWidth: true
                model: dialog.models
                enabled: dialog.models.length > 0
            }
        }
        Label {
            objectName: "remoteStatus"
            Layout.fillWidth: true
            visible: dialog.status.length > 0
            // A server's words are shown as they are, never rendered as markup.
            textFormat: Text.PlainText
            wrapMode: Text.Wrap
            font.pixelSize: Theme.small
            color: dialog.statusIsError ? Theme.danger : Theme.success
            text: dialog.status
        }
        Label {
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            font.pixelSize: Theme.small
            color: Theme.textFaint
            text: "The server applies its own chat template and sampling limits. The panels show the local engine's "
                  + "figures; a server's answers report their tokens/s and time to first token under each message."
        }
    }

    footer: DialogButtonBox {
        background: Rectangle { color: "transparent" }
        StrataButton {
            text: "Cancel"
            flat: true
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
        StrataButton {
            text: "Use this server"
            highlighted: true
            enabled: modelBox.currentText.length > 0
            DialogButtonBox.buttonRole: DialogButtonBox.AcceptRole
        }
    }
    onAccepted: {
        const err = chat.useRemote(urlField.text, keyField.text, modelBox.currentText)
        if (err.length > 0) {
            dialog.status = err
            dialog.statusIsError = true
            dialog.open()
        }
    }
}
