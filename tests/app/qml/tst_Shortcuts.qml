import QtQuick
import QtTest
import "../../../ui"

// The standard shortcuts reach their actions: Ctrl+N, Ctrl+, , Ctrl+Q,
// Ctrl+Shift+C, and Esc only while an answer is generating.
Item {
    width: 400
    height: 300

    Shortcuts { id: keys }
    SignalSpy { id: quit; target: keys; signalName: "quitRequested" }
    SignalSpy { id: newChat; target: keys; signalName: "newChatRequested" }
    SignalSpy { id: settings; target: keys; signalName: "settingsRequested" }
    SignalSpy { id: stop; target: keys; signalName: "stopRequested" }
    SignalSpy { id: copy; target: keys; signalName: "copyLastAnswerRequested" }

    // The Shortcut objects inside Shortcuts.qml.
    function shortcuts() {
        const out = []
        for (let i = 0; i < keys.data.length; ++i)
            if (keys.data[i].sequences !== undefined) out.push(keys.data[i])
        return out
    }

    TestCase {
        name: "Shortcuts"
        when: windowShown

        // Two sequences in one Shortcut (or the same key in two) can be the
        // same key on some platform: StandardKey.Quit is Ctrl+Q on X11, and
        // [StandardKey.Quit, "Ctrl+Q"] made Ctrl+Q ambiguous there, so it did
        // nothing. Offscreen, StandardKey.Quit is no key at all (the objects
        // read back without it), so the source is read too: one key per
        // action, no key twice.
        function test_one_key_per_action() {
            const xhr = new XMLHttpRequest()
            xhr.open("GET", Qt.resolvedUrl("../../../ui/Shortcuts.qml"))
            xhr.send()
            tryVerify(() => xhr.readyState === XMLHttpRequest.DONE)
            const lists = []
            const re = /sequences:\s*\[([^\]]*)\]/g
            for (let m = re.exec(xhr.responseText); m !== null; m = re.exec(xhr.responseText))
                lists.push((m[1].match(/"[^"]*"|[A-Za-z_.]+/g) || []).map(k => k.replace(/"/g, "").toLowerCase()))
            compare(lists.length, shortcuts().length, "every Shortcut's sequences are read")
            const seen = {}
            for (const keys of lists) {
                compare(keys.length, 1, "one key per action: " + keys.join(", "))
                verify(!(keys[0] in seen), keys[0] + " twice")
                seen[keys[0]] = true
            }
            for (const s of shortcuts()) compare(s.sequences.length, 1, s.objectName + " has one key")
        }

        function test_keys() {
            let ambiguous = 0
            for (const s of shortcuts()) s.activatedAmbiguously.connect(() => ++ambiguous)
            keyClick(Qt.Key_N, Qt.ControlModifier)
            compare(newChat.count, 1)
            keyClick(Qt.Key_Comma, Qt.ControlModifier)
            compare(settings.count, 1)
            keyClick(Qt.Key_C, Qt.ControlModifier | Qt.ShiftModifier)
            compare(copy.count, 1)
            keyClick(Qt.Key_Escape)
            compare(stop.count, 0)  // nothing is generating
            keys.generating = true
            keyClick(Qt.Key_Escape)
            compare(stop.count, 1)
            keyClick(Qt.Key_Q, Qt.ControlModifier)
            compare(quit.count, 1)
            compare(ambiguous, 0)
        }
    }
}
