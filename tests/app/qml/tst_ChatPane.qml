import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// The chat follows the newest line while an answer streams (unless the user
// scrolled up), and a notice under the last answer (such as "the oldest
// messages did not fit the context") never covers its last lines.
Item {
    id: root
    width: 700
    height: 520

    QtObject {
        id: chat
        signal streamed()
        signal currentConversationChanged()
        signal conversationOpened()
        property string modelState: "ready"
        property var modelInfo: ({ name: "demo", context: 2048, templateFallback: false })
        property var messages: messagesFixture.model
        property var currentConversationId: 1
        property string currentTitle: "A long chat"
        property string systemPrompt: ""
        property string conversationModel: ""
        property bool generating: false
        property bool anyGenerating: false
        property var generatingConversations: []
        property bool speculative: false
        property string lastError: ""
        property string notice: ""
        property string demoModelPath: ""
        property real loadFraction: 0
        property string loadStage: ""
        property string modelError: ""
        property string modelPath: ""
        function clearError() { lastError = "" }
        function clearNotice() { notice = "" }
        function send(text) { return true }
        function stop() {}
        function regenerate() {}
        function showAnswerVersion(d) { return false }
        function editAndResend(id, text) {}
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
        name: "ChatPane"
        when: windowShown

        // A new conversation's first answer streams in as the app sends it:
        // the question, an empty answer ("Thinking…"), then text at each
        // update, taller than the view after a few. Each update is in view
        // as it comes, not only when the answer ends.
        function test_a_first_answer_is_followed_as_it_streams() {
            messagesFixture.clear()
            const list = find(pane, "messageList")
            messagesFixture.startExchange("Tell me a long story.")
            chat.streamed()
            tryVerify(() => list.count === 2, 3000)
            // The view only ever moves down while it follows: an update that
            // rebuilt the answer's items collapsed it for a moment, and the
            // view jumped to the top.
            let lastY = list.contentY, jumps = []
            const watch = () => {
                if (list.contentY < lastY - 1) jumps.push(Math.round(lastY) + " → " + Math.round(list.contentY))
                lastY = list.contentY
            }
            list.contentYChanged.connect(watch)
            for (let i = 0; i < 60; ++i) {
                messagesFixture.appendToLast((i % 7 === 6 ? "\n\n" : " ") + "Line " + i + " of the story goes on and on, word after word.")
                chat.streamed()
                wait(40)
                if (list.contentHeight > list.height)
                    verify(list.atYEnd, "update " + i + ": contentY " + list.contentY + ", end " + (list.originY + list.contentHeight - list.height))
            }
            list.contentYChanged.disconnect(watch)
            compare(jumps.join(", "), "", "the view moved back up while following")
            verify(list.contentHeight > 2 * list.height, "the answer outgrew the view")
        }

        function test_follows_the_stream_and_the_notice_covers_nothing() {
            messagesFixture.fill(6)
            const list = find(pane, "messageList")
            tryVerify(() => list.count === 12, 3000)
            tryVerify(() => list.atYEnd, 3000, "opens at the newest message")
            // Streaming: the last answer grows, the view keeps its end in sight.
            for (let i = 0; i < 8; ++i) {
                messagesFixture.appendToLast(" And more words stream in, line after line, for a while longer.")
                chat.streamed()
            }
            tryVerify(() => list.atYEnd, 3000, "follows the stream")
            // Each update is followed as it comes, not only once the answer ends:
            // prose, then a code block that grows line by line, then prose again.
            const chunks = ["\n\nNow some code:\n\n```python\n"]
            for (let i = 0; i < 12; ++i) chunks.push("print(" + i + ")  # a line of the listing\n")
            chunks.push("```\n\nAnd a last paragraph, long enough to wrap in a chat of this width, closing the answer.")
            for (let i = 0; i < chunks.length; ++i) {
                messagesFixture.appendToLast(chunks[i])
                chat.streamed()
                wait(40)  // about one view update (ChatController::kFlushMs)
                verify(list.atYEnd, "in view after chunk " + i + ": contentY " + list.contentY + " of " + (list.contentHeight - list.height))
            }
            // A notice appears: the list leaves room for it.
            const toast = find(pane, "toast")
            chat.notice = "The oldest 2 message(s) did not fit the model's context (2048 tokens) and were left out of the prompt."
            tryVerify(() => toast.visible && list.atYEnd)
            const last = list.itemAtIndex(list.count - 1)
            verify(last !== null)
            const lastBottom = last.mapToItem(pane, 0, last.height).y
            const toastTop = toast.mapToItem(pane, 0, 0).y
            verify(lastBottom <= toastTop, "last answer ends at " + lastBottom + ", the notice starts at " + toastTop)
            chat.notice = ""
        }
    }
}
