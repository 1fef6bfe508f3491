import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// The start screen says what the demo model is (it continues King James
// Bible text; it is not an assistant) while the demo model is loaded, and
// only then.
Item {
    id: root
    width: 900
    height: 600

    ListModel { id: noMessages }
    QtObject {
        id: chat
        signal streamed()
        signal currentConversationChanged()
        signal conversationOpened()
        property string modelState: "ready"
        property var modelInfo: ({ name: "strata-demo-moe", context: 2048, templateFallback: false })
        property var messages: noMessages
        property var currentConversationId: 0
        property string currentTitle: ""
        property string systemPrompt: ""
        property string conversationModel: ""
        property bool generating: false
        property bool anyGenerating: false
        property var generatingConversations: []
        property bool speculative: false
        property bool remote: false
        property string lastError: ""
        property string notice: ""
        property string demoModelPath: "/usr/share/strata/models/strata-demo-moe.gguf"
        property real loadFraction: 0
        property string loadStage: ""
        property string modelError: ""
        property string modelPath: "/usr/share/strata/models/strata-demo-moe.gguf"
        function clearError() { lastError = "" }
        function clearNotice() { notice = "" }
        function send(text) { return true }
        function stop() {}
        function setSystemPrompt(t) {}
        function loadModel(p) {}
        function cancelModelLoad() {}
    }

    ChatPane { id: pane; anchors.fill: parent }

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
        name: "StartScreen"
        when: windowShown

        function test_the_demo_model_is_said_to_continue_bible_text() {
            const note = find(pane, "demoModelNote")
            verify(note.visible)
            verify(note.text.includes("King James Bible"), note.text)
            verify(note.text.includes("not an assistant"), note.text)
            // Another model, a server, or still loading: no such line.
            chat.modelPath = "/models/Qwen3-30B-A3B-Q4_K_M.gguf"
            verify(!note.visible)
            chat.modelPath = chat.demoModelPath
            chat.remote = true
            verify(!note.visible)
            chat.remote = false
            chat.modelState = "loading"
            verify(!note.visible)
            chat.modelState = "ready"
            verify(note.visible)
        }
    }
}
