import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The message box: Enter sends, Shift+Enter starts a new line; Stop while an
// answer is being generated.
Rectangle {
    id: composer
    implicitHeight: Math.min(Math.max(input.implicitHeight + 20, 56), 180)
    radius: 12
    color: Theme.surfaceAlt
    border.color: input.activeFocus ? Theme.accent : Theme.border

    // Speculative decoding runs one conversation at a time: say why this one waits.
    Label {
        anchors.bottom: parent.top
        anchors.bottomMargin: 4
        anchors.left: parent.left
        anchors.leftMargin: 4
        visible: chat.speculative && chat.anyGenerating
        text: chat.generating && chat.generatingConversations.length > 1
              ? "Queued: speculative decoding runs one conversation at a time."
              : "Speculative decoding is on: it runs one conversation at a time."
        color: Theme.textFaint
        font.pixelSize: Theme.tiny
    }

    // New chat (button or Ctrl+N) or another conversation: typing goes here
    // at once (the focus stayed on the button or the list, and typed text was lost).
    function focusInput() { input.forceActiveFocus() }
    Connections {
        target: chat
        function onConversationOpened() { composer.focusInput() }
    }

    function submit() {
        if (chat.generating) return
        if (input.text.trim().length === 0) return
        if (chat.send(input.text)) input.text = ""
    }

    RowLayout {
        anchors.fill: parent
        anchors.margins: 8
        anchors.leftMargin: 12
        spacing: 8
        ScrollView {
            Layout.fillWidth: true
            Layout.fillHeight: true
            TextArea {
                id: input
                objectName: "composerInput"
                wrapMode: TextEdit.Wrap
                selectByMouse: true
                focus: true
                placeholderText: chat.modelState === "ready" ? "Message " + chat.modelInfo.name
                                                             : "Load a model to chat"
                background: null
                Keys.onPressed: (event) => {
                    if ((event.key === Qt.Key_Return || event.key === Qt.Key_Enter) && !(event.modifiers & Qt.ShiftModifier)) {
                        composer.submit()
                        event.accepted = true
                    }
                }
            }
        }
        StrataButton {
            Layout.alignment: Qt.AlignBottom
            text: chat.generating ? "Stop" : "Send"
            highlighted: !chat.generating
            enabled: chat.generating || input.text.trim().length > 0
            onClicked: chat.generating ? chat.stop() : composer.submit()
        }
    }
}
