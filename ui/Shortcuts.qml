import QtQuick

// The app's keyboard shortcuts, as GPT4All and LM Studio users expect them.
// Signals only: Main.qml wires them to the actions, so they can be tested on
// their own (tests/app/qml/tst_Shortcuts.qml).
Item {
    id: keys
    // Esc stops an answer only while one is generating (otherwise it belongs to dialogs and fields).
    property bool generating: false

    signal quitRequested()
    signal newChatRequested()
    signal settingsRequested()
    signal stopRequested()
    signal copyLastAnswerRequested()

    Shortcut { objectName: "quit"; sequences: [StandardKey.Quit, "Ctrl+Q"]; context: Qt.ApplicationShortcut; onActivated: keys.quitRequested() }
    Shortcut { objectName: "newChat"; sequences: [StandardKey.New]; context: Qt.ApplicationShortcut; onActivated: keys.newChatRequested() }
    Shortcut { objectName: "settings"; sequences: ["Ctrl+,"]; context: Qt.ApplicationShortcut; onActivated: keys.settingsRequested() }
    Shortcut {
        objectName: "stop"
        sequences: ["Esc"]
        enabled: keys.generating
        context: Qt.ApplicationShortcut
        onActivated: keys.stopRequested()
    }
    Shortcut { objectName: "copyLast"; sequences: ["Ctrl+Shift+C"]; context: Qt.ApplicationShortcut; onActivated: keys.copyLastAnswerRequested() }
}
