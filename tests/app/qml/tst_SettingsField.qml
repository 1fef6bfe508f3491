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

    // A choice the owner refuses (as SettingsModel refuses "pinned" without a pin file).
    SettingsField {
        id: policy
        y: 150
        width: 600
        key: "policy"
        label: "Eviction policy"
        kind: "choice"
        choices: ["lru", "lfu", "arc", "pinned"]
        text: "lru"
        onSubmitted: (v) => {
            if (v === "pinned") {
                error = "policy 'pinned' needs a pin file (strata-cli calibrate writes one)"
            } else {
                error = ""
                text = v
            }
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

        // A refused choice puts the control back on the value in force, the
        // reason beside it; an accepted one stays.
        function test_refused_choice_restores_the_control() {
            const combo = find(policy, "choiceEditor")
            verify(combo.visible)
            compare(combo.currentText, "lru")
            combo.currentIndex = 3  // what picking "pinned" in the popup does
            combo.activated(3)
            compare(combo.currentText, "lru")
            verify(find(policy, "errorLabel").visible)
            combo.currentIndex = 1
            combo.activated(1)
            compare(combo.currentText, "lfu")
            compare(policy.text, "lfu")
            verify(!find(policy, "errorLabel").visible)
            policy.text = "arc"  // the model changed it (a reset): the control follows
            compare(combo.currentText, "arc")
        }

        function test_kinds_pick_editors() {
            field.kind = "bool"
            verify(!find(field, "textEditor").visible)
            field.kind = "real"
            verify(find(field, "textEditor").visible)
        }
    }
}
