import QtQuick
import QtTest
import Strata
import "../../../ui"

// Throughput: while the local engine answers, its tokens/s; idle, the last
// rate says it is the last answer's (it used to read as live), and the time
// per token replaces a running total that read as a per-pass time.
Item {
    width: 400
    height: 300

    QtObject {
        id: chat
        property bool anyGenerating: true
    }
    QtObject {
        id: telemetry
        property bool hasData: true
        property string source: "engine"
        property real tokensProcessed: 1500
        property real computeSeconds: 7.5
        property real tokensPerSecond: 200
        property real lastTtftMs: -1
        property var tokensPerSecondHistory: [180, 200]
        property var server: ({})
    }

    ThroughputPanel { id: panel; width: 380 }

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
        name: "ThroughputPanel"
        when: windowShown

        function test_idle_rate_is_named_and_per_token_time_shown() {
            const rate = find(panel, "tokensPerSecondStat")
            compare(rate.caption, "tokens/s")
            compare(rate.value, "200.0")
            const perToken = find(panel, "perTokenStat")
            compare(perToken.caption, "per token")
            compare(perToken.value, "5.0 ms")
            verify(panel.subtitle.indexOf("7.5 s computing") > 0, panel.subtitle)
            chat.anyGenerating = false
            compare(rate.caption, "tokens/s, last answer")
            compare(rate.value, "200.0")
            chat.anyGenerating = true
        }
    }
}
