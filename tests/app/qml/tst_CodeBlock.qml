import QtQuick
import QtTest
import Strata
import "../../../ui"

// A code block colours its code by language (CodeHighlighter), and keeps
// colouring it while it grows as an answer streams.
Item {
    width: 600
    height: 400

    CodeBlock {
        id: block
        width: 600
        language: "python"
        code: "def f():\n    return 1  # one"
    }
    CodeBlock {
        id: streaming
        y: 100
        width: 600
        language: "py"
        code: "def f():"
    }
    CodeBlock {
        id: plain
        y: 200
        width: 600
        code: "just \"text\" 42"
    }

    function find(item, name) {
        if (item.objectName === name) return item
        for (let i = 0; i < item.children.length; ++i) {
            const r = find(item.children[i], name)
            if (r) return r
        }
        return null
    }
    // The highlighter is not an Item: it is a child object of the block.
    function highlighterOf(b) {
        for (let i = 0; i < b.resources.length; ++i)
            if (b.resources[i].objectName === "highlighter") return b.resources[i]
        return null
    }

    TestCase {
        name: "CodeBlock"
        when: windowShown

        function test_colours_by_language() {
            const h = highlighterOf(block)
            verify(h !== null)
            compare(h.resolvedLanguage, "python")
            const text = find(block, "codeText")
            compare(text.text, block.code)
            tryVerify(() => h.colorAt(0) === "#c792ea")  // def (the first colouring is posted)
            compare(h.colorAt(block.code.indexOf("# one")), "#80909a")              // comment
            compare(h.colorAt(block.code.indexOf("1  #")), "#f78c6c")               // number

            // Unknown language: strings and numbers still, no keywords.
            const g = highlighterOf(plain)
            compare(g.resolvedLanguage, "")
            tryVerify(() => g.colorAt(plain.code.indexOf("\"text\"")) === "#ecc48d")
            compare(g.colorAt(0), "")
        }

        function test_streaming_appends_and_colours_new_lines() {
            const h = highlighterOf(streaming)
            const text = find(streaming, "codeText")
            tryVerify(() => h.colorAt(0) === "#c792ea")
            streaming.code = streaming.code + "\nprint(None)"
            compare(text.text, streaming.code)
            compare(h.colorAt(streaming.code.indexOf("None")), "#ff5874")
            streaming.code = streaming.code + "\n\"\"\"open"
            compare(text.text, streaming.code)
            streaming.code = streaming.code + "\nstill a string"
            compare(h.colorAt(streaming.code.indexOf("still")), "#ecc48d")
            // Not a continuation (a regenerated answer): replaced whole.
            streaming.code = "x = 2"
            compare(text.text, "x = 2")
            compare(h.colorAt(4), "#f78c6c")
            // Another language: coloured again.
            streaming.language = "js"
            compare(h.resolvedLanguage, "javascript")
        }
    }
}
