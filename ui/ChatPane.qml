import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The open conversation: its title bar (system prompt, export), the
// messages, the composer; the model's loading state when there is no model.
Rectangle {
    id: pane
    color: Theme.window
    signal loadModelRequested()
    signal exportRequested(string kind)
    signal settingsRequested()

    readonly property bool ready: chat.modelState === "ready"

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        // Title bar.
        Rectangle {
            Layout.fillWidth: true
            implicitHeight: 48
            color: Theme.window
            Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
            RowLayout {
                anchors.fill: parent
                anchors.leftMargin: 20
                anchors.rightMargin: 12
                spacing: 8
                Label {
                    Layout.fillWidth: true
                    text: chat.currentConversationId !== 0 ? chat.currentTitle : "New conversation"
                    elide: Text.ElideRight
                    font.pixelSize: Theme.title
                    font.weight: Font.DemiBold
                    color: Theme.text
                }
                // This conversation's model, when another is loaded now.
                StrataButton {
                    objectName: "conversationModelButton"
                    visible: chat.conversationModel.length > 0 && chat.modelState !== "loading"
                    flat: true
                    text: "Load " + chat.conversationModel.split("/").pop()
                    Layout.maximumWidth: 320
                    onClicked: chat.loadModel(chat.conversationModel)
                    ToolTip.visible: hovered
                    ToolTip.text: "This conversation was answered by " + chat.conversationModel
                                  + "; another model is loaded now. Load this conversation's model."
                }
                StrataButton {
                    flat: true
                    text: chat.systemPrompt.length > 0 ? "System prompt ●" : "System prompt"
                    checkable: true
                    checked: systemEditor.visible
                    onClicked: {
                        systemEditor.visible = !systemEditor.visible
                        if (systemEditor.visible) { systemText.text = chat.systemPrompt; systemText.forceActiveFocus() }
                    }
                    ToolTip.visible: hovered
                    ToolTip.text: "Instructions the model sees before this conversation"
                }
                StrataButton {
                    id: exportButton
                    flat: true
                    text: "Export ▾"
                    enabled: chat.currentConversationId !== 0 && chat.messages.count > 0
                    onClicked: exportMenu.open()
                    Menu {
                        id: exportMenu
                        y: exportButton.height
                        MenuItem { text: "Markdown…"; onTriggered: pane.exportRequested("markdown") }
                        MenuItem { text: "JSON…"; onTriggered: pane.exportRequested("json") }
                    }
                }
            }
        }

        // With a conversation open, the launch's word on the last model (the
        // empty state below has its own copy).
        LaunchNotice {
            objectName: "launchNoticeBar"
            visible: wanted && chat.messages.count > 0
            Layout.fillWidth: true
            Layout.margins: 10
        }

        // System prompt editor.
        Rectangle {
            id: systemEditor
            visible: false
            Layout.fillWidth: true
            implicitHeight: 150
            color: Theme.surface
            Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
            ColumnLayout {
                anchors.fill: parent
                anchors.margins: 12
                anchors.leftMargin: 20
                spacing: 8
                Label {
                    text: "System prompt for this conversation"
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                }
                ScrollView {
                    Layout.fillWidth: true
                    Layout.fillHeight: true
                    TextArea {
                        id: systemText
                        wrapMode: TextEdit.Wrap
                        selectByMouse: true
                        placeholderText: "e.g. You are a concise assistant."
                        background: Rectangle { color: Theme.surfaceAlt; radius: 6; border.color: systemText.activeFocus ? Theme.accent : Theme.border }
                    }
                }
                RowLayout {
                    Layout.alignment: Qt.AlignRight
                    StrataButton { text: "Cancel"; flat: true; onClicked: systemEditor.visible = false }
                    StrataButton {
                        text: "Save"
                        highlighted: true
                        onClicked: { chat.setSystemPrompt(systemText.text); systemEditor.visible = false }
                    }
                }
            }
        }

        // Messages, or what to do first.
        Item {
            Layout.fillWidth: true
            Layout.fillHeight: true

            ListView {
                id: messageList
                objectName: "messageList"
                anchors.fill: parent
                visible: chat.messages.count > 0
                clip: true
                model: chat.messages
                spacing: 6
                topMargin: 16
                // Room for a notice under the last answer, so it never covers its last lines.
                bottomMargin: toast.visible ? toast.height + 28 : 16
                onBottomMarginChanged: if (followEnd) Qt.callLater(scrollToEnd)
                boundsBehavior: Flickable.StopAtBounds
                ScrollBar.vertical: ScrollBar {}
                property bool followEnd: true
                // To the very end, the bottom margin included (the margin is the notice's room).
                // Far from the end (a conversation just opened), the view first makes
                // the last items so their heights are known; near it (an answer
                // growing) it only moves down: positionViewAtEnd stops short of the
                // margin, and calling it every update stepped the view back first.
                function scrollToEnd() {
                    if (originY + contentHeight + bottomMargin - height - contentY > height) positionViewAtEnd()
                    const end = originY + contentHeight + bottomMargin - height
                    if (end > contentY) contentY = end
                }
                onMovementEnded: followEnd = atYEnd
                onCountChanged: Qt.callLater(() => { if (followEnd) scrollToEnd() })
                // Delegates are made (and measured) as the view moves, so the
                // content grows after a jump to the end, and as an answer
                // streams: follow it until the user scrolls away.
                onContentHeightChanged: if (followEnd && !moving) Qt.callLater(scrollToEnd)
                Connections {
                    target: chat
                    // After the bubble has grown (its layout runs later), not before.
                    function onStreamed() { if (messageList.followEnd) Qt.callLater(messageList.scrollToEnd) }
                    function onCurrentConversationChanged() { messageList.followEnd = true; Qt.callLater(messageList.scrollToEnd) }
                }
                delegate: MessageBubble {
                    required property var messageId
                    required property string role
                    required property string content
                    required property var segments
                    required property bool streaming
                    required property bool partial
                    required property string statsText
                    required property string finish
                    required property bool isLast
                    required property int version
                    required property int versionCount
                    required property string reasoning
                    required property bool reasoningOpen
                    required property int reasoningWords
                    required property int promptDone
                    required property int promptTotal
                    required property var toolCalls
                    width: ListView.view.width
                    maxContentWidth: 820
                    bubbleId: messageId
                    bubbleRole: role
                    bubbleContent: content
                    segmentSource: segments
                    bubbleStreaming: streaming
                    bubblePartial: partial
                    bubbleStats: statsText
                    bubbleFinish: finish
                    bubbleIsLast: isLast
                    bubbleVersion: version
                    bubbleVersionCount: versionCount
                    bubbleReasoning: reasoning
                    bubbleReasoningOpen: reasoningOpen
                    bubbleReasoningWords: reasoningWords
                    bubblePromptDone: promptDone
                    bubblePromptTotal: promptTotal
                    bubbleToolCalls: toolCalls
                    canAct: !chat.generating && pane.ready
                    onRegenerateRequested: chat.regenerate()
                    onVersionRequested: (delta) => chat.showAnswerVersion(delta)
                    onEditSubmitted: (id, text) => chat.editAndResend(id, text)
                }
            }

            // Empty states.
            ColumnLayout {
                anchors.centerIn: parent
                width: Math.min(parent.width - 80, 520)
                visible: chat.messages.count === 0
                spacing: 14

                Label {
                    Layout.fillWidth: true
                    horizontalAlignment: Text.AlignHCenter
                    font.pixelSize: 22
                    font.weight: Font.DemiBold
                    color: Theme.text
                    text: pane.ready ? "Start a conversation"
                        : chat.modelState === "loading" ? "Loading the model"
                        : chat.modelState === "failed" ? "The model could not be loaded" : "Load a model to start"
                }
                Label {
                    Layout.fillWidth: true
                    horizontalAlignment: Text.AlignHCenter
                    wrapMode: Text.Wrap
                    color: chat.modelState === "failed" ? Theme.danger : Theme.textDim
                    text: pane.ready ? chat.modelInfo.name + " is ready (" + chat.modelInfo.context + " tokens of context). "
                                       + "The panels on the right show how its experts move between memory tiers as it answers."
                        : chat.modelState === "loading" ? chat.modelPath
                        : chat.modelState === "failed" ? chat.modelError
                        : "Strata runs Mixture-of-Experts models in GGUF format, keeping only the hot experts in fast memory."
                }
                // The last model, when the launch did not load it: why, and Load anyway.
                LaunchNotice { Layout.fillWidth: true }
                Label {
                    Layout.fillWidth: true
                    horizontalAlignment: Text.AlignHCenter
                    visible: pane.ready && chat.modelInfo.templateFallback === true
                    wrapMode: Text.Wrap
                    color: Theme.warning
                    font.pixelSize: Theme.small
                    text: chat.modelInfo.templateNote !== undefined ? "Note: " + chat.modelInfo.templateNote + "." : ""
                }
                // The demo model continues text: say so before the first message is a question.
                Label {
                    objectName: "demoModelNote"
                    Layout.fillWidth: true
                    horizontalAlignment: Text.AlignHCenter
                    visible: pane.ready && !chat.remote && chat.modelPath.length > 0
                             && (chat.modelPath === chat.demoModelPath || chat.modelPath.split("/").pop() === "strata-demo-moe.gguf")
                    wrapMode: Text.Wrap
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                    text: "This is the demo model: a small model trained on the King James Bible. It continues the text "
                          + "you give it (try “In the beginning”); it is not an assistant and does not answer questions."
                }
                ColumnLayout {
                    Layout.alignment: Qt.AlignHCenter
                    visible: chat.modelState === "loading"
                    spacing: 8
                    ProgressBar {
                        Layout.preferredWidth: 320
                        from: 0; to: 1
                        value: chat.loadFraction
                    }
                    Label {
                        Layout.alignment: Qt.AlignHCenter
                        color: Theme.textDim
                        font.pixelSize: Theme.small
                        text: chat.loadStage + " · " + Math.round(chat.loadFraction * 100) + "%"
                    }
                    StrataButton {
                        Layout.alignment: Qt.AlignHCenter
                        text: "Cancel"
                        onClicked: chat.cancelModelLoad()
                    }
                }
                RowLayout {
                    Layout.alignment: Qt.AlignHCenter
                    visible: chat.modelState === "none" || chat.modelState === "failed"
                    spacing: 10
                    StrataButton { text: "Load model…"; highlighted: true; onClicked: pane.loadModelRequested() }
                    StrataButton {
                        text: "Use the demo model"
                        visible: chat.demoModelPath.length > 0
                        onClicked: chat.loadModel(chat.demoModelPath)
                    }
                    StrataButton { text: "Settings…"; visible: chat.modelState === "failed"; onClicked: pane.settingsRequested() }
                }
            }

            Toast {
                id: toast
                objectName: "toast"
                anchors.bottom: parent.bottom
                anchors.horizontalCenter: parent.horizontalCenter
                anchors.bottomMargin: 12
                width: Math.min(parent.width - 40, 640)
            }
        }

        Composer {
            Layout.fillWidth: true
            Layout.maximumWidth: 900
            Layout.alignment: Qt.AlignHCenter
            Layout.leftMargin: 20
            Layout.rightMargin: 20
            Layout.bottomMargin: 16
            Layout.topMargin: 4
            enabled: pane.ready || chat.generating
        }
    }
}
