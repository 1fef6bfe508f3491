import QtQuick
import QtTest
import "../../../ui"

// The message bubble splits an answer into prose and code blocks, each code
// block in monospace with its own Copy button.
Item {
    width: 800
    height: 600

    MessageBubble {
        id: bubble
        width: 800
        bubbleRole: "assistant"
        bubbleContent: "Here is a loop:\n\n```cpp\nfor (int i = 0; i < 3; ++i) {}\n```\n\nand a shell line:\n\n```\nls -l\n```\nDone."
    }
    MessageBubble {
        id: user
        width: 800
        y: 400
        bubbleRole: "user"
        bubbleContent: "```\nnot split for the user\n```"
    }

    function findAll(item, name, out) {
        for (let i = 0; i < item.children.length; ++i) {
            const c = item.children[i]
            if (c.objectName === name) out.push(c)
            findAll(c, name, out)
        }
        return out
    }

    TestCase {
        name: "MessageBubble"
        when: windowShown

        function test_code_blocks() {
            compare(bubble.codeBlockCount, 2)
            compare(bubble.bubbleSegments.length, 5)
            tryVerify(() => findAll(bubble, "codeText", []).length === 2)
            const code = findAll(bubble, "codeText", [])
            compare(code[0].text, "for (int i = 0; i < 3; ++i) {}")
            compare(code[0].font.family, "DejaVu Sans Mono")
            compare(code[1].text, "ls -l")
            compare(findAll(bubble, "copyButton", []).length, 2)
        }

        function test_streaming_update() {
            bubble.bubbleContent = "Start\n```python\nprint(1)"
            tryVerify(() => findAll(bubble, "codeText", []).length === 1)
            compare(findAll(bubble, "codeText", [])[0].text, "print(1)")
        }

        function test_user_text_is_plain() {
            compare(findAll(user, "codeText", []).length, 0)
            verify(user.implicitHeight > 30)
        }
    }
}
