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

    TestCase {
        name: "Shortcuts"
        when: windowShown

        function test_keys() {
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
        }
    }
}
