import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Strata

// The conversation list: new chat, search, the list (newest first) with
// rename and delete (confirmed).
Rectangle {
    id: pane
    color: Theme.surface

    ColumnLayout {
        anchors.fill: parent
        anchors.margins: 12
        spacing: 10

        StrataButton {
            Layout.fillWidth: true
            text: "+  New chat"
            implicitHeight: 38
            highlighted: true
            onClicked: chat.newConversation()
        }
        StrataTextField {
            id: searchField
            Layout.fillWidth: true
            placeholderText: "Search chats"
            selectByMouse: true
            text: chat.searchText
            onTextEdited: searchTimer.restart()
            Timer { id: searchTimer; interval: 200; onTriggered: chat.search(searchField.text) }
            rightPadding: clearSearch.visible ? clearSearch.width + 8 : 8
            ToolButton {
                id: clearSearch
                visible: searchField.text.length > 0
                anchors.right: parent.right
                anchors.verticalCenter: parent.verticalCenter
                text: "×"
                flat: true
                onClicked: { searchField.text = ""; chat.search("") }
            }
        }

        ListView {
            id: list
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            spacing: 2
            model: chat.conversations
            ScrollBar.vertical: ScrollBar {}

            delegate: ItemDelegate {
                id: row
                required property int index
                required property var conversationId
                required property string title
                required property string updatedText
                required property var messageCount
                required property bool generating
                property bool editing: false
                width: ListView.view.width
                height: 48
                highlighted: conversationId === chat.currentConversationId
                onClicked: chat.selectConversation(conversationId)
                background: Rectangle {
                    radius: 6
                    color: row.highlighted ? Theme.accentSoft : row.hovered ? Theme.raised : "transparent"
                }
                contentItem: RowLayout {
                    spacing: 6
                    ColumnLayout {
                        Layout.fillWidth: true
                        spacing: 2
                        visible: !row.editing
                        Label {
                            Layout.fillWidth: true
                            text: row.title
                            elide: Text.ElideRight
                            color: Theme.text
                            font.weight: row.highlighted ? Font.DemiBold : Font.Normal
                        }
                        RowLayout {
                            Layout.fillWidth: true
                            spacing: 6
                            // An answer is being generated in this conversation: a dot
                            // that blinks (a timer, two frames a second; an animation
                            // would redraw the window at the display's rate meanwhile,
                            // taking CPU from the engine).
                            Rectangle {
                                objectName: "generatingDot"
                                visible: row.generating
                                implicitWidth: 7; implicitHeight: 7; radius: 3.5
                                color: Theme.success
                                Timer {
                                    running: row.generating
                                    repeat: true
                                    interval: 600
                                    onTriggered: parent.opacity = parent.opacity > 0.5 ? 0.3 : 1
                                    onRunningChanged: parent.opacity = 1
                                }
                            }
                            Label {
                                Layout.fillWidth: true
                                text: row.generating ? "generating…"
                                      : row.updatedText + " · " + row.messageCount + (row.messageCount === 1 ? " message" : " messages")
                                color: row.generating ? Theme.success : Theme.textFaint
                                font.pixelSize: Theme.tiny
                                elide: Text.ElideRight
                            }
                            ToolButton {
                                visible: row.generating
                                text: "Stop"
                                font.pixelSize: Theme.tiny
                                implicitHeight: 18
                                padding: 2
                                onClicked: chat.stopConversation(row.conversationId)
                                contentItem: Text { text: "Stop"; color: Theme.danger; font.pixelSize: Theme.tiny }
                                background: null
                            }
                        }
                    }
                    StrataTextField {
                        id: renameField
                        Layout.fillWidth: true
                        visible: row.editing
                        selectByMouse: true
                        onAccepted: { chat.renameConversation(row.conversationId, text); row.editing = false }
                        Keys.onEscapePressed: row.editing = false
                        onActiveFocusChanged: if (!activeFocus && row.editing) row.editing = false
                    }
                    ToolButton {
                        text: "⋯"
                        visible: !row.editing && (row.hovered || row.highlighted || rowMenu.visible)
                        flat: true
                        implicitWidth: 28
                        onClicked: rowMenu.popup()
                        ToolTip.visible: hovered
                        ToolTip.text: "Rename or delete"
                        Menu {
                            id: rowMenu
                            MenuItem {
                                text: "Rename"
                                onTriggered: {
                                    row.editing = true
                                    renameField.text = row.title
                                    renameField.selectAll()
                                    renameField.forceActiveFocus()
                                }
                            }
                            MenuItem {
                                text: "Delete…"
                                onTriggered: {
                                    deleteDialog.conversationId = row.conversationId
                                    deleteDialog.conversationTitle = row.title
                                    deleteDialog.count = row.messageCount
                                    deleteDialog.open()
                                }
                            }
                        }
                    }
                }
            }

            Label {
                anchors.centerIn: parent
                width: parent.width - 20
                visible: list.count === 0
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.Wrap
                color: Theme.textFaint
                text: chat.searchText.length > 0 ? "No chats match “" + chat.searchText + "”."
                                                 : "No conversations yet.\nYour chats are kept here."
            }
        }
    }

    DeleteConversationDialog { id: deleteDialog }
}
