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

    // One key per action: StandardKey.Quit *is* Ctrl+Q on Linux desktops, and
    // a Shortcut holding both registers the same key twice, which Qt treats as
    // ambiguous and then activates neither (Ctrl+Q did nothing). Ctrl+Q alone
    // is Quit everywhere (Cmd+Q on macOS, where "Ctrl" means Command).
    Shortcut { objectName: "quit"; sequences: ["Ctrl+Q"]; context: Qt.ApplicationShortcut; onActivated: keys.quitRequested() }
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
