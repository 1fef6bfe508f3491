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
    property var bubbleSegments: TextUtil.segments(bubbleContent)
    property bool bubbleStreaming: false
    property bool bubblePartial: false
    property string bubbleStats: ""
    property string bubbleFinish: ""
    property bool bubbleIsLast: false
    property bool canAct: true
    property real maxContentWidth: 820
    property bool editing: false
    readonly property bool isUser: bubbleRole === "user"
    readonly property int codeBlockCount: {
        let n = 0
        for (let i = 0; i < bubbleSegments.length; ++i) if (bubbleSegments[i].kind === "code") ++n
        return n
    }
    signal regenerateRequested()
    signal editSubmitted(var id, string text)

    implicitHeight: column.implicitHeight + 12
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
                Repeater {
                    model: bubble.isUser ? [] : bubble.bubbleSegments
                    delegate: Loader {
                        required property var modelData
                        Layout.fillWidth: true
                        sourceComponent: modelData.kind === "code" ? codeComponent : proseComponent
                        Component {
                            id: proseComponent
                            TextEdit {
                                text: modelData.text
                                textFormat: TextEdit.MarkdownText
                                readOnly: true
                                selectByMouse: true
                                wrapMode: TextEdit.Wrap
                                color: Theme.text
                                font.pixelSize: Theme.fontSize
                                selectionColor: Theme.accent
                                onLinkActivated: (link) => Qt.openUrlExternally(link)
                            }
                        }
                        Component {
                            id: codeComponent
                            CodeBlock { code: modelData.text; language: modelData.lang }
                        }
                    }
                }
                Label {
                    visible: bubble.bubbleStreaming && bubble.bubbleContent.length === 0
                    text: "Thinking…"
                    color: Theme.textFaint
                    font.italic: true
                    SequentialAnimation on opacity {
                        running: bubble.bubbleStreaming
                        loops: Animation.Infinite
                        NumberAnimation { to: 0.35; duration: 600 }
                        NumberAnimation { to: 1; duration: 600 }
                    }
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

        // Figures and actions.
        RowLayout {
            Layout.alignment: bubble.isUser ? Qt.AlignRight : Qt.AlignLeft
            spacing: 6
            visible: !bubble.editing && !(bubble.bubbleStreaming && !bubble.isUser)
            Rectangle {
                visible: !bubble.isUser && badge.text.length > 0
                implicitWidth: badge.implicitWidth + 12
                implicitHeight: badge.implicitHeight + 4
                radius: 4
                color: bubble.bubbleFinish === "error" ? Theme.dangerSoft : Theme.raised
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
                visible: !bubble.isUser && bubble.bubbleStats.length > 0
                text: bubble.bubbleStats
                color: Theme.textFaint
                font.pixelSize: Theme.small
            }
            ToolButton {
                text: "Copy"
                flat: true
                font.pixelSize: Theme.small
                visible: bubble.bubbleContent.length > 0
                onClicked: TextUtil.copyToClipboard(bubble.bubbleContent)
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
