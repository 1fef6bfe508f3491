import QtQuick
import QtTest
import Strata
import "../../../ui"

// The message bubble splits an answer into prose and code blocks, each code
// block in monospace with its own Copy button.
Item {
    width: 800
    height: 700

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

    // A narrow chat (960 px window, panels open): the actions stay inside.
    MessageBubble {
        id: narrow
        width: 340
        y: 500
        bubbleRole: "assistant"
        bubbleContent: "A short answer."
        bubbleStats: "128 tokens · 37.1 tok/s · first token 120 ms · 96 prompt tokens, 64 from the cache · 2.4 s"
        bubbleFinish: "length"
        bubbleIsLast: true
        canAct: true
    }

    // An answer whose long prompt is still being read.
    MessageBubble {
        id: reading
        width: 800
        y: 650
        bubbleRole: "assistant"
        bubbleStreaming: true
    }

    // A reasoning model's answer (gpt-oss's analysis channel): the reasoning collapsed.
    MessageBubble {
        id: reasoned
        width: 800
        y: 600
        bubbleRole: "assistant"
        bubbleContent: "Paris."
        bubbleReasoning: "The user asks for the capital of France. It is Paris."
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

        function test_reasoning_is_collapsed_until_asked() {
            const box = findAll(reasoned, "reasoningBox", [])[0]
            verify(box.visible)
            const text = findAll(reasoned, "reasoningText", [])[0]
            verify(!text.visible)
            const toggle = findAll(reasoned, "reasoningToggle", [])[0]
            verify(toggle.contentItem.text.indexOf("Reasoning") >= 0)
            mouseClick(toggle)
            tryVerify(() => text.visible)
            compare(text.text, "The user asks for the capital of France. It is Paris.")
            mouseClick(toggle)
            tryVerify(() => !text.visible)
            // No reasoning, no box.
            verify(!findAll(bubble, "reasoningBox", [])[0].visible)
        }

        function test_code_blocks() {
            compare(bubble.codeBlockCount, 2)
            compare(bubble.segments.count, 5)
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

        // Copy says it copied (and goes back to "Copy" a moment later).
        function test_copy_gives_feedback() {
            bubble.bubbleStreaming = false
            const copy = findAll(bubble, "copyMessageButton", [])[0]
            verify(copy.visible)
            compare(copy.text, "Copy")
            mouseClick(copy)
            compare(copy.text, "Copied ✓")
            compare(TextUtil.clipboardText(), bubble.bubbleContent)
            tryCompare(copy, "text", "Copy", 3000)
        }

        // The finish badge explains itself on hover ("context full" said nothing).
        function test_finish_badge_explains() {
            bubble.bubbleStreaming = false
            bubble.bubbleFinish = "context"
            const badge = findAll(bubble, "finishBadge", [])[0]
            verify(badge.visible)
            verify(badge.explanation.indexOf("context") >= 0 && badge.explanation.indexOf("new conversation") >= 0, badge.explanation)
            bubble.bubbleFinish = "length"
            verify(badge.explanation.indexOf("token limit") >= 0)
            bubble.bubbleFinish = ""
            verify(!badge.visible)
        }

        function test_narrow_bubble_keeps_its_buttons() {
            const copy = findAll(narrow, "copyMessageButton", [])[0]
            tryVerify(() => copy.width > 0)
            const p = copy.mapToItem(narrow, 0, 0)
            verify(p.x >= 0 && p.x + copy.width <= narrow.width + 0.5, "Copy at " + p.x + ".." + (p.x + copy.width))
            const stats = findAll(narrow, "statsLabel", [])[0]
            verify(stats.truncated, "the figures give way")
        }

        // While a long prompt is read, the answer says how far (not just "Thinking…").
        function test_prompt_reading_progress() {
            reading.bubblePromptDone = 1280
            reading.bubblePromptTotal = 5000
            const label = findAll(reading, "thinkingLabel", [])[0]
            verify(label.visible)
            verify(label.text.indexOf("Reading the prompt") === 0, label.text)
            verify(label.text.indexOf("of") > 0 && label.text.indexOf("tokens") > 0, label.text)
            const bar = findAll(reading, "promptProgress", [])[0]
            verify(bar.visible)
            fuzzyCompare(bar.value, 1280 / 5000, 1e-6)
            reading.bubblePromptTotal = 0
            compare(label.text, "Thinking…")
            verify(!bar.visible)
        }

        function test_user_text_is_plain() {
            compare(findAll(user, "codeText", []).length, 0)
            verify(user.implicitHeight > 30)
        }
    }
}
