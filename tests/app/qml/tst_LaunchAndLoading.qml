import QtQuick
import QtQuick.Controls
import QtTest
import Strata
import "../../../ui"

// Issue 45: a load can be cancelled while a conversation is open (the Cancel
// in the chat's empty state is hidden behind its messages): the model chip
// in the tool bar has one, at the window's narrowest too. And the start
// screen says why the last model was not loaded at launch, with a button to
// load it anyway.
Item {
    id: root
    width: 1280
    height: 700

    QtObject {
        id: chat
        property string modelState: "loading"
        property var modelInfo: ({})
        property string modelPath: "/models/Qwen3-30B-A3B-Q4_K_M.gguf"
        property bool remote: false
        property real loadFraction: 0.42
        property string loadStage: "weights"
        property var recentModels: []
        property bool settingsNeedReload: false
        property string modelError: ""
        property var launch: ({})
        property int cancels: 0
        property int launchLoads: 0
        function cancelModelLoad() { cancels += 1 }
        function loadLaunchModel() { launchLoads += 1 }
        function reloadModel() {}
        function unloadModel() {}
        function showNotice(text) {}
    }
    QtObject {
        id: appInfo
        property string logFile: "/tmp/strata.log"
        function openLog() { return true }
        function openDataDir() {}
    }
    QtObject {
        id: appServer
        property bool running: false
        property int port: 8080
        property string url: "http://127.0.0.1:8080/v1"
        property int requests: 0
    }

    TopBar { id: bar; width: 960 }
    LaunchNotice { id: notice; y: 100; width: 520 }

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
        name: "LaunchAndLoading"
        when: windowShown

        function test_cancel_loading_from_the_tool_bar() {
            for (const w of [960, 1280]) {
                bar.width = w
                const cancel = find(bar, "cancelLoadButton")
                verify(cancel, "no Cancel in the tool bar")
                tryVerify(() => cancel.visible && cancel.width > 0)
                const p = cancel.mapToItem(bar, 0, 0)
                verify(p.x >= 0 && p.x + cancel.width <= bar.width, "Cancel outside the bar at " + w)
                const before = chat.cancels
                mouseClick(cancel)
                compare(chat.cancels, before + 1)
            }
            chat.modelState = "ready"
            verify(!find(bar, "cancelLoadButton").visible)
            chat.modelState = "loading"
        }

        function test_launch_notice_says_why_and_loads_anyway() {
            chat.launch = ({})
            verify(!notice.visible)
            chat.launch = { state: "held", path: "/models/big.gguf", canLoad: true,
                            message: "big.gguf was not loaded at launch: it would take 20.60 GiB of the 23.50 GiB of RAM available (88%)" }
            verify(notice.visible)
            compare(find(notice, "launchText").text, chat.launch.message)
            const button = find(notice, "loadAnywayButton")
            verify(button.visible)
            compare(button.text, "Load big.gguf anyway")
            mouseClick(button)
            compare(chat.launchLoads, 1)
            // A plan that does not fit: the reason, and no button (the load would fail).
            chat.launch = { state: "held", path: "/models/big.gguf", canLoad: false, message: "big.gguf was not loaded at launch: does not fit" }
            verify(notice.visible)
            verify(!find(notice, "loadAnywayButton").visible)
        }
    }
}
