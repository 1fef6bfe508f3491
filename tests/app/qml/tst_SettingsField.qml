import QtQuick
import QtTest
import "../../../ui"

// A settings field submits what was typed and shows the reason a value was
// refused beside the field.
Item {
    width: 600
    height: 300

    SettingsField {
        id: field
        width: 600
        key: "top_p"
        label: "Top-p"
        kind: "real"
        text: "0.95"
        applies: "next message"
        help: "Nucleus sampling."
        property var lastSubmitted: undefined
        onSubmitted: (v) => {
            lastSubmitted = v
            // What SettingsModel does with an out-of-range value.
            error = Number(v) > 1 ? "top_p " + v + " is out of range: expected 0 < top_p <= 1" : ""
        }
    }

    function find(item, name) {
        for (let i = 0; i < item.children.length; ++i) {
            const c = item.children[i]
            if (c.objectName === name) return c
            const f = find(c, name)
            if (f) return f
        }
        return null
    }

    TestCase {
        name: "SettingsField"
        when: windowShown

        function test_error_is_shown() {
            const editor = find(field, "textEditor")
            const errorLabel = find(field, "errorLabel")
            verify(editor.visible)
            verify(!errorLabel.visible)
            editor.forceActiveFocus()
            editor.selectAll()
            keyClick(Qt.Key_1)
            keyClick(Qt.Key_Period)
            keyClick(Qt.Key_5)
            keyClick(Qt.Key_Return)
            compare(field.lastSubmitted, "1.5")
            verify(errorLabel.visible)
            compare(errorLabel.text, "top_p 1.5 is out of range: expected 0 < top_p <= 1")

            editor.selectAll()
            keyClick(Qt.Key_0)
            keyClick(Qt.Key_Period)
            keyClick(Qt.Key_9)
            keyClick(Qt.Key_Return)
            compare(field.lastSubmitted, "0.9")
            verify(!errorLabel.visible)
        }

        function test_kinds_pick_editors() {
            field.kind = "bool"
            verify(!find(field, "textEditor").visible)
            field.kind = "real"
            verify(find(field, "textEditor").visible)
        }
    }
}
