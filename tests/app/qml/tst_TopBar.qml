import QtQuick
import QtQuick.Controls
import QtTest
import "../../../ui"

// The tool bar at the window's sizes: at 960 px (the minimum) every action
// is in the bar or in its "⋯" menu, none past the right edge; at 1280 and
// 1920 the panel toggle, Settings and Help are in the bar itself. The model
// chip names the file (not the name stored inside it) and its quantization.
Item {
    id: root
    width: 1920
    height: 400

    // What TopBar reads from the app's context (chat, appInfo).
    QtObject {
        id: chat
        property string modelState: "ready"
        property var modelInfo: ({ name: "Qwen3-30B-A3B-Instruct-2507-Q4_K_M", storedName: "bench-moe-f16", quant: "Q4_K_M",
                                   arch: "qwen3moe", paramsTotal: 30.5e9, experts: 128, expertsUsed: 8, templateNote: "" })
        property string modelPath: "/models/Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf"
        property bool remote: false
        property real loadFraction: 0
        property var recentModels: ["/models/a.gguf"]
        property bool settingsNeedReload: true
        property string modelError: ""
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

    // "Serve to other apps" (AppServer).
    QtObject {
        id: appServer
        property bool running: false
        property int port: 8080
        property string url: "http://127.0.0.1:8080/v1"
        property int requests: 0
    }

    TopBar { id: bar; width: 960 }
    SignalSpy { id: settings; target: bar; signalName: "settingsRequested" }
    SignalSpy { id: panels; target: bar; signalName: "showPanelsToggled" }
    SignalSpy { id: about; target: bar; signalName: "aboutRequested" }

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
    // Shown, and wholly inside the bar.
    function inBar(name) {
        const item = find(bar, name)
        if (!item || !item.visible || item.width <= 0) return false
        const p = item.mapToItem(bar, 0, 0)
        return p.x >= 0 && p.x + item.width <= bar.width + 0.5
    }

    TestCase {
        name: "TopBar"
        when: windowShown

        function test_narrow_window_keeps_every_action_reachable() {
            bar.width = 960
            verify(bar.compact)
            tryVerify(() => inBar("overflowButton"))
            for (const name of ["modelChip", "loadButton", "openMenuButton", "reloadButton", "overflowButton"])
                verify(inBar(name), name)
            for (const name of ["panelsButton", "settingsButton", "helpButton"])
                verify(!find(bar, name).visible, name + " is in the overflow menu")
            // The overflow menu holds them.
            mouseClick(find(bar, "overflowButton"))
            let item = null
            tryVerify(() => (item = find(root.Window.contentItem, "overflowSettings")) !== null && item.visible)
            mouseClick(item)
            compare(settings.count, 1)
            mouseClick(find(bar, "overflowButton"))
            tryVerify(() => (item = find(root.Window.contentItem, "overflowPanels")) !== null && item.visible)
            mouseClick(item)
            compare(panels.count, 1)
            mouseClick(find(bar, "overflowButton"))
            tryVerify(() => (item = find(root.Window.contentItem, "overflowAbout")) !== null && item.visible)
            mouseClick(item)
            compare(about.count, 1)
        }

        // At every width, with Reload and the server badge shown (the widest
        // bar), each visible item lies inside the bar after the layout has
        // run, none overlaps the next, Open says "Open", and the model's
        // details show whole parts only (1280 px used to push Help off-screen,
        // 1000 px showed Open as a bare "▾", the details were cut mid-word).
        function test_every_width_fits_the_whole_bar() {
            appServer.running = true
            appServer.requests = 12
            const names = ["modelChip", "loadButton", "openMenuButton", "reloadButton", "serverBadge", "panelsButton",
                           "settingsButton", "overflowButton", "helpButton"]
            for (const w of [960, 1000, 1100, 1180, 1280, 1440, 1920]) {
                bar.width = w
                wait(50)  // the layout runs before the next frame
                let right = -1
                for (const name of names) {
                    const item = find(bar, name)
                    if (!item.visible) continue
                    verify(inBar(name), name + " inside the bar at " + w + " (x " + item.mapToItem(bar, 0, 0).x + ", w " + item.width + ")")
                    const x = item.mapToItem(bar, 0, 0).x
                    verify(x >= right - 0.5, name + " overlaps the item before it at " + w)
                    right = x + item.width
                }
                verify(find(bar, "openMenuButton").text.indexOf("Open") === 0, "Open at " + w)
                verify(find(bar, "modelChip").width >= 120, "chip at " + w)
                const details = find(bar, "modelDetails")
                if (details.visible && details.text.length > 0) {
                    verify(details.text.indexOf("…") < 0, "details cut at " + w + ": " + details.text)
                    verify(details.parts.join(" · ").indexOf(details.text) === 0, "whole parts at " + w + ": " + details.text)
                }
            }
            verify(!bar.compact, "1920 px shows everything")
            bar.width = 960
            verify(bar.compact)
            appServer.running = false
            appServer.requests = 0
        }

        function test_wide_windows_show_the_actions() {
            for (const w of [1280, 1920]) {
                bar.width = w
                verify(!bar.compact)
                tryVerify(() => inBar("helpButton"))
                for (const name of ["modelChip", "loadButton", "openMenuButton", "reloadButton", "panelsButton",
                                    "settingsButton", "helpButton"])
                    verify(inBar(name), name + " at " + w)
                verify(!find(bar, "overflowButton").visible)
            }
        }

        // While the app serves its model, a badge says so with the requests
        // other apps sent; a click opens the settings. Hidden when it does not
        // serve. (At 960 px: the wider sizes are test_wide_windows_show_the_actions'.)
        function test_server_badge() {
            bar.width = 960
            const badge = find(bar, "serverBadge")
            const text = find(bar, "serverBadgeText")
            verify(!badge.visible)
            appServer.running = true
            appServer.requests = 12
            tryVerify(() => inBar("serverBadge"))
            verify(inBar("overflowButton"))
            compare(text.text, ":8080 · 12 requests")
            appServer.requests = 1
            compare(text.text, ":8080 · 1 request")
            wait(50)  // the layout, for the badge's width
            verify(badge.height <= 30 && badge.width < 160, "compact: " + badge.width + "x" + badge.height)
            const before = settings.count
            mouseClick(badge)
            compare(settings.count, before + 1)
            // No local model (none loaded, or chatting with a server): said, not a count.
            chat.modelState = "none"
            compare(text.text, ":8080 · no model")
            chat.modelState = "ready"
            // Where there is room, it says what it is (the text alone: the layout is the wide test's).
            bar.width = 1920
            compare(text.text, "Serving · :8080 · 1 request")
            bar.width = 960
            appServer.running = false
            verify(!badge.visible)
        }

        // "Unload the model" is offered only with a model to unload.
        function test_unload_only_with_a_model() {
            bar.width = 960
            mouseClick(find(bar, "openMenuButton"))
            let item = null
            tryVerify(() => (item = find(root.Window.contentItem, "unloadItem")) !== null && item.visible)
            compare(item.text, "Unload the model")
            chat.modelState = "none"
            verify(!item.visible)
            compare(item.height, 0)
            chat.modelState = "ready"
            keyClick(Qt.Key_Escape)
        }

        function test_chip_names_the_file_and_its_quantization() {
            bar.width = 1280
            wait(50)  // the layout gives the details their width
            compare(find(bar, "modelName").text, "Qwen3-30B-A3B-Instruct-2507-Q4_K_M")
            verify(find(bar, "modelDetails").text.startsWith("Q4_K_M · qwen3moe"), find(bar, "modelDetails").text)
            bar.width = 960
            tryVerify(() => find(bar, "modelQuant").visible)
            compare(find(bar, "modelQuant").text, "Q4_K_M")
        }
    }
}
