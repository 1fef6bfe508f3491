import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// A fenced code block: its language and a Copy button above monospace text,
// syntax-coloured by a CodeHighlighter (C++). While an answer streams the
// code grows: the new text is appended, so only the new lines are coloured.
Rectangle {
    id: block
    property string code: ""
    property string language: ""
    property bool copied: false
    implicitHeight: header.height + codeText.implicitHeight + 20
    radius: 8
    color: Theme.codeBg
    border.color: Theme.border

    Rectangle {
        id: header
        width: parent.width
        height: 30
        radius: 8
        color: Theme.codeHeader
        Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 8; color: Theme.codeHeader }
        Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
        Label {
            anchors.left: parent.left
            anchors.leftMargin: 12
            anchors.verticalCenter: parent.verticalCenter
            text: block.language.length > 0 ? block.language : "code"
            color: Theme.textDim
            font.pixelSize: Theme.tiny
            font.family: Theme.mono
        }
        ToolButton {
            objectName: "copyButton"
            anchors.right: parent.right
            anchors.rightMargin: 4
            anchors.verticalCenter: parent.verticalCenter
            height: 26
            flat: true
            font.pixelSize: Theme.tiny
            text: block.copied ? "Copied" : "Copy"
            onClicked: {
                TextUtil.copyToClipboard(block.code)
                block.copied = true
                copiedTimer.restart()
            }
            Timer { id: copiedTimer; interval: 1500; onTriggered: block.copied = false }
        }
    }
    TextEdit {
        id: codeText
        objectName: "codeText"
        anchors.top: header.bottom
        anchors.left: parent.left
        anchors.right: parent.right
        anchors.margins: 10
        textFormat: TextEdit.PlainText
        readOnly: true
        selectByMouse: true
        wrapMode: TextEdit.WrapAnywhere
        font.family: Theme.mono
        font.pixelSize: 13
        color: "#d6deeb"
        selectionColor: Theme.accent
        Component.onCompleted: if (text !== block.code) text = block.code
    }
    CodeHighlighter {
        id: highlighter
        objectName: "highlighter"
        document: codeText.textDocument
        language: block.language
    }
    onCodeChanged: {
        const shown = codeText.text
        if (code.length > shown.length && code.startsWith(shown)) codeText.insert(codeText.length, code.slice(shown.length))
        else if (code !== shown) codeText.text = code
    }
}
