import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// After New chat (the button or Ctrl+N) or a switch to another conversation
// the message box has the keyboard focus: what the user types next lands in
// it (it went to the button or the list, and was lost).
Item {
    id: root
    width: 700
    height: 300

    QtObject {
        id: chat
        signal conversationOpened()
        property string modelState: "ready"
        property var modelInfo: ({ name: "demo" })
        property bool generating: false
        property bool anyGenerating: false
        property var generatingConversations: []
        property bool speculative: false
        function send(text) { return true }
        function stop() {}
    }

    TextField { id: elsewhere; objectName: "elsewhere"; width: 200 }
    Composer { id: composer; y: 100; width: 600 }

    function find(item, name) {
        if (!item) return null
        if (item.objectName === name) return item
        const kids = item.children || []
        for (let i = 0; i < kids.length; ++i) {
            const f = find(kids[i], name)
            if (f) return f
        }
        return null
    }

    TestCase {
        name: "Composer"
        when: windowShown

        function test_opening_a_conversation_focuses_the_message_box() {
            const input = find(composer, "composerInput")
            elsewhere.forceActiveFocus()
            verify(elsewhere.activeFocus)
            verify(!input.activeFocus)
            chat.conversationOpened()
            verify(input.activeFocus)
            keyClick(Qt.Key_H)
            keyClick(Qt.Key_I)
            compare(input.text, "hi")
            compare(elsewhere.text, "")
        }
    }
}
