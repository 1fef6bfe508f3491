import QtQuick
import QtTest
import Strata
import "../../../ui"

// The ledger at the window's minimum (a ~300 px panel): the tier's totals and
// every account's name are whole, not cut ("…MiB / 979 MiB", "experts.c…").
Item {
    width: 400
    height: 700

    QtObject {
        id: telemetry
        property bool hasData: true
        property string kernels: "avx512"
        property real repackedBytes: 0
        property var ledger: [
            { tier: "fast", description: "RAM", budget: 20.8 * 1024 * 1024 * 1024, reserved: 979 * 1048576, used: 362 * 1048576,
              accounts: [
                  { account: "weights.shared", reserved: 24 * 1048576, used: 24 * 1048576 },
                  { account: "weights.router", reserved: 8 * 1048576, used: 8 * 1048576 },
                  { account: "experts.cache", reserved: 684 * 1048576, used: 312 * 1048576 },
                  { account: "kv.pages", reserved: 192 * 1048576, used: 6 * 1048576 },
                  { account: "activations", reserved: 7 * 1048576, used: 7 * 1048576 },
                  { account: "runtime.reserve", reserved: 64 * 1048576, used: 0 } ] },
            { tier: "slow", description: "model file", budget: 0, reserved: 648 * 1048576, used: 648 * 1048576,
              accounts: [ { account: "experts.home", reserved: 648 * 1048576, used: 648 * 1048576 } ] } ]
    }

    LedgerPanel { id: ledger; width: 300 }

    function findAll(item, name, out) {
        for (let i = 0; i < item.children.length; ++i) {
            const c = item.children[i]
            if (c.objectName === name) out.push(c)
            findAll(c, name, out)
        }
        return out
    }

    TestCase {
        name: "LedgerPanel"
        when: windowShown

        function test_narrow_panel_cuts_nothing() {
            for (const w of [300, 380]) {
                ledger.width = w
                wait(50)  // the layout
                const totals = findAll(ledger, "tierTotals", [])
                compare(totals.length, 2)
                for (const t of totals) verify(!t.truncated, "totals cut at " + w + ": " + t.text)
                const names = findAll(ledger, "accountName", [])
                compare(names.length, 7)
                for (const n of names) verify(!n.truncated, "account name cut at " + w + ": " + n.text)
            }
            ledger.width = 300
            verify(ledger.narrow)
        }
    }
}
