import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// The Delete and About dialogs in the app's dark style (they had Qt's plain
// light ones), their text clear of the edges; Delete deletes what it names.
Item {
    id: root
    width: 1280
    height: 800

    QtObject {
        id: chat
        property string modelState: "none"
        property var modelInfo: ({})
        property string databasePath: "/home/someone/.local/share/Strata/strata/chats.sqlite"
        property var deleted: []
        function deleteConversation(id) { deleted = deleted.concat([id]) }
        function showNotice(text) {}
    }
    QtObject {
        id: appInfo
        property string version: "0.1.0"
        property string qtVersion: "6.4.2"
        property string engineBuild: "CPU kernels: avx512"
        property string logFile: "/tmp/strata.log"
        function openLog() { return true }
        function openDataDir() {}
    }
    QtObject { id: telemetry; property string device: "" }

    DeleteConversationDialog { id: del }
    AboutDialog { id: about }

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
        name: "Dialogs"
        when: windowShown

        function test_delete_dialog_is_dark_and_deletes() {
            del.conversationId = 42
            del.conversationTitle = "Commandments"
            del.count = 2
            del.open()
            tryVerify(() => del.opened)
            compare(del.background.color, Theme.surface)
            verify(del.leftPadding >= 16 && del.rightPadding >= 16)
            const button = find(del.footer, "confirmDelete")
            compare(button.text, "Delete")
            mouseClick(button)
            compare(chat.deleted, [42])
            tryVerify(() => !del.visible)
        }

        // The device sentence is said once (it was in the engine line and
        // again under "Computing on"), and the probe's reason not beside it.
        function test_about_says_the_device_once() {
            const why = "no NVIDIA driver (libcuda.so.1 not found)"
            const sentence = "device auto: the CPU, because " + why
            appInfo.engineBuild = "CPU kernels: avx512 · CUDA backend not built; no GPU: " + why + "\n" + sentence
            for (const device of ["", sentence]) {
                telemetry.device = device
                about.open()
                tryVerify(() => about.opened)
                const engine = find(about.contentItem, "aboutEngine").text
                const shown = find(about.contentItem, "aboutDevice")
                compare(engine, "CPU kernels: avx512 · CUDA backend not built")
                verify(shown.visible)
                compare(shown.text, sentence)
                about.close()
                tryVerify(() => !about.visible)
            }
            appInfo.engineBuild = "CPU kernels: avx512"
            telemetry.device = ""
        }

        function test_about_dialog_is_dark_with_margins() {
            about.open()
            tryVerify(() => about.opened)
            compare(about.background.color, Theme.surface)
            verify(about.leftPadding >= 16 && about.rightPadding >= 16 && about.topPadding >= 12)
            about.close()
        }
    }
}
