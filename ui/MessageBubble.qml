import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// One message. The user's on the right in a bubble, with Edit (edit and
// resend); the assistant's on the left, its Markdown split into prose and
// code blocks (each with a Copy button), its figures underneath, Regenerate
// on the last answer.
Item {
    id: bubble
    property var bubbleId: 0
    property string bubbleRole: "assistant"
    property string bubbleContent: ""
    // The answer in prose and code pieces: the message list's (segmentSource,
    // fed as the answer streams, with no text passing through QML), or made
    // here from bubbleContent for a bubble on its own.
    property var segmentSource: null
    readonly property var segments: segmentSource ? segmentSource : ownSegments
    // What Copy copies, read when asked (a binding would copy the answer into
    // QML at every streamed chunk), and whether there is an answer yet.
    function answerText() { return segmentSource ? segmentSource.markdown : bubbleContent }
    readonly property bool hasAnswer: segmentSource ? segmentSource.count > 0 : bubbleContent.length > 0
    property bool bubbleStreaming: false
    property bool bubblePartial: false
    property string bubbleStats: ""
    property string bubbleFinish: ""
    property bool bubbleIsLast: false
    property int bubbleVersion: 0        // which version of this answer (Regenerate keeps the others)
    property int bubbleVersionCount: 0
    property string bubbleReasoning: ""    // the model's reasoning before its answer (shown collapsed)
    property int bubbleReasoningWords: bubbleReasoning.length > 0 ? bubbleReasoning.trim().split(/\s+/).length : 0
    property bool bubbleReasoningOpen: false  // still being written
    property bool reasoningShown: false
    property int bubblePromptDone: 0      // a long prompt being read: tokens so far ...
    property int bubblePromptTotal: 0     // ... of this many (0: not reading one)
    property var bubbleToolCalls: []      // the tools the answer called: [{name, arguments, result}]
    property bool canAct: true
    property real maxContentWidth: 820
    property bool editing: false
    readonly property bool isUser: bubbleRole === "user"
    readonly property int codeBlockCount: segments.codeBlockCount
    signal regenerateRequested()
    signal versionRequested(int delta)
    signal editSubmitted(var id, string text)

    implicitHeight: column.implicitHeight + 12

    SegmentModel {
        id: ownSegments
        markdown: bubble.isUser || bubble.segmentSource ? "" : bubble.bubbleContent
    }
    readonly property real columnWidth: Math.min(width - 48, maxContentWidth)

    ColumnLayout {
        id: column
        x: (bubble.width - bubble.columnWidth) / 2
        width: bubble.columnWidth
        spacing: 4

        Label {
            text: bubble.isUser ? "You" : "Assistant"
            color: Theme.textFaint
            font.pixelSize: Theme.tiny
            font.weight: Font.DemiBold
            Layout.alignment: bubble.isUser ? Qt.AlignRight : Qt.AlignLeft
        }

        Rectangle {
            id: card
            Layout.alignment: bubble.isUser ? Qt.AlignRight : Qt.AlignLeft
            Layout.preferredWidth: bubble.isUser && !bubble.editing
                                   ? Math.min(bubble.columnWidth * 0.8, userText.implicitWidth + 28)
                                   : bubble.columnWidth
            implicitHeight: (bubble.editing ? editor.implicitHeight : bubble.isUser ? userText.implicitHeight : content.implicitHeight)
                            + (bubble.isUser || bubble.editing ? 20 : 4)
            radius: 12
            color: bubble.isUser ? Theme.userBubble : "transparent"

            // The user's text: plain, selectable.
            TextEdit {
                id: userText
                visible: bubble.isUser && !bubble.editing
                x: 14; y: 10
                width: card.width - 28
                text: bubble.bubbleContent
                readOnly: true
                selectByMouse: true
                wrapMode: TextEdit.Wrap
                color: Theme.text
                font.pixelSize: Theme.fontSize
                selectionColor: Theme.accent
            }

            // The assistant's Markdown, prose and code blocks.
            ColumnLayout {
                id: content
                visible: !bubble.isUser
                width: parent.width
                spacing: 10
                // The tools the model called before answering, each with what it returned.
                Repeater {
                    model: bubble.isUser ? [] : bubble.bubbleToolCalls
                    delegate: Rectangle {
                        required property var modelData
                        objectName: "toolCall"
                        Layout.fillWidth: true
                        implicitHeight: callText.implicitHeight + 12 + (beforeText.visible ? beforeText.implicitHeight + 6 : 0)
                        radius: 8
                        color: Theme.surface
                        border.color: Theme.border
                        // What the model wrote before the calls ("Let me work that out."), when anything.
                        TextEdit {
                            id: beforeText
                            visible: (modelData.before || "").length > 0
                            x: 10; y: 6
                            width: parent.width - 20
                            readOnly: true
                            selectByMouse: true
                            wrapMode: TextEdit.Wrap
                            textFormat: TextEdit.PlainText
                            font.pixelSize: Theme.small
                            font.italic: true
                            color: Theme.textDim
                            selectionColor: Theme.accent
                            text: modelData.before || ""
                        }
                        TextEdit {
                            id: callText
                            x: 10; y: beforeText.visible ? beforeText.y + beforeText.implicitHeight + 6 : 6
                            width: parent.width - 20
                            readOnly: true
                            selectByMouse: true
                            wrapMode: TextEdit.Wrap
                            textFormat: TextEdit.PlainText
                            font.family: Theme.mono
                            font.pixelSize: Theme.small
                            color: Theme.textDim
                            selectionColor: Theme.accent
                            text: "⚙ " + modelData.name + " " + modelData.arguments + "  →  " + modelData.result
                            Accessible.name: "Tool " + modelData.name + " returned " + modelData.result
                        }
                    }
                }
                // One item per piece: as an answer streams only the last
                // piece's text changes, and pieces are added, never rebuilt.
                Repeater {
                    model: bubble.isUser ? null : bubble.segments
                    delegate: Loader {
                        id: piece
                        required property string kind
                        required property string text
                        required property string lang
                        required property bool joined
                        Layout.fillWidth: true
                        // A long paragraph cut at a line break reads as one.
                        Layout.topMargin: joined ? -content.spacing : 0
                        sourceComponent: kind === "code" ? codeComponent : proseComponent
                        Component {
                            id: proseComponent
                            TextEdit {
                                id: proseText
                                objectName: "proseText"
                                text: piece.text
                                textFormat: TextEdit.MarkdownText
                                readOnly: true
                                selectByMouse: true
                                wrapMode: TextEdit.Wrap
                                color: Theme.text
                                font.pixelSize: Theme.fontSize
                                selectionColor: Theme.accent
                                onLinkActivated: (link) => Qt.openUrlExternally(link)
                                MarkdownStyler { document: proseText.textDocument }  // tables and quotes
                            }
                        }
                        Component {
                            id: codeComponent
                            CodeBlock { code: piece.text; language: piece.lang }
                        }
                    }
                }
                // The reasoning (gpt-oss's analysis channel, <think>): one line
                // under the answer, expanded on click.
                ColumnLayout {
                    id: reasoningBox
                    objectName: "reasoningBox"
                    visible: bubble.bubbleReasoning.length > 0
                    Layout.fillWidth: true
                    spacing: 4
                    AbstractButton {
                        id: reasoningToggle
                        objectName: "reasoningToggle"
                        Layout.fillWidth: true
                        implicitHeight: reasoningHeader.implicitHeight + 6
                        onClicked: bubble.reasoningShown = !bubble.reasoningShown
                        Accessible.name: bubble.reasoningShown ? "Hide the reasoning" : "Show the reasoning"
                        contentItem: Label {
                            id: reasoningHeader
                            text: (bubble.reasoningShown ? "▾ " : "▸ ")
                                  + (bubble.bubbleReasoningOpen ? "Reasoning…" : "Reasoning")
                                  + "  ·  " + bubble.bubbleReasoningWords + " words"
                            color: Theme.textDim
                            font.pixelSize: Theme.small
                        }
                    }
                    Rectangle {
                        visible: bubble.reasoningShown
                        Layout.fillWidth: true
                        implicitHeight: reasoningText.implicitHeight + 16
                        radius: 8
                        color: Theme.surface
                        border.color: Theme.border
                        TextEdit {
                            id: reasoningText
                            objectName: "reasoningText"
                            x: 10; y: 8
                            width: parent.width - 20
                            text: bubble.reasoningShown ? bubble.bubbleReasoning.trim() : ""
                            readOnly: true
                            selectByMouse: true
                            wrapMode: TextEdit.Wrap
                            color: Theme.textDim
                            font.pixelSize: Theme.small
                            selectionColor: Theme.accent
                        }
                    }
                }
                // Until the first words: blinks by a timer (an animation would
                // redraw the window at the display's rate, taking CPU from the
                // engine while it reads the prompt).
                Label {
                    id: thinking
                    objectName: "thinkingLabel"
                    visible: bubble.bubbleStreaming && !bubble.hasAnswer && bubble.bubbleReasoning.length === 0
                    // A long prompt: how far the engine has read it (it takes seconds on a CPU).
                    text: bubble.bubblePromptTotal > 0
                          ? "Reading the prompt · " + bubble.bubblePromptDone.toLocaleString(Qt.locale(), "f", 0) + " of "
                            + bubble.bubblePromptTotal.toLocaleString(Qt.locale(), "f", 0) + " tokens"
                          : "Thinking…"
                    color: Theme.textFaint
                    font.italic: true
                    Timer {
                        running: thinking.visible
                        repeat: true
                        interval: 600
                        onTriggered: thinking.opacity = thinking.opacity > 0.5 ? 0.35 : 1
                        onRunningChanged: thinking.opacity = 1
                    }
                }
                ProgressBar {
                    objectName: "promptProgress"
                    visible: thinking.visible && bubble.bubblePromptTotal > 0
                    Layout.preferredWidth: 240
                    from: 0
                    to: 1
                    value: bubble.bubblePromptTotal > 0 ? bubble.bubblePromptDone / bubble.bubblePromptTotal : 0
                }
            }

            // Edit and resend.
            ColumnLayout {
                id: editor
                visible: bubble.editing
                x: 10; y: 10
                width: card.width - 20
                spacing: 8
                TextArea {
                    id: editArea
                    Layout.fillWidth: true
                    wrapMode: TextEdit.Wrap
                    selectByMouse: true
                    background: Rectangle { color: Theme.surfaceAlt; radius: 6; border.color: Theme.accent }
                    Keys.onEscapePressed: bubble.editing = false
                }
                RowLayout {
                    Layout.alignment: Qt.AlignRight
                    Label {
                        text: "Later messages will be replaced."
                        color: Theme.textDim
                        font.pixelSize: Theme.small
                    }
                    StrataButton { text: "Cancel"; flat: true; onClicked: bubble.editing = false }
                    StrataButton {
                        text: "Save and resend"
                        highlighted: true
                        enabled: editArea.text.trim().length > 0
                        onClicked: { bubble.editing = false; bubble.editSubmitted(bubble.bubbleId, editArea.text) }
                    }
                }
            }
        }

        // Figures and actions. In a narrow chat the figures give way (elided,
        // whole on hover), never the buttons.
        RowLayout {
            objectName: "actionsRow"
            Layout.alignment: bubble.isUser ? Qt.AlignRight : Qt.AlignLeft
            Layout.fillWidth: !bubble.isUser
            Layout.maximumWidth: bubble.isUser ? -1 : implicitWidth
            spacing: 6
            visible: !bubble.editing && !(bubble.bubbleStreaming && !bubble.isUser)
            Rectangle {
                objectName: "finishBadge"
                visible: !bubble.isUser && badge.text.length > 0
                implicitWidth: badge.implicitWidth + 12
                implicitHeight: badge.implicitHeight + 4
                radius: 4
                color: bubble.bubbleFinish === "error" ? Theme.dangerSoft : Theme.raised
                // What the badge means and what to do about it, on hover.
                readonly property string explanation:
                    bubble.bubbleFinish === "cancelled" ? "You stopped this answer. Regenerate writes a new one."
                    : bubble.bubbleFinish === "error" ? "The engine failed while answering; the log has the details."
                    : bubble.bubbleFinish === "length" ? "The answer reached the token limit (Settings → Max tokens). Regenerate, or raise the limit."
                    : bubble.bubbleFinish === "context" ? "The conversation filled the model's context, so the answer stopped. Start a new conversation, or raise the context size in Settings (on the next load)."
                    : "This answer was cut off when the app closed."
                ToolTip.visible: badgeMouse.containsMouse
                ToolTip.delay: 300
                ToolTip.text: explanation
                MouseArea { id: badgeMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
                Label {
                    id: badge
                    anchors.centerIn: parent
                    font.pixelSize: Theme.tiny
                    color: bubble.bubbleFinish === "error" ? Theme.danger : Theme.warning
                    text: bubble.bubbleFinish === "cancelled" ? "stopped"
                        : bubble.bubbleFinish === "error" ? "failed"
                        : bubble.bubbleFinish === "length" ? "cut at the token limit"
                        : bubble.bubbleFinish === "context" ? "context full"
                        : (bubble.bubblePartial && !bubble.bubbleStreaming) ? "interrupted" : ""
                }
            }
            Label {
                objectName: "statsLabel"
                visible: !bubble.isUser && bubble.bubbleStats.length > 0
                Layout.fillWidth: true
                Layout.minimumWidth: 40
                Layout.maximumWidth: implicitWidth
                elide: Text.ElideRight
                text: bubble.bubbleStats
                color: Theme.textFaint
                font.pixelSize: Theme.small
                ToolTip.visible: truncated && statsMouse.containsMouse
                ToolTip.text: bubble.bubbleStats
                MouseArea { id: statsMouse; anchors.fill: parent; hoverEnabled: true; acceptedButtons: Qt.NoButton }
            }
            ToolButton {
                id: copyMessage
                objectName: "copyMessageButton"
                property bool copied: false
                text: copied ? "Copied ✓" : "Copy"
                flat: true
                font.pixelSize: Theme.small
                visible: bubble.isUser ? bubble.bubbleContent.length > 0 : bubble.hasAnswer
                onClicked: {
                    TextUtil.copyToClipboard(bubble.isUser ? bubble.bubbleContent : bubble.answerText())
                    copied = true
                    copiedTimer.restart()
                }
                Timer { id: copiedTimer; interval: 1500; onTriggered: copyMessage.copied = false }
            }
            ToolButton {
                text: "Edit"
                flat: true
                font.pixelSize: Theme.small
                visible: bubble.isUser
                enabled: bubble.canAct
                onClicked: {
                    editArea.text = bubble.bubbleContent
                    bubble.editing = true
                    editArea.forceActiveFocus()
                }
            }
            // ‹ 2/3 ›: the answer's versions, kept by Regenerate.
            Row {
                objectName: "versionSwitch"
                visible: !bubble.isUser && bubble.bubbleVersionCount > 1
                spacing: 0
                ToolButton {
                    objectName: "previousVersion"
                    text: "‹"
                    flat: true
                    enabled: bubble.canAct && bubble.bubbleVersion > 1
                    onClicked: bubble.versionRequested(-1)
                    ToolTip.visible: hovered
                    ToolTip.text: "The previous version of this answer"
                }
                Label {
                    objectName: "versionLabel"
                    anchors.verticalCenter: parent.verticalCenter
                    text: bubble.bubbleVersion + "/" + bubble.bubbleVersionCount
                    color: Theme.textDim
                    font.pixelSize: Theme.small
                }
                ToolButton {
                    objectName: "nextVersion"
                    text: "›"
                    flat: true
                    enabled: bubble.canAct && bubble.bubbleVersion < bubble.bubbleVersionCount
                    onClicked: bubble.versionRequested(1)
                    ToolTip.visible: hovered
                    ToolTip.text: "The next version of this answer"
                }
            }
            ToolButton {
                text: "Regenerate"
                flat: true
                font.pixelSize: Theme.small
                visible: !bubble.isUser && bubble.bubbleIsLast
                enabled: bubble.canAct
                onClicked: bubble.regenerateRequested()
            }
        }
    }
}
